"""A 2-D convolution as the user states it: its sizes and their checks, seeded inputs, the numpy oracle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tinynpu.compiler.workload import check_sizes
from tinynpu.errors import UsageError

Pair = int | tuple[int, int]
Quad = int | tuple[int, int, int, int]


def _spread(name: str, value: object, count: int, *, least: int) -> int | tuple[int, ...]:
    """``value`` as one int (every entry equal) or a ``count``-tuple of ints, each at least ``least``.

    A tuple (or list, as JSON gives it) whose entries are all equal collapses to one int, so equal
    shapes compare and hash equal however they were written.
    """
    what = "a positive integer" if least == 1 else "a non-negative integer"
    entries = list(value) if isinstance(value, (tuple, list)) else [value]
    ints = [int(v) for v in entries if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= least]
    if len(ints) != len(entries) or len(ints) not in (1, count):
        raise UsageError(f"conv2d: {name} must be {what} or {count} of them, not {value!r}.")
    return ints[0] if len(set(ints)) == 1 else tuple(ints)


@dataclass(frozen=True)
class ConvShape:
    """A 2-D convolution: ``N x C x H x W`` input, ``K x C x R x S`` kernel, strides, padding, dilations.

    ``stride`` and ``dilation`` are one int or ``(height, width)``; ``pad`` is one int or ONNX's
    ``(top, left, bottom, right)``.  Construct with keywords; every size is checked, and a
    (dilated) kernel larger than the padded input is refused with the sizes that clash.
    """

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: Pair = 1
    pad: Quad = 0
    dilation: Pair = 1

    def __post_init__(self) -> None:
        check_sizes("conv2d: ", **{name: getattr(self, name) for name in ("n", "c", "h", "w", "k", "r", "s")})
        object.__setattr__(self, "stride", _spread("stride", self.stride, 2, least=1))
        object.__setattr__(self, "pad", _spread("pad", self.pad, 4, least=0))
        object.__setattr__(self, "dilation", _spread("dilation", self.dilation, 2, least=1))
        (pt, pl, pb, pr), (er, es) = self.pads, self.extent
        if er > self.h + pt + pb or es > self.w + pl + pr:
            dilated = f" (dilation {self.dilation})" if self.dilation != 1 else ""
            raise UsageError(
                f"conv2d: the {er}x{es} kernel (r x s){dilated} is larger than the padded input "
                f"{self.h + pt + pb}x{self.w + pl + pr} (h={self.h}, w={self.w}, pad={self.pad}); "
                "no output pixel exists."
            )

    @property
    def strides(self) -> tuple[int, int]:
        """``(height, width)`` strides."""
        return _pair(self.stride)

    @property
    def dilations(self) -> tuple[int, int]:
        """``(height, width)`` dilations."""
        return _pair(self.dilation)

    @property
    def pads(self) -> tuple[int, int, int, int]:
        """``(top, left, bottom, right)`` zero padding."""
        p = self.pad
        return (p, p, p, p) if isinstance(p, int) else p

    @property
    def extent(self) -> tuple[int, int]:
        """Height and width of the input window one output pixel reads (the dilated kernel)."""
        dh, dw = self.dilations
        return (self.r - 1) * dh + 1, (self.s - 1) * dw + 1

    @property
    def p(self) -> int:
        """Output height."""
        pt, _, pb, _ = self.pads
        return (self.h + pt + pb - self.extent[0]) // self.strides[0] + 1

    @property
    def q(self) -> int:
        """Output width."""
        _, pl, _, pr = self.pads
        return (self.w + pl + pr - self.extent[1]) // self.strides[1] + 1

    @property
    def gemm_m(self) -> int:
        return self.n * self.p * self.q

    @property
    def gemm_n(self) -> int:
        return self.k

    @property
    def gemm_k(self) -> int:
        return self.c * self.r * self.s

    @property
    def macs(self) -> int:
        """Useful multiply-accumulates (the unpadded im2col GEMM)."""
        return self.gemm_m * self.gemm_n * self.gemm_k

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments: ``compile_conv2d(**shape.kwargs())`` (:func:`tinynpu.compiler.conv2d.compile_conv2d`).

        ``dilation`` only when it is not 1, so an undilated conv's keywords (workload records,
        program keys, sweep sizes) read as they always have.
        """
        names = ("n", "c", "h", "w", "k", "r", "s", "stride", "pad", *(("dilation",) if self.dilation != 1 else ()))
        return {f: getattr(self, f) for f in names}

    def __str__(self) -> str:
        return (f"conv2d N={self.n} C={self.c} H={self.h} W={self.w} K={self.k} R={self.r} S={self.s} "
                f"stride={self.stride} pad={self.pad}" + (f" dilation={self.dilation}" if self.dilation != 1 else ""))


def _pair(v: Pair) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else v


# ResNet-50's distinct convolution shapes, batch 1 (the conv benchmark).
RESNET50_CONVS: tuple[ConvShape, ...] = tuple(
    ConvShape(n=n, c=c, h=h, w=w, k=k, r=r, s=s, stride=st, pad=pd)
    for (n, c, h, w, k, r, s, st, pd) in (
        (1, 3, 224, 224, 64, 7, 7, 2, 3),
        (1, 64, 56, 56, 64, 1, 1, 1, 0),
        (1, 64, 56, 56, 64, 3, 3, 1, 1),
        (1, 64, 56, 56, 256, 1, 1, 1, 0),
        (1, 256, 56, 56, 128, 1, 1, 2, 0),
        (1, 128, 28, 28, 128, 3, 3, 1, 1),
        (1, 1024, 14, 14, 256, 1, 1, 1, 0),
        (1, 256, 14, 14, 256, 3, 3, 1, 1),
        (1, 512, 7, 7, 512, 3, 3, 1, 1),
        (1, 512, 7, 7, 2048, 1, 1, 1, 0),
    )
)


def conv2d_reference(x_nhwc: np.ndarray, w_krsc: np.ndarray, *, stride: Pair, pad: Quad, acc_dtype: np.dtype,
                     dilation: Pair = 1) -> np.ndarray:
    """Direct numpy convolution, NHWC in and out; integers sum in int64 then wrap to int32.

    ``stride``, ``pad`` and ``dilation`` as :class:`ConvShape` takes them.
    """
    n, h, w, c = x_nhwc.shape
    k, r, s, _ = w_krsc.shape
    shape = ConvShape(n=n, c=c, h=h, w=w, k=k, r=r, s=s, stride=stride, pad=pad, dilation=dilation)
    (pt, pl, pb, pr), (sh, sw), (dh, dw) = shape.pads, shape.strides, shape.dilations
    p, q = shape.p, shape.q
    wide = np.float64 if acc_dtype.kind == "f" else np.int64
    xp = np.pad(x_nhwc.astype(wide), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    out = np.zeros((n, p, q, k), dtype=wide)
    wt = w_krsc.astype(wide)
    for ri in range(r):
        for si in range(s):
            y0, x0 = ri * dh, si * dw
            patch = xp[:, y0:y0 + sh * (p - 1) + 1:sh, x0:x0 + sw * (q - 1) + 1:sw, :]
            out += patch @ wt[:, ri, si, :].T
    if acc_dtype.kind == "f":
        return out.astype(acc_dtype)
    return out.astype(np.int64).astype(np.uint32).view(np.int32)


def conv_inputs(shape: ConvShape, *, integer: bool, seed: int) -> dict[str, np.ndarray]:
    """Seeded input (NHWC) and weights (KRSC): int8 over the whole range, or fp32 in [0, 1)."""
    rng = np.random.default_rng(seed)
    x_shape, w_shape = (shape.n, shape.h, shape.w, shape.c), (shape.k, shape.r, shape.s, shape.c)
    if integer:
        return {"X": rng.integers(-128, 128, size=x_shape, dtype=np.int8),
                "W": rng.integers(-128, 128, size=w_shape, dtype=np.int8)}
    # Positive values as in the course's seed program: no cancellation, so rtol=1e-5 is meaningful.
    return {"X": rng.random(x_shape, dtype=np.float32), "W": rng.random(w_shape, dtype=np.float32)}


__all__ = ["RESNET50_CONVS", "ConvShape", "Pair", "Quad", "conv2d_reference", "conv_inputs"]
