"""A quantized ONNX layer's requantization scale, computed as onnxruntime computes it.

onnxruntime's integer kernels (QLinearConv, QGemm, QLinearMatMul) requantize an
int32 accumulator ``x`` as ``rint(float32(float32(x) * scale))`` with every
rounding half to even, and compute the per-channel ``scale`` in binary32 as
``(x_scale * w_scale[c]) / y_scale`` (two roundings, in that order; QGemm
multiplies its ``alpha`` into ``x_scale`` first).  The
accelerator's ``vrequantf`` is that arithmetic, so with the same binary32 scale
an accelerator layer equals onnxruntime's integer kernel bit for bit
(tests/test_onnx_requant.py checks it on near-tie accumulators, where the Q31
fixed-point rule of ``vrequant`` differs).
"""

from __future__ import annotations

import numpy as np


def layer_scale(x_scale: float, w_scale: np.ndarray | float, y_scale: float, *, alpha: float = 1.0) -> np.ndarray:
    """``((alpha * x_scale) * w_scale) / y_scale`` per output channel, each operation rounded to binary32.

    The scales are those of the ONNX model (float32 initializers, exactly representable); ``alpha``
    is a Gemm's (QGemm multiplies it in first; 1 for the other kernels, where it changes nothing).
    """
    w = np.atleast_1d(np.asarray(w_scale)).astype(np.float32)
    return (np.float32(alpha) * np.float32(x_scale) * w) / np.float32(y_scale)


__all__ = ["layer_scale"]
