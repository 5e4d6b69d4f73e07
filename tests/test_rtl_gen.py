"""The generated Verilog header and the RTL's decode assumptions (the Verilator lint is in test_rtl_configs)."""

from __future__ import annotations

import ast
import dataclasses
import re

from tinynpu.isa import Instruction, Isa, load_config, load_isa
from tinynpu.isa.alu_shapes import alu_ops
from tinynpu.isa.gen_verilog import RTL_HEADER_PATH, generate_verilog
from tinynpu.isa.gen_verilog_checks import checked_instructions


def test_committed_header_is_not_stale() -> None:
    isa = load_isa()
    expected = generate_verilog(isa, load_config("default", isa))
    assert RTL_HEADER_PATH.read_text(encoding="utf-8") == expected, (
        "rtl/generated/tinynpu_isa.vh is stale: run `python -m tinynpu.isa.gen_verilog`")


def _parsed_expressions(isa: Isa) -> dict[tuple[str, str], str]:
    """Every access bound, ``unless`` and static check of every instruction, as the shared parsed tree reads."""
    out = {}
    for instr in isa.instructions:
        texts = [b for a in instr.accesses for b in (*a.bounds, a.unless) if b is not None]
        for text in [*texts, *(c.fault for c in instr.checks)]:
            out[instr.mnemonic, str(text)] = ast.dump(isa.region_expr(instr, str(text)))
    return out


def test_generating_the_checks_leaves_the_shared_expressions_alone() -> None:
    """The simulator, the C header and the RTL checks read one cached tree per expression; the generator once
    rewrote a store's row bytes in place (``cols`` as 1), and a process that generated the RTL header then
    missed a store's DRAM overrun by less than its row."""
    isa = load_isa()
    before = _parsed_expressions(isa)
    for name in ("t8", "default", "t32", "acc2x", "dram_half"):
        generate_verilog(isa, load_config(name, isa))
    assert _parsed_expressions(isa) == before


def _params(text: str) -> dict[str, str]:
    return dict(re.findall(r"localparam int (\w+) *= (-?\d+);", text))


def test_header_carries_isa_and_config_values() -> None:
    isa = load_isa()
    cfg = load_config("default", isa)
    text = generate_verilog(isa, cfg)
    params = _params(text)
    for instr in isa.instructions:
        name = instr.mnemonic.upper()
        assert int(params[f"TNPU_{name}_OPCODE"]) == instr.fixed_value("opcode")
        for f in instr.fields:
            assert int(params[f"TNPU_{name}_{f.name.upper()}_LSB"]) == f.lsb
            assert int(params[f"TNPU_{name}_{f.name.upper()}_W"]) == f.width
    assert int(params["TNPU_DRAM_LATENCY"]) == cfg.dram_latency_cycles
    assert int(params["TNPU_QUEUE_DEPTH"]) == cfg.queue_depth
    assert int(params["TNPU_ACC_ROWS"]) == cfg.rows("acc")
    assert int(params["TNPU_TOKEN_MAX"]) == cfg.token_max_count
    for unit in isa.units:
        assert int(params[f"TNPU_UNIT_{unit.name.upper()}"]) == unit.id


def test_generator_is_a_pure_function_of_its_inputs() -> None:
    isa = load_isa()
    cfg = load_config("default", isa)
    assert generate_verilog(isa, cfg) == generate_verilog(isa, cfg)
    other = dataclasses.replace(cfg, dram_latency_cycles=37, queue_depth=3)
    params = _params(generate_verilog(isa, other))
    assert params["TNPU_DRAM_LATENCY"] == "37"
    assert params["TNPU_QUEUE_DEPTH"] == "3"


def test_unit_table_follows_each_instructions_unit() -> None:
    """The dispatcher's instruction-to-unit table has one line per instruction, with its YAML unit."""
    isa = load_isa()
    text = generate_verilog(isa, load_config("default", isa))
    table = re.findall(r"if \(\(word & TNPU_(\w+)_MASK\) == TNPU_\1_MATCH\) return \{1'b1, \d+'\(TNPU_UNIT_(\w+)\)\};",
                       text)
    assert table == [(i.mnemonic.upper(), i.unit.upper()) for i in isa.instructions]


@dataclasses.dataclass(frozen=True)
class _Positions:
    field_map: dict[str, tuple[int, int]]
    instr: Instruction


def test_shared_field_positions_the_rtl_relies_on() -> None:
    """The units decode zero like load, and every ALU op with vadd's wait/signal/rows/dst positions.

    ALU ops may sit at more than one opcode (a new one takes opcode 7 once opcode 6's functs are used up):
    the RTL tells them apart by their operation number (``tnpu_alu_op``), which must be one per op."""
    isa = load_isa()
    by = {i.mnemonic: _Positions({f.name: (f.lsb, f.msb) for f in i.fields}, i) for i in isa.instructions}
    for name in ("scope", "sp_row", "rows", "wait", "signal"):
        assert by["zero"].field_map[name] == by["load"].field_map[name]
    for name in ("wait", "signal", "rows", "dram", "stride", "cols"):
        assert by["store"].field_map[name] == by["load"].field_map[name]
    alu = [by[i.mnemonic] for i in isa.instructions if i.unit == "alu"]
    for instr in alu:
        for name in ("dst", "rows", "wait", "signal"):
            assert instr.field_map[name] == by["vadd"].field_map[name], (instr.instr.mnemonic, name)
    ops = alu_ops(isa)[2]
    assert len(set(ops.values())) == len(ops) == len(alu)
    assert by["vaddrow"].field_map["src"] == by["vadd"].field_map["src"]
    assert by["vmin"].field_map["imm"] == by["vmax"].field_map["imm"] == by["vmul"].field_map["imm"]
    # The tensor unit keeps m, n and k in registers of one width.
    assert len({hi - lo for name, (lo, hi) in by["tmm"].field_map.items() if name in ("m", "n", "k")}) == 1
    # The dispatcher reads sp_row and rows of store/ALU ops at load's positions.
    assert by["store"].field_map["sp_row"] == by["load"].field_map["sp_row"]
    assert by["vadd"].field_map["dst"] == by["load"].field_map["sp_row"]
    assert by["vadd"].field_map["rows"] == by["load"].field_map["rows"]


def test_dispatch_checks_cover_every_field_range_access_and_footprint() -> None:
    """tnpu_checks has one function per queued instruction, with a rule for each YAML fact it checks."""
    isa = load_isa()
    text = generate_verilog(isa, load_config("default", isa))
    selector = re.findall(r"return tnpu_(\w+)_checks\(word\);", text)
    queued = {u.name for u in isa.queued_units}
    assert selector == [i.mnemonic for i in checked_instructions(isa)] == [
        i.mnemonic for i in isa.instructions if i.unit in queued]
    assert {"load", "tmm", "store", "vadd", "vredsum", "vrecip"} <= set(selector)
    for instr in checked_instructions(isa):
        body = text.split(f"function automatic logic [2:0] tnpu_{instr.mnemonic}_checks(")[1].split("endfunction")[0]
        dram, spad, field = body.split("return {", 1)[1].rsplit("}", 1)[0].split(", ")
        lows = [f for f in instr.fields if (f.min or 0) > 0]
        highs = [f for f in instr.fields if f.max_is_tile or (f.max is not None and f.max < (1 << f.width) - 1)]
        for f in lows + highs:
            assert f"word[{f.lsb} +: {f.width}]" in field, (instr.mnemonic, f.name)
        checks = [c for c in instr.checks if not c.integer_only]
        # a check at a scratchpad-row field (an ALU source overlapping its destination) is a scratchpad fault
        at_row = sum(c.at is not None and instr.field_map[c.at].kind == "sp_row" for c in checks)
        assert field.count(" || ") + 1 == len(lows) + len(highs) + len(checks) - at_row, instr.mnemonic
        spad_rules = sum(not a.dram for a in instr.accesses) + at_row
        assert (spad.strip() == "1'b0") == (spad_rules == 0), instr.mnemonic
        assert spad_rules == 0 or spad.count(" || ") + 1 == spad_rules, instr.mnemonic
        footprints = sum(a.dram for a in instr.accesses)
        assert (dram.strip() == "1'b0") == (footprints == 0) and dram.count("% ") == 2 * footprints, instr.mnemonic
