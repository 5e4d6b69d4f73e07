"""Module-level cocotb benches of the MAC array, the requantizer and a vrequantf lane (numpy is the reference)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_rtl_cosim import CFG, ISA, require_rtl

from tinynpu.rtl.cosim import UNITS_TEST_MODULE, run_unit_benches

pytestmark = pytest.mark.rtl
TB_DIR = Path(__file__).resolve().parent.parent / "rtl" / "tb"


def _declared_benches() -> int:
    """The ``@cocotb.test()`` functions of the unit-bench module: every one must run, and pass."""
    path = TB_DIR / f"{UNITS_TEST_MODULE}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef)
               and any("cocotb.test" in ast.unparse(d) for d in node.decorator_list))


def test_the_bench_module_declares_benches() -> None:
    assert _declared_benches() >= 1


def test_mac_array_requantizer_and_requantf_lane_benches_pass() -> None:
    require_rtl()
    total, failed, log = run_unit_benches(ISA, CFG)
    assert total == _declared_benches(), log
    assert failed == 0, log
