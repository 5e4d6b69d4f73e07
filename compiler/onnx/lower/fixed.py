"""The transformer ALU instructions' arithmetic in numpy (issue 26): what the integer references compute.

Each function is one instruction of ``isa/isa.yaml`` (``vredmax``, ``vredsum``,
``vredsq``, ``vsubb``, ``vmulb``, ``vlut``, ``vrecip``, ``vrsqrt``) applied to a
matrix whose rows are the logical rows a program reduces (one row of a
softmax or a norm), so a lowering's reference is the program's instructions
statement by statement and the run is compared with it bit for bit.  The
values are int64: every lowering bounds its operands so that no product or
sum here leaves 63 bits (each module's docstring argues its bounds), which
the functions check rather than assume.
"""

from __future__ import annotations

import numpy as np

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
#: A ``vlut`` table's entries: 256, each the low 16 bits of an accumulator element, sign-extended.
LUT_ENTRIES = 256
LUT_MIN, LUT_MAX = -(2**15), 2**15 - 1


def _exact(v: np.ndarray, what: str) -> np.ndarray:
    """``v`` (int64), checked to be far from int64's ends (so the arithmetic above it was exact)."""
    v = np.asarray(v, dtype=np.int64)
    if v.size and int(np.abs(v).max()) >= 2**62:
        raise OverflowError(f"{what}: a value of {int(np.abs(v).max())} leaves the exact int64 range; the "
                            "lowering's bounds are wrong.")
    return v


def rnd(v: np.ndarray, shift: int) -> np.ndarray:
    """``(v + ((1 << shift) >> 1)) >> shift``: round half toward +infinity (``vshr``, ``vrequant``)."""
    v = np.asarray(v, dtype=np.int64)
    return (v + ((1 << shift) >> 1)) >> shift


def sat32(v: np.ndarray) -> np.ndarray:
    return np.clip(np.asarray(v, dtype=np.int64), INT32_MIN, INT32_MAX)


def wrap32(v: np.ndarray) -> np.ndarray:
    """Two's-complement wraparound to int32 (``vsubb``, ``vmul``, ``vadd``), as int64."""
    return np.asarray(v, dtype=np.int64).astype(np.int32).astype(np.int64)


def red_max(x: np.ndarray) -> np.ndarray:
    """``vredmax``: each row's maximum, as a column (broadcast over the row's segments)."""
    return np.asarray(x, dtype=np.int64).max(axis=-1, keepdims=True)


def red_sum(x: np.ndarray, shift: int) -> np.ndarray:
    """``vredsum``: each row's exact sum, rounded by ``shift``, saturated to int32."""
    return sat32(rnd(_exact(np.asarray(x, dtype=np.int64).sum(axis=-1, keepdims=True), "vredsum"), shift))


def red_sq(x: np.ndarray, shift: int) -> np.ndarray:
    """``vredsq``: each row's exact sum of squares, rounded by ``shift``, saturated to int32."""
    x = np.asarray(x, dtype=np.int64)
    return sat32(rnd(_exact((x * x).sum(axis=-1, keepdims=True), "vredsq"), shift))


def mul_b(x: np.ndarray, b: np.ndarray, shift: int) -> np.ndarray:
    """``vmulb``: ``sat32(rnd(x * b, shift))``, ``b`` one value per row."""
    return sat32(rnd(_exact(np.asarray(x, dtype=np.int64) * np.asarray(b, dtype=np.int64), "vmulb"), shift))


def lut(x: np.ndarray, table: np.ndarray, base: int) -> np.ndarray:
    """``vlut``: ``table[min(max(x - base, 0), 255)]`` (the table's entries already in int16)."""
    idx = np.clip(np.asarray(x, dtype=np.int64) - base, 0, LUT_ENTRIES - 1)
    return np.asarray(table, dtype=np.int64)[idx]


def recip(x: np.ndarray, shift: int) -> np.ndarray:
    """``vrecip``: ``min(2^shift // x, 2^31 - 1)``, and ``2^31 - 1`` where ``x <= 0``."""
    x = np.asarray(x, dtype=np.int64)
    safe = np.where(x > 0, x, 1)
    return np.where(x > 0, np.minimum((np.int64(1) << shift) // safe, INT32_MAX), INT32_MAX)


def rsqrt(x: np.ndarray, shift: int) -> np.ndarray:
    """``vrsqrt``: the largest ``r`` with ``r * r * x <= 4^shift`` (``isqrt(4^shift // x)``), at most
    ``2^31 - 1``, and ``2^31 - 1`` where ``x <= 0``.  Exact on Python integers (numpy has no isqrt)."""
    from math import isqrt

    x = np.asarray(x, dtype=np.int64)
    flat = [INT32_MAX if v <= 0 else min(isqrt((1 << (2 * shift)) // int(v)), INT32_MAX) for v in x.reshape(-1)]
    return np.array(flat, dtype=np.int64).reshape(x.shape)


def store_narrow(x: np.ndarray) -> np.ndarray:
    """``store ... narrow=1 shift=0``: saturation to int8."""
    return np.clip(np.asarray(x, dtype=np.int64), -128, 127).astype(np.int8)


__all__ = ["INT32_MAX", "INT32_MIN", "LUT_ENTRIES", "LUT_MAX", "LUT_MIN", "lut", "mul_b", "recip", "red_max",
           "red_sq", "red_sum", "rnd", "rsqrt", "sat32", "store_narrow", "wrap32"]
