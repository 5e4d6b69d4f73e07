"""Integer kernels of the quantized network in numpy: the reference the accelerator is checked against.

Activations are int8 with zero point 0 (symmetric); weights int8 per output
channel; accumulators int32.  Convolutions and GEMMs sum exactly (float64
BLAS sums of int8 products are exact below 2^53, far above any layer's
reduction), then wrap to int32 as the accumulator does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynpu.compiler.epilogue import Epilogue as NpuEpilogue
from tinynpu.simulator.semantics import requantize_float


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wraparound into int32."""
    return np.asarray(x, dtype=np.int64).astype(np.uint32).view(np.int32)


#: Integers up to this magnitude are exact in binary32 (24-bit significand).
_FLOAT32_EXACT = 1 << 24


def _magnitude(dtype: np.dtype) -> float:
    """The largest magnitude a value of ``dtype`` has (infinite for a non-integer dtype)."""
    if dtype.kind not in "iub":
        return float("inf")
    info = np.iinfo(dtype) if dtype.kind != "b" else np.iinfo(np.uint8)
    return float(max(-int(info.min), int(info.max)))


#: Bytes of the weight operand converted to floating point at a time (a few hundred rows) when ``a`` is one
#: row: the block stays in the caches and its buffer is reused for the next, where converting the whole
#: operand at once wrote a fresh copy of every weight (half a gigabyte of new pages, each zeroed by the kernel,
#: per GPT-2-small decode step) to multiply it by one row.  With more rows, each block's product is a small
#: matrix product BLAS spreads over its threads, waking them per block: at 8 rows (a prompt) that cost 6x the
#: CPU time of one call on the whole converted operand, so only matrix-vector products are blocked.
_BLOCK_BYTES = 1 << 20


def gemm_int32(a: np.ndarray, b_nk: np.ndarray) -> np.ndarray:
    """``a @ b_nk.T`` of int8 operands, summed exactly, wrapped to int32.

    Through BLAS in floating point: every product and partial sum is an integer no larger in magnitude
    than K times the largest product, so where that stays below 2**24 (int8 operands up to K = 1024:
    GPT-2's projections and LM head) binary32 holds every one exactly, whatever order BLAS sums in, and
    the GEMM runs in float32 (half the bytes of float64 converted and streamed: the reference of a decode
    step converts every weight of the model once); beyond it, float64 (exact below 2**53).  ``b_nk`` is
    converted a block of rows at a time into one reused buffer when ``a`` is one row (a batch-1 decode
    step's matrix-vector products); each output element is still one dot product over the whole of K, so the
    blocks change nothing but the memory traffic.
    """
    k = a.shape[-1]
    bound = k * _magnitude(np.dtype(a.dtype)) * _magnitude(np.dtype(b_nk.dtype))
    dtype = np.dtype(np.float32 if bound < _FLOAT32_EXACT else np.float64)
    a_f = a.astype(dtype)
    if a_f.shape[0] != 1:
        return wrap_int32(np.rint(a_f @ b_nk.astype(dtype).T).astype(np.int64))
    n = b_nk.shape[0]
    rows = max(1, min(n, _BLOCK_BYTES // max(1, k * dtype.itemsize)))
    block = np.empty((rows, k), dtype)
    prod = np.empty((a.shape[0], n), dtype)
    for lo in range(0, n, rows):
        part = block[:min(rows, n - lo)]
        np.copyto(part, b_nk[lo:lo + rows], casting="unsafe")
        prod[:, lo:lo + rows] = a_f @ part.T
    return wrap_int32(np.rint(prod).astype(np.int64))


def im2col_nhwc(x: np.ndarray, r: int, s: int, pads: tuple[int, ...], strides: tuple[int, ...],
                dilations: tuple[int, ...]) -> np.ndarray:
    """``(N*P*Q, R*S*C)`` patches of an NHWC input, reduction in (r, s, c) order (the KRSC weights').

    ``pads`` is ONNX's ``(top, left, bottom, right)``.
    """
    n, h, w, c = x.shape
    pt, pl, pb, pr = pads
    sh, sw = strides
    dh, dw = dilations
    p = (h + pt + pb - dh * (r - 1) - 1) // sh + 1
    q = (w + pl + pr - dw * (s - 1) - 1) // sw + 1
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    cols = np.empty((n, p, q, r, s, c), dtype=x.dtype)
    for ri in range(r):
        for si in range(s):
            y0, x0 = ri * dh, si * dw
            cols[:, :, :, ri, si, :] = xp[:, y0:y0 + sh * (p - 1) + 1:sh, x0:x0 + sw * (q - 1) + 1:sw]
    return cols.reshape(n * p * q, r * s * c)


def conv_int32_general(x: np.ndarray, w_krsc: np.ndarray, pads: tuple[int, ...], strides: tuple[int, ...],
                       dilations: tuple[int, ...]) -> np.ndarray:
    """Integer convolution, NHWC in, KRSC weights, ``(N, P, Q, K)`` int32 out."""
    k, r, s, _ = w_krsc.shape
    n, _, w, _ = x.shape
    q = (w + pads[1] + pads[3] - dilations[1] * (s - 1) - 1) // strides[1] + 1
    out = gemm_int32(im2col_nhwc(x, r, s, pads, strides, dilations), w_krsc.reshape(k, -1))
    return out.reshape(n, -1, q, k)


@dataclass(frozen=True)
class Epilogue:
    """What follows a layer's int32 accumulation: bias, per-channel requantization, zero point, clamp.

    Attributes:
        bias: int32 per output channel (or None).
        scale: float32 per output channel: ``vrequantf``'s binary32 scale
            (:func:`~tinynpu.compiler.onnx.frontend.requant.layer_scale`, as onnxruntime computes it).
        zero_point: the output's zero point.
        lo, hi: the clamp (relu: ``lo = zero_point``; Clip: its bounds in the output's integers).
    """

    bias: np.ndarray | None
    scale: np.ndarray
    zero_point: int
    lo: int
    hi: int

    def channels(self, total: int, channels: slice = slice(None)) -> Epilogue:
        """This epilogue for output ``channels`` of a layer with ``total`` (per-tensor values broadcast)."""
        def part(v: np.ndarray) -> np.ndarray:
            return np.broadcast_to(v, (total,))[channels]

        return Epilogue(bias=None if self.bias is None else part(self.bias), scale=part(self.scale),
                        zero_point=self.zero_point, lo=self.lo, hi=self.hi)

    def on_accelerator(self) -> NpuEpilogue:
        """This epilogue as the accelerator runs it: ``vrequantf`` (the program stores int8)."""
        return NpuEpilogue(requantizer="binary32", scale=np.ascontiguousarray(self.scale), bias=self.bias,
                           zero_point=self.zero_point, lo=self.lo, hi=self.hi)

    def apply(self, acc: np.ndarray) -> np.ndarray:
        """int32 accumulators (channel last) -> int8 outputs."""
        x = acc if self.bias is None else wrap_int32(acc.astype(np.int64) + self.bias.astype(np.int64))
        y = requantize_float(x, self.scale).astype(np.int64) + self.zero_point
        return np.clip(y, self.lo, self.hi).astype(np.int8)


def rescale_sum(terms: list[tuple[np.ndarray, float]], *, zero_point: int, lo: int, hi: int) -> np.ndarray:
    """``clamp(round(sum(x_i * scale_i)) + zp)`` in fixed point: an Add/Sum or a rescale.

    Every term uses a Q31 multiplier at one common shift (that of the largest
    scale), so the sum rounds once, ties to even as onnxruntime's QuantizeLinear
    and quantized kernels round (an average of 4 or 6 values often ends in .5).
    """
    scales = np.array([s for _, s in terms], dtype=np.float64)
    top = float(scales.max())
    exp = int(np.floor(np.log2(top))) + 1  # top < 2^exp
    common = 30 - exp  # each multiplier below 2^30: two terms sum without int64 overflow
    total: np.ndarray | int = 0
    for x, s in terms:
        m = int(round(s * 2.0**common))
        total = total + np.asarray(x, dtype=np.int64) * m
    if common > 0:
        t = np.asarray(total, dtype=np.int64)
        y, rest = t >> common, t & ((1 << common) - 1)
        half = 1 << (common - 1)
        y = y + ((rest > half) | ((rest == half) & ((y & 1) == 1)))
    else:
        y = np.asarray(total, dtype=np.int64) << (-common)
    return np.clip(y + zero_point, lo, hi).astype(np.int8)


def dequantize(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, axis: int | None) -> np.ndarray:
    """ONNX DequantizeLinear: ``(x - zp) * scale`` in float32."""
    s = np.asarray(scale, dtype=np.float32)
    z = np.asarray(zero_point)
    if axis is not None and s.ndim == 1:
        shape = [1] * np.ndim(x)
        shape[axis] = -1
        s, z = s.reshape(shape), z.reshape(shape)
    x = np.asarray(x)
    if x.dtype.itemsize <= 2 and z.dtype.itemsize <= 2:
        # Values and zero points of up to 16 bits are exact in float32, and so is their difference, so the
        # product is rounded once, as the int64 route below rounds it: the same floats, without two int64
        # temporaries (GPT-2-small's weights: 0.3 s instead of 3 s).
        out = x.astype(np.float32)
        out -= z.astype(np.float32)
        out *= s
        return out
    return ((x.astype(np.int64) - z.astype(np.int64)).astype(np.float32) * s).astype(np.float32)


def _pool_geometry(h: int, w: int, kernel: tuple[int, int], stride: tuple[int, int],
                   pads: tuple[int, int, int, int], ceil_mode: bool) -> tuple[int, int, int, int]:
    """Output height and width, and the rows/columns ceil mode adds past the far pads."""
    kh, kw = kernel
    sh, sw = stride
    pt, pl, pb, pr = pads
    rnd = np.ceil if ceil_mode else np.floor
    p = int(rnd((h + pt + pb - kh) / sh)) + 1
    q = int(rnd((w + pl + pr - kw) / sw)) + 1
    if ceil_mode:  # the last window must start inside the input or its leading pad (ONNX, onnxruntime)
        p -= (p - 1) * sh >= h + pt
        q -= (q - 1) * sw >= w + pl
    return p, q, max(0, (p - 1) * sh + kh - (h + pt + pb)), max(0, (q - 1) * sw + kw - (w + pl + pr))


def _window_fold(xp: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int], p: int, q: int,
                 out: np.ndarray, combine: np.ufunc) -> np.ndarray:
    """``combine(out, window_tap, out=out)`` over every tap of every window of the padded ``xp``."""
    sh, sw = stride
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            combine(out, xp[:, :, i:i + sh * (p - 1) + 1:sh, j:j + sw * (q - 1) + 1:sw], out=out)
    return out


def max_pool_int(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int],
                 pads: tuple[int, int, int, int], ceil_mode: bool) -> np.ndarray:
    """MaxPool on NCHW int8 (padding never wins: it is the type's minimum)."""
    n, c, h, w = x.shape
    p, q, eb, er = _pool_geometry(h, w, kernel, stride, pads, ceil_mode)
    pt, pl, pb, pr = pads
    lo = np.iinfo(x.dtype).min
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb + eb), (pl, pr + er)), constant_values=lo)
    return _window_fold(xp, kernel, stride, p, q, np.full((n, c, p, q), lo, dtype=x.dtype), np.maximum)


def sum_pool_int(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int],
                 pads: tuple[int, int, int, int] = (0, 0, 0, 0), ceil_mode: bool = False,
                 count_include_pad: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Window sums (int64) of an NCHW integer tensor padded with zeros, and each window's count (p, q).

    The count is what ONNX's AveragePool divides by: the window's elements inside the input, or
    with ``count_include_pad`` inside the padded input (ceil mode's overhang past the pads never
    counts).
    """
    n, c, h, w = x.shape
    p, q, eb, er = _pool_geometry(h, w, kernel, stride, pads, ceil_mode)
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pt, pb + eb), (pl, pr + er)))
    sums = _window_fold(xp, kernel, stride, p, q, np.zeros((n, c, p, q), dtype=np.int64), np.add)
    inside = np.zeros((h + pt + pb + eb, w + pl + pr + er), dtype=np.int64)
    if count_include_pad:
        inside[:h + pt + pb, :w + pl + pr] = 1
    else:
        inside[pt:pt + h, pl:pl + w] = 1
    counts = _window_fold(inside[None, None], kernel, stride, p, q, np.zeros((1, 1, p, q), np.int64), np.add)
    return sums, counts[0, 0]


__all__ = ["Epilogue", "conv_int32_general", "dequantize", "gemm_int32", "im2col_nhwc", "max_pool_int",
           "rescale_sum", "sum_pool_int", "wrap_int32"]
