"""YAML loading that remembers where every key came from.

Messages about a bad spec or config must name file, key path and line, so the
loader keeps the parser's marks next to the plain data it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

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


def load_yaml(path: Path) -> YamlSource:
    """Parse ``path`` (merge keys and anchors allowed) and record key positions.

    Raises:
        SpecError: the file is missing or not valid YAML (with line:col).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the file: {exc.strerror}.") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.load(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        place = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise SpecError(f"{place}: not valid YAML: {exc.problem}.") from None
    marks: dict[KeyPath, tuple[int, int]] = {}
    if node is not None:
        _walk(node, (), marks)
    return YamlSource(path=path, data=data, marks=marks)


def _walk(node: yaml.Node, key_path: KeyPath, marks: dict[KeyPath, tuple[int, int]]) -> None:
    marks.setdefault(key_path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if key_node.value == "<<":  # merge key: its entries belong to this mapping
                continue
            child = (*key_path, key_node.value)
            marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            _walk(value_node, child, marks)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*key_path, index), marks)
