"""The transformer ALU instructions' arithmetic on whole rows: what the integer references compute.

Each function is one instruction of ``isa/isa.yaml`` (``vredmax``, ``vredsum``,
``vredsq``, ``vmulb``, ``vlut``, ``vrecip``, ``vrsqrt``) applied to a matrix whose
rows are the logical rows a program reduces (one row of a softmax or a norm),
built on the simulator's own definitions of the rules
(:mod:`tinynpu.simulator.transformer_ops`): a row of ``N`` elements is one
"segment" of ``N`` columns there.  So a lowering's reference is its program's
instructions statement by statement, and the run is compared with it bit for
bit.  Values are int64 columns (one value per row) or matrices.
"""

from __future__ import annotations

import numpy as np

from tinynpu.simulator import transformer_ops as ops

INT32_MIN, INT32_MAX = ops.INT32_MIN, ops.INT32_MAX
LUT_ENTRIES = ops.LUT_ENTRIES


def _rows(x: np.ndarray) -> np.ndarray:
    """``x`` (rows x N) as the simulator's segments: one segment of N columns per row."""
    x = np.asarray(x, dtype=np.int64)
    return x.reshape(x.shape[0], 1, x.shape[1])


def rnd(v: np.ndarray, shift: int) -> np.ndarray:
    """``(v + ((1 << shift) >> 1)) >> shift``: round half toward +infinity (``vshr``, ``vrequant``)."""
    return ops.round_shift(np.asarray(v, dtype=np.int64), shift)


def sat32(v: np.ndarray) -> np.ndarray:
    return ops.saturate32(np.asarray(v, dtype=np.int64)).astype(np.int64)


def wrap32(v: np.ndarray) -> np.ndarray:
    """Two's-complement wraparound to int32 (``vsubb``, ``vmul``, ``vadd``), as int64."""
    return np.asarray(v, dtype=np.int64).astype(np.int32).astype(np.int64)


def red_max(x: np.ndarray) -> np.ndarray:
    """``vredmax``: each row's maximum, as a column (broadcast over the row's segments)."""
    return ops.row_max(_rows(x), np.shape(x)[1]).reshape(-1, 1)


def red_sum(x: np.ndarray, shift: int) -> np.ndarray:
    """``vredsum``: each row's exact sum, rounded by ``shift``, saturated to int32."""
    return sat32(rnd(ops.row_sum(_rows(x), np.shape(x)[1]), shift)).reshape(-1, 1)


def red_sq(x: np.ndarray, shift: int) -> np.ndarray:
    """``vredsq``: each row's exact sum of squares, rounded by ``shift``, saturated to int32."""
    sums = ops.row_sum_squares(_rows(x), np.shape(x)[1])
    return ops.round_shift_saturate(sums, shift).astype(np.int64).reshape(-1, 1)


def mul_b(x: np.ndarray, b: np.ndarray, shift: int) -> np.ndarray:
    """``vmulb``: ``sat32(rnd(x * b, shift))``, ``b`` one value per row (both int32: the product is exact)."""
    return sat32(rnd(np.asarray(x, dtype=np.int64) * np.asarray(b, dtype=np.int64), shift))


def lut(x: np.ndarray, table: np.ndarray, base: int) -> np.ndarray:
    """``vlut``: ``sext16(table[min(max(x - base, 0), 255)])``."""
    return ops.lookup(np.asarray(x), np.asarray(table, dtype=np.int64).astype(np.int32), base).astype(np.int64)


def recip(x: np.ndarray, shift: int) -> np.ndarray:
    """``vrecip``: ``min(2^shift // x, 2^31 - 1)``, and ``2^31 - 1`` where ``x <= 0``."""
    return ops.reciprocal(np.asarray(x, dtype=np.int64), shift).astype(np.int64)


def rsqrt(x: np.ndarray, shift: int) -> np.ndarray:
    """``vrsqrt``: the largest ``r <= 2^31 - 1`` with ``r * r * x <= 4^shift``, and ``2^31 - 1`` where ``x <= 0``."""
    x = np.asarray(x, dtype=np.int64)
    return ops.reciprocal_sqrt(x.reshape(-1), shift).astype(np.int64).reshape(x.shape)


def store_narrow(x: np.ndarray) -> np.ndarray:
    """``store ... narrow=1 shift=0``: saturation to int8."""
    return np.clip(np.asarray(x, dtype=np.int64), -128, 127).astype(np.int8)


__all__ = ["INT32_MAX", "INT32_MIN", "LUT_ENTRIES", "lut", "mul_b", "recip", "red_max", "red_sq", "red_sum", "rnd",
           "rsqrt", "sat32", "store_narrow", "wrap32"]
