"""The implicit im2col's geometry: how a conv's reduction is cut into tiles and where each tile's data lives.

Two layouts of the reduction (:class:`ConvLayout`), chosen per shape by
:func:`choose_layout`:

``direct``
    Reduction tiles are ``(r, s, c-block)``: ``T`` channels of one kernel tap
    (``T`` the tile edge).  One scratchpad row of an A tile is one output
    pixel's ``T`` channels at input position ``(p*stride_h + r*dilation_h -
    pad_top, q*stride_w + s*dilation_w - pad_left)``, so a run of output pixels
    ``q..q'`` along one output row is one 2-D DMA with row stride ``stride_w*C``
    elements; pixels whose tap falls in the padding halo become ``zero`` rows;
    runs crossing output rows split.
    No host work.  When C is not a multiple of ``T`` the last channel block is
    zero-filled by the load (``cols < T``), which costs MACs: the reduction is
    padded to ``R*S*ceil(C/T)*T``.

``rowpack``
    For small C (ResNet's first layer has C = 3) the host re-lays the input
    into ``X'[n][p][x][r][c] = Xpad[n][p*stride_h + r*dilation_h][x][c]`` (the
    input padded as the conv says, then the R input rows each output row needs,
    interleaved), and the weights into ``K x S x R x C``.  For one output pixel
    the whole reduction in ``(s, r, c)`` order is then contiguous (its S taps are
    adjacent columns: a width dilation of 1 only), so it is
    cut into ``T``-wide tiles with only the last one short: the reduction is
    padded to ``ceil(R*S*C/T)*T`` only.  The re-layout is host work; its
    traffic (read the input, write ``X'``; read and write the weights) is
    counted in ``host_traffic_bytes`` and reported, never free.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tinynpu.compiler.conv_shape import ConvShape
from tinynpu.intmath import ceil_div
from tinynpu.isa import ArchConfig

LAYOUTS = ("direct", "rowpack")


@dataclass(frozen=True)
class Dma:
    """One ``load`` (or, with ``zero`` set, one ``zero``) filling scratchpad rows of an operand tile.

    ``row`` is relative to the tile's first scratchpad row; ``dram`` is a byte
    address; ``stride`` is in bytes between consecutive rows.
    """

    row: int
    rows: int
    zero: bool = False
    dram: int = 0
    stride: int = 0
    cols: int = 0


@dataclass(frozen=True)
class ConvLayout:
    """How the conv's reduction is cut into tile-wide slices and where each tile's data lives.

    Attributes:
        shape: the convolution.
        kind: ``direct`` or ``rowpack`` (see the module docstring).
        tile: the tile edge (``cfg.tile``).
        elem: bytes per input/weight element.
    """

    shape: ConvShape
    kind: str
    tile: int
    elem: int

    @property
    def c_blocks(self) -> int:
        return ceil_div(self.shape.c, self.tile)

    @property
    def k_tiles(self) -> int:
        """Reduction tiles of the padded GEMM."""
        sh = self.shape
        if self.kind == "direct":
            return sh.r * sh.s * self.c_blocks
        return ceil_div(sh.gemm_k, self.tile)

    @property
    def padded_k(self) -> int:
        return self.k_tiles * self.tile

    @property
    def padded_width(self) -> int:
        """Row length (pixels) of the host re-laid input ``X'`` in ``rowpack``."""
        _, pl, _, pr = self.shape.pads
        return self.shape.w + pl + pr

    # -- DRAM tensors the accelerator reads ---------------------------------

    def input_shape(self) -> tuple[int, ...]:
        """Shape of the input tensor the program reads (``X`` or the re-laid ``X'``)."""
        sh = self.shape
        if self.kind == "direct":
            return (sh.n, sh.h, sh.w, sh.c)
        return (sh.n, sh.p, self.padded_width, sh.r, sh.c)

    def weight_shape(self) -> tuple[int, ...]:
        sh = self.shape
        if self.kind == "direct":
            return (sh.k, sh.r, sh.s, sh.c)
        return (sh.k, sh.s, sh.r, sh.c)

    def dram_bytes(self, out_bytes: int) -> int:
        """DRAM the program's tensors occupy (input as read, weights, output), alignment aside."""
        sh = self.shape
        return ((int(np.prod(self.input_shape())) + int(np.prod(self.weight_shape()))) * self.elem
                + sh.gemm_m * sh.gemm_n * out_bytes)

    def host_input(self, x_nhwc: np.ndarray) -> np.ndarray:
        """The input as the program reads it (host re-layout in ``rowpack``)."""
        if self.kind == "direct":
            return np.ascontiguousarray(x_nhwc)
        sh = self.shape
        pt, pl, pb, pr = sh.pads
        xp = np.pad(x_nhwc, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
        # (P, R) padded input rows
        rows = np.arange(sh.p)[:, None] * sh.strides[0] + np.arange(sh.r)[None, :] * sh.dilations[0]
        # xp[:, rows] is (N, P, R, Wp, C); the program wants (N, P, Wp, R, C).
        return np.ascontiguousarray(xp[:, rows].transpose(0, 1, 3, 2, 4))

    def host_weights(self, w_krsc: np.ndarray) -> np.ndarray:
        """The weights as the program reads them (``K x S x R x C`` in ``rowpack``)."""
        if self.kind == "direct":
            return np.ascontiguousarray(w_krsc)
        return np.ascontiguousarray(w_krsc.transpose(0, 2, 1, 3))

    def host_traffic_bytes(self) -> int:
        """Bytes the host reads and writes to re-lay the operands (0 for ``direct``)."""
        if self.kind == "direct":
            return 0
        sh = self.shape
        x_in = sh.n * sh.h * sh.w * sh.c
        x_out = int(np.prod(self.input_shape()))
        wts = sh.k * sh.r * sh.s * sh.c
        return (x_in + x_out + 2 * wts) * self.elem

    # -- operand tiles --------------------------------------------------------

    def a_tile(self, x_base: int, m0: int, rows: int, kt: int) -> list[Dma]:
        """DMAs that fill GEMM rows ``m0 .. m0+rows-1``, reduction tile ``kt``, of the implicit im2col A.

        Scratchpad row ``i`` of the tile receives output pixel ``m0 + i``'s ``tile``
        reduction values of tile ``kt``; halo rows become ``zero`` rows.
        """
        sh = self.shape
        (pt, pl, _, _), (s_h, s_w), (d_h, d_w) = sh.pads, sh.strides, sh.dilations
        out: list[Dma] = []
        for row, n, p, q0, q1 in self._pixel_runs(m0, rows):
            if self.kind == "rowpack":
                j0 = kt * self.tile
                base = ((n * sh.p + p) * self.padded_width + q0 * s_w) * sh.r * sh.c + j0
                out.append(Dma(row=row, rows=q1 - q0, dram=x_base + base * self.elem,
                               stride=s_w * sh.r * sh.c * self.elem,
                               cols=min(self.tile, sh.gemm_k - j0)))
                continue
            r, s, cb = self.direct_tap(kt)
            c0 = cb * self.tile
            cols = min(self.tile, sh.c - c0)
            y = p * s_h + r * d_h - pt
            if not 0 <= y < sh.h:
                out.append(Dma(row=row, rows=q1 - q0, zero=True))
                continue
            # Output columns whose tap lands inside the input: 0 <= q*stride_w + s*dilation_w - pad_left < W.
            lo = max(q0, ceil_div(pl - s * d_w, s_w))
            hi = min(q1, (sh.w - 1 + pl - s * d_w) // s_w + 1)
            if hi <= lo:
                out.append(Dma(row=row, rows=q1 - q0, zero=True))
                continue
            if lo > q0:
                out.append(Dma(row=row, rows=lo - q0, zero=True))
            x = lo * s_w + s * d_w - pl
            addr = x_base + (((n * sh.h + y) * sh.w + x) * sh.c + c0) * self.elem
            out.append(Dma(row=row + lo - q0, rows=hi - lo, dram=addr, stride=s_w * sh.c * self.elem,
                           cols=cols))
            if q1 > hi:
                out.append(Dma(row=row + hi - q0, rows=q1 - hi, zero=True))
        return out

    def b_tile(self, w_base: int, k0: int, rows: int, kt: int) -> list[Dma]:
        """DMAs that fill output channels ``k0 .. k0+rows-1``, reduction tile ``kt``, of B (the weights)."""
        sh = self.shape
        row_bytes = sh.gemm_k * self.elem
        if self.kind == "rowpack":
            j0 = kt * self.tile
            return [Dma(row=0, rows=rows, dram=w_base + k0 * row_bytes + j0 * self.elem, stride=row_bytes,
                        cols=min(self.tile, sh.gemm_k - j0))]
        r, s, cb = self.direct_tap(kt)
        c0 = cb * self.tile
        off = ((r * sh.s + s) * sh.c + c0) * self.elem
        return [Dma(row=0, rows=rows, dram=w_base + k0 * row_bytes + off, stride=row_bytes,
                    cols=min(self.tile, sh.c - c0))]

    def direct_tap(self, kt: int) -> tuple[int, int, int]:
        """``(r, s, c-block)`` of reduction tile ``kt`` in the ``direct`` layout (c innermost)."""
        rs, cb = divmod(kt, self.c_blocks)
        r, s = divmod(rs, self.shape.s)
        return r, s, cb

    def _pixel_runs(self, m0: int, rows: int) -> Iterator[tuple[int, int, int, int, int]]:
        """Split GEMM rows ``m0..m0+rows-1`` into runs along one output row: ``(tile row, n, p, q0, q1)``."""
        sh = self.shape
        m, end = m0, min(m0 + rows, sh.gemm_m)
        while m < end:
            n, rem = divmod(m, sh.p * sh.q)
            p, q0 = divmod(rem, sh.q)
            q1 = min(sh.q, q0 + end - m)
            yield m - m0, n, p, q0, q1
            m += q1 - q0


def choose_layout(shape: ConvShape, cfg: ArchConfig) -> ConvLayout:
    """``direct`` unless packing the reduction saves padded MACs (small C), then ``rowpack``.

    ``rowpack`` is taken only when its re-laid input (about R/stride times the
    input) still fits DRAM beside the weights and the output, and the kernel's
    width is not dilated (its S taps must be adjacent input columns).
    """
    elem = cfg.elem_bytes("a_reg")
    direct = ConvLayout(shape, "direct", cfg.tile, elem)
    if not rowpack_applies(shape):
        return direct
    rowpack = ConvLayout(shape, "rowpack", cfg.tile, elem)
    if rowpack.k_tiles < direct.k_tiles and rowpack.dram_bytes(cfg.elem_bytes("acc")) <= cfg.dram_bytes:
        return rowpack
    return direct


def rowpack_applies(shape: ConvShape) -> bool:
    """Whether ``rowpack`` can lay the conv out: one output pixel's S taps are adjacent input columns."""
    return shape.dilations[1] == 1


__all__ = ["LAYOUTS", "ConvLayout", "Dma", "choose_layout", "rowpack_applies"]
