"""A 2-D convolution as the user states it: its sizes and their checks, seeded inputs, the numpy oracle."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynpu.compiler.workload import check_sizes
from tinynpu.errors import UsageError


@dataclass(frozen=True)
class ConvShape:
    """A 2-D convolution: ``N x C x H x W`` input, ``K x C x R x S`` kernel, square stride and padding.

    Construct with keywords; every size is checked, and a kernel larger than
    the padded input is refused with the sizes that clash.
    """

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: int = 1
    pad: int = 0

    def __post_init__(self) -> None:
        check_sizes("conv2d: ", **{name: getattr(self, name) for name in ("n", "c", "h", "w", "k", "r", "s",
                                                                        "stride")})
        if not isinstance(self.pad, (int, np.integer)) or isinstance(self.pad, bool) or self.pad < 0:
            raise UsageError(f"conv2d: pad must be a non-negative integer, not {self.pad!r}.")
        if self.r > self.h + 2 * self.pad or self.s > self.w + 2 * self.pad:
            raise UsageError(
                f"conv2d: the {self.r}x{self.s} kernel (r x s) is larger than the padded input "
                f"{self.h + 2 * self.pad}x{self.w + 2 * self.pad} (h={self.h}, w={self.w}, pad={self.pad}); "
                "no output pixel exists."
            )

    @property
    def p(self) -> int:
        """Output height."""
        return (self.h + 2 * self.pad - self.r) // self.stride + 1

    @property
    def q(self) -> int:
        """Output width."""
        return (self.w + 2 * self.pad - self.s) // self.stride + 1

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

    def kwargs(self) -> dict[str, int]:
        """Keyword arguments: ``compile_conv2d(**shape.kwargs())`` (:func:`tinynpu.compiler.conv2d.compile_conv2d`)."""
        return {f: getattr(self, f) for f in ("n", "c", "h", "w", "k", "r", "s", "stride", "pad")}

    def __str__(self) -> str:
        return (f"conv2d N={self.n} C={self.c} H={self.h} W={self.w} K={self.k} R={self.r} S={self.s} "
                f"stride={self.stride} pad={self.pad}")


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


def conv2d_reference(x_nhwc: np.ndarray, w_krsc: np.ndarray, *, stride: int, pad: int,
                     acc_dtype: np.dtype) -> np.ndarray:
    """Direct numpy convolution, NHWC in and out; integers sum in int64 then wrap to int32."""
    n, h, w, c = x_nhwc.shape
    k, r, s, _ = w_krsc.shape
    p = (h + 2 * pad - r) // stride + 1
    q = (w + 2 * pad - s) // stride + 1
    wide = np.float64 if acc_dtype.kind == "f" else np.int64
    xp = np.pad(x_nhwc.astype(wide), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    out = np.zeros((n, p, q, k), dtype=wide)
    wt = w_krsc.astype(wide)
    for ri in range(r):
        for si in range(s):
            patch = xp[:, ri:ri + stride * (p - 1) + 1:stride, si:si + stride * (q - 1) + 1:stride, :]
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


__all__ = ["RESNET50_CONVS", "ConvShape", "conv2d_reference", "conv_inputs"]
