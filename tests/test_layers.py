"""Imports run down the layers of docs/architecture.md, never up: read from every module's AST.

The layers, lowest first.  A module may import its own layer and the layers
below it.  Two more rules: a part's ``cli`` module is its command line and
only its own part (and ``tinynpu/cli.py``, which loads it by name) may import
it, and no module takes a private (``_name``) name from another part.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Layer:
    """One layer: its name and the packages (dotted, under ``tinynpu``) that belong to it."""

    name: str
    packages: tuple[str, ...]


# Lowest first.  The base is the shared plumbing of every part (errors, file I/O, progress, integer helpers,
# argument types); the top is the `tinynpu` command that loads every part's cli.
LAYERS = (
    Layer("base", ("tinynpu",)),
    Layer("isa", ("tinynpu.isa",)),
    Layer("assembler", ("tinynpu.assembler",)),
    Layer("simulator", ("tinynpu.simulator",)),
    Layer("compiler", ("tinynpu.compiler",)),  # with its ONNX front end, tinynpu.compiler.onnx
    Layer("rtl", ("tinynpu.rtl",)),
    Layer("report", ("tinynpu.report",)),
    Layer("explore", ("tinynpu.explore",)),
    Layer("command", ("tinynpu.cli", "tinynpu.__main__")),
)
# Where each package's source lives (pyproject.toml's package-dir).
SOURCE_DIRS = {"tinynpu": "tinynpu", "tinynpu.isa": "isa", "tinynpu.assembler": "assembler",
               "tinynpu.simulator": "simulator", "tinynpu.compiler": "compiler", "tinynpu.rtl": "rtl",
               "tinynpu.explore": "explore"}

def _module_name(path: Path) -> str:
    """The dotted module name of a source file (``compiler/onnx/cli.py`` -> ``tinynpu.compiler.onnx.cli``)."""
    rel = path.relative_to(ROOT)
    for package, folder in sorted(SOURCE_DIRS.items(), key=lambda kv: -len(kv[1])):
        if rel.parts[0] == folder:
            parts = [package, *rel.with_suffix("").parts[1:]]
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join(parts)
    raise AssertionError(f"{rel}: not in a package folder")


def layer_of(module: str) -> int:
    """The index in LAYERS of a dotted module name: the layer of its longest matching package."""
    best, depth = -1, -1
    for index, layer in enumerate(LAYERS):
        for package in layer.packages:
            if (module == package or module.startswith(package + ".")) and package.count(".") > depth:
                best, depth = index, package.count(".")
    assert best >= 0, f"{module} is in no layer"
    return best


def _part(module: str) -> str:
    """The part a module belongs to: ``tinynpu.compiler`` for ``tinynpu.compiler.onnx.cli``."""
    return ".".join(module.split(".")[:2])


@dataclass(frozen=True)
class Import:
    """One imported module (and, for ``from X import a``, the names) at a source line."""

    where: str  # file:line
    source: str  # the file, relative to the repository
    importer: str
    module: str
    names: tuple[str, ...]


def _imports(path: Path) -> list[Import]:
    importer = _module_name(path)
    rel = str(path.relative_to(ROOT))
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
        if isinstance(node, ast.Import):
            out += [Import(f"{rel}:{node.lineno}", rel, importer, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importer's package
                package = importer if path.name == "__init__.py" else importer.rsplit(".", 1)[0]
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names = tuple(alias.name for alias in node.names)
            if module == "tinynpu":  # `from tinynpu import fsio`: each name is a module of the base
                out += [Import(f"{rel}:{node.lineno}", rel, importer, f"tinynpu.{name}", ()) for name in names]
            else:
                out.append(Import(f"{rel}:{node.lineno}", rel, importer, module, names))
    return [i for i in out if i.module == "tinynpu" or i.module.startswith("tinynpu.")]


def _sources() -> list[Path]:
    return sorted(p for folder in SOURCE_DIRS.values() for p in (ROOT / folder).rglob("*.py"))


def _violations(imports: list[Import]) -> list[str]:
    found = []
    for imp in imports:
        low, high = layer_of(imp.importer), layer_of(imp.module)
        if high > low:
            found.append(f"{imp.where}: {imp.importer} (layer {LAYERS[low].name}) imports {imp.module} "
                         f"(layer {LAYERS[high].name}): imports run only down the layers "
                         f"{' < '.join(layer.name for layer in LAYERS)}")
        if imp.module.rsplit(".", 1)[-1] == "cli" and _part(imp.module) != _part(imp.importer) \
                and LAYERS[low].name != "command":
            found.append(f"{imp.where}: {imp.importer} imports {imp.module}: a part's cli is its command line, "
                         "imported only by that part; move what it shares into a module of the part")
        private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
        if private and _part(imp.module) != _part(imp.importer):
            found.append(f"{imp.where}: {imp.importer} imports {', '.join(private)} from {imp.module}: a private "
                         "name of another part; make it public where it belongs")
    return found


def test_imports_run_down_the_layers() -> None:
    imports = [imp for path in _sources() for imp in _imports(path)]
    assert len(imports) > 100, "the scan found too few imports: are the source folders right?"
    violations = _violations(imports)
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize(("source", "importer", "module", "names", "rule"), [
    ("isa/x.py", "tinynpu.isa.x", "tinynpu.compiler.matmul", (), "imports run only down"),
    ("simulator/bench.py", "tinynpu.simulator.bench", "tinynpu.compiler.matmul", (), "imports run only down"),
    ("rtl/cli.py", "tinynpu.rtl.cli", "tinynpu.compiler.cli", ("add_workloads",), "a part's cli"),
    ("rtl/cli.py", "tinynpu.rtl.cli", "tinynpu.compiler.workload", ("_secret",), "a private name"),
    ("tinynpu/fsio.py", "tinynpu.fsio", "tinynpu.isa", (), "imports run only down"),
])
def test_each_rule_names_the_file_line_and_the_rule(source: str, importer: str, module: str,
                                                      names: tuple[str, ...], rule: str) -> None:
    [message] = _violations([Import(f"{source}:7", source, importer, module, names)])
    assert message.startswith(f"{source}:7: ") and rule in message


def test_downward_and_same_part_imports_pass() -> None:
    ok = [Import("rtl/cosim.py:3", "rtl/cosim.py", "tinynpu.rtl.cosim", "tinynpu.compiler.matmul", ()),
          Import("compiler/cli.py:3", "compiler/cli.py", "tinynpu.compiler.cli", "tinynpu.compiler.onnx.cli", ()),
          Import("tinynpu/cli.py:3", "tinynpu/cli.py", "tinynpu.cli", "tinynpu.rtl.cli", ()),
          Import("isa/spec.py:3", "isa/spec.py", "tinynpu.isa.spec", "tinynpu.fsio", ())]
    assert _violations(ok) == []


def test_the_architecture_table_lists_every_package_in_layer_order() -> None:
    """docs/architecture.md's table of parts names every package, in the order of LAYERS."""
    text = DOC.read_text(encoding="utf-8")
    documented = re.findall(r"^\| [^|]+ \| `(tinynpu(?:\.[a-z_.]+)?)` \|", text, flags=re.M)
    packages = [p.strip() for p in re.findall(r'"(tinynpu[a-z_.]*)"', (ROOT / "pyproject.toml").read_text())]
    # the data folders (generated files, configs) and the RTL's cocotb benches are not parts of their own
    python_packages = [p for p in dict.fromkeys(packages) if p.rsplit(".", 1)[-1] not in ("generated", "tb", "configs")]
    # a part's own rooms (compiler.onnx's frontend/, lower/, ...) are described in its row, not rows of their own
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| [^|]+ \| `(tinynpu(?:\.[a-z_.]+)?)` \|.*$", text, re.M)}
    python_packages = [p for p in python_packages if p in documented or
                       f"`{p.rsplit('.', 1)[-1]}/`" not in rows.get(p.rsplit(".", 1)[0], "")]
    assert sorted(set(documented)) == sorted(set(python_packages)), (
        f"{DOC.name}'s table of parts differs from pyproject.toml's packages: "
        f"missing {sorted(set(python_packages) - set(documented))}, "
        f"extra {sorted(set(documented) - set(python_packages))}")
    order = [layer_of(p) for p in documented]
    assert order == sorted(order), f"{DOC.name}'s table is not in layer order: {documented}"
