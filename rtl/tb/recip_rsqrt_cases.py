"""The exact results of ``vrecip`` / ``vrsqrt`` on one value, and the operands that test them.

Shared by the cocotb bench of ``rtl/tinynpu_recip_rsqrt.sv`` and its pytest checks.  The
reference is the ISA's definition on Python integers: no floating point anywhere.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
RECIP_SHIFTS = range(63)  # vrecip's S
RSQRT_SHIFTS = range(32)  # vrsqrt's S


def recip(x: int, shift: int) -> int:
    """min(2^S // x, 2^31 - 1), or 2^31 - 1 when x <= 0."""
    return INT32_MAX if x <= 0 else min((1 << shift) // x, INT32_MAX)


def rsqrt(x: int, shift: int) -> int:
    """The largest r with r * r * x <= 4^S (isqrt(4^S // x)), at most 2^31 - 1; 2^31 - 1 when x <= 0."""
    return INT32_MAX if x <= 0 else min(math.isqrt((1 << (2 * shift)) // x), INT32_MAX)


@dataclass(frozen=True)
class Case:
    """One value for the unit: the operation, x (int32) and S."""

    is_rsqrt: bool
    x: int
    shift: int

    @property
    def expected(self) -> int:
        return rsqrt(self.x, self.shift) if self.is_rsqrt else recip(self.x, self.shift)


def _powers_and_neighbours(exponents: Iterable[int]) -> list[int]:
    """2^j and its neighbours for each j, the int32 bounds, zero and small values."""
    xs = {INT32_MIN, INT32_MIN + 1, -(2**30), -2, -1, 0, 1, 2, 3, 5, 7, INT32_MAX, INT32_MAX - 1}
    for j in exponents:
        xs |= {(1 << j) - 1, 1 << j, (1 << j) + 1}
    return sorted(x for x in xs if INT32_MIN <= x <= INT32_MAX)


def edge_cases(full: bool) -> list[Case]:
    """Extremes: x <= 0, x = 1, 2^31 - 1, powers of two, S = 0 and the largest, the saturation edges.

    ``full``: every power of two in int32 with every S; else a representative subset of both.
    """
    xs = _powers_and_neighbours(range(31) if full else (1, 2, 15, 16, 29, 30))
    recip_shifts = list(RECIP_SHIFTS) if full else [0, 1, 2, 30, 31, 32, 45, 61, 62]
    rsqrt_shifts = list(RSQRT_SHIFTS) if full else [0, 1, 2, 15, 16, 30, 31]
    cases = [Case(False, x, s) for s in recip_shifts for x in xs]
    cases += [Case(True, x, s) for s in rsqrt_shifts for x in xs]
    # recip saturates exactly when x <= 2^(S-31): the quotient is 2^31 at x = 2^(S-31).
    for s in range(31, 63):
        cases += [Case(False, (1 << (s - 31)) + d, s) for d in (-1, 0, 1) if (1 << (s - 31)) + d > 0]
    # rsqrt saturates only at x = 1, S = 31 (isqrt(4^31) = 2^31); its neighbours do not.
    cases += [Case(True, x, s) for x in (1, 2, 3) for s in (30, 31)]
    return cases


def square_cases(rng: random.Random, count: int) -> list[Case]:
    """rsqrt where r * r * x = 4^S exactly, and one off on either side (where isqrt's floor steps)."""
    cases = []
    for _ in range(count):
        s = rng.choice(RSQRT_SHIFTS)
        r = rng.randrange(1, 1 << min(s + 1, 31))
        base = (1 << (2 * s)) // (r * r)
        cases += [Case(True, x, s) for x in (base - 1, base, base + 1) if 0 < x <= INT32_MAX]
    for j in range(16):  # x = 4^j and perfect squares: exact roots
        cases += [Case(True, 1 << (2 * j), s) for s in (j, 31)]
        m = rng.randrange(1, 46341)
        cases.append(Case(True, m * m, rng.choice(RSQRT_SHIFTS)))
    return cases


def random_cases(rng: random.Random, count: int) -> list[Case]:
    """Uniform int32 x (and x of random bit length, so small divisors appear) with uniform S."""
    cases = []
    for n in range(count):
        x = rng.randrange(INT32_MIN, INT32_MAX + 1) if n % 2 else rng.getrandbits(rng.randrange(1, 32))
        is_rsqrt = bool(rng.getrandbits(1))
        cases.append(Case(is_rsqrt, x, rng.choice(RSQRT_SHIFTS if is_rsqrt else RECIP_SHIFTS)))
    return cases


def exhaustive_cases(lo: int, hi: int) -> list[Case]:
    """Every x in [lo, hi] with every S of both operations."""
    return ([Case(False, x, s) for x in range(lo, hi + 1) for s in RECIP_SHIFTS]
            + [Case(True, x, s) for x in range(lo, hi + 1) for s in RSQRT_SHIFTS])
