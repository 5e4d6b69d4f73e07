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
from tinynpu.errors import AsmError
from tinynpu.isa import ArchConfig, Field, Instruction, Isa, encoding, regions
from tinynpu.isa.spec import Check
from tinynpu.isa.syntax import SP_KINDS

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
    scratchpad: tuple[_Extent, ...]  # the scratchpad regions its isa.yaml accesses name
    dram: _Footprint | None  # the DRAM region its isa.yaml accesses name, if any
    rules: tuple[tuple[Check, regions.Scalar, tuple[tuple[str, regions.Scalar], ...]], ...]  # isa.yaml checks


class _Extent(NamedTuple):
    """A scratchpad access ``[lo, hi)`` whose lower bound is one operand: the rows it spans from there."""

    field: Field  # the sp_row or sp_tile operand of the lower bound
    rows: regions.Scalar  # hi - lo
    counts: tuple[str, ...]  # the other operands of the upper bound (tmm's m, n, k), named in messages


class _Footprint(NamedTuple):
    """A DRAM access ``[addr, stride, rows, row_bytes]``; the element size is the row_bytes of ``cols=1``."""

    addr: Field
    stride: str | None  # the operand of the stride, whose position a misaligned stride names
    bounds: tuple[regions.Scalar, ...]
    write: bool


@functools.lru_cache(maxsize=16)
def _encode_plans(isa: Isa, tile: int) -> dict[str, _EncodePlan]:
    plans: dict[str, _EncodePlan] = {}
    for instr in isa.instructions:
        fields = tuple(_FieldPlan(f, f.name, f.default_at(tile), f.lo, f.hi_at(tile), f.kind == "sp_tile")
                       for f in instr.fields)

        def compiled(text: str, ins: Instruction = instr) -> regions.Scalar:
            return regions.scalar_function(isa.region_expr(ins, text), isa.scope_ids)

        def names(text: str, ins: Instruction = instr) -> tuple[str, ...]:
            return regions.names(isa.region_expr(ins, text))

        scratchpad: list[_Extent] = []
        dram: _Footprint | None = None
        for a in instr.accesses:
            base = names(a.bounds[0])
            if a.dram:
                stride = names(a.bounds[1])
                dram = _Footprint(instr.field_map[base[0]], stride[0] if len(stride) == 1 else None,
                                  tuple(compiled(b) for b in a.bounds), a.write)
            elif len(base) == 1 and instr.field_map[base[0]].kind in SP_KINDS:
                counts = tuple(n for n in names(a.bounds[1]) if n != base[0])
                scratchpad.append(_Extent(instr.field_map[base[0]], compiled(f"({a.bounds[1]}) - ({a.bounds[0]})"),
                                          counts))
        rules = tuple((c, compiled(c.fault), tuple((f, compiled(f)) for f in c.fields)) for c in instr.checks)
        plans[instr.mnemonic] = _EncodePlan(fields, tuple(scratchpad), dram, rules)
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
    for extent in plan.scratchpad:
        _check_scratchpad(instr, extent, values[extent.field.name], full, limits)
    if plan.dram is not None:
        _check_dram(instr, plan.dram, values, full, limits, at)
    _check_rules(instr, values, full, limits, at)
    return instr, encoded_values


def _check_scratchpad(instr: Instruction, extent: _Extent, val: Value, full: dict[str, int],
                      limits: Limits) -> None:
    cfg, fld = limits.cfg, extent.field
    assert val.scope is not None or fld.scope is not None
    scope: str = val.scope or fld.scope  # type: ignore[assignment]
    key, capacity = limits.capacity[scope]
    row = val.value
    rows = extent.rows(full, cfg.tile, limits.elem_bytes, limits.scope_rows)
    if row < 0 or row + rows > capacity:
        # The description is built only here: this check runs for every scratchpad operand.
        what = f"{rows} row{'s' if rows != 1 else ''}"
        if fld.kind == "sp_tile":
            tiles = rows // cfg.tile
            counts = " * ".join(f"{d}={full[d]}" for d in extent.counts)
            what = f"{tiles} tile{'s' if tiles != 1 else ''}" + (f" ({counts})" if counts else "")
        raise AsmError(f"{val.pos}: {instr.mnemonic} {fld.operand or fld.name}: {scope}[{row}] spanning "
                       f"{what} reaches row {row + rows - 1}, beyond the {capacity} rows "
                       f"(0..{capacity - 1}) of scratchpad {scope} ({key}) in config {cfg.name!r}.")


def _check_dram(instr: Instruction, footprint: _Footprint, values: dict[str, Value], full: dict[str, int],
                limits: Limits, at: Pos) -> None:
    cfg = limits.cfg
    tables = (cfg.tile, limits.elem_bytes, limits.scope_rows)
    addr, stride, rows, row_bytes = (f(full, *tables) for f in footprint.bounds)
    elem = footprint.bounds[3]({**full, "cols": 1}, *tables)
    pos = values[footprint.addr.name].pos if footprint.addr.name in values else at
    if addr % elem:
        raise AsmError(f"{pos}: {instr.mnemonic}: DRAM address 0x{addr:x} is not aligned to the "
                       f"{elem}-byte elements it {'writes' if footprint.write else 'reads'}.")
    if rows > 1 and stride % elem:
        spos = values[footprint.stride].pos if footprint.stride is not None and footprint.stride in values else at
        raise AsmError(f"{spos}: {instr.mnemonic}: stride {stride} is not a multiple of the {elem}-byte "
                       "element size, so rows after the first would be misaligned.")
    end = addr + (rows - 1) * stride + row_bytes
    if end > cfg.dram_bytes:
        raise AsmError(f"{pos}: {instr.mnemonic}: DRAM bytes 0x{addr:x}..0x{end - 1:x} (rows={rows}, "
                       f"stride={stride}, {row_bytes} bytes a row) reach beyond the {cfg.dram_bytes} "
                       f"bytes (0x0..0x{cfg.dram_bytes - 1:x}) of DRAM in config {cfg.name!r}.")


def _check_rules(instr: Instruction, values: dict[str, Value], full: dict[str, int], limits: Limits,
                 at: Pos) -> None:
    """The instruction's isa.yaml ``checks`` (and ``integer_only``), naming the operand each check names."""
    cfg = limits.cfg
    if instr.integer_only and not cfg.is_integer:
        raise AsmError(f"{at}: {instr.mnemonic} is for integer configs only; config {cfg.name!r} accumulates in "
                       f"{cfg.acc_dtype}.")
    tables = (cfg.tile, limits.elem_bytes, limits.scope_rows)
    for rule, fault, fields in limits.plans[instr.mnemonic].rules:  # isa.yaml `checks`
        if (cfg.is_integer and rule.integer_only) or not fault(full, *tables):
            continue
        text = rule.explain({name: f(full, *tables) for name, f in fields}, config=cfg.name,
                            acc_dtype=cfg.acc_dtype)
        pos = values[rule.at].pos if rule.at is not None and rule.at in values else at
        raise AsmError(f"{pos}: {instr.mnemonic}: {text}.")


__all__ = ["Checked", "Limits", "Value", "check_values", "encode_checked"]
