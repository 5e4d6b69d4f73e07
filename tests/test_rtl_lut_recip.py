"""Module benches of vlut's lookup register and the vrecip / vrsqrt unit against exact Python integers.

The normal suite runs a representative subset (T = 16 and T = 12, which does not divide 256; the
recip/rsqrt edge cases and a few hundred random values); ``--runslow`` runs T = 8, 16, 32 and 12 at
length, every S with every power-of-two x, an exhaustive small range and padded cycle counts.
"""

from __future__ import annotations

import ast
import math
import random
from pathlib import Path

import pytest
from test_rtl_cosim import CFG, ISA, require_rtl, require_simulator

from tinynpu.isa import load_config
from tinynpu.rtl.module_bench import BenchResult, run_module_bench
from tinynpu.rtl.runner import RtlError, lint_verilator
from tinynpu.rtl.tb.recip_rsqrt_cases import (
    INT32_MAX,
    edge_cases,
    exhaustive_cases,
    random_cases,
    recip,
    rsqrt,
)

pytestmark = pytest.mark.rtl
TB_DIR = Path(__file__).resolve().parent.parent / "rtl" / "tb"
LUT, RECIP = "tinynpu_lut", "tinynpu_recip_rsqrt"


def _declared_benches(module: str) -> int:
    """The ``@cocotb.test()`` functions of a bench module: every one must run, and pass."""
    path = TB_DIR / f"{module}_cocotb.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.AsyncFunctionDef)
               and any("cocotb.test" in ast.unparse(d) for d in node.decorator_list))


def _assert_all_passed(module: str, result: BenchResult) -> None:
    assert result.total == _declared_benches(module) >= 1, result.log
    assert result.failed == 0, result.log


def _lut_bench(lanes: int, full: bool) -> None:
    require_rtl()
    result = run_module_bench(ISA, CFG, LUT, f"{LUT}_cocotb", parameters={"Lanes": lanes},
                              env={"TNPU_LUT_LANES": str(lanes), "TNPU_BENCH_FULL": str(int(full))})
    _assert_all_passed(LUT, result)


def _recip_bench(recip_cycles: int, rsqrt_cycles: int, full: bool) -> None:
    require_rtl()
    result = run_module_bench(ISA, CFG, RECIP, f"{RECIP}_cocotb",
                              parameters={"RecipCycles": recip_cycles, "RsqrtCycles": rsqrt_cycles},
                              env={"TNPU_RECIP_CYCLES": str(recip_cycles), "TNPU_RSQRT_CYCLES": str(rsqrt_cycles),
                                   "TNPU_BENCH_FULL": str(int(full))})
    _assert_all_passed(RECIP, result)


# ---- the reference itself: the definitions, checked by their inequalities --------------------------

def test_the_reference_meets_the_definitions() -> None:
    """recip: r*x <= 2^S < (r+1)*x; rsqrt: r*r*x <= 4^S < (r+1)^2*x; unless saturated (or x <= 0)."""
    cases = edge_cases(full=False) + exhaustive_cases(-2, 40) + random_cases(random.Random(5), 3000)
    for case in cases:
        r, n = case.expected, 1 << (2 * case.shift if case.is_rsqrt else case.shift)
        if case.x <= 0:
            assert r == INT32_MAX, case
            continue
        low, high = (r * r * case.x, (r + 1) ** 2 * case.x) if case.is_rsqrt else (r * case.x, (r + 1) * case.x)
        assert low <= n, case
        assert high > n or (r == INT32_MAX and low <= n), case
    assert recip(1, 62) == rsqrt(1, 31) == INT32_MAX and rsqrt(2, 31) == math.isqrt(2**61) < INT32_MAX


# ---- vlut's lookup register -------------------------------------------------------------------------

@pytest.mark.parametrize("lanes", [16, 12])
def test_lut_matches_the_exact_lookups(lanes: int) -> None:
    _lut_bench(lanes, full=False)


@pytest.mark.slow
@pytest.mark.parametrize("lanes", [8, 12, 16, 32])
def test_lut_matches_the_exact_lookups_at_length(lanes: int) -> None:
    _lut_bench(lanes, full=True)


# ---- the reciprocal / reciprocal square root unit --------------------------------------------------

def test_recip_rsqrt_match_the_exact_values_in_the_minimum_cycles() -> None:
    _recip_bench(32, 64, full=False)


@pytest.mark.slow
def test_recip_rsqrt_match_the_exact_values_at_length() -> None:
    """Every S with every power-of-two x, x in -3 .. 130 with every S, exact squares, 6,000 random."""
    _recip_bench(32, 64, full=True)


@pytest.mark.slow
def test_recip_rsqrt_take_the_padded_cycles_a_yaml_may_give() -> None:
    """C larger than the algorithm's minimum: done_o (and the result) exactly C cycles after each start."""
    _recip_bench(37, 70, full=False)


def test_icarus_refuses_fewer_cycles_than_the_algorithm_takes() -> None:
    """A YAML C below the algorithm's: the Icarus build stops at time 0 instead of running wrong."""
    require_rtl()
    try:
        result = run_module_bench(ISA, CFG, RECIP, f"{RECIP}_cocotb", parameters={"RecipCycles": 31})
    except RtlError as exc:
        assert "RecipCycles must be >=" in str(exc) or "did not run" in str(exc)
        return
    assert result.failed == result.total, result.log


@pytest.mark.parametrize(("toplevel", "config", "parameters"), [
    (LUT, "t8", {}), (LUT, "default", {}), (LUT, "t32", {}), (LUT, "default", {"Lanes": 12}),
    (RECIP, "default", {}), (RECIP, "default", {"RecipCycles": 37, "RsqrtCycles": 70})])
def test_verilator_lint_is_clean(toplevel: str, config: str, parameters: dict[str, int]) -> None:
    """``--lint-only -Wall`` at each tile edge of the RTL and with the benches' parameters."""
    require_simulator("verilator")
    proc = lint_verilator(toplevel, load_config(config, ISA), parameters)
    assert proc.returncode == 0 and "%Warning" not in proc.stderr and "%Error" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("parameters", [{"RecipCycles": 31}, {"RsqrtCycles": 63}])
def test_verilator_refuses_fewer_cycles_than_the_algorithm_takes(parameters: dict[str, int]) -> None:
    require_simulator("verilator")
    proc = lint_verilator(RECIP, CFG, parameters)
    assert proc.returncode != 0 and "RecipCycles must be >= TNPU_ACC_BITS" in proc.stderr, proc.stderr
