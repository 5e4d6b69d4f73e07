"""The comparison logic and the random program generator, without a Verilog simulator."""

from __future__ import annotations

import numpy as np
import pytest

from tinynpu.assembler.image import Program, Tensor
from tinynpu.isa import load_config, load_isa
from tinynpu.rtl.compare import CosimCase, _compare, _run_model
from tinynpu.rtl.cosim import RtlResult
from tinynpu.rtl.randprog import random_program
from tinynpu.simulator import Machine

ISA = load_isa()
CFG = load_config("default", ISA)


def _case() -> CosimCase:
    words = [ISA.encode("load", {"scope": 2, "sp_row": 0, "dram": 0, "stride": 64, "rows": 2, "signal": 8}),
             ISA.encode("store", {"sp_row": 0, "dram": 256, "stride": 64, "rows": 2, "wait": 1}),
             ISA.encode("halt", {})]
    tensors = [Tensor("X", 0, (2, 16), "int32"), Tensor("Y", 256, (2, 16), "int32", "output")]
    x = np.arange(32, dtype=np.int32).reshape(2, 16)
    return CosimCase("copy", Program.build(ISA, CFG, words, tensors), {"X": x})


def _rtl_like_model(case: CosimCase) -> RtlResult:
    """An RtlResult that reproduces the model exactly (what a correct RTL returns)."""
    model = _run_model(ISA, CFG, case)
    trace = tuple((d, s, e) for _, _, _, d, s, e in model.timeline)
    return RtlResult(cycles=model.cycles, done=True, error=False, cause=0, error_pc=0, timed_out=False,
                     trace=trace, regions=tuple(model.outputs[t.name] for t in case.program.tensors),
                     late_responses=0, sim_seconds=0.1, wall_seconds=0.1)


def test_identical_runs_agree() -> None:
    case = _case()
    report = _compare(ISA, case, _run_model(ISA, CFG, case), _rtl_like_model(case))
    assert report.agree and report.cycle_diff == 0 and report.instructions_compared == 3
    np.testing.assert_array_equal(report.outputs["Y"], case.inputs["X"])


def test_a_flipped_output_byte_is_reported() -> None:
    case = _case()
    rtl = _rtl_like_model(case)
    regions = list(rtl.regions)
    regions[1] = bytes([regions[1][0] ^ 1]) + regions[1][1:]
    report = _compare(ISA, case, _run_model(ISA, CFG, case), RtlResult(**{**rtl.__dict__, "regions": tuple(regions)}))
    assert not report.agree and report.output_mismatches == ("Y",)


def test_a_late_instruction_and_a_cycle_difference_are_reported() -> None:
    case = _case()
    rtl = _rtl_like_model(case)
    trace = list(rtl.trace)
    d, s, e = trace[1]
    trace[1] = (d, s + 1, e + 1)
    changed = RtlResult(**{**rtl.__dict__, "trace": tuple(trace), "cycles": rtl.cycles + 1})
    report = _compare(ISA, case, _run_model(ISA, CFG, case), changed)
    assert not report.agree and report.cycle_diff == 1
    assert [(m.index, m.mnemonic) for m in report.trace_mismatches] == [(1, "store")]
    assert report.to_json()["first_trace_mismatches"][0]["rtl"] == [d, s + 1, e + 1]


def test_an_rtl_error_is_reported_with_its_cause() -> None:
    case = _case()
    rtl = _rtl_like_model(case)
    failed = RtlResult(**{**rtl.__dict__, "error": True, "done": False, "cause": 4, "error_pc": 1})
    report = _compare(ISA, case, _run_model(ISA, CFG, case), failed)
    assert not report.agree and "DRAM" in (report.rtl_error or "") and "instruction 1" in (report.rtl_error or "")


@pytest.mark.parametrize("seed", range(60))
def test_random_programs_are_valid_and_race_free(seed: int) -> None:
    """The simulator (with its race sanitizer) accepts every generated program."""
    program, inputs = random_program(ISA, CFG, seed)
    machine = Machine(CFG, ISA)
    machine.load(program)
    machine.write_tensor("mem", inputs["mem"])
    stats = machine.run(check_races=True)
    assert stats.cycles > 0 and stats.instructions_total == len(program.words)


def test_a_late_dram_response_is_a_bench_fault() -> None:
    case = _case()
    rtl = _rtl_like_model(case)
    report = _compare(ISA, case, _run_model(ISA, CFG, case), RtlResult(**{**rtl.__dict__, "late_responses": 2}))
    assert not report.agree and "late" in (report.rtl_error or "")
