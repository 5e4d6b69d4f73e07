"""Planning a network for the accelerator: what runs where, and where every tensor lives in DRAM.

The front end proposes a place for each step; :func:`place` moves to the host
what the lowering cannot take.  :func:`plan` sizes the weights of every
accelerator step and plans the activations by liveness (:mod:`.memory`),
storing a concatenation's inputs as slices of its buffer where that keeps the
peak as low.  :func:`reserve_weights` gives every program's weights and
parameter rows their place in the DRAM image, in step order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from tinynpu.compiler.onnx.ir import (
    HOST,
    NPU,
    AddStep,
    ConcatStep,
    ConvStep,
    GemmStep,
    MaskStep,
    Network,
    NonlinearStep,
    ProductStep,
    SoftmaxStep,
    Step,
)
from tinynpu.compiler.onnx.lower.memory import ALIGN, ChannelSlice, MemoryPlan, plan_memory
from tinynpu.compiler.onnx.lower.programs import ProgramCache, ProgramKey, conv_programs, groups_per_program
from tinynpu.intmath import round_up
from tinynpu.isa import ArchConfig

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.runtime.image import DramImage


def place(net: Network, cfg: ArchConfig) -> None:
    """Move accelerator steps the lowering cannot take to the host, with the reason; a constant mask's
    select into the softmax program after it where that program fits (:func:`fuse_constant_masks`), and a
    per-run mask's (:func:`~.mask_fusion.fuse_runtime_masks`)."""
    from tinynpu.compiler.onnx.lower.mask_fusion import fuse_runtime_masks
    from tinynpu.compiler.onnx.lower.nonlinear import check_fits

    fuse_constant_masks(net, cfg)
    fuse_runtime_masks(net, cfg)
    for i, step in enumerate(net.steps):
        if isinstance(step, (ConvStep, NonlinearStep)) and step.inputs[0] not in net.shapes:
            net.steps[i] = replace(step, where=HOST, reason="input shape unknown")
        elif isinstance(step, NonlinearStep) and step.where == NPU:
            why = check_fits(step, net.shapes[step.inputs[0]], cfg)
            if why:
                net.steps[i] = replace(step, where=HOST, reason=why)


def fuse_constant_masks(net: Network, cfg: ArchConfig) -> None:
    """Each host select of a constant mask (a :class:`MaskStep` whose mask is a constant) and the accelerator's
    masked softmax that alone reads its output become that softmax, applying the mask itself
    (:mod:`.select`), where its program with the mask's rows fits the accumulators; else both stay."""
    from tinynpu.compiler.onnx.lower import select
    from tinynpu.compiler.onnx.lower.nonlinear import check_fits

    readers: dict[str, list[Step]] = {}
    for step in net.steps:
        for name in step.inputs:
            readers.setdefault(name, []).append(step)
    fused: dict[int, Step] = {}
    for step in net.steps:
        shape = net.shapes.get(step.inputs[0]) if step.inputs else None
        sm = readers.get(step.outputs[0], []) if isinstance(step, MaskStep) else []
        if (not isinstance(step, MaskStep) or step.inputs[1] not in net.constants or shape is None
                or len(sm) != 1 or not isinstance(sm[0], SoftmaxStep) or sm[0].where != NPU
                or sm[0].params is None or step.outputs[0] in net.outputs):
            continue
        masked = np.broadcast_to(np.asarray(net.constants[step.inputs[1]]) <= step.floor, shape)
        masked = np.ascontiguousarray(masked).reshape(-1, shape[-1])
        params = replace(sm[0].params, mask=masked[:select.period(masked)])
        inline = replace(sm[0], inputs=(step.inputs[0],), params=params,
                         reason=f"masked softmax on the accelerator, the constant mask {step.inputs[1]!r} applied in "
                                "its program (vmax, vadd of the mask's rows)")
        if not check_fits(inline, shape, cfg):
            fused[id(step)], fused[id(sm[0])] = inline, inline
    net.steps[:] = [fused.get(id(s), s) for s in net.steps if not (isinstance(s, MaskStep) and id(s) in fused)]


def _tensor_bytes(net: Network, name: str) -> int:
    shape = net.shapes.get(name)
    if shape is None:
        return 0
    qp = net.qparams.get(name)
    return int(np.prod(shape)) * (1 if qp is not None else 4)


def _weight_bytes(net: Network, tile: int) -> int:
    """Every accelerator step's weights and parameter rows, as the image lays them out."""
    total = 0
    for step in net.steps:
        if step.where == NPU and isinstance(step, (ConvStep, GemmStep)):
            w = step.weight
            groups = step.group if isinstance(step, ConvStep) else 1
            per = groups_per_program(groups, w.shape[3], tile) if isinstance(step, ConvStep) else 1
            programs, k_part = groups // per, w.shape[0] // groups * per
            # each program's (block-diagonal) weights and its parameter rows (bias, M, S, zero point
            # per column tile), aligned
            total += programs * (round_up(w.nbytes // programs * per, ALIGN)
                                 + round_up(4 * round_up(k_part, tile) * 4, ALIGN))
        elif step.where == NPU and isinstance(step, (AddStep, ProductStep)):  # identity tile, two scale rows an input
            gate = 256 * 4 if isinstance(step, ProductStep) and step.gate is not None else 0  # its table's rows
            total += round_up(tile * tile, ALIGN) + round_up(2 * len(step.inputs) * tile * 4 + gate, ALIGN)
        elif step.where == NPU and isinstance(step, NonlinearStep):  # its b tiles and the parameter rows
            from tinynpu.compiler.onnx.lower.nonlinear import b_rows, parameter_rows, row_shape

            rs = row_shape(step, net.shapes[step.inputs[0]], tile)
            rows = parameter_rows(step, rs).shape[0]
            total += round_up(b_rows(step, rs).nbytes, ALIGN) + round_up(rows * tile * 4, ALIGN)
    return total


def _lifetimes(net: Network) -> dict[str, tuple[int, int]]:
    """Each tensor's first and last step (a network output lives to the end)."""
    lifetimes: dict[str, tuple[int, int]] = {}
    for i, step in enumerate(net.steps):
        for name in step.outputs:
            if name:
                lifetimes[name] = (i, i)
        for name in step.inputs:
            if name in lifetimes:
                lifetimes[name] = (lifetimes[name][0], i)
            elif name in net.inputs:
                lifetimes[name] = (0, i)
    last = len(net.steps) - 1
    for name in net.outputs:
        if name in lifetimes:
            lifetimes[name] = (lifetimes[name][0], last)
    return lifetimes


def plan(net: Network, tile: int) -> MemoryPlan:
    """The DRAM plan: weights, then activations placed by liveness (with channel slices if no worse)."""
    weight_bytes = _weight_bytes(net, tile)
    lifetimes = _lifetimes(net)
    sizes = {name: _tensor_bytes(net, name) for name in lifetimes}
    plain = plan_memory(weight_bytes, sizes, lifetimes)
    slices = _channel_slices(net, tile)
    if not slices:
        return plain
    # a joined buffer lives from its first slice's producer on: kept only if the peak stays as low
    sliced = plan_memory(weight_bytes, sizes, lifetimes, slices)
    return sliced if sliced.activation_peak_bytes <= plain.activation_peak_bytes else plain


def _channel_slices(net: Network, tile: int) -> tuple[ChannelSlice, ...]:
    """The inputs of channel concatenations their producer can store in place in the joined buffer.

    An input qualifies when a conv run by one program (it stores its whole output) writes it and the
    concatenation is all that reads it; the others the host copies in at the concatenation's step.
    """
    producer = {o: s for s in net.steps for o in s.outputs}
    readers: dict[str, int] = {}
    for s in net.steps:
        for i in s.inputs:
            readers[i] = readers.get(i, 0) + 1
    found: list[ChannelSlice] = []
    for step in net.steps:
        out_shape = net.shapes.get(step.outputs[0]) if isinstance(step, ConcatStep) else None
        if not isinstance(step, ConcatStep) or out_shape is None or len(out_shape) != 4 or step.axis not in (1, -3):
            continue
        offset = 0
        for name in step.inputs:
            src, c = producer.get(name), net.shapes[name][1]
            if (isinstance(src, ConvStep) and src.where == NPU and readers[name] == 1
                    and name not in net.outputs and conv_programs(src, tile) == 1):
                found.append(ChannelSlice(name=name, of=step.outputs[0], offset=offset, row_bytes=c,
                                          pitch=out_shape[1]))
            offset += c
    return tuple(found)


def reserve_weights(net: Network, programs: dict[str, tuple[ProgramKey, ...]], cache: ProgramCache,
                    image: DramImage) -> None:
    """Place every layer's weights and parameter rows in the image (each program's, in step order).

    A conv's programs (one per group set) have ``W<i>`` and ``P<i>``; a Gemm's ``B`` and
    ``P``; a residual add's (and a nonlinear step's) identity tile ``I`` and parameter rows ``P``; a matmul between two
    activations has no weights of its own (its operands are staged).
    """
    for step in net.steps:
        if step.where != NPU or not isinstance(step, (ConvStep, GemmStep, AddStep, ProductStep, NonlinearStep)):
            continue
        for i, key in enumerate(programs[step.name]):
            program = cache.programs[key].program
            for reserved, tensor in _weight_tensors(step, i):
                image.reserve((step.name, reserved), program.tensor(tensor).nbytes)


def _weight_tensors(step: ConvStep | GemmStep | AddStep | ProductStep | NonlinearStep,
                    index: int) -> list[tuple[str, str]]:
    """(name in the image, tensor of the program) of the weights of a step's program ``index``."""
    if isinstance(step, (AddStep, ProductStep, NonlinearStep)):
        return [("I", "I"), ("P", "P")]
    if isinstance(step, ConvStep):
        return [(f"W{index}", "W"), (f"P{index}", "P")]
    return [("B", "B"), ("P", "P")]


__all__ = ["place", "plan", "reserve_weights"]
