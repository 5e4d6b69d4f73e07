"""The assembler's fast path: instruction lines read without the tokenizer.

A generated program is mostly plain lines (``load a[0], [A + 0x40], rows=16``)
that :data:`.fastline.FAST_LINE` matches; this module reads their operands
with string operations and gives the values to the same checks as the full
parser (:func:`.values.check_values`).  Anything unusual, and any error, is
left to the full parser, which then reports it with its exact column.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from tinynpu.assembler.fastline import eval_sum, split_line
from tinynpu.assembler.lexer import Pos
from tinynpu.assembler.values import Checked, Limits, Value, check_values
from tinynpu.errors import AsmError
from tinynpu.isa import Field, Instruction, Isa
from tinynpu.isa.syntax import UNITS_NONE, syntax_table


@dataclass(frozen=True)
class _FastOperand:
    """What the fast path needs of one positional operand."""

    field: str  # the field that takes the operand's number
    bracket: bool
    scopes: dict[str, int] | None  # a scratchpad operand: the scope names it allows -> scope id
    scope_field: str | None  # the field that encodes the named scope, if not fixed


@dataclass(frozen=True)
class _FastSyntax:
    """Per-mnemonic layout for the fast path, computed once per ISA."""

    instruction: Instruction
    operands: tuple[_FastOperand, ...]
    options: dict[str, Field]


@functools.lru_cache(maxsize=16)
def fast_table(isa: Isa) -> dict[str, _FastSyntax]:
    table: dict[str, _FastSyntax] = {}
    for mnemonic, syntax in syntax_table(isa).items():
        operands = tuple(
            _FastOperand(
                field=op.value_field.name,
                bracket=op.bracket,
                scopes=({s: isa.scope_by_name[s].id for s in op.allowed_scopes(isa)}
                        if op.address is not None else None),
                scope_field=op.scope_field.name if op.scope_field is not None else None,
            )
            for op in syntax.operands
        )
        table[mnemonic] = _FastSyntax(syntax.instruction, operands, syntax.option_map)
    return table


# Items (``rows=16``, ``acc[0]``, ``wait=load|tensor``) repeat on most lines of a generated program,
# so their values are remembered; bounded because DRAM operands (``[A + 0x1230]``) rarely repeat.
_ITEM_CACHE_SIZE = 4096

_Filled = tuple[tuple[str, Value], ...]  # the (field, value) pairs one item fills


def fast_instruction(text: str, at_line: tuple[str, int], table: dict[str, _FastSyntax], limits: Limits,
                     lookup: Callable[[str, Pos], int], cache: dict[tuple[str, int, str], _Filled]) -> Checked | None:
    """Encode a line :data:`FAST_LINE` matched, or ``None`` to leave it to the full parser.

    The values and the checks in :func:`check_values` are the full parser's; only
    the reading differs.  Any doubt (a shape the layout does not expect, an
    unknown name) and any error returns ``None``: the full parser then reads
    the line again and reports the problem with its exact column, so this path
    never makes a message.  That is why the positions in its values are
    placeholders (the mnemonic of the line where the item was first read) and
    why an item's values may be reused: a symbol, once defined, keeps its value.
    """
    mnemonic, col, items = split_line(text)
    fast = table.get(mnemonic)
    nops = len(fast.operands) if fast is not None else 0
    if fast is None or len(items) < nops:
        return None
    at = Pos(at_line[0], at_line[1], col)
    values: dict[str, Value] = {}
    try:
        for slot, item in enumerate(items):
            key = (mnemonic, min(slot, nops), item)  # every option shares the slot after the operands
            filled = cache.get(key)
            if filled is None:
                filled = _fast_item(fast, slot, item, limits.isa, lookup, at)
                if filled is None:
                    return None
                if len(cache) < _ITEM_CACHE_SIZE:
                    cache[key] = filled
            for name, value in filled:
                if name in values:  # an option given twice
                    return None
                values[name] = value
        return check_values(fast.instruction, values, limits, at)
    except AsmError:
        return None


def _fast_item(fast: _FastSyntax, slot: int, item: str, isa: Isa, symbol: Callable[[str, Pos], int],
               at: Pos) -> _Filled | None:
    """What item ``slot`` of a fast line fills, or ``None`` if the full parser must read the line.

    Raises:
        AsmError: an undefined symbol (the caller then leaves the line to the full parser).
    """

    def lookup(name: str) -> int:
        return symbol(name, at)

    if slot < len(fast.operands):
        op = fast.operands[slot]
        if op.scopes is not None:  # scope[row]
            scope, bracket, row = item.partition("[")
            scope = scope.rstrip()
            sid = op.scopes.get(scope)
            if sid is None or not bracket:
                return None
            value = Value(eval_sum(row[:-1].strip(), lookup), at, scope)
            if op.scope_field is None:
                return ((op.field, value),)
            return ((op.field, value), (op.scope_field, Value(sid, at)))
        if op.bracket:  # [sum]
            if item[0] != "[":
                return None
            return ((op.field, Value(eval_sum(item[1:-1].strip(), lookup), at)),)
        if "[" in item or "=" in item:  # a plain sum is wanted
            return None
        return ((op.field, Value(eval_sum(item, lookup), at)),)
    key, eq, text = item.partition("=")  # key=value
    fld = fast.options.get(key.rstrip())
    if not eq or fld is None:
        return None
    text = text.lstrip()
    if fld.kind == "units":
        mask = _fast_units(text, fld, fast.instruction, isa)
        return None if mask is None else ((fld.name, Value(mask, at)),)
    if "|" in text:
        return None
    return ((fld.name, Value(eval_sum(text, lookup), at)),)


def _fast_units(text: str, fld: Field, instr: Instruction, isa: Isa) -> int | None:
    """The mask of ``load|tensor``, or ``None`` for anything :func:`_units` would reject."""
    mask = 0
    for name in text.split("|"):
        name = name.strip()
        if name in (UNITS_NONE, "0"):
            continue
        uid = isa.unit_ids.get(name)
        if uid is None or name == instr.unit or uid >= fld.width:
            return None
        mask |= 1 << uid
    return mask


__all__ = ["fast_instruction", "fast_table"]
