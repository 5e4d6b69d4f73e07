"""A conv's traffic and yardsticks: exact DRAM bytes per tiling, ``best_tiling_bytes``, the compulsory bound.

``io_lower_bound_bytes`` of a conv is its compulsory traffic (read the input
elements some output depends on and the weights once, write the output
once), reported with ``bound_kind = "compulsory"``: the matmul bound
2*M*N*K/sqrt(S) does not hold for a convolution (its sliding windows reuse
inputs) and no proven convolution bound is implemented here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tinynpu.compiler.bounds import least_traffic, pass_traffic
from tinynpu.compiler.conv_geometry import ConvLayout
from tinynpu.compiler.conv_shape import ConvShape
from tinynpu.compiler.schedule import Tiling
from tinynpu.isa import ArchConfig


def a_pass_bytes(layout: ConvLayout) -> int:
    """DRAM bytes of one pass over the implicit im2col A (every tile once); halo rows read nothing.

    ``direct``: each (r, s) tap reads C channels for every output pixel whose
    tap lands inside the input.  ``rowpack``: every pixel reads its whole
    packed reduction (the halos are zeros in the re-laid input).
    """
    sh = layout.shape
    if layout.kind == "rowpack":
        return sh.gemm_m * sh.gemm_k * layout.elem
    (pt, pl, _, _), (s_h, s_w), (d_h, d_w) = sh.pads, sh.strides, sh.dilations
    rows = [_inside(sh.h, sh.p, s_h, r * d_h - pt) for r in range(sh.r)]
    cols = [_inside(sh.w, sh.q, s_w, s * d_w - pl) for s in range(sh.s)]
    return sh.n * sum(rows) * sum(cols) * sh.c * layout.elem


def _inside(size: int, out: int, stride: int, offset: int) -> int:
    """Output positions ``o < out`` whose input position ``o*stride + offset`` lies in ``[0, size)``."""
    return sum(1 for o in range(out) if 0 <= o * stride + offset < size)


def b_pass_bytes(layout: ConvLayout) -> int:
    """DRAM bytes of one pass over the weights."""
    return layout.shape.gemm_n * layout.shape.gemm_k * layout.elem


def conv_traffic_model(layout: ConvLayout, cfg: ArchConfig, out_bytes: int, *,
                       bias: int = 0) -> Callable[[Tiling], int]:
    """``tiling -> DRAM bytes`` the lowering moves: exact, matching the emitted loads and stores.

    The output-stationary traffic of :func:`tinynpu.compiler.bounds.pass_traffic`
    with the conv's passes (computed once): only the per-pass bytes differ
    from a dense GEMM (halo rows read nothing).  ``bias``: parameter rows per output channel.
    """
    sh = layout.shape
    a_pass, b_pass = a_pass_bytes(layout), b_pass_bytes(layout)
    return lambda t: pass_traffic(sh.gemm_m, sh.gemm_n, t, cfg, a_pass_bytes=a_pass, b_pass_bytes=b_pass,
                                  out_bytes=out_bytes, bias=bias)


def conv_best_tiling_bytes(layout: ConvLayout, cfg: ArchConfig, out_bytes: int, *, bias: int = 0) -> int:
    """``best_tiling_bytes`` for a conv: :func:`tinynpu.compiler.bounds.least_traffic` of its traffic model.

    The tiling space is the padded im2col GEMM's (reduction ``layout.padded_k``).
    """
    sh = layout.shape
    return least_traffic(sh.gemm_m, sh.gemm_n, layout.padded_k, cfg,
                         conv_traffic_model(layout, cfg, out_bytes, bias=bias), bias=bias)


def _touched(size: int, out: int, kernel: int, stride: int, pad: int, dilation: int = 1) -> int:
    """Input positions along one axis that some output position reads through some kernel tap.

    ``pad`` is the padding before the first input position.
    """
    read = np.zeros(size, dtype=bool)
    starts = np.arange(out) * stride - pad
    for tap in range(kernel):
        at = starts + tap * dilation
        read[at[(at >= 0) & (at < size)]] = True
    return int(read.sum())


def conv_compulsory_bytes(shape: ConvShape, in_bytes: int, out_bytes: int) -> int:
    """``io_lower_bound_bytes`` of a conv (``bound_kind = "compulsory"``).

    Every input element some output depends on must be read once (with a
    stride larger than the kernel, e.g. a 1x1 stride-2 layer, only a quarter
    of the input is), every weight once, and every output written once.
    """
    (pt, pl, _, _), (s_h, s_w), (d_h, d_w) = shape.pads, shape.strides, shape.dilations
    rows = _touched(shape.h, shape.p, shape.r, s_h, pt, d_h)
    cols = _touched(shape.w, shape.q, shape.s, s_w, pl, d_w)
    return ((shape.n * rows * cols * shape.c + shape.k * shape.r * shape.s * shape.c) * in_bytes
            + shape.gemm_m * shape.gemm_n * out_bytes)


__all__ = ["a_pass_bytes", "b_pass_bytes", "conv_best_tiling_bytes", "conv_compulsory_bytes",
           "conv_traffic_model"]
