"""A per-run attention mask applied inside the masked softmax's program, as a constant mask is (:mod:`.select`).

BERT's ``attention_mask`` input and a decoder's padding mask reach the scores as
``Where(cond, 0, -big)`` computed from a network input: unlike a constant mask, its rows
are not known when the program is built.  So the run writes them into DRAM, and the
softmax program reads them there, each tile-row its own:

- **One byte per position, on the host** (:class:`~tinynpu.compiler.onnx.ir.MaskCodesStep`):
  -128 where masked, 0 where kept, over the mask's own shape with every axis it does not
  vary on kept at 1 (:func:`codes_shape`).  BERT's mask, ``[1, 1, S, T]`` after the export's
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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from tinynpu.compiler.onnx.lower.select import KEPT_FLOOR, MASK_ADD
from tinynpu.errors import OnnxError

if TYPE_CHECKING:  # the IR imports this module (through softmax's parameters): its classes are imported late
    from tinynpu.compiler.emitter import Emitter
    from tinynpu.compiler.onnx.ir import MaskCodesStep, Network, Step
    from tinynpu.compiler.onnx.lower.rowwise import RowShape, TileRow
    from tinynpu.isa import ArchConfig

#: A masked position's code byte, and the weight the ``b`` tile gives it: their product is ``MASK_ADD``.
MASKED_BYTE = -128
CODE_WEIGHT = MASK_ADD // MASKED_BYTE
#: Operators whose output varies along an axis only where one of their inputs does (broadcasting).
_ELEMENTWISE = frozenset({"Cast", "Not", "And", "Or", "Xor", "Where", "Equal", "Less", "Greater", "LessOrEqual",
                          "GreaterOrEqual", "Add", "Sub", "Mul", "Div", "Neg", "Identity"})

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


def codes_shape(net: Network, mask: str, scores: tuple[int, ...]) -> tuple[int, ...]:
    """The mask's shape right-aligned to the scores', 1 along every leading axis it does not vary on (the keys'
    axis always the scores'): found through its producers (an elementwise operator varies where an input does,
    a constant where its values differ, anything else along every axis longer than 1).

    Raises:
        OnnxError: the mask's shape does not broadcast to the scores (the message names the mask).
    """
    rank = len(scores)
    shape = net.shapes.get(mask)
    lead = rank - len(shape) if shape is not None else -1
    if shape is None or lead < 0 or any(d not in (1, scores[lead + a]) for a, d in enumerate(shape)):
        raise OnnxError(f"the attention mask {mask!r} has the shape {shape!r}, which does not broadcast to the "
                        f"scores {scores!r} it is added to, so no program can read one mask row per score row: "
                        "the model's shapes disagree (re-export it, or give the mask the scores' shape).")
    axes = _varying(net, mask, rank, {}, _producers(net))
    return tuple(scores[a] if a in axes or a == rank - 1 else 1 for a in range(rank))


def _producers(net: Network) -> dict[str, Step]:
    return {o: s for s in net.steps for o in s.outputs}


def _varying(net: Network, name: str, rank: int, memo: dict[str, frozenset[int]],
             producers: dict[str, Step]) -> frozenset[int]:
    """The axes (of ``rank``, right-aligned) along which tensor ``name`` may take different values."""
    if name in memo:
        return memo[name]
    if name in net.constants:
        v = np.asarray(net.constants[name])
        v = v.reshape((1,) * (rank - v.ndim) + v.shape) if v.ndim <= rank else v
        found = frozenset(a for a in range(v.ndim) if v.shape[a] > 1
                          and not np.array_equal(v, np.broadcast_to(np.take(v, [0], axis=a), v.shape)))
    else:
        from tinynpu.compiler.onnx.ir import OnnxStep

        step = producers.get(name)
        if isinstance(step, OnnxStep) and step.op in _ELEMENTWISE:
            found = frozenset().union(*(_varying(net, i, rank, memo, producers) for i in step.inputs if i))
        else:
            shape = net.shapes.get(name) or ()
            lead = rank - len(shape)
            found = frozenset(lead + a for a, d in enumerate(shape) if d != 1) if lead >= 0 else frozenset(range(rank))
    memo[name] = found
    return found


def fuse_runtime_masks(net: Network, cfg: ArchConfig) -> None:
    """Each host select of a per-run mask and the accelerator's masked softmax that alone reads its output become
    that softmax reading the mask's codes (one :class:`MaskCodesStep` per mask, where the first select was),
    where the program fits; else both stay, the select saying why."""
    from tinynpu.compiler.onnx.ir import NPU, MaskCodesStep, MaskStep, SoftmaxStep
    from tinynpu.compiler.onnx.lower.nonlinear import check_fits

    readers: dict[str, list[Step]] = {}
    for step in net.steps:
        for name in step.inputs:
            readers.setdefault(name, []).append(step)
    swap: dict[int, Step | None] = {}
    codes_steps: dict[tuple[str, tuple[int, ...]], MaskCodesStep] = {}
    for step in net.steps:
        sm = readers.get(step.outputs[0], []) if isinstance(step, MaskStep) else []
        if (not isinstance(step, MaskStep) or step.inputs[1] in net.constants or len(sm) != 1
                or not isinstance(sm[0], SoftmaxStep) or sm[0].where != NPU or sm[0].params is None
                or step.outputs[0] in net.outputs or step.inputs[0] not in net.shapes):
            continue
        scores, mask = tuple(net.shapes[step.inputs[0]]), step.inputs[1]
        try:
            rm = RuntimeMask(scores, codes_shape(net, mask, scores))
        except OnnxError as exc:
            raise OnnxError(f"Add {step.name!r} (the mask before Softmax {sm[0].name!r}): {exc}") from None
        codes = codes_steps.get((mask, rm.codes))
        first = codes is None
        if codes is None:
            name = f"{mask}_codes" + (f"_{len(codes_steps)}" if any(m == mask for m, _ in codes_steps) else "")
            codes = MaskCodesStep(name=name, op="MaskCodes", where=step.where, inputs=(mask,), outputs=(name,),
                                  floor=step.floor, shape=rm.codes,
                                  reason="the per-run mask as one int8 code per position the program reads "
                                         "(-128 masked, 0 kept), broadcast over rows and heads by its addressing")
        params = replace(sm[0].params, runtime=rm)
        inline = replace(sm[0], inputs=(step.inputs[0], codes.outputs[0]), params=params,
                         reason=f"masked softmax on the accelerator, the per-run mask {mask!r} applied in its program "
                                "(vmax, its codes by strided DMA, tmm by 2I)")
        why = check_fits(inline, scores, cfg)
        if why:
            swap[id(step)] = replace(step, reason=f"{step.reason}; not in the softmax program: {why}")
            continue
        if first:  # the first select of this mask gives way to its codes, the others go
            codes_steps[(mask, rm.codes)] = codes
            net.shapes[codes.outputs[0]] = (rm.rows, scores[-1])
        swap[id(step)] = codes if first else None
        swap[id(sm[0])] = inline
    net.steps[:] = [s for s in (swap.get(id(s), s) for s in net.steps) if s is not None]
    for codes in codes_steps.values():
        _read_the_condition(net, codes)


def _read_the_condition(net: Network, codes: MaskCodesStep) -> None:
    """When the mask is ``Where(cond, a, b)`` of two scalar constants that only the codes read, the codes read
    ``cond`` and the ``Where`` goes: its float mask is never made."""
    from tinynpu.compiler.onnx.ir import OnnxStep

    where = next((s for s in net.steps if codes.inputs[0] in s.outputs), None)
    if (not isinstance(where, OnnxStep) or where.op != "Where" or len(where.inputs) != 3
            or codes.inputs[0] in net.outputs
            or any(codes.inputs[0] in s.inputs for s in net.steps if s is not codes)):
        return
    branches = [np.asarray(net.constants[i]) for i in where.inputs[1:] if i in net.constants]
    if len(branches) != 2 or any(v.size != 1 for v in branches):
        return
    a, b = (float(v.reshape(-1)[0]) for v in branches)
    lean = replace(codes, inputs=(where.inputs[0],), branches=(a, b))
    net.steps[:] = [lean if s is codes else s for s in net.steps if s is not where]


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


__all__ = ["CODE_WEIGHT", "MASKED_BYTE", "RuntimeMask", "code_tile", "codes_of", "codes_shape", "emit_select",
           "fuse_runtime_masks", "runs", "select_reference"]
