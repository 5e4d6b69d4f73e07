"""The TVM front end is an optional extra: pinned exactly, locked, and imported nowhere else."""

from __future__ import annotations

import ast
import re

from tvm_support import ROOT

PACKAGE_DIRS = ("tinynpu", "isa", "assembler", "simulator", "compiler", "rtl", "explore")


def test_only_compiler_tvm_imports_tvm() -> None:
    offenders = []
    for folder in PACKAGE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            if path.is_relative_to(ROOT / "compiler" / "tvm"):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno}" for n in names
                              if n == "tvm" or n.startswith(("tvm.", "tvm_ffi"))]
    assert not offenders, f"tvm imported outside compiler/tvm/: {offenders}"


def test_the_extra_is_pinned_and_locked() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    extra = re.search(r"^tvm = \[(.*?)\]", pyproject, re.S | re.M)
    assert extra, "pyproject.toml has no tvm extra"
    pins = dict(re.findall(r'"([a-z-]+)==([^"]+)"', extra.group(1)))
    assert set(pins) == {"apache-tvm", "apache-tvm-ffi"}
    lock = (ROOT / "requirements" / "test.lock").read_text(encoding="utf-8")
    for name, version in pins.items():
        assert re.search(rf"^{name}=={re.escape(version)}$", lock, re.M), f"{name}=={version} not in the lock"
    assert "--extra tvm" in (ROOT / "scripts" / "lock.sh").read_text(encoding="utf-8")
    assert ".[test,tvm]" in (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")
    assert "TINYNPU_REQUIRE_TVM=1" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
