"""The RTL's error flag and cause, for every fault a program can trigger, next to the simulator's verdict."""

from __future__ import annotations

import numpy as np
import pytest
from test_rtl_cosim import require_simulator  # noqa: I001  (tests/ is on sys.path under pytest)

from tinynpu.assembler.image import Program
from tinynpu.errors import TinyNpuError
from tinynpu.isa import load_config, load_isa
from tinynpu.rtl.cosim import ERROR_CAUSES, RtlJob, RtlResult, run_rtl
from tinynpu.rtl.runner import SIMULATORS
from tinynpu.simulator import Machine

pytestmark = pytest.mark.rtl
ISA = load_isa()
CFG = load_config("default", ISA)


def enc(mnemonic: str, **fields: int) -> int:
    return ISA.encode(mnemonic, fields)


def raw_field(word: int, mnemonic: str, field: str, value: int) -> int:
    """Overwrite a field with a value encode() would refuse (the RTL must catch it)."""
    f = ISA.by_mnemonic[mnemonic].field_map[field]
    return (word & ~f.mask) | ((value & ((1 << f.width) - 1)) << f.lsb)


LOAD = dict(scope=0, sp_row=0, dram=0, stride=16, rows=4)
CASES: dict[str, tuple[list[int], int, int]] = {
    # name: (words, expected cause, expected error pc)
    "undecodable": ([enc("sync"), 0xF, enc("halt")], 1, 1),
    "reserved_bits": ([enc("load", **LOAD) | (1 << 120), enc("halt")], 1, 0),
    "rows_zero": ([enc("sync"), enc("sync"), raw_field(enc("load", **LOAD), "load", "rows", 0), enc("halt")], 2, 2),
    "cols_17": ([raw_field(enc("load", **LOAD), "load", "cols", 17), enc("halt")], 2, 0),
    "scope_3": ([raw_field(enc("zero", scope=0, sp_row=0, rows=1), "zero", "scope", 3), enc("halt")], 2, 0),
    "raw_store_with_shift": ([raw_field(enc("store", sp_row=0, dram=0, rows=1), "store", "shift", 3),
                              enc("halt")], 2, 0),
    "spad_overrun": ([enc("load", **{**LOAD, "sp_row": CFG.rows("a_reg") - 2}), enc("halt")], 3, 0),
    "tmm_overrun": ([enc("tmm", acc=CFG.rows("acc") // CFG.tile - 1, a=0, b=0, m=2), enc("halt")], 3, 0),
    "vadd_overlap": ([enc("vadd", dst=0, src=2, rows=4), enc("halt")], 3, 0),
    "vaddrow_inside": ([enc("vaddrow", dst=0, src=2, rows=4), enc("halt")], 3, 0),
    "dram_overrun": ([enc("load", **{**LOAD, "dram": CFG.dram_bytes - 32}), enc("halt")], 4, 0),
    "misaligned_acc_load": ([enc("load", scope=2, sp_row=0, dram=2, stride=64, rows=1), enc("halt")], 4, 0),
    "misaligned_acc_stride": ([enc("load", scope=2, sp_row=0, dram=0, stride=6, rows=2), enc("halt")], 4, 0),
    "misaligned_raw_store": ([enc("store", sp_row=0, dram=2, stride=64, rows=1), enc("halt")], 4, 0),
    # the generated checks (isa/gen_verilog_checks.py) of each field range, access and footprint of load, zero,
    # store and tmm
    "tmm_k_zero": ([raw_field(enc("tmm", acc=0, a=0, b=0), "tmm", "k", 0), enc("halt")], 2, 0),
    "store_cols_zero": ([raw_field(enc("store", sp_row=0, dram=0, rows=1), "store", "cols", 0), enc("halt")], 2, 0),
    "zero_acc_overrun": ([enc("zero", scope=2, sp_row=CFG.rows("acc") - 1, rows=2), enc("halt")], 3, 0),
    "store_acc_overrun": ([enc("store", sp_row=CFG.rows("acc") - 1, dram=0, rows=2), enc("halt")], 3, 0),
    "tmm_b_overrun": ([enc("tmm", acc=0, a=0, b=CFG.rows("b_reg") // CFG.tile - 1, n=2), enc("halt")], 3, 0),
    "store_dram_overrun": ([enc("store", sp_row=0, dram=CFG.dram_bytes - 60, stride=64, rows=1), enc("halt")], 4, 0),
    "misaligned_raw_store_stride": ([enc("store", sp_row=0, dram=0, stride=62, rows=2), enc("halt")], 4, 0),
    # the generated checks of the ALU's instructions: field ranges (cause 2), then scratchpad rows and static
    # checks at a row field, such as a source overlapping its destination (cause 3)
    "vmax_rows_zero": ([raw_field(enc("vmax", dst=0, imm=0, rows=1), "vmax", "rows", 0), enc("halt")], 2, 0),
    "vredsum_rows_above_tile": ([raw_field(enc("vredsum", dst=0, src=64, rows=1), "vredsum", "rows", CFG.tile + 1),
                                 enc("halt")], 2, 0),
    "vredsum_n_zero": ([raw_field(enc("vredsum", dst=0, src=64, rows=1), "vredsum", "n", 0), enc("halt")], 2, 0),
    "vredmax_cols_zero": ([raw_field(enc("vredmax", dst=0, src=64, rows=1), "vredmax", "cols", 0), enc("halt")], 2, 0),
    "vredsq_cols_above_tile": ([raw_field(enc("vredsq", dst=0, src=64, rows=1), "vredsq", "cols", CFG.tile + 1),
                                enc("halt")], 2, 0),
    "vrecip_shift_63": ([raw_field(enc("vrecip", dst=0, src=0, rows=1), "vrecip", "shift", 63), enc("halt")], 2, 0),
    "vrsqrt_shift_32": ([raw_field(enc("vrsqrt", dst=0, src=0, rows=1), "vrsqrt", "shift", 32), enc("halt")], 2, 0),
    "vmax_acc_overrun": ([enc("vmax", dst=CFG.rows("acc") - 1, imm=0, rows=2), enc("halt")], 3, 0),
    "vrequant_params_past_acc": ([enc("vrequant", dst=0, src=CFG.rows("acc") - 1, rows=1), enc("halt")], 3, 0),
    "vsubb_block_overlap": ([enc("vsubb", dst=0, src=2, rows=4), enc("halt")], 3, 0),
    "vredsum_span_overlap": ([enc("vredsum", dst=CFG.tile + 3, src=0, rows=4, n=2), enc("halt")], 3, 0),
    "vlut_table_overlap": ([enc("vlut", dst=0, src=8, rows=10, base=-128), enc("halt")], 3, 0),
    "vrecip_partial_overlap": ([enc("vrecip", dst=0, src=1, rows=2), enc("halt")], 3, 0),
    "self_wait": ([raw_field(enc("load", **LOAD), "load", "wait", 1), enc("halt")], 5, 0),
    "no_halt": ([enc("zero", scope=0, sp_row=0, rows=1), enc("sync")], 7, 2),
    "token_overflow": ([enc("zero", scope=0, sp_row=0, rows=1, signal=2)] * (CFG.token_max_count + 1)
                       + [enc("halt")], 6, None),
}


@pytest.fixture(scope="module", params=SIMULATORS)
def results(request: pytest.FixtureRequest) -> dict[str, RtlResult]:
    require_simulator(request.param)
    jobs = [RtlJob(words=tuple(words), max_cycles=20_000) for words, _, _ in CASES.values()]
    return dict(zip(CASES, run_rtl(ISA, CFG, jobs, simulator=request.param), strict=True))


@pytest.mark.parametrize("name", list(CASES))
def test_rtl_stops_with_the_cause(results: dict[str, RtlResult], name: str) -> None:
    _, cause, pc = CASES[name]
    r = results[name]
    assert r.error and not r.done, r
    assert r.cause == cause, f"{name}: cause {r.cause} ({r.cause_text}), expected {ERROR_CAUSES[cause]}"
    if pc is not None:
        assert r.error_pc == pc


@pytest.mark.parametrize("name", list(CASES))
def test_simulator_also_faults(name: str) -> None:
    words, _, _ = CASES[name]
    machine = Machine(CFG, ISA)
    with pytest.raises(TinyNpuError):
        machine.load(Program.build(ISA, CFG, words))
        machine.run(max_cycles=20_000)


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_a_clean_program_raises_no_error(simulator: str) -> None:
    require_simulator(simulator)
    [r] = run_rtl(ISA, CFG, [RtlJob(words=(enc("zero", scope=0, sp_row=0, rows=3), enc("halt")))],
                  simulator=simulator)
    assert r.done and not r.error and r.cycles == 1 + 3 + 1 and r.simulator == simulator
    assert np.array_equal(r.trace[0], (0, 1, 4))
    assert r.trace[1][1:] == (-1, -1)  # halt: dispatched, never started by a unit


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_a_one_row_transfer_ignores_its_stride(simulator: str) -> None:
    """Only a second row adds the stride, so the simulator checks its alignment only then; so does the RTL."""
    require_simulator(simulator)
    store_bit, load_bit = 1 << ISA.unit_ids["store"], 1 << ISA.unit_ids["load"]
    words = (enc("load", scope=2, sp_row=0, dram=0, stride=6, rows=1, signal=store_bit),
             enc("store", sp_row=0, dram=64, stride=6, rows=1, wait=load_bit), enc("halt"))
    machine = Machine(CFG, ISA)
    machine.load(Program.build(ISA, CFG, list(words)))
    stats = machine.run(max_cycles=20_000)
    [r] = run_rtl(ISA, CFG, [RtlJob(words=words, max_cycles=20_000)], simulator=simulator)
    assert r.done and not r.error, r
    assert r.cycles == stats.cycles
