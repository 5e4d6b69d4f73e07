"""A conv's traffic and yardsticks: exact DRAM bytes per tiling, ``best_tiling_bytes``, the compulsory bound.

``io_lower_bound_bytes`` of a conv is its compulsory traffic (read the input
elements some output depends on and the weights once, write the output
once), reported with ``bound_kind = "compulsory"``: the matmul bound
2*M*N*K/sqrt(S) does not hold for a convolution (its sliding windows reuse
inputs) and no proven convolution bound is implemented here.
"""

from __future__ import annotations

from collections.abc import Callable

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
    valid = 0
    for r in range(sh.r):
        rows = sum(1 for p in range(sh.p) if 0 <= p * sh.stride + r - sh.pad < sh.h)
        for s in range(sh.s):
            cols = sum(1 for q in range(sh.q) if 0 <= q * sh.stride + s - sh.pad < sh.w)
            valid += rows * cols
    return sh.n * valid * sh.c * layout.elem


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


def _touched(size: int, out: int, kernel: int, stride: int, pad: int) -> int:
    """Input positions along one axis that some output position reads through some kernel tap."""
    if stride <= kernel:  # the windows overlap or touch: one interval
        return min(size, (out - 1) * stride - pad + kernel) - max(0, -pad)
    return sum(max(0, min(size, o * stride - pad + kernel) - max(0, o * stride - pad)) for o in range(out))


def conv_compulsory_bytes(shape: ConvShape, in_bytes: int, out_bytes: int) -> int:
    """``io_lower_bound_bytes`` of a conv (``bound_kind = "compulsory"``).

    Every input element some output depends on must be read once (with a
    stride larger than the kernel, e.g. a 1x1 stride-2 layer, only a quarter
    of the input is), every weight once, and every output written once.
    """
    rows = _touched(shape.h, shape.p, shape.r, shape.stride, shape.pad)
    cols = _touched(shape.w, shape.q, shape.s, shape.stride, shape.pad)
    return ((shape.n * rows * cols * shape.c + shape.k * shape.r * shape.s * shape.c) * in_bytes
            + shape.gemm_m * shape.gemm_n * out_bytes)


__all__ = ["a_pass_bytes", "b_pass_bytes", "conv_best_tiling_bytes", "conv_compulsory_bytes",
           "conv_traffic_model"]
