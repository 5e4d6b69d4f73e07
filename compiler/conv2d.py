"""conv2d by implicit im2col: the convolution is a GEMM whose A operand is gathered by strided DMA.

The GEMM view (NT form, as ``tmm``)::

    M = N*P*Q      one GEMM row per output pixel (n, p, q), row-major: the output is NHWC
    N = K          one GEMM column per output channel
    K_gemm         the reduction over (r, s, c)

Tensors in DRAM (user-facing layouts, no host work): the input is NHWC, the
weights are ``K x R x S x C`` (a ``K x (R*S*C)`` matrix: B of the NT form,
no transpose), the output is NHWC (``M x K``), int32 (fp32 in the fp32 config)
or, with ``out_dtype="int8"``, requantized by the store as a quantized
network's layer would be.  An NCHW user (``input_layout="NCHW"``) gets the
transposes done on the host, counted in ``host_traffic_bytes``.

Halo rows are ``zero`` instructions, emitted before the loads of the same
tile: the ISA lets a ``zero`` start only once the load unit's earlier loads
have completed, so a zero behind a load would wait out the DRAM latency.

The GEMM itself is lowered by :func:`tinynpu.compiler.lower.lower_gemm` with
the tiling :func:`tinynpu.compiler.search.auto_tiling` picks for the padded
im2col GEMM (or a ``naive``/saved schedule); the conv's trace starts with its
own ``im2col`` step naming the layout, so a saved trace replays exactly.

Two layouts of the reduction (:class:`ConvLayout`), chosen per shape:

``direct``
    Reduction tiles are ``(r, s, c-block)``: 16 channels of one kernel tap.
    One scratchpad row of an A tile is one output pixel's 16 channels at input
    position ``(p*stride + r - pad, q*stride + s - pad)``, so a run of output
    pixels ``q..q'`` along one output row is one 2-D DMA with row stride
    ``stride*C`` elements; pixels whose tap falls in the padding halo become
    ``zero`` rows; runs crossing output rows split.  No host work.  When C is
    not a multiple of 16 the last channel block is zero-filled by the load
    (``cols < 16``), which costs MACs: the reduction is padded to
    ``R*S*ceil(C/16)*16``.

``rowpack``
    For small C (ResNet's first layer has C = 3) the host re-lays the input
    into ``X'[n][p][x][r][c] = Xpad[n][p*stride + r][x][c]`` (the input padded
    by ``pad`` on every side, then the R input rows each output row needs,
    interleaved), and the weights into ``K x S x R x C``.  For one output pixel
    the whole reduction in ``(s, r, c)`` order is then contiguous, so it is
    cut into 16-wide tiles with only the last one short: the reduction is
    padded to ``ceil(R*S*C/16)*16`` only.  The re-layout is host work; its
    traffic (read the input, write ``X'``; read and write the weights) is
    counted in ``host_traffic_bytes`` and reported, never free.

Bounds: ``io_lower_bound_bytes`` is the compulsory traffic of the real tensors
(read the input and the weights once, write the output once), reported with
``bound_kind = "compulsory"``: the matmul bound 2*M*N*K/sqrt(S) does not hold
for a convolution (its sliding windows reuse inputs) and no proven
convolution bound is implemented here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from tinynpu.assembler.image import Program, Tensor
from tinynpu.compiler.bounds import roofline_cycles
from tinynpu.compiler.compiled import Bounds, Compiled
from tinynpu.compiler.cost import estimate
from tinynpu.compiler.lower import lower_gemm
from tinynpu.compiler.matmul import resolve_config
from tinynpu.compiler.operands import DenseOutput, Emitter
from tinynpu.compiler.quant import calibrate_shift, requantize
from tinynpu.compiler.schedule import Schedule, Tiling, apply, fits, from_tiling, naive
from tinynpu.compiler.search import auto_tiling
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, load_isa

LAYOUTS = ("direct", "rowpack")


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
        for name in ("n", "c", "h", "w", "k", "r", "s", "stride"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
                raise UsageError(f"conv2d: {name} must be a positive integer, not {value!r}.")
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
        """Keyword arguments for :func:`compile_conv2d`: ``compile_conv2d(**shape.kwargs())``."""
        return {f: getattr(self, f) for f in ("n", "c", "h", "w", "k", "r", "s", "stride", "pad")}

    def __str__(self) -> str:
        return (f"conv2d N={self.n} C={self.c} H={self.h} W={self.w} K={self.k} R={self.r} S={self.s} "
                f"stride={self.stride} pad={self.pad}")


# ResNet-50's distinct convolution shapes (DESIGN.md, "Benchmark workloads"), batch 1.
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
    """How the conv's reduction is cut into 16-wide tiles and where each tile's data lives.

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
        return -(-self.shape.c // self.tile)

    @property
    def k_tiles(self) -> int:
        """Reduction tiles of the padded GEMM."""
        sh = self.shape
        if self.kind == "direct":
            return sh.r * sh.s * self.c_blocks
        return -(-sh.gemm_k // self.tile)

    @property
    def padded_k(self) -> int:
        return self.k_tiles * self.tile

    @property
    def padded_width(self) -> int:
        """Row length (pixels) of the host re-laid input ``X'`` in ``rowpack``."""
        return self.shape.w + 2 * self.shape.pad

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
        xp = np.pad(x_nhwc, ((0, 0), (sh.pad, sh.pad), (sh.pad, sh.pad), (0, 0)))
        rows = (np.arange(sh.p)[:, None] * sh.stride + np.arange(sh.r)[None, :])  # (P, R) padded input rows
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

        Scratchpad row ``i`` of the tile receives output pixel ``m0 + i``'s 16
        reduction values of tile ``kt``; halo rows become ``zero`` rows.
        """
        sh = self.shape
        out: list[Dma] = []
        for row, n, p, q0, q1 in self._pixel_runs(m0, rows):
            if self.kind == "rowpack":
                j0 = kt * self.tile
                base = ((n * sh.p + p) * self.padded_width + q0 * sh.stride) * sh.r * sh.c + j0
                out.append(Dma(row=row, rows=q1 - q0, dram=x_base + base * self.elem,
                               stride=sh.stride * sh.r * sh.c * self.elem,
                               cols=min(self.tile, sh.gemm_k - j0)))
                continue
            r, s, cb = self.direct_tap(kt)
            c0 = cb * self.tile
            cols = min(self.tile, sh.c - c0)
            y = p * sh.stride + r - sh.pad
            if not 0 <= y < sh.h:
                out.append(Dma(row=row, rows=q1 - q0, zero=True))
                continue
            # Output columns whose tap lands inside the input: 0 <= q*stride + s - pad < W.
            lo = max(q0, -(-(sh.pad - s) // sh.stride))
            hi = min(q1, (sh.w - 1 + sh.pad - s) // sh.stride + 1)
            if hi <= lo:
                out.append(Dma(row=row, rows=q1 - q0, zero=True))
                continue
            if lo > q0:
                out.append(Dma(row=row, rows=lo - q0, zero=True))
            x = lo * sh.stride + s - sh.pad
            addr = x_base + (((n * sh.h + y) * sh.w + x) * sh.c + c0) * self.elem
            out.append(Dma(row=row + lo - q0, rows=hi - lo, dram=addr, stride=sh.stride * sh.c * self.elem,
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
    input) still fits DRAM beside the weights and the output.
    """
    elem = cfg.elem_bytes("a_reg")
    direct = ConvLayout(shape, "direct", cfg.tile, elem)
    rowpack = ConvLayout(shape, "rowpack", cfg.tile, elem)
    if rowpack.k_tiles < direct.k_tiles and rowpack.dram_bytes(cfg.elem_bytes("acc")) <= cfg.dram_bytes:
        return rowpack
    return direct


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


@dataclass(frozen=True)
class ConvOperand:
    """The conv's A (implicit im2col of the input) or B (the weights) as a GEMM operand of the lowering.

    Implements :class:`~tinynpu.compiler.operands.OperandA`: ``load`` turns
    the :class:`Dma` records of :meth:`ConvLayout.a_tile` / :meth:`ConvLayout.b_tile`
    into ``load`` and ``zero`` instructions.  ``k_total`` is the padded
    reduction of the layout, so every reduction tile the lowering asks for is
    one of the layout's tiles.
    """

    layout: ConvLayout
    addr: int
    which: str  # "A" (input) or "B" (weights)

    @property
    def rows_total(self) -> int:
        return self.layout.shape.gemm_m if self.which == "A" else self.layout.shape.gemm_n

    @property
    def k_total(self) -> int:
        return self.layout.padded_k

    def dmas(self, row0: int, rows: int, k0: int) -> list[Dma]:
        """The DMAs of one operand tile (also used by the traffic model)."""
        kt = k0 // self.layout.tile
        if self.which == "A":
            return self.layout.a_tile(self.addr, row0, rows, kt)
        return self.layout.b_tile(self.addr, row0, rows, kt)

    def load(self, emit: Emitter, *, scope: str, sp_row: int, row0: int, rows: int, k0: int) -> None:
        what = "X" if self.which == "A" else "W"
        # Zeros first: a `zero` may not start before the load unit's earlier loads complete
        # (isa.yaml timing), so a zero after a load would stall for the DRAM latency.
        for d in sorted(self.dmas(row0, rows, k0), key=lambda d: not d.zero):
            note = f"{what} rows {row0 + d.row}..{row0 + d.row + d.rows - 1}, k {k0}"
            if d.zero:
                emit.zero(scope, sp_row + d.row, rows=d.rows, comment=f"halo {note}")
            else:
                emit.load(scope, sp_row + d.row, d.dram, rows=d.rows, cols=d.cols, stride=d.stride,
                          comment=note)


# -- traffic and bounds -----------------------------------------------------------


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


def conv_tiling_traffic(layout: ConvLayout, t: Tiling, out_bytes: int) -> int:
    """DRAM bytes the lowering moves for tiling ``t``: exact, matching the emitted loads and stores.

    Output stationary, as :func:`tinynpu.compiler.bounds.tiling_traffic`: A is
    streamed once per column block and B once per row block, unless that
    operand's panel stays resident (then once); Y is written once.  Only the
    per-pass bytes differ from a dense GEMM (halo rows read nothing).
    """
    sh, e = layout.shape, layout.tile
    row_blocks = -(-sh.gemm_m // (t.bm * e))
    col_blocks = -(-sh.gemm_n // (t.bn * e))
    a_reads = 1 if t.resident == "a" else col_blocks
    b_reads = 1 if t.resident == "b" else row_blocks
    out = sh.gemm_m * sh.gemm_n * out_bytes
    return a_pass_bytes(layout) * a_reads + b_pass_bytes(layout) * b_reads + out


def conv_best_tiling_bytes(layout: ConvLayout, cfg: ArchConfig, out_bytes: int) -> int:
    """``best_tiling_bytes`` for a conv: exhaustive minimum of :func:`conv_tiling_traffic` over the space.

    Traffic depends only on the block sizes (bm, bn) and the resident operand,
    so each block shape is visited with the smallest chunk and single buffers
    (they fit whenever anything with those blocks does), and with A or B
    resident when a whole panel (block x all of the padded K) fits its scope.
    """
    e = cfg.tile
    mt, nt = -(-layout.shape.gemm_m // e), -(-layout.shape.gemm_n // e)
    kt = layout.k_tiles
    acc_tiles = cfg.rows("acc") // e
    best = None
    for bm in range(1, min(mt, acc_tiles) + 1):
        for bn in range(1, min(nt, acc_tiles // bm) + 1):
            for t in (Tiling(bm, bn, 1, "mn", False, 1, "fold"),
                      Tiling(bm, bn, kt, "mn", False, 1, "fold", "a"),
                      Tiling(bm, bn, kt, "nm", False, 1, "fold", "b")):
                if fits(t, cfg):
                    traffic = conv_tiling_traffic(layout, t, out_bytes)
                    best = traffic if best is None else min(best, traffic)
    if best is None:
        raise UsageError(f"conv2d: no tiling fits the scratchpads of config {cfg.name!r}.")
    return best


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


# -- compiling ------------------------------------------------------------------------

IM2COL_OP = "im2col"  # the conv's own trace step, before the GEMM schedule's steps


def _auto_tiling(layout: ConvLayout, cfg: ArchConfig, out_bytes: int) -> Tiling:
    """The ``auto`` tiling of the padded im2col GEMM (:func:`tinynpu.compiler.search.auto_tiling`).

    The GEMM model ranks it: the conv's A moves at most the padded GEMM's
    bytes (halo rows read nothing), so the model's ranking carries over.
    """
    sh = layout.shape
    return auto_tiling(sh.gemm_m, sh.gemm_n, layout.padded_k, cfg, in_bytes=layout.elem,
                       out_bytes=out_bytes).tiling


def _resolve_schedule(schedule: str | Schedule, shape: ConvShape, cfg: ArchConfig,
                      layout_kind: str) -> tuple[ConvLayout, Schedule | None]:
    """The layout and the GEMM schedule (None: choose automatically) a ``schedule`` argument names."""
    sched: Schedule | None
    if isinstance(schedule, Schedule):
        sched = schedule
    elif schedule == "auto":
        sched = None
    elif schedule == "naive":
        sched = naive(cfg)
    else:
        sched = Schedule.load(schedule)
    if sched is not None:
        steps = [s for s in sched.steps if s.get("op") == IM2COL_OP]
        if steps:
            kind = steps[-1].get("layout")
            if kind not in LAYOUTS:
                raise UsageError(f"schedule {sched.name!r}: the {IM2COL_OP} step's layout must be one of "
                                 f"{', '.join(LAYOUTS)}, not {kind!r}.")
            if layout_kind not in ("auto", kind):
                raise UsageError(f"schedule {sched.name!r} fixes the im2col layout {kind!r}, but layout "
                                 f"{layout_kind!r} was asked for.")
            layout_kind = kind
            sched = Schedule(sched.name, tuple(s for s in sched.steps if s.get("op") != IM2COL_OP))
    if layout_kind == "auto":
        return choose_layout(shape, cfg), sched
    if layout_kind not in LAYOUTS:
        raise UsageError(f"conv2d: layout must be auto or one of {', '.join(LAYOUTS)}, not {layout_kind!r}.")
    return ConvLayout(shape, layout_kind, cfg.tile, cfg.elem_bytes("a_reg")), sched


def compile_conv2d(n: int, c: int, h: int, w: int, k: int, r: int, s: int, *, stride: int = 1, pad: int = 0,
                   dtype: str = "int8", cfg: ArchConfig | None = None, schedule: str = "auto",
                   layout: str = "auto", out_dtype: str | None = None,
                   input_layout: str = "NHWC") -> Compiled:
    """Compile a 2-D convolution (NHWC input, KRSC weights, NHWC output) by implicit im2col.

    Args:
        n, c, h, w: Input batch, channels, height, width.
        k, r, s: Output channels, kernel height, kernel width.
        stride: Stride in both directions.
        pad: Zero padding on every side.
        dtype: ``int8`` (int32 output) or ``fp32`` (the fp32 config).
        cfg: Architecture config; by default the one matching ``dtype``.
        schedule: ``auto`` (cost-model choice), ``naive`` (the seed loop's one-tile blocks) or a
            saved trace file (a conv trace starts with its ``im2col`` step).
        layout: ``auto``, ``direct`` or ``rowpack`` (see the module docstring).
        out_dtype: ``None`` (the accumulator's int32/fp32) or ``int8``: requantized on the way out
            (``store narrow=1``) with the shift :func:`~tinynpu.compiler.quant.calibrate_shift`
            picks on the seed-0 inputs, as a network layer feeding the next one would be.
        input_layout: the user's layout: ``NHWC`` (input NHWC, weights KRSC, output NHWC: no host
            work) or ``NCHW`` (input NCHW, weights KCRS, output NCHW): the host transposes to the
            device's NHWC and back, and that traffic is counted in ``host_traffic_bytes``.

    Returns:
        The compiled program, its inputs/reference/host layout change and its yardsticks.

    Raises:
        UsageError: bad sizes, a kernel larger than the padded input, an unsupported dtype, or a
            schedule that does not apply or fit.
    """
    started = time.perf_counter()
    cfg = resolve_config(dtype, cfg)
    isa = load_isa()
    shape = ConvShape(n=n, c=c, h=h, w=w, k=k, r=r, s=s, stride=stride, pad=pad)
    in_elems = shape.n * shape.h * shape.w * shape.c + shape.k * shape.r * shape.s * shape.c
    need = in_elems * cfg.elem_bytes("a_reg") + shape.gemm_m * shape.gemm_n * cfg.elem_bytes("acc")
    if need > cfg.dram_bytes:  # checked before generating (and calibrating on) data of that size
        raise UsageError(f"{shape}: its tensors need at least {need} bytes of DRAM, more than the "
                         f"{cfg.dram_bytes} bytes of config {cfg.name!r}.")
    lay, sched = _resolve_schedule(schedule, shape, cfg, layout)
    if input_layout not in ("NHWC", "NCHW"):
        raise UsageError(f"conv2d: input_layout must be NHWC or NCHW, not {input_layout!r}.")
    integer = cfg.is_integer
    acc_dt = str(cfg.dtype("acc"))
    if out_dtype not in (None, acc_dt, "int8") or (out_dtype == "int8" and not integer):
        raise UsageError(f"conv2d: out_dtype must be {acc_dt}" + (" or int8" if integer else "")
                         + f" in config {cfg.name!r}, not {out_dtype!r}.")
    narrow = out_dtype == "int8"
    in_b, out_b = cfg.elem_bytes("a_reg"), 1 if narrow else cfg.elem_bytes("acc")
    in_dt, y_dt = str(cfg.dtype("a_reg")), "int8" if narrow else acc_dt
    x_shape, w_shape, y_shape = lay.input_shape(), lay.weight_shape(), (shape.n, shape.p, shape.q, shape.k)
    x_addr = 0
    w_addr = x_addr + _align(int(np.prod(x_shape)) * in_b)
    y_addr = w_addr + _align(int(np.prod(w_shape)) * in_b)
    m_g, n_g, k_g = shape.gemm_m, shape.gemm_n, lay.padded_k
    if y_addr + m_g * n_g * out_b > cfg.dram_bytes:
        raise UsageError(f"{shape}: its tensors in the {lay.kind} layout need {y_addr + m_g * n_g * out_b} "
                         f"bytes of DRAM, more than the {cfg.dram_bytes} bytes of config {cfg.name!r}.")
    tensors = [Tensor("X", x_addr, x_shape, in_dt, "input"), Tensor("W", w_addr, w_shape, in_dt, "input"),
               Tensor("Y", y_addr, y_shape, y_dt, "output")]
    shift = 0
    if narrow:
        x0 = conv_inputs(shape, integer=True, seed=0)
        shift = calibrate_shift(conv2d_reference(x0["X"], x0["W"], stride=stride, pad=pad,
                                                 acc_dtype=cfg.dtype("acc")), relu=False)
    if sched is None:
        tiling = _auto_tiling(lay, cfg, out_b)
        sched = from_tiling(tiling, cfg, name="auto")
    else:
        tiling = apply(sched, m=m_g, n=n_g, k=k_g, cfg=cfg)

    emit = Emitter(isa, cfg)
    issued = lower_gemm(emit, m=m_g, n=n_g, k=k_g, a=ConvOperand(lay, x_addr, "A"),
                        b=ConvOperand(lay, w_addr, "B"),
                        c=DenseOutput(y_addr, n_g, out_b, narrow=narrow, shift=shift, name="Y"),
                        tiling=tiling)
    words, comments = emit.finish()
    program = Program.build(isa, cfg, words, tensors)

    compulsory = conv_compulsory_bytes(shape, in_b, out_b)
    bounds = Bounds(
        io_lower_bound_bytes=compulsory,
        best_tiling_bytes=conv_best_tiling_bytes(lay, cfg, out_b),
        roofline_cycles=roofline_cycles(shape.macs, compulsory, cfg),
        padding_ceiling=shape.macs / issued,
        useful_macs=shape.macs,
        issued_macs=issued,
        bound_kind="compulsory",
    )
    nchw = input_layout == "NCHW"

    def make_inputs(seed: int) -> dict[str, np.ndarray]:
        d = conv_inputs(shape, integer=integer, seed=seed)
        if not nchw:
            return d
        return {name: np.ascontiguousarray(a.transpose(0, 3, 1, 2)) for name, a in d.items()}

    def device_order(inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        x, wt = np.asarray(inputs["X"]), np.asarray(inputs["W"])
        return (x.transpose(0, 2, 3, 1), wt.transpose(0, 2, 3, 1)) if nchw else (x, wt)

    def reference(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        # The device's Y is NHWC; an NCHW user gets it transposed on the host (counted, not compared).
        y = conv2d_reference(*device_order(inputs), stride=shape.stride, pad=shape.pad,
                             acc_dtype=cfg.dtype("acc"))
        return {"Y": requantize(y, shift, relu=False) if narrow else y}

    def to_device(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        x, wt = device_order(inputs)
        return {"X": lay.host_input(x), "W": lay.host_weights(wt)}

    model = {"tiling": list(tiling.key()),
             "cycles": estimate(m_g, n_g, k_g, tiling, cfg, in_bytes=in_b, out_bytes=out_b).cycles,
             "dram_bytes": conv_tiling_traffic(lay, tiling, out_b)}
    trace = ({"op": IM2COL_OP, "layout": lay.kind,
              "reduction": "(r, s, c)" if lay.kind == "direct" else "(s, r, c)",
              "gemm": {"m": m_g, "n": n_g, "k": shape.gemm_k, "k_padded": k_g}}, *sched.steps)
    return Compiled(
        program=program,
        comments=comments,
        workload={"kind": "conv2d", **shape.kwargs(), "p": shape.p, "q": shape.q, "config": cfg.name,
                  "dtype": "int8" if integer else "fp32", "out_dtype": y_dt,
                  "shift": shift if narrow else None, "layout": lay.kind, "input_layout": input_layout,
                  "weight_layout": "KCRS" if nchw else "KRSC", "output_layout": input_layout,
                  "device_layouts": {"X": "NPWRC" if lay.kind == "rowpack" else "NHWC",
                                     "W": "KSRC" if lay.kind == "rowpack" else "KRSC", "Y": "NHWC"},
                  "gemm": {"m": m_g, "n": n_g, "k": shape.gemm_k, "k_padded": k_g}},
        trace=tuple(trace),
        schedule_name=sched.name,
        bounds=bounds,
        host_traffic_bytes=lay.host_traffic_bytes() + _nchw_host_bytes(lay, nchw, out_b),
        make_inputs=make_inputs,
        reference=reference,
        to_device=to_device,
        outputs=("Y",),
        exact=integer,
        compile_seconds=time.perf_counter() - started,
        model=model,
    )


def conv_inputs(shape: ConvShape, *, integer: bool, seed: int) -> dict[str, np.ndarray]:
    """Seeded input (NHWC) and weights (KRSC): int8 over the whole range, or fp32 in [0, 1)."""
    rng = np.random.default_rng(seed)
    x_shape, w_shape = (shape.n, shape.h, shape.w, shape.c), (shape.k, shape.r, shape.s, shape.c)
    if integer:
        return {"X": rng.integers(-128, 128, size=x_shape, dtype=np.int8),
                "W": rng.integers(-128, 128, size=w_shape, dtype=np.int8)}
    # Positive values as in the course's seed program: no cancellation, so rtol=1e-5 is meaningful.
    return {"X": rng.random(x_shape, dtype=np.float32), "W": rng.random(w_shape, dtype=np.float32)}


def _nchw_host_bytes(lay: ConvLayout, nchw: bool, out_bytes: int) -> int:
    """Host bytes to serve an NCHW user beyond the layout's own re-layout (0 for NHWC users).

    ``direct`` transposes X and W to NHWC/KRSC (read + write each); ``rowpack``
    already reads X and W once and writes them re-laid, which absorbs the
    transpose.  Either way Y is transposed back to NCHW (read + write).
    """
    if not nchw:
        return 0
    sh = lay.shape
    y = 2 * sh.gemm_m * sh.gemm_n * out_bytes
    if lay.kind == "rowpack":
        return y
    return 2 * (sh.n * sh.c * sh.h * sh.w + sh.k * sh.c * sh.r * sh.s) * lay.elem + y


def _align(nbytes: int, align: int = 64) -> int:
    return -(-nbytes // align) * align
