"""Per-channel requantization: the ``vrequant`` instruction's arithmetic (imported from the simulator).

For an int32 accumulator value ``x`` and a column's fixed-point multiplier
``M`` (signed int32, normally in [2^30, 2^31)) and right shift ``S`` (0..31)::

    y = clamp((x * M + 2^(30+S)) >> (31+S), -2^31, 2^31 - 1)

i.e. ``round(x * M * 2^-(31+S))``, ties toward +infinity (the tie rule of
``vshr`` and ``store ... shift=``).  A layer's real scale ``s_in * s_w[c] /
s_out`` becomes ``(M[c], S[c])`` by :func:`quantize_multiplier`.
"""

from __future__ import annotations

import math

import numpy as np

from tinynpu.simulator.semantics import requantize as vrequant

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
MAX_SHIFT = 31


def requant_host(x: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """:func:`vrequant`'s arithmetic with shifts down to -30 (scales up to 2^30): the host's version.

    A layer whose output scale is finer than its accumulator's (real scale of 1 or more) has a
    negative ``S``, which the instruction's 5-bit field cannot hold; the same rounding then runs
    on the host.  For ``S`` in 0..31 this is exactly :func:`vrequant`.
    """
    s = np.asarray(shift, dtype=np.int64)
    if np.all(s >= 0):
        return vrequant(x, multiplier, s)
    p = np.asarray(x, dtype=np.int64) * np.asarray(multiplier, dtype=np.int64)  # |p| <= 2^62
    y = (p + (np.int64(1) << (30 + s))) >> (31 + s)
    return np.clip(y, INT32_MIN, INT32_MAX).astype(np.int32)


def quantize_multiplier(real: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(M, S)`` with ``M * 2^-(31+S)`` closest to each positive ``real`` scale below 2^30.

    ``M`` is in [2^30, 2^31) unless the scale is below ``2^-32`` (then ``S`` is 31 and ``M``
    smaller).  Scales of 1 or more give a negative ``S`` (:func:`requant_host` only).

    Raises:
        ValueError: a scale that is not positive and finite, or not below 2^30.
    """
    r = np.atleast_1d(np.asarray(real, dtype=np.float64))
    ms = np.zeros(r.shape, dtype=np.int64)
    ss = np.zeros(r.shape, dtype=np.int64)
    for i, v in enumerate(r.flat):
        if not (math.isfinite(v) and 0.0 < v < 2.0**30):
            raise ValueError(f"requantization scale must be positive and below 2^30, not {v!r}")
        _, exp = math.frexp(v)  # v = mant * 2^exp, mant in [0.5, 1)
        s = min(-exp, MAX_SHIFT)
        m = round(v * 2.0 ** (31 + s))
        if m == 2**31:  # mant rounded up to 1.0
            if s > 0:
                s -= 1
                m = round(v * 2.0 ** (31 + s))
            else:
                m = 2**31 - 1
        ms.flat[i], ss.flat[i] = m, s
    return ms.astype(np.int32), ss.astype(np.int32)


__all__ = ["quantize_multiplier", "requant_host", "vrequant"]
