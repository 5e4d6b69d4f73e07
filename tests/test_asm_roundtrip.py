"""Property tests: encode/decode and asm -> bin -> disasm -> asm round trips on random valid instructions."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinynpu.assembler import Program, assemble, disassemble, format_instruction
from tinynpu.assembler.image import Tensor
from tinynpu.isa import ArchConfig, Field, Instruction, load_config, load_isa, regions
from tinynpu.isa.records import Check

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


def _expr(instr: Instruction, cfg: ArchConfig, text: str, values: dict[str, int]) -> int:
    """An expression of the instruction's ``accesses`` or ``checks`` in isa.yaml, for these values."""
    return int(regions.evaluate(ISA.region_expr(instr, text), ISA.scope_ids, values, tile=cfg.tile,
                                elem_bytes=ISA.per_scope(lambda s: cfg.elem_bytes(s.config_key)),
                                scope_rows=ISA.per_scope(lambda s: cfg.rows(s.config_key))))


def _extent(instr: Instruction, cfg: ArchConfig, fld: Field, values: dict[str, int]) -> int:
    """How many rows past ``fld`` the instruction's scratchpad accesses placed by it reach (isa.yaml)."""
    reach = 1
    for acc in instr.accesses:
        if not acc.dram and regions.names(ISA.region_expr(instr, acc.bounds[0])) == (fld.name,):
            at_zero = {n: values.get(n, 0) for n in instr.operands} | {fld.name: 0}
            reach = max(reach, _expr(instr, cfg, acc.bounds[1], at_zero) - _expr(instr, cfg, acc.bounds[0], at_zero))
    return reach


def _faults(instr: Instruction, cfg: ArchConfig, values: dict[str, int]) -> list[Check]:
    """The instruction's ``checks`` in isa.yaml that these values break on ``cfg``."""
    full = {n: values.get(n, 0) for n in instr.operands}
    return [c for c in instr.checks
            if not (c.integer_only and cfg.is_integer) and _expr(instr, cfg, c.fault, full)]


def _satisfy_checks(instr: Instruction, cfg: ArchConfig, values: dict[str, int], caps: dict[str, int]) -> None:
    """Move the operand each broken check names (``at``) to the nearest value that breaks no check.

    A scratchpad row moves through the rows it may take (``caps``: its highest); any other field
    falls back to its default (``shift`` to 0 when ``narrow`` is clear, ...).
    """
    for _ in range(len(instr.checks) + 1):  # fixing one check may break another (narrow, then shift)
        broken = _faults(instr, cfg, values)
        if not broken:
            return
        check = broken[0]
        fld = instr.field_map[check.at]
        if fld.name in caps:
            start = values[fld.name]
            for step in range(caps[fld.name] + 1):
                values[fld.name] = (start + step) % (caps[fld.name] + 1)
                if check not in _faults(instr, cfg, values):
                    break
        else:
            values[fld.name] = fld.default if fld.default is not None else fld.lo
        assert check not in _faults(instr, cfg, values), (instr.mnemonic, values)
    assert not _faults(instr, cfg, values), (instr.mnemonic, values)


@st.composite
def valid_instruction(draw: Any, cfg: ArchConfig) -> tuple[Instruction, dict[str, int]]:
    """An instruction that passes every static check of the assembler for ``cfg``.

    Values are drawn per field kind from the config's limits; the extents of the scratchpad
    addresses come from the instruction's ``accesses`` and the rules between fields from its
    ``checks`` in isa.yaml, enforced by construction, not by filtering, so every draw is usable.
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
    caps: dict[str, int] = {}  # a scratchpad row field -> its highest allowed value
    if scope_field is not None:
        sid = draw(st.sampled_from([s.id for s in ISA.scopes if scope_field.lo <= s.id <= scope_field.hi]))
        values[scope_field.name] = sid
    for fld in instr.fields:
        if fld.kind == "sp_row":
            scope = fld.scope or ISA.scope_by_id[values[scope_field.name]].name  # type: ignore[index]
            scope_of_field[fld.name] = scope
            caps[fld.name] = cfg.rows(ISA.scope_by_name[scope].config_key) - _extent(instr, cfg, fld, values)
            values[fld.name] = draw(st.integers(0, caps[fld.name]))
        elif fld.kind == "sp_tile":
            assert fld.scope is not None
            cap_tiles = cfg.rows(ISA.scope_by_name[fld.scope].config_key) // cfg.tile
            extent = _extent(instr, cfg, fld, values) // cfg.tile
            values[fld.name] = draw(st.integers(0, cap_tiles - extent))
        elif fld.kind == "units":
            values[fld.name] = _units(draw, instr, fld)
        elif fld.kind in ("flag", "shift", "imm") or (fld.kind == "count" and fld.name == "cols"):
            values[fld.name] = draw(st.integers(fld.lo, fld.hi_at(cfg.tile)))
    if "src" in values and "dst" in values and draw(st.booleans()):
        values["src"] = values["dst"]  # identical ranges, where the checks allow them
    _satisfy_checks(instr, cfg, values, caps)
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
