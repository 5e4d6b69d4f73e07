"""Property tests: encode/decode and asm -> bin -> disasm -> asm round trips on random valid instructions."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinynpu.assembler import Program, assemble, disassemble, format_instruction
from tinynpu.assembler.image import Tensor
from tinynpu.isa import ArchConfig, Field, Instruction, load_config, load_isa

ISA = load_isa()
CONFIGS = {name: load_config(name, ISA) for name in ("default", "fp32", "t8", "t32")}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _any_value(fld: Field) -> st.SearchStrategy[int]:
    return st.integers(fld.lo, fld.hi)


@st.composite
def raw_instruction(draw: Any) -> tuple[Instruction, dict[str, int]]:
    """Any instruction with any encodable field values (what the decoder must round-trip)."""
    instr = draw(st.sampled_from(ISA.instructions))
    return instr, {f.name: draw(_any_value(f)) for f in instr.fields}


@given(raw_instruction())
@SETTINGS
def test_encode_decode_round_trip(case: tuple[Instruction, dict[str, int]]) -> None:
    instr, fields = case
    word = ISA.encode(instr.mnemonic, fields)
    assert 0 <= word < 1 << ISA.word_bits
    decoded, values = ISA.decode(word)
    assert decoded is instr
    assert values == fields


def _units(draw: Any, instr: Instruction, fld: Field) -> int:
    """A wait/signal mask over the other queued units."""
    others = [u.id for u in ISA.queued_units if u.name != instr.unit and u.id < fld.width]
    chosen = draw(st.lists(st.sampled_from(others), unique=True, max_size=len(others))) if others else []
    return sum(1 << i for i in chosen)


@st.composite
def valid_instruction(draw: Any, cfg: ArchConfig) -> tuple[Instruction, dict[str, int]]:
    """An instruction that passes every static check of the assembler for ``cfg``.

    Values are drawn per field kind from the config's limits, then the few
    rules between fields (extents, DRAM bounds, the ISA's prose rules) are
    enforced by construction, not by filtering, so every draw is usable.
    """
    instr = draw(st.sampled_from(ISA.instructions))
    if instr.integer_only and not cfg.is_integer:
        instr = ISA.by_mnemonic["vmax"]
    f = instr.field_map
    values: dict[str, int] = {}
    rows = draw(st.integers(1, 48)) if "rows" in f else 1
    if "rows" in f:
        values["rows"] = rows
    for name in ("m", "n", "k"):
        if name in f:
            values[name] = draw(st.integers(1, 3))
    scope_field = next((fl for fl in instr.fields if fl.kind == "scope"), None)
    scope_of_field: dict[str, str] = {}
    if scope_field is not None:
        sid = draw(st.sampled_from([s.id for s in ISA.scopes if scope_field.lo <= s.id <= scope_field.hi]))
        values[scope_field.name] = sid
    for fld in instr.fields:
        if fld.kind == "sp_row":
            scope = fld.scope or ISA.scope_by_id[values[scope_field.name]].name  # type: ignore[index]
            scope_of_field[fld.name] = scope
            cap = cfg.rows(ISA.scope_by_name[scope].config_key)
            extent = {("vaddrow", "src"): 1, ("vrequantf", "src"): 1,
                      ("vrequant", "src"): 2}.get((instr.mnemonic, fld.name), rows)
            values[fld.name] = draw(st.integers(0, cap - extent))
        elif fld.kind == "sp_tile":
            assert fld.scope is not None
            cap_tiles = cfg.rows(ISA.scope_by_name[fld.scope].config_key) // cfg.tile
            dims = {"acc": ("m", "n"), "a": ("m", "k"), "b": ("n", "k")}[fld.name]
            extent = values[dims[0]] * values[dims[1]]
            values[fld.name] = draw(st.integers(0, cap_tiles - extent))
        elif fld.kind == "units":
            values[fld.name] = _units(draw, instr, fld)
        elif fld.kind in ("flag", "shift", "imm") or (fld.kind == "count" and fld.name == "cols"):
            values[fld.name] = draw(st.integers(fld.lo, fld.hi_at(cfg.tile)))
    if instr.mnemonic == "store":
        if not cfg.is_integer:
            values["narrow"] = 0
        if not values["narrow"]:
            values["shift"] = 0
    if instr.mnemonic == "vadd" and draw(st.booleans()):
        values["src"] = values["dst"]  # identical ranges are allowed
    if instr.mnemonic == "vadd" and values["src"] != values["dst"]:
        values["src"] = (values["dst"] + rows) % (cfg.rows("acc") - rows + 1)
        if values["src"] < values["dst"] + rows and values["dst"] < values["src"] + rows:
            values["src"] = values["dst"]
    if instr.mnemonic in ("vaddrow", "vrequantf") and values["dst"] <= values["src"] < values["dst"] + rows:
        values["src"] = values["dst"] + rows if values["dst"] + rows < cfg.rows("acc") else values["dst"] - 1
    if instr.mnemonic == "vrequant" and values["src"] + 1 >= values["dst"] and values["src"] < values["dst"] + rows:
        values["src"] = values["dst"] + rows if values["dst"] + rows + 2 <= cfg.rows("acc") else values["dst"] - 2
    if "dram" in f:
        sp = next(fl for fl in instr.fields if fl.kind == "sp_row")
        key = ISA.scope_by_name[scope_of_field[sp.name]].config_key
        elem = 1 if values.get("narrow") else cfg.elem_bytes(key)
        stride = draw(st.integers(0, 4096)) * elem
        span = (rows - 1) * stride + values.get("cols", 16) * elem
        values["stride"] = stride
        values["dram"] = draw(st.integers(0, (cfg.dram_bytes - span) // elem)) * elem
    return instr, values


@st.composite
def valid_program(draw: Any) -> tuple[ArchConfig, Program]:
    cfg = CONFIGS[draw(st.sampled_from(sorted(CONFIGS)))]
    body = draw(st.lists(valid_instruction(cfg), min_size=1, max_size=12))
    words = [ISA.encode(i.mnemonic, v) for i, v in body]
    tensors = []
    if draw(st.booleans()):
        tensors.append(Tensor("X", 0, (draw(st.integers(1, 64)), 16), "int8", "input"))
        tensors.append(Tensor("Y", 0x10000, (16, 16), cfg.acc_dtype, "output"))
    return cfg, Program.build(ISA, cfg, words, tensors)


@given(valid_program())
@SETTINGS
def test_asm_bin_disasm_asm_same_bytes(case: tuple[ArchConfig, Program]) -> None:
    cfg, program = case
    binary = program.to_bytes()
    loaded = Program.from_bytes(binary)
    text = disassemble(loaded, ISA)
    again = assemble(text, isa=ISA, cfg=cfg)
    assert again.to_bytes() == binary
    # and the text of each instruction is what format_instruction gives
    for word, line in zip(program.words, [ln.strip() for ln in text.splitlines() if ln.startswith("    ")],
                          strict=True):
        instr, fields = ISA.decode(word)
        single = assemble(format_instruction(ISA, instr, fields, cfg=cfg), isa=ISA, cfg=cfg)
        assert single.words == (word,), line


@given(st.data())
@SETTINGS
def test_field_values_survive_assembly(data: st.DataObject) -> None:
    """Writing a valid instruction as text and assembling it gives back the same field values."""
    cfg = CONFIGS["default"]
    instr, values = data.draw(valid_instruction(cfg))
    text = format_instruction(ISA, instr, values, cfg=cfg)
    decoded, fields = ISA.decode(assemble(text, isa=ISA, cfg=cfg).words[0])
    assert decoded is instr
    expected = {fl.name: values.get(fl.name, fl.default) for fl in instr.fields}
    assert fields == expected, text
