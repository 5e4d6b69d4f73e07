"""The assembler's checks of one instruction's values, and the encoding of every checked instruction.

:func:`check_values` applies the ISA's and the config's static rules to the
values an instruction line gives (field ranges, tile alignment, scratchpad
extents from isa.yaml ``accesses``, DRAM bounds and alignment, the ``checks``
of each instruction), naming the source position in every message;
:func:`encode_checked` then turns all checked instructions into words with the
ISA's one encoder, one vectorized pass per mnemonic.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from itertools import chain
from typing import NamedTuple

import numpy as np

from tinynpu.assembler.lexer import Pos
from tinynpu.assembler.syntax import SP_KINDS
from tinynpu.errors import AsmError
from tinynpu.isa import ArchConfig, Field, Instruction, Isa, encoding, regions
from tinynpu.isa.spec import Check

# tmm's tile operands span a block of tiles (isa.yaml tmm semantics):
# acc m*n tiles, a m*k tiles, b n*k tiles.
_TILE_EXTENT = {"acc": ("m", "n"), "a": ("m", "k"), "b": ("n", "k")}
Checked = tuple[Instruction, list[int]]  # an instruction and its field values, in field order, checked


class Value(NamedTuple):
    value: int
    pos: Pos
    scope: str | None = None  # for scratchpad operands: the scope named by the prefix



@dataclass
class Limits:
    """What the checks consult for every instruction, looked up once per assembly."""

    isa: Isa
    cfg: ArchConfig
    plans: dict[str, _EncodePlan] = field(init=False)
    capacity: dict[str, tuple[str, int]] = field(init=False)  # scope name -> (config key, rows)
    elem_bytes: list[int] = field(init=False)  # by scope id, for isa.yaml expressions
    scope_rows: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.plans = _encode_plans(self.isa, self.cfg.tile)
        self.capacity = {s.name: (s.config_key, self.cfg.rows(s.config_key)) for s in self.isa.scopes}
        self.elem_bytes = self.isa.per_scope(lambda s: self.cfg.elem_bytes(s.config_key))
        self.scope_rows = self.isa.per_scope(lambda s: self.cfg.rows(s.config_key))


def encode_checked(isa: Isa, checked: list[Checked]) -> list[int]:
    """Encode every checked instruction: one vectorized :func:`encoding.encode_columns` per mnemonic."""
    lo = np.zeros(len(checked), dtype=np.uint64)
    hi = np.zeros(len(checked), dtype=np.uint64)
    members: dict[int, list[int]] = {}
    for i, (instr, _) in enumerate(checked):
        members.setdefault(instr.index, []).append(i)
    for index, idx in members.items():
        instr = isa.instructions[index]
        nf = len(instr.fields)
        rows = np.fromiter(chain.from_iterable(checked[i][1] for i in idx), dtype=np.int64,
                           count=len(idx) * nf).reshape(len(idx), nf)
        columns = {f.name: rows[:, j] for j, f in enumerate(instr.fields)}
        lo[idx], hi[idx] = encoding.encode_columns(instr, columns, len(idx))
    return encoding.to_ints(lo, hi)


class _FieldPlan(NamedTuple):
    """A field with the numbers :func:`check_values` needs, computed once (``Field.lo``/``hi`` are properties)."""

    field: Field
    name: str
    default: int | None
    lo: int
    hi: int
    tile: bool  # written as a row, encoded as a tile index


@dataclass(frozen=True)
class _EncodePlan:
    """Per-mnemonic encoding layout: the word's fixed bits and every field's range, mask and shift."""

    fields: tuple[_FieldPlan, ...]
    scratchpad: tuple[Field, ...]  # fields checked against scratchpad capacity
    dram: Field | None  # the DRAM address field, if any
    dram_scratchpad: Field | None  # the scratchpad field that gives the DRAM element size
    row_extent: dict[str, regions.Scalar]  # sp_row field -> rows its access spans (isa.yaml accesses)
    rules: tuple[tuple[Check, regions.Scalar, tuple[tuple[str, regions.Scalar], ...]], ...]  # isa.yaml checks


@functools.lru_cache(maxsize=16)
def _encode_plans(isa: Isa, tile: int) -> dict[str, _EncodePlan]:
    plans: dict[str, _EncodePlan] = {}
    for instr in isa.instructions:
        fields = tuple(_FieldPlan(f, f.name, f.default_at(tile), f.lo, f.hi_at(tile), f.kind == "sp_tile")
                       for f in instr.fields)
        scratchpad = tuple(f for f in instr.fields if f.kind in SP_KINDS)
        dram = next((f for f in instr.fields if f.kind == "dram_addr"), None)

        def compiled(text: str, ins: Instruction = instr) -> regions.Scalar:
            return regions.scalar_function(isa.region_expr(ins, text), isa.scope_ids)

        extent = {a.bounds[0]: compiled(f"({a.bounds[1]}) - ({a.bounds[0]})")
                  for a in instr.accesses if not a.dram and a.bounds[0] in instr.operands}
        rules = tuple((c, compiled(c.fault), tuple((f, compiled(f)) for f in c.fields)) for c in instr.checks)
        plans[instr.mnemonic] = _EncodePlan(fields, scratchpad, dram,
                                            scratchpad[0] if dram is not None else None, extent, rules)
    return plans


def check_values(instr: Instruction, values: dict[str, Value], limits: Limits, at: Pos) -> Checked:
    """Check ``instr``'s values, with their source positions in every message (:func:`_words` encodes)."""
    cfg = limits.cfg
    plan = limits.plans[instr.mnemonic]
    # Defaults and missing fields first, so the checks below see every value.
    full: dict[str, int] = {}
    for fp in plan.fields:
        val = values.get(fp.name)
        if val is not None:
            full[fp.name] = val.value
        elif fp.default is not None:
            full[fp.name] = fp.default
        else:
            raise AsmError(f"{at}: {instr.mnemonic} needs {fp.name}=... ({fp.field.summary}); it has no default.")
    # Range checks in field order, with the source positions in the messages: the values the ISA's
    # encoder gets later are in range.
    encoded_values: list[int] = []
    keep = encoded_values.append
    tile = cfg.tile
    for fp in plan.fields:
        value = encoded = full[fp.name]
        if fp.tile:
            if value % tile:
                pos = values[fp.name].pos if fp.name in values else at
                raise AsmError(f"{pos}: {instr.mnemonic} {fp.name}: scratchpad row {value} is not "
                               f"aligned to a tile; tile addresses must be multiples of {tile}.")
            encoded = value // tile
        if not fp.lo <= encoded <= fp.hi:
            pos = values[fp.name].pos if fp.name in values else at
            fld = fp.field
            shown = f"{fld.lo}..{fp.hi}"
            if fld.kind == "sp_tile":
                shown = f"rows {fld.lo * tile}..{fld.hi * tile} (multiples of {tile})"
            elif fld.max_is_tile:
                shown += f" (at most the tile edge of config {cfg.name!r})"
            raise AsmError(f"{pos}: {instr.mnemonic} {fld.name}={value} is out of range: the field "
                           f"({fld.width} bits, {fld.kind}) holds {shown}.")
        keep(encoded)
    for fld in plan.scratchpad:
        _check_scratchpad(instr, fld, values[fld.name], full, limits)
    if plan.dram is not None:
        assert plan.dram_scratchpad is not None
        _check_dram(instr, plan.dram, plan.dram_scratchpad, values, full, limits, at)
    _check_rules(instr, values, full, limits, at)
    return instr, encoded_values


def _scope_of(fld: Field, val: Value) -> str:
    assert val.scope is not None or fld.scope is not None
    return val.scope or fld.scope  # type: ignore[return-value]


def _check_scratchpad(instr: Instruction, fld: Field, val: Value, full: dict[str, int],
                      limits: Limits) -> None:
    cfg = limits.cfg
    scope = _scope_of(fld, val)
    key, capacity = limits.capacity[scope]
    row = val.value
    if fld.kind == "sp_tile":
        dims = _TILE_EXTENT.get(fld.name, ())
        tiles = 1
        for d in dims:
            tiles *= full.get(d, 1)
        extent = tiles * cfg.tile
    else:
        span = limits.plans[instr.mnemonic].row_extent.get(fld.name)
        extent = span(full, cfg.tile, limits.elem_bytes, limits.scope_rows) if span is not None else full.get("rows", 1)
    if row < 0 or row + extent > capacity:
        # The description is built only here: this check runs for every scratchpad operand.
        if fld.kind == "sp_tile":
            dims_text = " * ".join(f"{d}={full.get(d, 1)}" for d in dims)
            what = f"{tiles} tile{'s' if tiles != 1 else ''} ({dims_text})"
        else:
            what = f"{extent} row{'s' if extent != 1 else ''}"
        raise AsmError(f"{val.pos}: {instr.mnemonic} {fld.operand or fld.name}: {scope}[{row}] spanning "
                       f"{what} reaches row {row + extent - 1}, beyond the {capacity} rows "
                       f"(0..{capacity - 1}) of scratchpad {scope} ({key}) in config {cfg.name!r}.")


def _check_dram(instr: Instruction, dram_field: Field, sp: Field, values: dict[str, Value],
                full: dict[str, int], limits: Limits, at: Pos) -> None:
    cfg = limits.cfg
    key = limits.isa.scope_by_name[_scope_of(sp, values[sp.name])].config_key
    elem = 1 if full.get("narrow") else cfg.elem_bytes(key)
    addr, rows = full[dram_field.name], full.get("rows", 1)
    stride, cols = full.get("stride", 0), full.get("cols", 1)
    pos = values[dram_field.name].pos if dram_field.name in values else at
    if addr % elem:
        raise AsmError(f"{pos}: {instr.mnemonic}: DRAM address 0x{addr:x} is not aligned to the "
                       f"{elem}-byte elements it {'reads' if instr.unit == 'load' else 'writes'}.")
    if rows > 1 and stride % elem:
        spos = values["stride"].pos if "stride" in values else at
        raise AsmError(f"{spos}: {instr.mnemonic}: stride {stride} is not a multiple of the {elem}-byte "
                       "element size, so rows after the first would be misaligned.")
    end = addr + (rows - 1) * stride + cols * elem
    if end > cfg.dram_bytes:
        raise AsmError(f"{pos}: {instr.mnemonic}: DRAM bytes 0x{addr:x}..0x{end - 1:x} (rows={rows}, "
                       f"stride={stride}, cols={cols} x {elem} bytes) reach beyond the {cfg.dram_bytes} "
                       f"bytes (0x0..0x{cfg.dram_bytes - 1:x}) of DRAM in config {cfg.name!r}.")


def _check_rules(instr: Instruction, values: dict[str, Value], full: dict[str, int], limits: Limits,
                 at: Pos) -> None:
    """Constraints the ISA states in prose (isa.yaml descriptions), checked where they are static."""
    cfg = limits.cfg

    def pos(name: str) -> Pos:
        return values[name].pos if name in values else at

    if instr.mnemonic == "store":
        if full["narrow"] and not cfg.is_integer:
            raise AsmError(f"{pos('narrow')}: store narrow=1 requantizes to int8, which only integer configs "
                           f"support; config {cfg.name!r} accumulates in {cfg.acc_dtype}.")
        if not full["narrow"] and full["shift"]:
            raise AsmError(f"{pos('shift')}: store shift={full['shift']} needs narrow=1; without narrowing "
                           "the shift must be 0.")
    elif instr.mnemonic == "vadd":
        dst, src, rows = full["dst"], full["src"], full["rows"]
        if dst != src and dst < src + rows and src < dst + rows:
            raise AsmError(f"{pos('src')}: vadd source rows {src}..{src + rows - 1} partly overlap "
                           f"destination rows {dst}..{dst + rows - 1}; they must be identical or disjoint.")
    elif instr.mnemonic == "vaddrow":
        dst, src, rows = full["dst"], full["src"], full["rows"]
        if dst <= src < dst + rows:
            raise AsmError(f"{pos('src')}: vaddrow broadcast row {src} lies inside the destination rows "
                           f"{dst}..{dst + rows - 1}; it must lie outside them.")
    if instr.integer_only and not cfg.is_integer:
        raise AsmError(f"{at}: {instr.mnemonic} is for integer configs only; config {cfg.name!r} accumulates in "
                       f"{cfg.acc_dtype}.")
    tables = (cfg.tile, limits.elem_bytes, limits.scope_rows)
    for rule, fault, fields in limits.plans[instr.mnemonic].rules:  # isa.yaml `checks`
        if fault(full, *tables):
            text = rule.message.format_map({name: f(full, *tables) for name, f in fields})
            raise AsmError(f"{at}: {instr.mnemonic}: {text}.")


__all__ = ["Checked", "Limits", "Value", "check_values", "encode_checked"]
