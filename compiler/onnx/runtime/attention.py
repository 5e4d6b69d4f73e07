"""Attention's matmuls between two activations, one program per batch entry (head), their operands read
through their views.

An operand (or the output) with an :class:`~tinynpu.compiler.onnx.ir.OperandView` is a layout move of
a tensor in the DRAM image (the head split and merge,
:mod:`~tinynpu.compiler.onnx.frontend.heads`).  For each head the block the program reads (A: M x K;
B: N x K, the tmm's layout; C: M x N written) is looked up in the image: where it is rows of contiguous
bytes a fixed pitch apart, the program is relocated onto them (the DMA's row stride does the move:
:func:`~tinynpu.compiler.onnx.runtime.image.relocate`); where it is not (a 4-D tensor, which the image
holds NHWC; B of ``P @ V``, whose rows would be V's columns; a constant), the host gathers the block into
the staging area, as it always did for these operands, and that copy is counted.  Without an image,
the operands are the views' gathers and the numpy reference or a fresh machine computes the same.
"""

from __future__ import annotations

import numpy as np

from tinynpu.compiler.epilogue import Epilogue as NpuEpilogue
from tinynpu.compiler.onnx.ir import MatmulStep, OperandView
from tinynpu.compiler.onnx.lower.programs import MatmulProgram, matmul_program
from tinynpu.compiler.onnx.runtime.image import DramImage, image_layout
from tinynpu.compiler.onnx.runtime.layers import Accelerator, LayerRun, _simulate, gemm_layer

#: (address of the block's first byte, bytes between its rows or None when they are back to back)
Place = tuple[int, int | None]


def operand(view: OperandView | None, value: np.ndarray) -> np.ndarray:
    """The operand a view reads from ``value`` (its tensor), or ``value`` itself without a view."""
    if view is None:
        return value
    return np.asarray(value).reshape(-1)[view.index]


def matmul_layer(step: MatmulStep, env: dict[str, np.ndarray], npu: Accelerator | None,
                 run: LayerRun) -> np.ndarray:
    """The step's int8 output, as its output tensor holds it (through the output's view, if any)."""
    va, vb, vc = step.views
    x, w = operand(va, env[step.inputs[0]]), operand(vb, env[step.inputs[1]])
    batch = np.broadcast_shapes(x.shape[:-2], w.shape[:-2])
    xb = np.broadcast_to(x, (*batch, *x.shape[-2:])).reshape(-1, *x.shape[-2:])
    wb = np.broadcast_to(w, (*batch, *w.shape[-2:])).reshape(-1, *w.shape[-2:])
    m, k, n = xb.shape[1], xb.shape[2], wb.shape[-1]
    if npu is None:
        y = np.stack([gemm_layer(xb[i], np.ascontiguousarray(wb[i].T), step.epilogue, npu=None, run=run)
                      for i in range(xb.shape[0])])
    else:
        def compiled() -> MatmulProgram:
            return matmul_program(npu.cache, step.epilogue, m, n, k)

        # the step's own epilogue and shapes: the same program on every run of the image
        prog = (npu.image.derive((step.name, "matmul program", m, n, k), compiled, step.epilogue) if npu.image
                else compiled())
        if npu.image is not None and (prog.n, prog.k) == (n, k) and any(step.views):
            y = _in_image(step, env, npu, npu.image, prog, (batch, m, n, k), xb, wb, run)
        else:  # zero rows and columns up to the compiled shape (exact: zero points 0), every operand staged
            xp = np.pad(xb, ((0, 0), (0, 0), (0, prog.k - k)))
            wp = np.pad(wb, ((0, 0), (0, prog.k - k), (0, prog.n - n)))
            y = np.stack([gemm_layer(xp[i], np.ascontiguousarray(wp[i].T), prog.epilogue, npu=npu, run=run,
                                     owner=(step.name, m, n, k)) for i in range(xp.shape[0])])[..., :n]
            run.host_bytes += 2 * wp.nbytes  # B transposed to N x K on the host
    y = np.ascontiguousarray(y).reshape(*batch, m, n)
    if vc is None:
        return y
    out = np.empty(int(np.prod(vc.tensor_shape)), dtype=y.dtype)
    out[vc.index.reshape(-1)] = np.broadcast_to(y, vc.shape).reshape(-1)
    return out.reshape(vc.tensor_shape)


def _in_image(step: MatmulStep, env: dict[str, np.ndarray], npu: Accelerator, image: DramImage,
              prog: MatmulProgram, dims: tuple[tuple[int, ...], int, int, int], xb: np.ndarray, wb: np.ndarray,
              run: LayerRun) -> np.ndarray:
    """Each head's program (``prog``, unpadded) in the image, every operand with a view read (written) in
    place where it can be."""
    batch, m, n, k = dims
    va, vb, vc = step.views
    blocks = {"A": _blocks(image, env, step, "A", (*batch, m, k)),
              "B": _blocks(image, env, step, "B", (*batch, k, n)),
              "C": _blocks(image, env, step, "C", (*batch, m, n))}

    def epilogue() -> tuple[NpuEpilogue, np.ndarray]:
        npu_epi = prog.epilogue.on_accelerator()
        return npu_epi, npu_epi.param_table(image.cfg.tile)

    npu_epi, table = image.derive((step.name, "matmul", m, n, k), epilogue, prog.epilogue)  # the same every run
    key, comp = prog.key, prog.compiled
    in_place: dict[str, list[bool]] = {name: [] for name in blocks}
    ys = []
    for i in range(xb.shape[0]):
        bases: dict[str, int] = {}
        pitches: dict[str, int] = {}
        staged: dict[str, np.ndarray] = {"P": table}
        taken: list[tuple[int, int]] = []
        for name, value in (("A", xb[i]), ("B", wb[i].T), ("C", None)):
            place = blocks[name][i]
            if place is not None:
                # a program's manifest holds each tensor as its own span of bytes: Q and K read from one fused
                # projection's output would overlap there, so the second is staged (its B copy, as before)
                span = (place[0], place[0] + comp.program.tensor(name).nbytes)
                place = None if any(lo < span[1] and span[0] < hi for lo, hi in taken) else place
            in_place[name].append(place is not None)
            if place is not None:
                taken.append(span)
                bases[name] = place[0]
                if place[1] is not None:
                    pitches[name] = place[1]
            elif value is not None:
                staged[name] = np.ascontiguousarray(value)
                run.host_bytes += 2 * value.nbytes  # the host's gather (B: and transpose) into the staging area
        ys.append(_simulate(npu, comp, staged, "C", npu_epi, run, key=(*key, step.name), bases=bases,
                            pitches=pitches))
    run.output_in_image = all(in_place["C"])
    run.note = _note(step, [in_place[name] for name in ("A", "B", "C")])
    return np.stack(ys)


def _blocks(image: DramImage, env: dict[str, np.ndarray], step: MatmulStep, which: str,
            shape: tuple[int, ...]) -> list[Place | None]:
    """Where each head's block of operand ``which`` (A, B or C, the output) of ``step`` is: rows ``pitch``
    bytes apart in its tensor's place in the image; None for a head whose block is not, and for every head
    without a view or when the tensor has no plain place there."""
    at = "ABC".index(which)
    tensor, view = (*step.inputs, *step.outputs)[at], step.views[at]
    heads = int(np.prod(shape[:-2]))
    if view is None or image.slice_of(tensor) is not None or tensor in image.aliases:
        return [None] * heads
    if which != "C" and (tensor not in image.held or np.asarray(env[tensor]).dtype != np.int8):
        return [None] * heads  # a constant or a tensor the image does not hold: the host stages it
    # the rest depends on the plan and the view alone: worked out on the first run only
    return image.derive((step.name, "blocks", which, shape),
                        lambda: _places(image, tensor, view, shape, transpose=which == "B"))


def _places(image: DramImage, tensor: str, view: OperandView, shape: tuple[int, ...], *,
            transpose: bool) -> list[Place | None]:
    """:func:`_blocks` of a viewed operand the image holds in a plain place."""
    heads = int(np.prod(shape[:-2]))
    size = int(np.prod(view.tensor_shape))  # int8: the moves of a view are on int8 values at one scale
    base = image.address(tensor, size)
    if base is None:
        return [None] * heads
    laid = image_layout(np.arange(size, dtype=np.int64).reshape(view.tensor_shape)).reshape(-1)
    at = np.empty(size, dtype=np.int64)
    at[laid] = np.arange(size, dtype=np.int64)  # the image byte of each element of the tensor
    offsets = at[np.broadcast_to(view.index, shape).reshape(-1, *shape[-2:])]
    return [_rows(o.T if transpose else o, base) for o in offsets]


def _rows(offsets: np.ndarray, base: int) -> Place | None:
    """``offsets`` (rows x cols of image bytes) as (first byte, pitch) when each row is contiguous and the
    rows are one pitch apart, at least a row wide; else None."""
    rows, cols = offsets.shape
    first = offsets[:, :1]
    if not np.array_equal(offsets, first + np.arange(cols)):
        return None
    pitch = int(first[1, 0] - first[0, 0]) if rows > 1 else cols
    if pitch < cols or not np.array_equal(first[:, 0], first[0, 0] + pitch * np.arange(rows)):
        return None
    return base + int(first[0, 0]), (None if pitch == cols else pitch)


def _note(step: MatmulStep, in_place: list[list[bool]]) -> str:
    """What the report says of where the viewed operands came from (went to)."""
    parts = []
    for label, view, heads in zip(("A", "B", "output"), step.views, in_place, strict=True):
        if view is None:
            continue
        how = "strided DMA" if all(heads) else "host-staged" if not any(heads) else "strided DMA for some heads"
        parts.append(f"{label} {'into' if label == 'output' else 'from'} {view.tensor} ({how}, "
                     f"replacing {', '.join(view.moves)})")
    return "head split/merge folded: " + "; ".join(parts)


__all__ = ["matmul_layer", "operand"]
