"""Host steps: the integer operators (residual add, pools, concatenation) in numpy, and ONNX operators
through ``onnx.reference``.

Each runs on the values the runtime gives it (read back from the DRAM image
on a run on the simulator) and returns its outputs; a concatenation whose
inputs their convs stored in place is joined in the image.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinynpu.compiler.onnx.intops import max_pool_int, rescale_sum, sum_pool_int
from tinynpu.compiler.onnx.ir import (
    AddStep,
    AvgPoolStep,
    ConcatStep,
    MaskStep,
    MaxPoolStep,
    MoveStep,
    Network,
    OnnxStep,
)
from tinynpu.compiler.onnx.lower.memory import ChannelSlice
from tinynpu.compiler.onnx.runtime.image import DramImage
from tinynpu.compiler.onnx.runtime.layers import LayerRun


def fixed_point_add(step: AddStep, env: dict[str, np.ndarray]) -> np.ndarray:
    """A residual add on the host: each input rescaled in fixed point, summed, rounded once."""
    terms = [(env[t.name].astype(np.int64) - t.zero_point, t.ratio) for t in step.terms]
    return rescale_sum(terms, zero_point=step.zero_point, lo=step.lo, hi=step.hi)


def mask_select(step: MaskStep, env: dict[str, np.ndarray]) -> np.ndarray:
    """Scores with their mask applied as a select: kept ones clamped to [-127, 127], masked ones -128."""
    x = np.asarray(env[step.inputs[0]])
    masked = np.broadcast_to(np.asarray(env[step.inputs[1]]) <= step.floor, x.shape)  # the front end checked it
    return np.where(masked, np.int8(-128), np.maximum(x, -127)).astype(np.int8)


def max_pool(step: MaxPoolStep, env: dict[str, np.ndarray]) -> np.ndarray:
    w = step.window
    return max_pool_int(env[step.inputs[0]], w.kernel, w.strides, w.pads, w.ceil_mode)


def average_pool(step: AvgPoolStep, env: dict[str, np.ndarray]) -> np.ndarray:
    """Window sums, then one rescale per window size (several only where a window reaches into the pads)."""
    w = step.window
    x = env[step.inputs[0]].astype(np.int64) - step.input_zero_point  # padding is the real 0
    sums, counts = sum_pool_int(x, w.kernel, w.strides, w.pads, w.ceil_mode, step.count_include_pad)
    y = np.empty(sums.shape, dtype=np.int8)
    for count in np.unique(counts):
        at = counts == count
        y[:, :, at] = rescale_sum([(sums[:, :, at], step.input_scale / (step.scale * count))],
                                  zero_point=step.zero_point, lo=-128, hi=127)
    return y


def concat(step: ConcatStep, env: dict[str, np.ndarray], image: DramImage | None, run: LayerRun) -> np.ndarray:
    y = np.concatenate([env[name] for name in step.inputs], axis=step.axis)
    if image is not None and step.outputs[0] in image.aliases:
        # an aliased output (a KV cache): the inputs aliased to their rows of it are there already (the past
        # resident, the new rows stored after it); the host copies in only the others
        start = 0
        copied = []
        for name in step.inputs:
            if name not in image.aliases:
                image.write_alias_part(step.outputs[0], env[name], step.axis, start)
                run.host_bytes += 2 * env[name].nbytes
                copied.append(name)
            start += env[name].shape[step.axis]
        run.output_in_image = True
        run.note = ("joined in place: " + (f"the host copied in {', '.join(copied)}; the other inputs" if copied
                                           else "every input") + " already its rows of the output in DRAM")
    elif image is not None and any(image.slice_of(name) for name in step.inputs):
        _join_in_place(step, env, image, run)
    return y


def _join_in_place(step: ConcatStep, env: dict[str, np.ndarray], image: DramImage, run: LayerRun) -> None:
    """A channel concatenation whose buffer some producers stored their slices in: the host copies
    in the other inputs (their bytes are the step's traffic), and the joined tensor is read back."""
    pitch = sum(env[name].shape[1] for name in step.inputs)
    offset = copied = 0
    for name in step.inputs:
        c = env[name].shape[1]
        if image.slice_of(name) is None:
            image.write_slice(ChannelSlice(name, step.outputs[0], offset, c, pitch), env[name])
            run.host_bytes += 2 * env[name].nbytes
            copied += 1
        offset += c
    run.output_in_image = True
    run.note = (f"joined in place: {len(step.inputs) - copied} of its {len(step.inputs)} inputs stored into "
                "their channels by their convs" + (f", {copied} copied in by the host" if copied else ""))


def move(step: MoveStep, env: dict[str, np.ndarray], net: Network) -> list[np.ndarray]:
    """The ONNX operator, fed the int8 values in place of their dequantized copy."""
    node = step.node
    feeds = {node.input[0]: env[step.inputs[0]]} | {i: env[i] for i in node.input[1:] if i}
    return _evaluate(step, feeds, net)


def onnx_operator(step: OnnxStep, env: dict[str, np.ndarray], net: Network) -> list[np.ndarray]:
    """The ONNX operator itself (onnx.reference, numpy), on the values it names."""
    return _evaluate(step, {i: env[i] for i in step.inputs if i}, net)


def _evaluate(step: OnnxStep | MoveStep, feeds: dict[str, np.ndarray], net: Network) -> list[np.ndarray]:
    """The node on ``feeds``: its cached onnx.reference evaluator, or (where that one fails on these
    values, e.g. GatherElements with indices smaller than the data) onnxruntime, then tinynpu's numpy."""
    from tinynpu.compiler.onnx.frontend.evaluate import evaluate_node, reference_evaluator

    ev: Any = net.evaluators.get(step.name)
    if ev is None:
        try:
            ev = reference_evaluator(step.node, step.opset, feeds)
        except Exception:
            ev = _FALLBACK
        net.evaluators[step.name] = ev
    if ev is not _FALLBACK:
        try:
            return [np.asarray(o) for o in ev.run(None, feeds)]
        except Exception:
            net.evaluators[step.name] = _FALLBACK
    return evaluate_node(step.node, step.opset, feeds)


#: Marks a step whose onnx.reference evaluator failed once: it goes to :func:`evaluate_node` directly.
_FALLBACK = object()


__all__ = ["average_pool", "concat", "fixed_point_add", "mask_select", "max_pool", "move", "onnx_operator"]
