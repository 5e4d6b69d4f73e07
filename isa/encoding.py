"""Instruction words from field values and back: the one place the field rules are applied.

A field's rules (its default, its range ``lo..hi``, its bits ``lsb..msb``,
two's complement for signed fields) are applied here only.  One word at a
time (:func:`encode`, :func:`pack`, :func:`field_value`) for the ISA, the
assembler and the disassembler; whole columns at a time (:func:`encode_columns`,
:func:`field_column`) for code that handles many instructions of one kind: the
compiler's emitter and the simulator's decoder.  Words are Python ints of
``word_bits`` bits; a column of 128-bit words is two ``uint64`` arrays, the
low and the high 64 bits.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from tinynpu.errors import SpecError

if TYPE_CHECKING:
    from tinynpu.isa.records import Field, Instruction

_MASK64 = (1 << 64) - 1


def pack(instr: Instruction, values: Sequence[int]) -> int:
    """The word of ``instr`` with ``values`` (one per field, in field order, already in range)."""
    word = instr.match
    for (mask, lsb), value in zip(instr.packing, values, strict=False):  # lengths checked by callers
        word |= (value & mask) << lsb
    return word


def encode(instr: Instruction, values: Mapping[str, int], tile: int | None = None) -> int:
    """Encode one instruction; missing fields take their defaults.

    ``tile`` is the config's tile edge: the default and the largest value of
    the fields that count a row's elements (``cols``).

    Raises:
        SpecError: an unknown field, a missing value without default, or a value outside its field.
    """
    mnemonic = instr.mnemonic
    for name in values:
        if name not in instr.field_map:
            raise SpecError(f"encode: {mnemonic} has no field {name!r}; it has {sorted(instr.field_map)}.")
    ordered: list[int] = []
    for field in instr.fields:
        value = values.get(field.name, field.default_at(tile))
        if value is None:
            raise SpecError(f"encode: {mnemonic} needs a value for field {field.name!r}.")
        hi = field.hi_at(tile)
        if not field.lo <= value <= hi:
            raise SpecError(f"encode: {mnemonic} field {field.name!r} must be in {field.lo}..{hi}, not {value}.")
        ordered.append(value)
    return pack(instr, ordered)


def field_value(word: int, field: Field) -> int:
    """The value of ``field`` in ``word`` (sign-extended for signed fields; not range-checked)."""
    raw = (word >> field.lsb) & ((1 << field.width) - 1)
    return raw - (1 << field.width) if field.signed and raw >> (field.width - 1) else raw


def encode_columns(instr: Instruction, columns: Mapping[str, np.ndarray | int],
                   n: int, tile: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Encode ``n`` instructions of one kind at once: the vectorized :func:`encode`.

    Args:
        instr: the instruction.
        columns: field name -> ``n`` values (or one value for all); missing fields take their defaults.
        n: number of instructions.
        tile: the config's tile edge, as in :func:`encode`.

    Returns:
        The words' low and high 64 bits, two ``uint64`` arrays of length ``n`` (:func:`to_ints`
        makes Python ints of them).

    Raises:
        SpecError: as :func:`encode`, naming the first offending instruction of the columns.
    """
    for name in columns:
        if name not in instr.field_map:
            raise SpecError(f"encode: {instr.mnemonic} has no field {name!r}; it has {sorted(instr.field_map)}.")
    lo = np.full(n, instr.match & _MASK64, dtype=np.uint64)
    hi = np.full(n, instr.match >> 64, dtype=np.uint64)
    for field in instr.fields:
        given = columns.get(field.name, field.default_at(tile))
        if given is None:
            raise SpecError(f"encode: {instr.mnemonic} needs a value for field {field.name!r}.")
        value = np.broadcast_to(np.asarray(given, dtype=np.int64), (n,))
        top = field.hi_at(tile)
        bad = np.flatnonzero((value < field.lo) | (value > top))
        if len(bad):
            raise SpecError(f"encode: {instr.mnemonic} field {field.name!r} must be in {field.lo}..{top}, "
                            f"not {int(value[bad[0]])} (instruction {int(bad[0])} of the columns).")
        bits = value.astype(np.uint64) & np.uint64((1 << field.width) - 1)  # two's complement of negatives
        if field.lsb < 64:
            lo |= bits << np.uint64(field.lsb)  # bits shifted past bit 63 drop out here ...
        if field.msb >= 64:  # ... and land in the high word
            hi |= bits << np.uint64(field.lsb - 64) if field.lsb >= 64 else bits >> np.uint64(64 - field.lsb)
    return lo, hi


#: Words converted per pass by :func:`to_ints` and :func:`split`: their Python-object temporaries (about 60
#: bytes a word) stay a few hundred KiB instead of growing with the program (a naive 1024^3 program has 794K
#: words: converting it whole made ~100 MB of short-lived objects, the simulator's peak memory).
_CONVERT_CHUNK = 1 << 14


def to_ints(lo: np.ndarray, hi: np.ndarray) -> list[int]:
    """Python int words from their low and high 64-bit columns."""
    words: list[int] = []
    for base in range(0, len(lo), _CONVERT_CHUNK):
        end = base + _CONVERT_CHUNK
        words += [(h << 64) | w for w, h in zip(lo[base:end].tolist(), hi[base:end].tolist(), strict=True)]
    return words


def split(words: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The low and high 64-bit columns of ``words`` (the inverse of :func:`to_ints`)."""
    n = len(words)
    lo, hi = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64)
    for base in range(0, n, _CONVERT_CHUNK):
        end = min(base + _CONVERT_CHUNK, n)
        # one C-level conversion per word (int.to_bytes) instead of two Python expressions; a word outside
        # [0, 2**128) raises OverflowError as numpy's conversion of its halves did; numpy integers convert too
        raw = b"".join([operator.index(w).to_bytes(16, "little") for w in words[base:end]])
        halves = np.frombuffer(raw, dtype="<u8").reshape(end - base, 2)
        lo[base:end], hi[base:end] = halves[:, 0], halves[:, 1]
    return lo, hi


def field_column(lo: np.ndarray, hi: np.ndarray, field: Field) -> np.ndarray:
    """The values of ``field`` in a column of words: the vectorized :func:`field_value` (int64)."""
    width = field.width
    mask = np.uint64((1 << width) - 1)
    if field.msb < 64:
        raw = (lo >> np.uint64(field.lsb)) & mask
    elif field.lsb >= 64:
        raw = (hi >> np.uint64(field.lsb - 64)) & mask
    else:
        raw = ((lo >> np.uint64(field.lsb)) | (hi << np.uint64(64 - field.lsb))) & mask
    out = raw.astype(np.int64)
    if field.signed:
        out = np.where(out >= 1 << (width - 1), out - (1 << width), out)
    return out


__all__ = ["encode", "encode_columns", "field_column", "field_value", "pack", "split", "to_ints"]
