"""LayerNorm and RMSNorm along the last axis as accelerator programs, and their integer reference.

On int8 codes ``x`` of scale ``s`` and zero point ``z``, ``N`` per row, both norms are
``y = D sqrt(N) / sqrt(Q + C) * gamma + beta`` with, for LayerNorm, ``D = N x - sum(x)``
(exact; the zero point cancels) and ``C = eps N^3 / s^2``, and for RMSNorm ``D = x - z``
and ``C = eps N / s^2``, where ``Q = sum(D^2)``.  Per tile-row (:mod:`.rowwise`)::

    [sum = vredsum(x); x = vmul(x, N); D = vsubb(x, sum)]      LayerNorm: D exact, |D| <= 255 N
    [D = vaddrow(x, -z)]                                       RMSNorm with a zero point
    V = vredsq(D, shift=Sq) + round(C / 2^Sq)                  exact sum, then one rounding
    r = vrsqrt(V, shift=31)                                    floor(2^31 / sqrt(V))
    P = vmulb(D, r, shift=Sm)                                  = y_norm k,  k = 2^(31 + Sq/2 - Sm) / sqrt(N)
    y = vrequant(P + b_c, M_c, S_c) + z_out                     M_c 2^-(31+S_c) = gamma_c / (s_out k)

where ``b_c = round(beta_c k / gamma_c)`` puts beta before the requantization
(one rounding), in every column where ``|b_c| <= 2^29``; a column where it is not
(``gamma_c`` near 0) adds ``round(beta_c / s_out)`` after it instead (two roundings,
at most one LSB).

Why nothing saturates or loses precision: ``Sq`` is the least shift with
``N Dmax^2 + C < 2^30 2^Sq`` (``Dmax`` = 255 N or 255), so ``V <= 2^30 + 1``
can never saturate; ``vrsqrt`` gives ``r`` within one unit of
``2^31 / sqrt(V) >= 2^15.5`` (relative error below ``2^-15``); ``D r < 2^18 2^31``
is exact in the unit and ``Sm = ceil(1 + Sq / 2)`` puts ``|P| = |y_norm| k``
(``|y_norm| <= sqrt(N)``) at most ``2^30``, and at most ``sqrt 2`` times that where
``V``'s rounding is largest (``V = 1``): below ``2^31``, so ``vmulb`` never
saturates, and ``P`` keeps ``log2 k >= 30 - log2(sqrt N) - 1`` fraction bits of
the normalized value.  ``|P + b_c| <= sqrt(2) 2^30 + 2^29 < 2^31`` and ``vrequant``'s product
``(P + b_c) M < 2^62`` is exact.  A
negative ``gamma_c`` is a negative multiplier.  A row longer than one tile-row
can hold, or a ``gamma / s_out`` no q31 scale below 1 can hold, is refused
naming the node and the sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.epilogue import quantize_multiplier
from tinynpu.compiler.onnx.lower import fixed
from tinynpu.compiler.onnx.lower.rowwise import Body, RowShape, TileRow, alu, broadcast_rows, column_rows
from tinynpu.errors import OnnxError

RSQRT_SHIFT = 31
#: ``V``'s ceiling: vredsq's result plus the eps term stays below 2^30 + 1.
V_BITS = 30


@dataclass(frozen=True)
class NormParams:
    """A LayerNorm's (``center``) or RMSNorm's integer parameters along rows of ``width``."""

    width: int
    center: bool
    zero_point_in: int
    sq_shift: int
    eps_term: int
    mul_shift: int
    multiplier: np.ndarray  # int64 per column
    shift: np.ndarray  # int64 per column
    bias: np.ndarray  # int64 per column: beta in P's units, added before the requantization
    offset: np.ndarray  # int64 per column: z_out, plus round(beta / s_out) where beta is not in bias

    @property
    def blocks(self) -> int:
        return 2 if self.center else 1


def norm_params(width: int, *, center: bool, s_in: float, z_in: int, eps: float, gamma: np.ndarray,
                beta: np.ndarray | None, s_out: float, z_out: int, what: str) -> NormParams:
    """The parameters of a norm over ``width`` elements (see the module docstring).

    Raises:
        OnnxError: a column's ``gamma / (s_out k)`` is not below 1 (``what`` names the node).
    """
    n = int(width)
    d_max = 255 * n if center else 255
    c = float(eps) * (n**3 if center else n) / float(s_in) ** 2
    sq = max(0, int(n * d_max * d_max + int(np.ceil(c))).bit_length() - V_BITS)
    eps_term = int(np.rint(c / 2.0**sq))
    mul_shift = int(np.ceil(1 + sq / 2))
    k = 2.0 ** (RSQRT_SHIFT + sq / 2 - mul_shift) / np.sqrt(n)
    g = np.broadcast_to(np.asarray(gamma, dtype=np.float64).reshape(-1), (n,))
    real = g / float(s_out) / k
    big = np.flatnonzero(~(np.abs(real) < 1.0))
    if big.size:
        i = int(big[0])
        raise OnnxError(f"{what}: column {i}'s scale gamma / s_out = {g[i] / s_out!r} over the normalized value's "
                        f"{k:.4g} units is {real[i]!r}: not below 1, which vrequant's q31 multiplier needs, so the "
                        "norm cannot be lowered.")
    m = np.zeros(n, dtype=np.int64)
    s = np.zeros(n, dtype=np.int64)
    nz = np.flatnonzero(real != 0)
    if nz.size:
        mm, ss = quantize_multiplier(np.abs(real[nz]))
        m[nz] = np.sign(real[nz]).astype(np.int64) * mm.astype(np.int64)
        s[nz] = ss
    b = np.zeros(n) if beta is None else np.broadcast_to(np.asarray(beta, dtype=np.float64).reshape(-1), (n,))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        pre = np.where(g != 0, np.rint(b * k / np.where(g != 0, g, 1.0)), np.inf)
    before = np.abs(pre) <= 2**29
    bias = np.where(before, pre, 0).astype(np.int64)
    after = np.where(before, 0, np.clip(np.rint(b / float(s_out)), -(2**24), 2**24)).astype(np.int64)
    return NormParams(width=n, center=center, zero_point_in=int(z_in), sq_shift=sq, eps_term=eps_term,
                      mul_shift=mul_shift, multiplier=m, shift=s, bias=bias, offset=after + int(z_out))


def norm_reference(x: np.ndarray, p: NormParams) -> np.ndarray:
    """The program's arithmetic on int8 rows ``x`` (the norm along the last axis), bit for bit."""
    from tinynpu.simulator.semantics import requantize

    x2 = np.asarray(x, dtype=np.int64).reshape(-1, p.width)
    d = fixed.wrap32(x2 * p.width - fixed.red_sum(x2, 0)) if p.center else x2 - p.zero_point_in
    v = fixed.wrap32(fixed.red_sq(d, p.sq_shift) + p.eps_term)
    r = fixed.rsqrt(v, RSQRT_SHIFT)
    prob = fixed.wrap32(fixed.mul_b(d, r, p.mul_shift) + p.bias)
    y = requantize(prob, p.multiplier.astype(np.int32), p.shift.astype(np.int32)).astype(np.int64) + p.offset
    return fixed.store_narrow(fixed.wrap32(y)).reshape(x.shape)


def norm_rows(p: NormParams, shape: RowShape) -> np.ndarray:
    """Parameter rows: per segment its M and S rows (adjacent, as vrequant reads them), then per segment
    its offset row, then per segment its bias row, then the eps row and the ``-z`` row."""
    m, s, o, b = (column_rows(v, shape) for v in (p.multiplier, p.shift, p.offset, p.bias))
    pairs = np.stack([m, s], axis=1).reshape(-1, shape.tile)
    return np.concatenate([pairs, o, b, broadcast_rows(np.array([p.eps_term, -p.zero_point_in]), shape.tile)])


def norm_body(p: NormParams) -> Body:
    """The ALU instructions of one tile-row."""

    def body(emit: Emitter, tr: TileRow, shape: RowShape) -> None:
        n, t, cols = shape.segments, shape.tile, shape.last_cols
        whole = n * t
        q = tr.blocks[-1]
        offsets = tr.params + 2 * n
        biases = offsets + n
        eps_row = biases + n
        if p.center:
            sm = tr.blocks[0]
            alu(emit, "vredsum", sm, t, src=tr.data, n=n, cols=cols, shift=0)
            emit.alu("vmul", tr.data, rows=whole, imm=p.width)
            alu(emit, "vsubb", tr.data, whole, src=sm)
        elif p.zero_point_in:
            emit.alu("vaddrow", tr.data, rows=whole, src=eps_row + 1)
        alu(emit, "vredsq", q, t, src=tr.data, n=n, cols=cols, shift=p.sq_shift)
        if p.eps_term:
            emit.alu("vaddrow", q, rows=t, src=eps_row)
        alu(emit, "vrsqrt", q, t, src=q, shift=RSQRT_SHIFT)
        alu(emit, "vmulb", tr.data, whole, src=q, shift=p.mul_shift)
        for j in range(n):
            if p.bias.any():
                emit.alu("vaddrow", tr.data + j * t, rows=t, src=biases + j)
            emit.alu("vrequant", tr.data + j * t, rows=t, src=tr.params + 2 * j)
            if p.offset.any():
                emit.alu("vaddrow", tr.data + j * t, rows=t, src=offsets + j)

    return body


def check_norm_scale(s_in: float, *, what: str) -> None:
    if not (np.isfinite(s_in) and s_in > 0):
        raise OnnxError(f"{what}: input scale {s_in!r} is not a positive finite number; the norm cannot be lowered.")


__all__ = ["NormParams", "check_norm_scale", "norm_body", "norm_params", "norm_reference", "norm_rows"]
