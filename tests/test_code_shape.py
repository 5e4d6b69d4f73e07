"""The shape of the code: no function above cyclomatic complexity 30, no Python file over 500 lines.

Tests and generated code aside, every Python file of the tree is measured:
each function, method, nested function and method of a nested class by
radon's cyclomatic complexity (one plus one per decision: ``if``, loop,
``except``, boolean operator, comprehension clause, ...), and each file by
its line count.  A failure names ``file:line``, the function and its
complexity (or the file and its length), so the function to split is found
without running radon by hand.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from radon.complexity import cc_rank
from radon.visitors import Class, ComplexityVisitor, Function

ROOT = Path(__file__).resolve().parent.parent
MAX_COMPLEXITY = 30  # radon's grades A to D; E and F (31 and above) are refused
MAX_LINES = 500
# Directories never measured: tests, generated code, and what tools and builds leave in the tree.
SKIPPED_DIRS = {"tests", "generated", "build", "dist", "__pycache__", "node_modules"}

def _sources() -> list[Path]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts[:-1]
        if any(p in SKIPPED_DIRS or p.startswith(".") or p.endswith(".egg-info") for p in parts):
            continue
        found.append(path)
    return found


def _blocks(functions: list[Function], classes: list[Class], prefix: str = "") -> Iterator[tuple[str, Function]]:
    """Every function of a module with its qualified name: methods, closures and nested classes included."""
    for f in functions:
        name = f"{prefix}{f.name}"
        yield name, f
        yield from _blocks(f.closures, [], f"{name}.")
    for c in classes:
        yield from _blocks(c.methods, c.inner_classes, f"{prefix}{c.name}.")


def _complexities() -> list[tuple[str, int, str, int]]:
    """(file, line, qualified function name, complexity) of every function measured."""
    out = []
    for path in _sources():
        visitor = ComplexityVisitor.from_code(path.read_text(encoding="utf-8"))
        rel = path.relative_to(ROOT).as_posix()
        out += [(rel, f.lineno, name, f.complexity) for name, f in _blocks(visitor.functions, visitor.classes)]
    return out


def _line_counts() -> dict[str, int]:
    return {path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
            for path in _sources()}


def test_the_tree_is_measured() -> None:
    """The walk finds the packages and skips what it must (a walk that found nothing would pass everything)."""
    names = {path.relative_to(ROOT).as_posix() for path in _sources()}
    assert {"simulator/timing.py", "compiler/schedule.py", "tinynpu/cli.py", "isa/spec.py"} <= names
    assert not any(n.startswith("tests/") or "/generated/" in n or n.startswith(".venv/") for n in names)
    assert len(_complexities()) > 500


def test_no_function_is_too_complex() -> None:
    over = [(rel, line, name, cc) for rel, line, name, cc in _complexities()
            if cc > MAX_COMPLEXITY]
    assert not over, (
        f"functions above cyclomatic complexity {MAX_COMPLEXITY} (radon grade E or F); split them:\n"
        + "\n".join(f"  {rel}:{line} {name}: {cc} (grade {cc_rank(cc)})" for rel, line, name, cc in over)
    )


def test_no_file_is_too_long() -> None:
    over = {rel: n for rel, n in _line_counts().items() if n > MAX_LINES}
    assert not over, (
        f"Python files over {MAX_LINES} lines; split them into modules of one job each:\n"
        + "\n".join(f"  {rel}: {n} lines" for rel, n in sorted(over.items()))
    )


@pytest.mark.parametrize(("source", "expected"), [
    ("def f(x):\n    return x\n", [("f", 1)]),
    ("def f(x):\n    if x:\n        return 1\n    for i in x:\n        pass\n    return x and 2\n", [("f", 4)]),
    ("class C:\n    def m(self, x):\n        def inner(y):\n            return y if y else 0\n"
     "        return inner\n    class D:\n        def n(self):\n            while True:\n                break\n",
     [("C.m", 1), ("C.m.inner", 2), ("C.D.n", 2)]),
])
def test_every_function_is_named_and_measured(source: str, expected: list[tuple[str, int]]) -> None:
    """Methods, closures and the methods of nested classes are measured on their own, under qualified names."""
    visitor = ComplexityVisitor.from_code(source)
    assert [(name, f.complexity) for name, f in _blocks(visitor.functions, visitor.classes)] == expected
