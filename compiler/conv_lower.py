"""Lowering a conv onto the GEMM lowering: its operands, its layout and schedule, its tiling.

The conv is the GEMM of its implicit im2col (M = N*P*Q output pixels, N = K
output channels, the reduction padded as the layout says), lowered by
:func:`tinynpu.compiler.lower.lower_gemm` with :class:`ConvOperand` bringing
its tiles in by strided DMA.  Halo rows are ``zero`` instructions, emitted
before the loads of the same tile: the ISA lets a ``zero`` start only once
the load unit's earlier loads have completed, so a zero behind a load would
wait out the DRAM latency.

A conv's schedule trace starts with its own ``im2col`` step naming the
layout, then the GEMM's steps, so a saved trace replays exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinynpu.compiler.conv_geometry import LAYOUTS, ConvLayout, Dma, choose_layout, rowpack_applies
from tinynpu.compiler.conv_shape import ConvShape
from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.lower import Bias, EpilogueRows, lower_gemm
from tinynpu.compiler.operands import OutputC
from tinynpu.compiler.schedule import Schedule, Tiling
from tinynpu.compiler.search import auto_tiling
from tinynpu.compiler.workload import resolve_schedule
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig

IM2COL_OP = "im2col"  # the conv's own trace step, before the GEMM schedule's steps


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


def resolve_layout_schedule(schedule: str | Schedule, shape: ConvShape, cfg: ArchConfig,
                            layout: str) -> tuple[ConvLayout, Schedule | None]:
    """The layout and the GEMM schedule (None: choose automatically) that ``schedule`` and ``layout`` name.

    ``schedule`` is as for :func:`tinynpu.compiler.workload.resolve_schedule`;
    a trace's ``im2col`` step fixes the layout (and is not part of the GEMM
    schedule); ``layout`` is ``auto`` or one of :data:`LAYOUTS`.

    Raises:
        UsageError: an unknown layout, or one that contradicts the trace's.
    """
    sched = resolve_schedule(schedule, cfg)
    if sched is not None:
        steps = [s for s in sched.steps if s.get("op") == IM2COL_OP]
        if steps:
            kind = steps[-1].get("layout")
            if kind not in LAYOUTS:
                raise UsageError(f"schedule {sched.name!r}: the {IM2COL_OP} step's layout must be one of "
                                 f"{', '.join(LAYOUTS)}, not {kind!r}.")
            if layout not in ("auto", kind):
                raise UsageError(f"schedule {sched.name!r} fixes the im2col layout {kind!r}, but layout "
                                 f"{layout!r} was asked for.")
            layout = kind
            sched = Schedule(sched.name, tuple(s for s in sched.steps if s.get("op") != IM2COL_OP))
    if layout == "auto":
        return choose_layout(shape, cfg), sched
    if layout not in LAYOUTS:
        raise UsageError(f"conv2d: layout must be auto or one of {', '.join(LAYOUTS)}, not {layout!r}.")
    if layout == "rowpack" and not rowpack_applies(shape):
        raise UsageError(f"{shape}: the rowpack layout needs a kernel width dilation of 1 (its S taps adjacent "
                         f"input columns), not {shape.dilations[1]}; use the direct layout.")
    return ConvLayout(shape, layout, cfg.tile, cfg.elem_bytes("a_reg")), sched


def conv_auto_tiling(layout: ConvLayout, cfg: ArchConfig, out_bytes: int, *, bias: int = 0,
                     alu_ops: int = 0) -> Tiling:
    """The ``auto`` tiling of the padded im2col GEMM (:func:`tinynpu.compiler.search.auto_tiling`).

    The GEMM model ranks it: the conv's A moves at most the padded GEMM's
    bytes (halo rows read nothing), so the model's ranking carries over.
    """
    sh = layout.shape
    return auto_tiling(sh.gemm_m, sh.gemm_n, layout.padded_k, cfg, in_bytes=layout.elem, out_bytes=out_bytes,
                       bias=bias, alu_ops=alu_ops).tiling


def lower_conv2d(emit: Emitter, layout: ConvLayout, *, x_addr: int, w_addr: int, out: OutputC,
                 tiling: Tiling, bias: Bias | None = None, epilogue: EpilogueRows | None = None) -> int:
    """Emit the conv ``layout`` (input at ``x_addr``, weights at ``w_addr``, as the layout reads them).

    The output is the ``N*P*Q x K`` (NHWC) GEMM result that ``out`` stores;
    ``bias`` (one accumulator element per output channel) is added before it, or the layer's
    ``epilogue`` runs on it.

    Returns:
        The MACs issued by tmm (whole tile steps), for the padding ceiling.
    """
    sh = layout.shape
    return lower_gemm(emit, m=sh.gemm_m, n=sh.gemm_n, k=layout.padded_k, a=ConvOperand(layout, x_addr, "A"),
                      b=ConvOperand(layout, w_addr, "B"), c=out, tiling=tiling, bias=bias, epilogue=epilogue)


__all__ = ["IM2COL_OP", "ConvOperand", "conv_auto_tiling", "lower_conv2d", "resolve_layout_schedule"]
