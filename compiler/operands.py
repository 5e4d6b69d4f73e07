"""The seam between workloads and the GEMM lowering: the operand protocols.

The lowering (:mod:`tinynpu.compiler.lower`) sees every workload as a GEMM
``C[M x N] = A[M x K] @ B[N x K]^T`` and never touches DRAM layouts itself: it
asks an :class:`OperandA` / :class:`OperandB` to bring a block of GEMM rows at
one reduction tile into a scratchpad, and an :class:`OutputC` to write a block
of accumulator rows back, each through the :class:`~tinynpu.compiler.emitter.Emitter`.
Dense matmul uses :class:`DenseOperand` and :class:`DenseOutput`; conv2d
implements the same protocols with implicit im2col (strided DMA plus zero rows
for halos).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tinynpu.compiler.emitter import Emitter


class OperandA(Protocol):
    """How to bring a block of GEMM rows (of A, or of B in its N x K form) into a scratchpad."""

    @property
    def rows_total(self) -> int:  # GEMM rows (M for A, N for B)
        ...

    @property
    def k_total(self) -> int:  # reduction length K
        ...

    def load(self, emit: Emitter, *, scope: str, sp_row: int, row0: int, rows: int, k0: int) -> None:
        """Load GEMM rows ``row0..row0+rows-1``, reduction columns ``k0..k0+tile-1`` (zeros past K)
        into ``scope`` rows ``sp_row..sp_row+rows-1`` with one or more ``load``/``zero`` instructions."""
        ...


OperandB = OperandA


class OutputC(Protocol):
    """How to write a block of accumulator rows back to DRAM."""

    def store(self, emit: Emitter, *, sp_row: int, row0: int, rows: int, col0: int, cols: int) -> None:
        """Store accumulator rows ``sp_row..`` holding output rows ``row0..row0+rows-1``, output columns
        ``col0..col0+cols-1`` (``cols`` <= tile)."""
        ...


@dataclass(frozen=True)
class DenseOperand:
    """A row-major ``rows_total x k_total`` DRAM matrix at ``addr`` (elements of ``elem_bytes``)."""

    addr: int
    rows_total: int
    k_total: int
    elem_bytes: int
    name: str = "A"

    def load(self, emit: Emitter, *, scope: str, sp_row: int, row0: int, rows: int, k0: int) -> None:
        cols = min(emit.cfg.tile, self.k_total - k0)
        stride = self.k_total * self.elem_bytes
        emit.load(scope, sp_row, self.addr + row0 * stride + k0 * self.elem_bytes, rows=rows, cols=cols,
                  stride=stride, comment=f"{self.name}[{row0}:{row0 + rows}, {k0}:{k0 + cols}]")


@dataclass(frozen=True)
class DenseOutput:
    """A row-major ``m x n`` DRAM output at ``addr``; int8 outputs are requantized on store."""

    addr: int
    n: int
    elem_bytes: int
    narrow: bool = False
    shift: int = 0
    relu: bool = False
    name: str = "C"

    def store(self, emit: Emitter, *, sp_row: int, row0: int, rows: int, col0: int, cols: int) -> None:
        stride = self.n * self.elem_bytes
        emit.store(sp_row, self.addr + row0 * stride + col0 * self.elem_bytes, rows=rows, cols=cols,
                   stride=stride, narrow=self.narrow, relu=self.relu, shift=self.shift,
                   comment=f"{self.name}[{row0}:{row0 + rows}, {col0}:{col0 + cols}]")


__all__ = ["DenseOperand", "DenseOutput", "OperandA", "OperandB", "OutputC"]
