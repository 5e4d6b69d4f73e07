"""isa/ is the bottom layer: its modules import nothing of the assembler, simulator, compiler or RTL tools."""

from __future__ import annotations

import ast
from pathlib import Path

ISA_DIR = Path(__file__).resolve().parent.parent / "isa"
BELOW_OR_BESIDE = {"isa", "errors", "intmath", "fsio"}  # tinynpu.<these> may be imported from isa/
# isa/cli.py writes the generated files with the assembler's write_output; that helper is being moved
# down by another change, after which this entry goes.
KNOWN = {("cli.py", "tinynpu.assembler.image")}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):  # function-level imports count as much as module-level ones
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_isa_imports_nothing_above_it() -> None:
    upward = sorted((p.name, m) for p in ISA_DIR.glob("*.py") for m in _imports(p)
                    if m.startswith("tinynpu.") and m.split(".")[1] not in BELOW_OR_BESIDE
                    and (p.name, m) not in KNOWN)
    assert upward == [], f"isa/ modules import higher layers: {upward}"


def test_the_scan_sees_function_level_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from tinynpu.simulator.semantics import SEMANTICS\n", encoding="utf-8")
    assert _imports(probe) == {"tinynpu.simulator.semantics"}
