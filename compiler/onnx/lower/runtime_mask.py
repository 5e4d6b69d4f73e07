"""A per-run attention mask applied inside the masked softmax's program, as a constant mask is (:mod:`.select`).

BERT's ``attention_mask`` input and a decoder's padding mask reach the scores as
``Where(cond, 0, -big)`` computed from a network input: unlike a constant mask, its rows
are not known when the program is built.  So the run writes them into DRAM, and the
softmax program reads them there, each tile-row its own:

- **One byte per position, on the host** (:class:`~tinynpu.compiler.onnx.ir.MaskCodesStep`):
  -128 where masked, 0 where kept, over the mask's own shape with every axis it does not
  vary on kept at 1 (:func:`.mask_fusion.codes_shape`).  BERT's mask, ``[1, 1, S, T]`` after the export's
  ``And`` with an all-true constant, varies only along the keys: ``T`` bytes, written once
  per run whatever the number of layers and heads.  It is the conversion of a network input
  into the form the accelerator reads, as quantizing an input is; it replaces the ``Where``
  that made the float mask (it reads that ``Where``'s condition) and every layer's host select.
- **The broadcast by addressing.**  Score row ``r`` (of ``[..., rows, keys]`` flattened over
  the leading axes) reads the codes' row at :meth:`RuntimeMask.row_offsets`; consecutive rows
  whose offsets step by one stride (0 for a mask broadcast over query rows and heads) are one
  strided DMA load into the ``a`` rows the tile-row's scores came through.
- **The add by the MAC array.**  After ``vmax`` with -127 (as for a constant mask), one
  ``tmm`` of those code rows by ``2 I`` (the second tile of ``b``) adds ``2 * -128 = MASK_ADD``
  where masked and 0 where kept, exactly what the constant mask's ``vadd`` adds; the first
  ``vlut`` then sends every masked entry to ``MASKED_CODE``.  The bytes stay int8 (no int32
  rows of ``MASK_ADD``: four times the traffic), and the ALU does no more than for a
  constant mask.

So the program's result is the host select's and the masked softmax's, bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tinynpu.compiler.onnx.lower.select import KEPT_FLOOR, MASK_ADD

if TYPE_CHECKING:  # the IR imports this module (through softmax's parameters): its classes are imported late
    from tinynpu.compiler.emitter import Emitter
    from tinynpu.compiler.onnx.ir import MaskCodesStep
    from tinynpu.compiler.onnx.lower.rowwise import RowShape, TileRow


#: A masked position's code byte, and the weight the ``b`` tile gives it: their product is ``MASK_ADD``.
MASKED_BYTE = -128
CODE_WEIGHT = MASK_ADD // MASKED_BYTE
assert MASKED_BYTE * CODE_WEIGHT == MASK_ADD and 0 < CODE_WEIGHT <= 127  # an int8 b entry  # noqa: S101


@dataclass(frozen=True)
class RuntimeMask:
    """Where a per-run mask's codes are for each score row.

    Attributes:
        scores: The scores' shape, ``[..., rows, keys]``.
        codes: The codes' shape, the scores' rank: each axis 1 (the mask is the same along it) or the scores';
            the last axis is always the keys.
    """

    scores: tuple[int, ...]
    codes: tuple[int, ...]

    @property
    def rows(self) -> int:
        """Rows of the codes tensor as the program reads it (``[rows, keys]``)."""
        return math.prod(self.codes[:-1])

    def row_offsets(self) -> np.ndarray:
        """The byte offset in the codes of each score row's mask row (one per row of the flattened scores)."""
        lead = self.scores[:-1]
        if not lead:
            return np.zeros(1, dtype=np.int64)
        strides = [math.prod(self.codes[a + 1:]) if self.codes[a] > 1 else 0 for a in range(len(lead))]
        index = np.indices(lead).reshape(len(lead), -1)
        return (np.asarray(strides, dtype=np.int64)[:, None] * index).sum(axis=0)


def runs(offsets: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Consecutive rows whose offsets step by one stride (>= 0): ``(first row, rows, offset, stride)`` each,
    one strided DMA load apiece."""
    out: list[tuple[int, int, int, int]] = []
    i = 0
    while i < len(offsets):
        stride = int(offsets[i + 1] - offsets[i]) if i + 1 < len(offsets) else 0
        stride = max(stride, 0)
        j = i + 1
        while j < len(offsets) and int(offsets[j] - offsets[j - 1]) == stride:
            j += 1
        if j == i + 1:
            stride = 0
        out.append((i, j - i, int(offsets[i]), stride))
        i = j
    return out


def emit_select(emit: Emitter, tr: TileRow, shape: RowShape, offsets: np.ndarray, *, b_row: int) -> None:
    """The tile-row's mask: ``vmax`` with -127, its code rows into the ``a`` rows its scores came through
    (``offsets``: every score row's, :meth:`RuntimeMask.row_offsets`), one ``tmm`` by ``2 I`` (at ``b_row``)."""
    from tinynpu.compiler.onnx.lower.rowwise import alu

    n, t = shape.segments, shape.tile
    alu(emit, "vmax", tr.data, n * t, imm=KEPT_FLOOR)
    mine = offsets[tr.index * t: tr.index * t + tr.rows]
    for j in range(n):
        for first, rows, offset, stride in runs(mine):
            emit.load("a", tr.a + j * t + first, tr.m_addr + offset + j * t, rows=rows, cols=shape.seg_cols(j),
                      stride=stride, comment="the tile-row's mask codes")
    emit.tmm(tr.data, tr.a, b_row, m=n, n=1, k=1, accumulate=True, comment="+ codes @ 2I: MASK_ADD where masked")


def code_tile(tile: int) -> np.ndarray:
    """The ``b`` tile the codes are multiplied by: ``CODE_WEIGHT`` times the identity."""
    return (CODE_WEIGHT * np.eye(tile)).astype(np.int8)


def select_reference(x2: np.ndarray, codes: np.ndarray, rm: RuntimeMask) -> np.ndarray:
    """The program's arithmetic before the first ``vlut`` on ``[rows, keys]`` int scores and the int8 codes
    (``[rm.rows, keys]``): ``max(x, -127) + 2 * code`` (any byte, as the machine computes it)."""
    width = x2.shape[1]
    full = np.asarray(codes, dtype=np.int64).reshape(-1)[rm.row_offsets()[:, None] + np.arange(width)]
    return np.maximum(x2, KEPT_FLOOR) + CODE_WEIGHT * full


def codes_of(step: MaskCodesStep, value: np.ndarray) -> np.ndarray:
    """The step's int8 codes (``[rows, keys]``) from its input: the float mask, or the ``Where``'s condition."""
    v = np.asarray(value)
    rank = len(step.shape)
    v = v.reshape((1,) * (rank - v.ndim) + v.shape)
    dims: tuple[int, ...] = v.shape
    part = v[tuple(slice(None) if c > 1 or d == 1 else slice(0, 1) for c, d in zip(step.shape, dims, strict=True))]
    if not np.array_equal(np.broadcast_to(part, v.shape), v):  # never: codes_shape found where it varies
        raise RuntimeError(f"step {step.name!r}: the mask varies along an axis its codes {step.shape} hold once")
    if step.branches is not None:
        masked = np.where(part.astype(bool), step.branches[0] <= step.floor, step.branches[1] <= step.floor)
    else:
        masked = part <= step.floor
    codes = np.where(np.broadcast_to(masked, step.shape), np.int8(MASKED_BYTE), np.int8(0))
    return np.ascontiguousarray(codes.astype(np.int8).reshape(-1, step.shape[-1]))


__all__ = ["CODE_WEIGHT", "MASKED_BYTE", "RuntimeMask", "code_tile", "codes_of", "emit_select", "runs",
           "select_reference"]
