"""int8 requantization in numpy: the reference the MLP and its tests are checked against.

The accelerator computes int8 x int8 products summed in int32 with
two's-complement wraparound, adds an int32 bias row (``vaddrow``) and then
requantizes on the way out (``store`` with ``narrow=1``): an arithmetic shift
right with rounding to nearest (ties toward +infinity), relu, saturation to
int8.  The functions here model exactly those steps, element for element, so
a compiled network can be compared bit for bit.

Calibration (:func:`calibrate_shift`) picks the per-layer shift: the smallest
shift for which no value of the layer's pre-activation on the calibration
inputs saturates after rounding (and relu, when the layer has one).  The
smallest such shift keeps the most precision; it is data dependent, so the
MLP calibrates on the same seeded inputs it runs, as a post-training
quantizer calibrates on a representative batch.
"""

from __future__ import annotations

import functools

import numpy as np

from tinynpu.errors import UsageError
from tinynpu.isa import load_isa

INT8_MIN = -128
INT8_MAX = 127


@functools.cache
def max_shift() -> int:
    """The largest requantization shift: what the ``store`` instruction's ``shift`` field holds (isa.yaml)."""
    return next(f.hi for f in load_isa().by_mnemonic["store"].fields if f.name == "shift")


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wraparound of integer values into int32, as the accumulator does."""
    return np.asarray(x, dtype=np.int64).astype(np.uint32).view(np.int32)


def matmul_nt_int32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``A @ B.T`` of int8 operands summed in int32 with wraparound (the ``tmm`` semantics)."""
    return wrap_int32(a.astype(np.int64) @ b.astype(np.int64).T)


def linear_int32(x: np.ndarray, w: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``x @ w.T + bias`` in int32 with wraparound (``tmm`` then ``vaddrow``)."""
    return wrap_int32(matmul_nt_int32(x, w).astype(np.int64) + bias.astype(np.int64)[None, :])


def round_shift(x: np.ndarray, shift: int) -> np.ndarray:
    """Arithmetic shift right with rounding to nearest, ties toward +infinity, in int64."""
    if not 0 <= shift <= max_shift():
        raise UsageError(f"requantization shift must be in 0..{max_shift()}, not {shift}.")
    x64 = np.asarray(x, dtype=np.int64)
    return (x64 + ((1 << shift) >> 1)) >> shift


def requantize(acc: np.ndarray, shift: int, *, relu: bool) -> np.ndarray:
    """The ``store ... narrow=1`` path: round-shift, optional relu, saturate to int8."""
    x = round_shift(acc, shift)
    if relu:
        x = np.maximum(x, 0)
    return np.clip(x, INT8_MIN, INT8_MAX).astype(np.int8)


def calibrate_shift(acc: np.ndarray, *, relu: bool) -> int:
    """Smallest shift for which ``acc`` requantizes to int8 without saturating.

    Args:
        acc: int32 pre-activation values of the layer on the calibration inputs.
        relu: whether relu follows (then only positive values can saturate).

    Returns:
        The shift in 0..:func:`max_shift`.
    """
    for shift in range(max_shift() + 1):
        x = round_shift(acc, shift)
        if relu:
            x = np.maximum(x, 0)
        if x.size == 0 or (x.max() <= INT8_MAX and x.min() >= INT8_MIN):
            return shift
    return max_shift()


def mlp_int8_reference(
    x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray, shift: int
) -> tuple[np.ndarray, np.ndarray]:
    """The two-layer MLP as the accelerator computes it.

    Returns:
        ``(hidden, logits)``: the int8 requantized relu output of layer 1 and
        the int32 output of layer 2 (bias added, not requantized).
    """
    hidden = requantize(linear_int32(x, w1, b1), shift, relu=True)
    logits = linear_int32(hidden, w2, b2)
    return hidden, logits


def mlp_fp32_reference(
    x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The course's ``numpy_mlp`` in float32: ``relu(x @ w1.T + b1) @ w2.T + b2``."""
    pre = x.astype(np.float32) @ w1.astype(np.float32).T + b1.astype(np.float32)
    hidden = np.maximum(pre, 0).astype(np.float32)
    logits = (hidden @ w2.astype(np.float32).T + b2.astype(np.float32)).astype(np.float32)
    return hidden, logits


__all__ = [
    "INT8_MAX",
    "INT8_MIN",
    "calibrate_shift",
    "linear_int32",
    "matmul_nt_int32",
    "mlp_fp32_reference",
    "mlp_int8_reference",
    "requantize",
    "round_shift",
    "wrap_int32",
]
