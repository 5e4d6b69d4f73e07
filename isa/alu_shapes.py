"""The operand shapes of the vector ALU's instructions, read from their isa.yaml ``accesses`` and ``checks``.

The ALU's hardware (and the dispatcher's range checks) handles a few shapes
of source operand, not one circuit per instruction:

* ``none``: no source rows (``vmax``, ``vshr``, ...: an immediate or nothing);
* ``walk``: ``rows`` source rows that advance with the destination (``vadd``,
  ``vrecip``); the ranges must be identical or disjoint;
* ``fixed``: ``count`` rows from ``src`` read for every destination row (a
  broadcast row, per-column parameter rows: ``vaddrow``, ``vrequant``); they
  must lie outside the destination rows;
* ``block``: the T-row block ``src + i % T`` for destination row i
  (``vsubb``, ``vmulb``): min(rows, T) rows, outside the destination rows;
* ``segments``: a reduction's walk (``vredsum``): logical row i reads rows
  src + i + j*T for j < n, the span [src, src + (n-1)*T + rows) outside the
  destination rows, and rows <= T;
* ``table``: ``count`` table entries in ceil(count / T) rows from ``src``
  (``vlut``), outside the destination rows.

:func:`alu_shapes` classifies every ALU instruction from its accesses and then
checks that its static ``checks`` refuse at least what the ALU unit's walk of
that shape needs refused (:func:`refused`), over a grid of small operands.  The
dispatcher enforces the YAML's own checks (generated:
:mod:`tinynpu.isa.gen_verilog_checks`), so a check stricter than the shape's
rule needs no RTL edit, while a more lenient one, which would let the unit
read rows it overwrites, is an error naming it.  An instruction of another
shape is an error naming it too: the ALU unit would need a new shape first.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from tinynpu.isa import regions
from tinynpu.isa.records import Instruction
from tinynpu.isa.spec import Isa

ALU_UNIT = "alu"
MAX_FIXED_ROWS = 3  # the most rows a fixed source reads (vrequant's 2, one to spare); more is no shape of the unit
_GRID_ROWS = 12  # accumulator rows of the grid the checks are compared on


class ShapeError(ValueError):
    """An ALU instruction whose operands the RTL's shapes do not cover; the message names it."""


@dataclass(frozen=True)
class AluShape:
    """One ALU instruction's source operand: ``kind`` as listed above; ``count`` the fixed rows or table entries.

    ``op`` is the instruction's ALU operation number (:func:`alu_ops`): its funct, above which the
    opcode's offset from the ALU's first opcode, when the ALU has more than one opcode.
    """

    mnemonic: str
    op: int
    kind: str
    count: int = 0


def alu_ops(isa: Isa) -> tuple[int, int, dict[str, int]]:
    """(first ALU opcode, bits of an ALU operation number, each ALU instruction's number).

    The number is ``(opcode - first) << funct_bits | funct``: with every ALU instruction at one opcode
    it is the funct; a second opcode (a full funct space) adds one bit, and so on.
    """
    alu = [i for i in isa.instructions if i.unit == ALU_UNIT]
    funct_bits = max((f.msb - f.lsb + 1 for i in alu for f in i.fixed if f.name == "funct"), default=0)
    first = min(i.fixed_value("opcode") for i in alu)
    spread = max(i.fixed_value("opcode") for i in alu) - first
    bits = funct_bits + spread.bit_length()
    return first, bits, {i.mnemonic: (i.fixed_value("opcode") - first) << funct_bits | i.fixed_value("funct")
                         for i in alu}


def _value(isa: Isa, instr: Instruction, text: str, values: dict[str, int], acc_rows: int, tile: int = 1) -> int:
    scope_rows = [acc_rows if s.name == "acc" else 0 for s in sorted(isa.scopes, key=lambda s: s.id)]
    return int(regions.evaluate(isa.region_expr(instr, text), isa.scope_ids, values, tile=tile,
                                elem_bytes=[4] * len(scope_rows), scope_rows=scope_rows))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# The source lengths of the shapes whose length is a rule (the source rows read for `rows` rows, n
# segments, at tile edge T); `walk` is the one `fixed` and `table` are not.
_LENGTHS = {
    "walk": lambda rows, n, tile: rows,
    "block": lambda rows, n, tile: min(rows, tile),
    "segments": lambda rows, n, tile: (n - 1) * tile + rows,
}
_SAMPLES = [(rows, n, tile) for rows in (1, 2, 5, 9) for n in (1, 2, 3) for tile in (1, 4, 8)]


def _classify(isa: Isa, instr: Instruction) -> AluShape:
    op = alu_ops(isa)[2][instr.mnemonic]
    writes = [a for a in instr.accesses if a.write]
    reads = [a for a in instr.accesses if not a.write]
    if len(writes) != 1 or writes[0].space != "acc" or writes[0].bounds != ("dst", "dst + rows"):
        raise ShapeError(f"{instr.mnemonic}: the ALU writes acc rows [dst, dst + rows) and nothing else; "
                         f"its accesses say {[(a.space, a.bounds) for a in writes]}")
    if not reads:
        return AluShape(instr.mnemonic, op, "none")
    if len(reads) > 1 or reads[0].space != "acc" or reads[0].bounds[0] != "src":
        raise ShapeError(f"{instr.mnemonic}: the ALU reads at most one acc range starting at src; "
                         f"its accesses say {[(a.space, a.bounds) for a in reads]}")
    has_n = "n" in instr.operands
    lengths = {(rows, n, tile): _value(isa, instr, reads[0].bounds[1], {"src": 0, "dst": 0, "rows": rows, "n": n},
                                       1 << 20, tile)
               for rows, n, tile in _SAMPLES if has_n or n == 1}
    for kind, rule in _LENGTHS.items():
        if (kind == "segments") == has_n and all(length == rule(*k) for k, length in lengths.items()):
            return AluShape(instr.mnemonic, op, kind)
    by_tile = {tile: {v for k, v in lengths.items() if k[2] == tile} for tile in (1, 4, 8)}
    if all(len(v) == 1 for v in by_tile.values()):
        count = by_tile[1].pop()
        if 1 <= count <= MAX_FIXED_ROWS and by_tile[4] == by_tile[8] == {count}:
            return AluShape(instr.mnemonic, op, "fixed", count)
        if all(by_tile[t] == {_ceil_div(count, t)} for t in (4, 8)):  # count entries, T per row
            return AluShape(instr.mnemonic, op, "table", count)
    raise ShapeError(f"{instr.mnemonic}: its source rows [src, {reads[0].bounds[1]}) are neither `rows` rows, "
                     f"1..{MAX_FIXED_ROWS} fixed rows, a T-row block, n segments nor a table")


def _source_rows(shape: AluShape, rows: int, n: int, tile: int) -> int:
    """The length of the source span the dispatcher range-checks."""
    if shape.kind == "fixed":
        return shape.count
    if shape.kind == "table":
        return _ceil_div(shape.count, tile)
    return _LENGTHS[shape.kind](rows, n, tile)


def refused(shape: AluShape, src: int, dst: int, rows: int, acc_rows: int, *, n: int = 1, tile: int = 1) -> bool:
    """What the ALU unit's walk of ``shape`` needs refused (besides dst's own range): a source outside acc or
    overlapping the destination rows in a way the walk would read rows it has already written."""
    if shape.kind == "none":
        return False
    length = _source_rows(shape, rows, n, tile)
    outside = src + length > acc_rows
    overlap = src < dst + rows and dst < src + length
    if shape.kind == "walk":
        return outside or (src != dst and overlap)
    return outside or overlap or (shape.kind == "segments" and rows > tile)


# The tile edge each shape's grid is compared at: small, but a table must fit a few rows.
_GRID_TILE = {"table": 64}


def _check_rule(isa: Isa, instr: Instruction, shape: AluShape) -> None:
    """The YAML's checks and source range refuse at least what :func:`refused` does, on a small grid."""
    if shape.kind == "none":
        return
    end = next(a for a in instr.accesses if not a.write).bounds[1]
    tile = _GRID_TILE.get(shape.kind, 4 if shape.kind in ("block", "segments") else 1)
    segs = (1, 2) if "n" in instr.operands else (1,)
    for src, dst, rows, n in itertools.product(range(_GRID_ROWS + 2), range(_GRID_ROWS), range(1, 6), segs):
        if dst + rows > _GRID_ROWS:
            continue
        values = {name: 0 for name in instr.operands} | {"src": src, "dst": dst, "rows": rows, "n": n}
        yaml = _value(isa, instr, end, values, _GRID_ROWS, tile) > _GRID_ROWS or any(
            _value(isa, instr, c.fault, values, _GRID_ROWS, tile) for c in instr.checks if not c.integer_only)
        if not yaml and refused(shape, src, dst, rows, _GRID_ROWS, n=n, tile=tile):
            raise ShapeError(f"{instr.mnemonic}: its checks accept src={src}, dst={dst}, "
                             f"rows={rows}{f', n={n}' if len(segs) > 1 else ''} at T={tile}, which the ALU unit's "
                             f"walk of a {shape.kind} source needs refused (its source overlaps what it writes)")


def alu_shapes(isa: Isa) -> tuple[AluShape, ...]:
    """Every ALU instruction's shape, in operation-number order.

    Raises:
        ShapeError: an instruction the RTL's shapes do not cover, or whose checks differ from its shape's rule.
    """
    out = []
    for instr in isa.instructions:
        if instr.unit == ALU_UNIT:
            shape = _classify(isa, instr)
            _check_rule(isa, instr, shape)
            out.append(shape)
    return tuple(sorted(out, key=lambda s: s.op))


__all__ = ["ALU_UNIT", "MAX_FIXED_ROWS", "AluShape", "ShapeError", "alu_ops", "alu_shapes", "refused"]
