"""Operands of ``vrequantf`` that exercise every rounding and every special scale.

Shared by the RTL lane's cocotb bench (``tinynpu_units_cocotb.py``) and the simulator tests, so
both cores and the RTL are checked on the same cases.
"""

from __future__ import annotations

import numpy as np

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def _bits(values: list[float]) -> list[int]:
    return np.array(values, dtype=np.float32).view(np.int32).tolist()


#: Scales (binary32 bit patterns) with a meaning of their own: zeros, subnormals, the smallest
#: normal, exact powers of two and halves (integer ties), infinities, NaNs (quiet, signalling,
#: negative), the largest finite, and 2^31 (every x != 0 saturates or lands on the bound).
SPECIAL_SCALES = [
    0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x80800000,
    *_bits([1.0, -1.0, 0.5, -0.5, 0.25, 1.5, 2.0**-24, 2.0**-23, 2.0**31, -(2.0**31), 2.0**7, 3.0e38]),
    0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x7F7FFFFF,
]

#: Accumulators: zero, +-1, the int32 bounds, the edges of binary32's 24-bit significand, and
#: values whose conversion to binary32 is a tie (2^25 + 2, ...) or just off one.
SPECIAL_XS = [0, 1, -1, 2, 3, -3, INT32_MAX, INT32_MIN, INT32_MIN + 1, 2**24, 2**24 + 1, -(2**24 + 1),
              2**24 + 3, 2**25 + 2, 2**25 + 6, -(2**25 + 2), 2**25 + 3, 2**30 + 64, 2**30 + 65, 2**31 - 64,
              2**31 - 65, 16_777_215, -16_777_215]


def _significand(rng: np.random.Generator, trailing_zeros: int) -> int:
    """A 24-bit significand (top bit set) with exactly ``trailing_zeros`` trailing zero bits."""
    odd = int(rng.integers(1 << (23 - trailing_zeros), 1 << (24 - trailing_zeros))) | 1
    return odd << trailing_zeros


def product_ties(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` pairs (x, scale bits) whose exact product x * s lies half-way between two binary32 values.

    x has at most 24 significant bits (its conversion is exact).  The 48-bit product of the
    significands keeps its top 24 bits, so it is a tie when its lowest set bit is the first
    bit dropped: trailing zeros of x's and s's significands summing to 23 (product below 2^47)
    or 24 (above).
    """
    xs: list[int] = []
    ss: list[int] = []
    while len(xs) < n:
        kept_from = int(rng.integers(23, 25))  # the first kept bit: 23 (product < 2^47) or 24
        a = int(rng.integers(0, kept_from))
        xm, sm = _significand(rng, a), _significand(rng, kept_from - 1 - a)
        if (xm * sm).bit_length() != kept_from + 24:
            continue
        tz = (xm & -xm).bit_length() - 1  # shifting x keeps its significand: still a tie
        x = xm >> int(rng.integers(0, tz + 1)) if rng.integers(0, 2) else xm << int(rng.integers(0, 8))
        exp = int(rng.integers(100, 131))  # scale 2^(exp-150) * sm: products around 1 .. 2^31
        sign = int(rng.integers(0, 2))
        xs.append(-x if rng.integers(0, 2) else x)
        ss.append(int(np.array([(sign << 31) | (exp << 23) | (sm & 0x7FFFFF)], dtype=np.uint32).view(np.int32)[0]))
    return np.array(xs, dtype=np.int32), np.array(ss, dtype=np.int32)


def cases(rng: np.random.Generator, n_random: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """(x, scale bits) int32 arrays: every special x with every special scale, product ties, random."""
    sx, ss = np.meshgrid(np.array(SPECIAL_XS, dtype=np.int64), np.array(SPECIAL_SCALES, dtype=np.int64))
    special = (sx.reshape(-1).astype(np.int32), ss.reshape(-1).astype(np.uint32).view(np.int32))
    ties = product_ties(rng, 400)
    x = rng.integers(INT32_MIN, INT32_MAX + 1, n_random, dtype=np.int64)
    x[: n_random // 2] >>= rng.integers(0, 31, n_random // 2)  # small accumulators too
    # scales of typical requantization magnitude, and any bit pattern at all
    typical = (rng.integers(100, 135, n_random) << 23) | rng.integers(0, 1 << 23, n_random)
    typical |= rng.integers(0, 2, n_random) << 31
    anything = rng.integers(0, 1 << 32, n_random)
    s = np.where(rng.integers(0, 2, n_random) == 0, typical, anything).astype(np.uint32).view(np.int32)
    return (np.concatenate([special[0], ties[0], x.astype(np.int32)]),
            np.concatenate([special[1], ties[1], s]))


__all__ = ["SPECIAL_SCALES", "SPECIAL_XS", "cases", "product_ties"]
