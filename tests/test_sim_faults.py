"""Every fault class ends in a SimFault naming the instruction (index, pc, mnemonic) and the reason.

The range faults run on the t8, default and t32 configs (:func:`test_sim_support.over_tiles`):
scratchpad rows, tiles and DRAM bounds all come from the config.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_sim_support import DEFAULT, FP32, HALT, ISA, SYNC, load, machine, over_tiles, program, scope, units

from tinynpu.isa import ArchConfig
from tinynpu.simulator import Machine, SimFault

pytestmark = pytest.mark.usefixtures("sim_engine")  # each test runs on both simulator cores


def _fault(instrs, cfg=DEFAULT, **run):
    with pytest.raises(SimFault) as exc:
        m = machine(instrs, cfg)
        m.run(**run)
    return exc.value.message


@over_tiles(ci=True)
def test_scratchpad_out_of_range(cfg: ArchConfig) -> None:
    rows, t = cfg.rows("a_reg"), cfg.tile
    msg = _fault([load("a", rows - t // 2, 0, cfg=cfg), HALT], cfg)
    assert "instruction 0 (pc 0x0, load)" in msg
    assert f"{rows - t // 2}..{rows + t // 2 - 1}" in msg and f"{rows} rows" in msg
    machine([load("a", rows - t, 0, cfg=cfg), HALT], cfg).run()  # the last whole tile fits


@over_tiles(ci=True)
def test_tmm_tiles_out_of_range(cfg: ArchConfig) -> None:
    tiles = cfg.rows("acc") // cfg.tile
    msg = _fault([SYNC, ("tmm", {"acc": tiles - 1, "a": 0, "b": 0, "m": 2}), HALT], cfg)
    assert "instruction 1 (pc 0x10, tmm)" in msg and "acc tiles" in msg
    machine([SYNC, ("tmm", {"acc": tiles - 2, "a": 0, "b": 0, "m": 2}), HALT], cfg).run()  # the last two fit


@over_tiles()
def test_dram_out_of_range(cfg: ArchConfig) -> None:
    msg = _fault([load("a", 0, cfg.dram_bytes - cfg.tile // 2, rows=1, cfg=cfg), HALT], cfg)
    assert "beyond the" in msg and "load" in msg
    machine([load("a", 0, cfg.dram_bytes - cfg.tile, rows=1, cfg=cfg), HALT], cfg).run()  # the last row fits


def test_misaligned_dram_address() -> None:
    msg = _fault([load("acc", 0, 2, rows=1), HALT])
    assert "not aligned to the 4-byte element size" in msg


def test_unknown_opcode() -> None:
    prog = program([HALT])
    bad = type(prog)(words=(0xF, *prog.words), tensors=(), config_name=prog.config_name,
                     build_hash=prog.build_hash)
    m = Machine(DEFAULT, ISA)
    with pytest.raises(SimFault, match=r"instruction 0 \(pc 0x0\): undecodable word"):
        m.load(bad)


def test_token_overflow() -> None:
    zero = ("zero", {"scope": scope("a"), "sp_row": 0, "rows": 1, "signal": units("tensor")})
    msg = _fault([zero] * (DEFAULT.token_max_count + 1) + [HALT])
    assert "load->tensor overflows" in msg and f"max_count = {DEFAULT.token_max_count}" in msg


def test_token_overflow_without_timing() -> None:
    zero = ("zero", {"scope": scope("a"), "sp_row": 0, "rows": 1, "signal": units("tensor")})
    assert "overflows" in _fault([zero] * (DEFAULT.token_max_count + 1) + [HALT], timing=False)


def test_many_tokens_consumed_in_time_do_not_overflow() -> None:
    pair = [("zero", {"scope": scope("a"), "sp_row": 0, "rows": 1, "signal": units("tensor")}),
            ("tmm", {"acc": 0, "a": 1, "b": 0, "wait": units("load")})]
    machine(pair * (3 * DEFAULT.token_max_count) + [HALT]).run()  # long enough to trim the ledgers
    extra = [pair[0]] * (DEFAULT.token_max_count + 1)
    with pytest.raises(SimFault, match="overflows"):
        machine(pair * (3 * DEFAULT.token_max_count) + extra + [HALT]).run()


def test_vadd_partial_overlap() -> None:
    assert _fault([("vadd", {"dst": 0, "src": 4, "rows": 8}), HALT]) == (
        "instruction 0 (pc 0x0, vadd): source rows 4..11 partially overlap destination rows 0..7; they must be "
        "identical or disjoint.")


def test_vaddrow_source_inside_destination() -> None:
    assert _fault([("vaddrow", {"dst": 0, "src": 4, "rows": 8}), HALT]) == (
        "instruction 0 (pc 0x0, vaddrow): the broadcast row 4 lies inside the destination rows 0..7; it must lie "
        "outside them.")


@over_tiles()
def test_source_rows_out_of_range(cfg: ArchConfig) -> None:
    rows = cfg.rows("acc")
    msg = _fault([("vadd", {"dst": 0, "src": rows - 4, "rows": 8}), HALT], cfg)
    assert msg == (f"instruction 0 (pc 0x0, vadd): src: acc rows {rows - 4}..{rows + 3} are out of range "
                   f"(acc has {rows} rows).")
    msg = _fault([("vaddrow", {"dst": 0, "src": rows, "rows": 8}), HALT], cfg)
    assert msg == f"instruction 0 (pc 0x0, vaddrow): src: acc row {rows} is out of range (acc has {rows} rows)."


def test_vrequant_parameter_rows_inside_destination() -> None:
    msg = _fault([("vrequant", {"dst": 4, "src": 3, "rows": 8}), HALT])
    assert msg == ("instruction 0 (pc 0x0, vrequant): the parameter rows 3..4 overlap the destination rows "
                   "4..11."), msg
    assert "overlap" in _fault([("vrequant", {"dst": 4, "src": 11, "rows": 8}), HALT])
    machine([("vrequant", {"dst": 4, "src": 12, "rows": 8}), ("vrequant", {"dst": 4, "src": 2, "rows": 8}),
             HALT]).run()


@over_tiles()
def test_vrequant_parameter_rows_out_of_range(cfg: ArchConfig) -> None:
    last = cfg.rows("acc") - 1
    msg = _fault([("vrequant", {"dst": 0, "src": last, "rows": 1}), HALT], cfg)
    assert f"the parameter rows {last}..{last + 1} are out of range (acc has {last + 1} rows)" in msg


def test_no_halt() -> None:
    assert "never halts" in _fault([load("a", 0, 0)])


def test_cycle_limit() -> None:
    msg = _fault([load("a", 0, 0), HALT], max_cycles=50)
    assert "cycle limit of 50" in msg and "instruction 0 (pc 0x0, load)" in msg


def test_deadlock_names_unit_instruction_channel() -> None:
    msg = _fault([("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load")}), HALT])
    assert "deadlock" in msg and "instruction 0 (pc 0x0, tmm)" in msg and "channel load->tensor" in msg


def test_deadlock_on_cycle_of_waits() -> None:
    msg = _fault([("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("alu"), "signal": units("alu")}),
                  ("vmax", {"dst": 64, "imm": 0, "rows": 1, "wait": units("tensor"),
                            "signal": units("tensor")}),
                  HALT], timing=False)
    assert "deadlock" in msg


def test_integer_only_instructions_fault_in_fp32() -> None:
    assert "integer configs only" in _fault([("vshr", {"dst": 0, "shift": 1, "rows": 1}), HALT], FP32)
    msg = _fault([("vrequant", {"dst": 0, "src": 8, "rows": 1}), HALT], FP32)
    assert "vrequant is for integer configs only (config 'fp32' is float32)" in msg, msg
    store = ("store", {"sp_row": 0, "dram": 0, "rows": 1, "narrow": 1})
    assert _fault([store, HALT], FP32) == ("instruction 0 (pc 0x0, store): narrow=1 requantizes to int8, which "
                                           "only integer configs support (config 'fp32' is float32).")
    machine([store, HALT]).run()  # an integer config takes it


def test_raw_store_with_shift() -> None:
    assert _fault([("store", {"sp_row": 0, "dram": 0, "rows": 1, "shift": 2}), HALT]) == (
        "instruction 0 (pc 0x0, store): shift=2 needs narrow=1; without narrowing the shift must be 0.")


def test_self_wait() -> None:
    assert "neither wait on nor signal itself" in _fault([load("a", 0, 0, wait=units("load")), HALT])


@over_tiles()
def test_instructions_after_halt_are_not_checked(cfg: ArchConfig) -> None:
    stats = machine([HALT, load("a", cfg.rows("a_reg") - 1, 0, cfg=cfg)], cfg).run()
    assert stats.instructions_total == 1


def test_program_for_another_config_is_refused() -> None:
    from tinynpu.errors import AsmError

    with pytest.raises(AsmError, match="built for config"):
        Machine(FP32, ISA).load(program([HALT]))


def test_write_tensor_checks_shape_and_values() -> None:
    from tinynpu.assembler.image import Tensor
    from tinynpu.errors import TinyNpuError

    tensors = [Tensor("X", 0, (4, 4), "int8"), Tensor("F", 64, (2, 2), "float32")]
    m = Machine(DEFAULT, ISA)
    m.load(program([HALT], tensors=tensors))
    m.write_tensor("X", np.arange(16).reshape(4, 4))  # int64 values that fit int8 are fine
    assert m.read_tensor("X").dtype == np.int8
    with pytest.raises(TinyNpuError, match="do not fit"):
        m.write_tensor("X", np.full((4, 4), 300))
    with pytest.raises(TinyNpuError, match="shape"):
        m.write_tensor("X", np.zeros((3, 4), np.int8))
    with pytest.raises(TinyNpuError, match="no tensor 'Y'"):
        m.write_tensor("Y", np.zeros(1))
    m.write_tensor("F", np.full((2, 2), 0.1))  # float64 rounds to float32
    assert m.read_tensor("F")[0, 0] == np.float32(0.1)
    with pytest.raises(TinyNpuError, match="outside"):
        m.read_dram(DEFAULT.dram_bytes - 1, 2)


def test_faults_in_later_decode_chunks_name_the_program_index() -> None:
    zero = ISA.encode("zero", {"scope": scope("a"), "sp_row": 0, "rows": 1})
    bad = ISA.encode("load", {"scope": scope("acc"), "sp_row": 0, "dram": 2, "rows": 1})
    halt = ISA.encode("halt", {})
    n = 70_000  # beyond one decode chunk
    prog = program([HALT])
    make = type(prog)
    words = (zero,) * n + (bad, halt)
    with pytest.raises(SimFault, match=f"instruction {n} \\(pc 0x{n * 16:x}, load\\)"):
        Machine(DEFAULT, ISA).load(make(words=words, tensors=(), config_name=prog.config_name,
                                        build_hash=prog.build_hash))
    words = (zero,) * n + (halt, 0xF)  # undecodable, but after the halt
    m = Machine(DEFAULT, ISA)
    m.load(make(words=words, tensors=(), config_name=prog.config_name, build_hash=prog.build_hash))


@over_tiles(ci=True)
def test_transformer_instruction_rules(cfg: ArchConfig) -> None:
    """Each rule of the new ALU instructions faults with its YAML message; the edge of each rule runs."""
    T = cfg.tile
    table = -(-256 // T)
    assert _fault([("vredsum", {"dst": 4 * T, "src": 0, "n": 1, "rows": T + 1, "shift": 0}), HALT], cfg) == (
        f"instruction 0 (pc 0x0, vredsum): rows={T + 1} is more than the tile edge {T}: a reduction covers the "
        "logical rows of one tile-row.")
    assert _fault([("vredmax", {"dst": 2 * T, "src": 0, "n": 3, "rows": 2}), HALT], cfg) == (
        f"instruction 0 (pc 0x0, vredmax): the source rows 0..{2 * T + 1} overlap the destination rows "
        f"{2 * T}..{2 * T + 1}; they must be disjoint.")
    assert _fault([("vmulb", {"dst": 5, "src": 0, "rows": 3 * T, "shift": 0}), HALT], cfg) == (
        f"instruction 0 (pc 0x0, vmulb): the block rows 0..{T - 1} overlap the destination rows 5..{3 * T + 4}; "
        "they must be disjoint.")
    assert _fault([("vlut", {"dst": table - 1, "src": 0, "rows": 1, "base": 0}), HALT], cfg) == (
        f"instruction 0 (pc 0x0, vlut): the table rows 0..{table - 1} overlap the destination rows "
        f"{table - 1}..{table - 1}; they must be disjoint.")
    assert "partially overlap" in _fault([("vrsqrt", {"dst": 0, "src": 1, "rows": 2, "shift": 0}), HALT], cfg)
    last = cfg.rows("acc")
    assert _fault([("vlut", {"dst": 0, "src": last - table + 1, "rows": 1, "base": 0}), HALT], cfg) == (
        f"instruction 0 (pc 0x0, vlut): src: acc rows {last - table + 1}..{last} are out of range "
        f"(acc has {last} rows).")
    machine([("vredmax", {"dst": 2 * T + 2, "src": 0, "n": 3, "rows": 2}),
             ("vsubb", {"dst": 3 * T, "src": 0, "rows": 2 * T}),
             ("vlut", {"dst": table, "src": 0, "rows": 1, "base": 0}),
             ("vrecip", {"dst": 0, "src": 0, "rows": 4, "shift": 62}), HALT], cfg).run()


def test_transformer_instructions_are_integer_only() -> None:
    cases = (("vredsq", {"dst": 64, "src": 0, "rows": 1}), ("vlut", {"dst": 64, "src": 0, "rows": 1, "base": 0}),
             ("vrecip", {"dst": 0, "src": 0, "rows": 1}))
    for mnemonic, ops in cases:
        message = _fault([(mnemonic, ops), HALT], FP32)
        assert f"{mnemonic} is for integer configs only (config 'fp32' is float32)" in message, message
