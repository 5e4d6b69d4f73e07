"""A nonlinear step's program and integer reference, by kind: one table the lowering and the runtime share.

Each kind (:class:`~tinynpu.compiler.onnx.ir.LutStep`, ``SoftmaxStep``,
``NormStep``) gives the matrix its program works on (:class:`.rowwise.RowShape`:
a softmax or norm reduces each row of the last axis; a table lookup is
elementwise, so it takes the image's bytes of the tensor in rows of eight
segments where the size allows, else pixels by channels), its parameter rows
(data: steps that differ only in them share a program), the instructions of
one tile-row, and the numpy reference the run is compared with bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.ir import LutStep, NonlinearStep, NormStep, RotaryStep, SoftmaxStep
from tinynpu.compiler.onnx.lower import lut, norm, rotary, runtime_mask, select, softmax
from tinynpu.compiler.onnx.lower.rowwise import Body, RowShape, row_compiled
from tinynpu.isa import ArchConfig

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.lower.programs import ProgramCache, ProgramKey


#: Segments per tile-row of a table lookup, most first: eight keep the table copy (ceil(256 / T) rows per
#: vlut) small beside the 8 T rows it looks up, and a tile-row far inside the accumulators.
LUT_SEGMENTS = (8, 4, 2, 1)


def row_shape(step: NonlinearStep, shape: tuple[int, ...], tile: int) -> RowShape:
    """The ``[rows, width]`` matrix the step's program works on."""
    from tinynpu.compiler.onnx.lower.programs import rows_and_channels

    if isinstance(step, LutStep):  # elementwise: any split of the image's bytes into rows will do
        rows, width = rows_and_channels(shape)
        size = rows * width
        k = next((k for k in LUT_SEGMENTS if size % (tile * k) == 0), 0)
        if k:
            rows, width = size // (tile * k), tile * k
    else:
        rows, width = int(np.prod(shape[:-1])), int(shape[-1])
    return RowShape(rows, width, tile)


def in_place(step: NonlinearStep, shape: tuple[int, ...]) -> bool:
    """Whether the program reads and writes the tensor where the image holds it: a table lookup always
    (elementwise), a row operation unless the image holds the tensor NHWC (4-D) and rows are along W."""
    return isinstance(step, LutStep) or len(shape) != 4


def reference(step: NonlinearStep, x: np.ndarray, codes: np.ndarray | None = None) -> np.ndarray:
    """The program's integer arithmetic on int8 ``x`` (the step's input, as the network sees it); ``codes``: a
    softmax's per-run mask (:mod:`.runtime_mask`)."""
    if isinstance(step, LutStep) and step.table is not None:
        return lut.lut_reference(x, step.table)
    if isinstance(step, SoftmaxStep) and step.params is not None:
        return softmax.softmax_reference(x, step.params, codes)
    if isinstance(step, NormStep) and step.params is not None:
        return norm.norm_reference(x, step.params)
    if isinstance(step, RotaryStep) and step.params is not None:
        return rotary.rotary_reference(x, step.params)
    raise RuntimeError(f"step {step.name!r} ({step.kind}) has no integer parameters")  # never: ir checks it


def parameter_rows(step: NonlinearStep, shape: RowShape) -> np.ndarray:
    """The int32 parameter rows the program loads once (its ``P`` tensor)."""
    if isinstance(step, LutStep) and step.table is not None:
        return lut.lut_rows(step.table, shape.tile)
    if isinstance(step, SoftmaxStep) and step.params is not None:
        rows = softmax.softmax_rows(step.params, shape.tile)
        if step.params.mask is not None:  # the constant mask's rows last (lower/select.py)
            rows = np.concatenate([rows, select.mask_rows(step.params.mask, shape)])
        return rows
    if isinstance(step, NormStep) and step.params is not None:
        return norm.norm_rows(step.params, shape)
    if isinstance(step, RotaryStep) and step.params is not None:
        return rotary.rotary_rows(step.params, shape)
    raise RuntimeError(f"step {step.name!r} ({step.kind}) has no integer parameters")


def b_rows(step: NonlinearStep, shape: RowShape) -> np.ndarray:
    """The int8 tiles the program loads into ``b`` (its ``I`` tensor): the identity tile, then a rotary
    embedding's rotation tiles."""
    if isinstance(step, RotaryStep) and step.params is not None:
        return rotary.rotation_tiles(step.params, shape)[0]
    if isinstance(step, SoftmaxStep) and step.params is not None and step.params.runtime is not None:
        return np.concatenate([np.eye(shape.tile, dtype=np.int8), runtime_mask.code_tile(shape.tile)])
    return np.eye(shape.tile, dtype=np.int8)


def codes_shape(step: NonlinearStep) -> tuple[int, int] | None:
    """The ``M`` tensor of the step's program: a softmax's per-run mask codes, ``[rows, keys]``; else None."""
    if isinstance(step, SoftmaxStep) and step.params is not None and step.params.runtime is not None:
        rm = step.params.runtime
        return (rm.rows, rm.codes[-1])
    return None


@dataclass(frozen=True)
class BodyPlan:
    """A kind's tile-row: its instructions, its ``T``-row blocks, what of it the parameter rows do not carry
    (part of the program's key), and the parameter rows loaded once (None: all of them)."""

    body: Body
    blocks: int
    form: tuple[Any, ...]
    resident: int | None = None


def _body(step: NonlinearStep, shape: RowShape, cfg: ArchConfig) -> BodyPlan:
    tile = shape.tile
    if isinstance(step, SoftmaxStep) and step.params is not None:
        sp = step.params
        if sp.mask is None:  # a per-run mask's addressing is part of the program
            rm = sp.runtime
            return BodyPlan(softmax.softmax_body(sp, tile), 2, (bool(sp.zero_point), sp.masked)
                            + ((rm.scores, rm.codes) if rm is not None else ()))
        head = len(softmax.softmax_rows(sp, tile))
        stream = select.streamed(sp.mask, shape, head, cfg.rows("acc"))
        form = (bool(sp.zero_point), sp.masked, select.blocks(sp.mask, tile), stream)  # a mask block per tile-row
        return BodyPlan(softmax.softmax_body(sp, tile, streamed_mask=stream), 2 + shape.segments * stream, form,
                        head if stream else None)
    if isinstance(step, NormStep) and step.params is not None:
        p = step.params
        return BodyPlan(norm.norm_body(p), p.blocks, (p.center, bool(p.zero_point_in), p.sq_shift, bool(p.eps_term),
                                                      p.mul_shift, bool(p.bias.any()), bool(p.offset.any())))
    if isinstance(step, RotaryStep) and step.params is not None:  # the tiles it multiplies by shape the program
        rp = step.params
        resident = rotary.resident_rows(rp, shape, cfg)
        return BodyPlan(rotary.rotary_body(rp, shape, cfg), rotary.body_blocks(rp, shape, cfg),
                        (rotary.rotation_tiles(rp, shape)[1], rotary.table_blocks(rp, tile), resident), resident)
    return BodyPlan(lut.lut_body(), 0, ())


def program_key(cache: ProgramCache, step: NonlinearStep, shape: tuple[int, ...]) -> ProgramKey:
    """The cached program of ``step`` on its input of ``shape`` (compiled the first time)."""
    rs = row_shape(step, shape, cache.cfg.tile)
    bp = _body(step, rs, cache.cfg)
    params = parameter_rows(step, rs)
    key = (step.kind, rs.rows, rs.width, params.shape[0], *bp.form)
    what = f"{step.op} {step.name!r}"
    cache.get(key, lambda: row_compiled(cache.cfg, rs, params, bp.blocks, bp.body,
                                        lambda x, codes=None: reference(step, x.reshape(rs.rows, rs.width), codes),
                                        kind=step.kind, what=what, b_rows=b_rows(step, rs), resident=bp.resident,
                                        codes=codes_shape(step)))
    return key


def check_fits(step: NonlinearStep, shape: tuple[int, ...], cfg: ArchConfig) -> str:
    """Why the step's program cannot be built for ``cfg`` (a one-paragraph message), or ``""``."""
    from tinynpu.compiler.onnx.lower.rowwise import acc_plan, check_b_tiles
    from tinynpu.errors import OnnxError

    rs = row_shape(step, shape, cfg.tile)
    bp = _body(step, rs, cfg)
    what = f"{step.op} {step.name!r}"
    try:
        check_b_tiles(cfg, b_rows(step, rs).shape[0] // cfg.tile, what=what)
        acc_plan(cfg, rs, bp.blocks, parameter_rows(step, rs).shape[0] if bp.resident is None else bp.resident,
                 what=what)
    except OnnxError as exc:
        return str(exc)
    return ""


__all__ = ["BodyPlan", "b_rows", "check_fits", "codes_shape", "in_place", "parameter_rows", "program_key", "reference",
           "row_shape"]
