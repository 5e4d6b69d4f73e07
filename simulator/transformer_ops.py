"""The arithmetic of the transformer instructions (isa.yaml ``vredmax`` .. ``vrsqrt``), on numpy arrays, exact.

Each function is the one definition of its rule for the Python simulator core;
an integer reference (the compiler's, a test's) can import it too.  Every
result is the exact integer the YAML ``semantics`` computes with Python
integers: the sums stay inside int64 (or are split so they do), and the
rounding shift never overflows.
"""

from __future__ import annotations

import math

import numpy as np

INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)
LUT_ENTRIES = 256  # the table of vlut: one entry per int8 code


def segments(acc: np.ndarray, src: int, rows: int, n: int) -> np.ndarray:
    """The (rows, n, T) source elements of a reduction: segment j of logical row i is acc row src + i + j*T."""
    t = acc.shape[1]
    index = src + np.arange(rows)[:, None] + t * np.arange(n)[None, :]
    return acc[index]


def round_shift(v: np.ndarray, shift: int) -> np.ndarray:
    """``rnd(v, shift) = (v + 2^shift / 2) >> shift`` for int64 ``v`` with |v| <= 2^62, without overflow.

    For shift >= 2 it halves v first: with v = 2a + b (b the low bit), (v + 2^(s-1)) >> s equals
    (a + 2^(s-2)) >> (s-1), because adding b/2 to an integer never crosses a multiple of 2^(s-1).
    So the sum stays below 2^62 even for a product of two int32 values and shift 63.
    """
    if shift < 2:
        return (v + shift) >> shift  # shift 0: v; shift 1: (v + 1) >> 1
    return ((v >> 1) + (1 << (shift - 2))) >> (shift - 1)


def saturate32(v: np.ndarray) -> np.ndarray:
    """``v`` clamped to int32, as int32."""
    return np.clip(v, INT32_MIN, INT32_MAX).astype(np.int32)


def _last_cols_mask(n: int, cols: int, t: int) -> np.ndarray:
    """(n, T) booleans: every column of the first n-1 segments, the first ``cols`` of the last."""
    mask = np.ones((n, t), dtype=bool)
    mask[n - 1, cols:] = False
    return mask


def row_max(seg: np.ndarray, cols: int) -> np.ndarray:
    """``vredmax``: the maximum of each logical row's elements (``cols`` columns of its last segment)."""
    rows, n, t = seg.shape
    return np.where(_last_cols_mask(n, cols, t), seg, INT32_MIN).reshape(rows, -1).max(axis=1).astype(np.int64)


def row_sum(seg: np.ndarray, cols: int) -> np.ndarray:
    """``vredsum`` before its shift: the exact sum (at most 2^12 * 2^7 int32 values: below 2^50 in int64)."""
    rows, n, t = seg.shape
    return np.where(_last_cols_mask(n, cols, t), seg.astype(np.int64), 0).reshape(rows, -1).sum(axis=1)


def row_sum_squares(seg: np.ndarray, cols: int) -> list[int]:
    """``vredsq`` before its shift: the exact sum of squares, as Python integers (it may pass 2^63).

    x = h * 2^16 + l with 0 <= l < 2^16 gives x^2 = h^2 * 2^32 + 2hl * 2^16 + l^2, each of the three
    partial sums below 2^52 over at most 2^19 elements, so they are exact in int64 and combined exactly.
    """
    rows, n, t = seg.shape
    x = np.where(_last_cols_mask(n, cols, t), seg.astype(np.int64), 0).reshape(rows, -1)
    h, lo = x >> 16, x & 0xFFFF
    hh, hl, ll = (h * h).sum(axis=1), (h * lo).sum(axis=1), (lo * lo).sum(axis=1)
    return [(int(a) << 32) + (int(b) << 17) + int(c) for a, b, c in zip(hh, hl, ll, strict=True)]


def round_shift_saturate(values: list[int], shift: int) -> np.ndarray:
    """``sat32(rnd(v, shift))`` of Python integers, as int32 (the reductions' result)."""
    return np.array([min(max((v + ((1 << shift) >> 1)) >> shift, INT32_MIN), INT32_MAX) for v in values],
                    dtype=np.int32)


def lookup(x: np.ndarray, table: np.ndarray, base: int) -> np.ndarray:
    """``vlut``: ``sext16(table[clamp(x - base, 0, 255)])``; ``table`` is the 256 int32 entries."""
    entries = table.astype(np.int16).astype(np.int32)  # int32 -> int16 keeps the low 16 bits: sign-extended
    idx = np.clip(x.astype(np.int64) - base, 0, LUT_ENTRIES - 1)
    return entries[idx]


def reciprocal(x: np.ndarray, shift: int) -> np.ndarray:
    """``vrecip``: ``min(2^shift // x, 2^31 - 1)``, and 2^31 - 1 for x <= 0 (shift 0..62: 2^shift fits int64)."""
    wide = x.astype(np.int64)
    q = np.int64(1 << shift) // np.maximum(wide, 1)
    return np.where(wide <= 0, INT32_MAX, np.minimum(q, INT32_MAX)).astype(np.int32)


def reciprocal_sqrt(x: np.ndarray, shift: int) -> np.ndarray:
    """``vrsqrt``: the largest r <= 2^31 - 1 with r*r*x <= 4^shift (= isqrt(4^shift // x)); 2^31 - 1 for x <= 0."""
    out = [INT32_MAX if v <= 0 else min(math.isqrt((1 << (2 * shift)) // v), INT32_MAX) for v in x.tolist()]
    return np.array(out, dtype=np.int32)


__all__ = ["INT32_MAX", "INT32_MIN", "LUT_ENTRIES", "lookup", "reciprocal", "reciprocal_sqrt", "round_shift",
           "round_shift_saturate", "row_max", "row_sum", "row_sum_squares", "saturate32", "segments"]
