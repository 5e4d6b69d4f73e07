"""YAML loading that remembers where every key came from.

Messages about a bad spec or config must name file, key path and line, so the
loader keeps the parser's marks next to the plain data it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tinynpu import fsio
from tinynpu.errors import SpecError

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class YamlSource:
    """Parsed YAML plus the (line, column) of every key path, both 1-based."""

    path: Path
    data: Any
    marks: dict[KeyPath, tuple[int, int]]

    def where(self, key_path: KeyPath) -> str:
        """``file:line:col`` of the deepest known prefix of ``key_path``, plus the key path."""
        for depth in range(len(key_path), -1, -1):
            mark = self.marks.get(tuple(key_path[:depth]))
            if mark is not None:
                break
        else:
            mark = (1, 1)
        dotted = format_key_path(key_path)
        return f"{self.path}:{mark[0]}:{mark[1]} (at {dotted})"


def format_key_path(key_path: KeyPath) -> str:
    """``instructions[3].fields[0].lsb`` style rendering of a key path."""
    out = ""
    for key in key_path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out or "<top level>"


# Bounds on what a spec or config may be: far beyond the ISA and configs we ship, far below what would hang
# the loader (an alias "billion laughs" expands exponentially; nesting recurses in the composer).
MAX_YAML_BYTES = 4 << 20
MAX_DEPTH = 64
MAX_NODES = 200_000
_TOO_DEEP = f"mappings and lists nest more than {MAX_DEPTH} deep."
# libyaml's loader where installed (same documents, same marks, several times faster), else PyYAML's own.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: Path) -> YamlSource:
    """Parse ``path`` (merge keys and anchors allowed) and record key positions.

    The file must be a regular file of at most :data:`MAX_YAML_BYTES`, without
    NUL bytes, nested at most :data:`MAX_DEPTH` deep, with at most
    :data:`MAX_NODES` values once aliases are expanded, and no key twice in
    one mapping.

    Raises:
        SpecError: the file is missing, too large or not valid YAML, with file:line:col.
    """
    text = fsio.read_text(path, what="the file", limit=MAX_YAML_BYTES, error=SpecError)
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        col = nul - (text.rfind("\n", 0, nul) + 1) + 1
        raise SpecError(f"{path}:{line}:{col}: not valid YAML: a NUL byte.")
    try:
        _check_depth(text, path)
        node = yaml.compose(text, Loader=_LOADER)
        if node is not None:
            _check_size(node, path)
        data = yaml.load(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        place = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        if "nesting depth" in str(exc.problem):
            # PyYAML >= 6.0.4 stops at 1,000 levels while scanning ahead, before _check_depth sees an event;
            # the rule the user must meet is still ours.
            raise SpecError(f"{place}: not valid here: {_TOO_DEEP}") from None
        raise SpecError(f"{place}: not valid YAML: {exc.problem}.") from None
    except ValueError as exc:  # a scalar PyYAML cannot convert, e.g. an integer of 5,000 digits
        raise SpecError(f"{path}: not valid YAML: a value cannot be read: {str(exc).split(';')[0]}.") from None
    except yaml.YAMLError as exc:  # e.g. a reader error: a character YAML does not allow
        raise SpecError(f"{path}: not valid YAML: {' '.join(str(exc).split())}.") from None
    marks: dict[KeyPath, tuple[int, int]] = {}
    if node is not None:
        _walk(node, (), marks, path)
    return YamlSource(path=path, data=data, marks=marks)


def _place(path: Path, mark: Any) -> str:
    return f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)


def _check_depth(text: str, path: Path) -> None:
    """Refuse nesting beyond MAX_DEPTH and explicit tags (``!!int``, ``!!python/...``) from the event stream.

    The event parser is iterative; the composer that runs next recurses once per level.
    """
    depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        tag = getattr(event, "tag", None)
        if tag is not None:  # plain values carry no tag
            raise SpecError(f"{_place(path, event.start_mark)}: not valid here: an explicit tag ({tag}); "
                            "write plain values.")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError(f"{_place(path, event.start_mark)}: not valid here: {_TOO_DEEP}")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_size(root: yaml.Node, path: Path) -> None:
    """Refuse a document whose aliases expand to more than MAX_NODES values (counted without expanding)."""
    sizes: dict[int, int] = {}
    # post-order over the node graph, each node once: an alias is the same node object reached again
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        sizes[id(node)] = min(1 + sum(sizes.get(id(c), 1) for c in children), MAX_NODES + 1)
        if sizes[id(node)] > MAX_NODES:
            raise SpecError(f"{_place(path, node.start_mark)}: the aliases here expand to more than "
                            f"{MAX_NODES:,} values; write the data out or use fewer aliases.")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _walk(node: yaml.Node, key_path: KeyPath, marks: dict[KeyPath, tuple[int, int]], path: Path) -> None:
    marks.setdefault(key_path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        seen: dict[object, yaml.Mark] = {}
        for key_node, value_node in node.value:
            if key_node.value == "<<":  # merge key: its entries belong to this mapping
                continue
            if isinstance(key_node, yaml.ScalarNode):
                first = seen.setdefault(key_node.value, key_node.start_mark)
                if first is not key_node.start_mark:
                    raise SpecError(f"{_place(path, key_node.start_mark)}: duplicate key {key_node.value!r} "
                                    f"(first at line {first.line + 1}); a key may appear once in a mapping.")
            child = (*key_path, key_node.value)
            marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            _walk(value_node, child, marks, path)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*key_path, index), marks, path)
