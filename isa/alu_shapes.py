"""The operand shapes of the vector ALU's instructions, read from their isa.yaml ``accesses`` and ``checks``.

The ALU's hardware (and the dispatcher's range checks) handles a few shapes
of source operand, not one circuit per instruction:

* ``none``: no source rows (``vmax``, ``vshr``, ...: an immediate or nothing);
* ``walk``: ``rows`` source rows that advance with the destination (``vadd``);
  the ranges must be identical or disjoint;
* ``fixed``: ``count`` rows from ``src`` read for every destination row (a
  broadcast row, per-column parameter rows: ``vaddrow``, ``vrequant``); they
  must lie outside the destination rows.

:func:`alu_shapes` classifies every ALU instruction from its accesses and then
checks that its static ``checks`` say exactly what the dispatcher's rule for
that shape refuses, over a grid of small operands, so the generated RTL
constants (:mod:`tinynpu.isa.gen_verilog`) cannot silently disagree with the
YAML.  An instruction of another shape is an error naming it: the RTL would
need a new shape first.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from tinynpu.isa import regions
from tinynpu.isa.records import Instruction
from tinynpu.isa.spec import Isa

ALU_UNIT = "alu"
MAX_FIXED_ROWS = 3  # the widest fixed source the RTL's constants encode (2 bits per funct)
_GRID_ROWS = 12  # accumulator rows of the grid the checks are compared on


class ShapeError(ValueError):
    """An ALU instruction whose operands the RTL's shapes do not cover; the message names it."""


@dataclass(frozen=True)
class AluShape:
    """One ALU instruction's source operand: ``kind`` is none, walk or fixed; ``count`` the fixed rows."""

    mnemonic: str
    funct: int
    kind: str
    count: int = 0


def _value(isa: Isa, instr: Instruction, text: str, values: dict[str, int], acc_rows: int) -> int:
    scope_rows = [acc_rows if s.name == "acc" else 0 for s in sorted(isa.scopes, key=lambda s: s.id)]
    return int(regions.evaluate(isa.region_expr(instr, text), isa.scope_ids, values, tile=1,
                                elem_bytes=[4] * len(scope_rows), scope_rows=scope_rows))


def _classify(isa: Isa, instr: Instruction) -> AluShape:
    funct = instr.fixed_value("funct")
    writes = [a for a in instr.accesses if a.write]
    reads = [a for a in instr.accesses if not a.write]
    if len(writes) != 1 or writes[0].space != "acc" or writes[0].bounds != ("dst", "dst + rows"):
        raise ShapeError(f"{instr.mnemonic}: the ALU writes acc rows [dst, dst + rows) and nothing else; "
                         f"its accesses say {[(a.space, a.bounds) for a in writes]}")
    if not reads:
        return AluShape(instr.mnemonic, funct, "none")
    if len(reads) > 1 or reads[0].space != "acc" or reads[0].bounds[0] != "src":
        raise ShapeError(f"{instr.mnemonic}: the ALU reads at most one acc range starting at src; "
                         f"its accesses say {[(a.space, a.bounds) for a in reads]}")
    lengths = {rows: _value(isa, instr, reads[0].bounds[1], {"src": 0, "dst": 0, "rows": rows}, 1 << 20)
               for rows in (1, 2, 5)}
    if all(length == rows for rows, length in lengths.items()):
        return AluShape(instr.mnemonic, funct, "walk")
    count = lengths[1]
    if len(set(lengths.values())) == 1 and 1 <= count <= MAX_FIXED_ROWS:
        return AluShape(instr.mnemonic, funct, "fixed", count)
    raise ShapeError(f"{instr.mnemonic}: its source rows [src, {reads[0].bounds[1]}) are neither `rows` rows "
                     f"nor 1..{MAX_FIXED_ROWS} fixed rows")


def refused(shape: AluShape, src: int, dst: int, rows: int, acc_rows: int) -> bool:
    """What the RTL's dispatcher refuses for an ALU instruction of ``shape`` (besides dst's own range)."""
    if shape.kind == "walk":
        return src + rows > acc_rows or (src != dst and src < dst + rows and dst < src + rows)
    if shape.kind == "fixed":
        return src + shape.count > acc_rows or (src < dst + rows and dst < src + shape.count)
    return False


def _check_rule(isa: Isa, instr: Instruction, shape: AluShape) -> None:
    """The YAML's checks and source range refuse exactly what :func:`refused` does, on a small grid."""
    if shape.kind == "none":
        return
    end = next(a for a in instr.accesses if not a.write).bounds[1]
    for src, dst, rows in itertools.product(range(_GRID_ROWS + 2), range(_GRID_ROWS), range(1, 5)):
        if dst + rows > _GRID_ROWS:
            continue
        values = {n: 0 for n in instr.operands} | {"src": src, "dst": dst, "rows": rows}
        yaml = _value(isa, instr, end, values, _GRID_ROWS) > _GRID_ROWS or any(
            _value(isa, instr, c.fault, values, _GRID_ROWS) for c in instr.checks if not c.integer_only)
        if yaml != refused(shape, src, dst, rows, _GRID_ROWS):
            raise ShapeError(f"{instr.mnemonic}: its checks {'refuse' if yaml else 'accept'} src={src}, dst={dst}, "
                             f"rows={rows}, which the RTL's rule for a {shape.kind} source "
                             f"{'accepts' if yaml else 'refuses'}")


def alu_shapes(isa: Isa) -> tuple[AluShape, ...]:
    """Every ALU instruction's shape, in funct order.

    Raises:
        ShapeError: an instruction the RTL's shapes do not cover, or whose checks differ from its shape's rule.
    """
    out = []
    for instr in isa.instructions:
        if instr.unit == ALU_UNIT:
            shape = _classify(isa, instr)
            _check_rule(isa, instr, shape)
            out.append(shape)
    return tuple(sorted(out, key=lambda s: s.funct))


__all__ = ["ALU_UNIT", "MAX_FIXED_ROWS", "AluShape", "ShapeError", "alu_shapes", "refused"]
