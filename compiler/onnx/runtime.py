"""Run the network's steps in order: accelerator layers on the simulator (or numpy), host steps in numpy.

The same code runs both ways; only where an accelerator layer's int32
accumulators come from differs (the simulator, or
:mod:`~tinynpu.compiler.onnx.intops`), so the reference is the same integer
network and the comparison is bit for bit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.graph import NPU, Network, Step
from tinynpu.compiler.onnx.image import DramImage
from tinynpu.compiler.onnx.intops import max_pool_int, rescale_sum, sum_pool_int
from tinynpu.compiler.onnx.memory import ChannelSlice
from tinynpu.compiler.onnx.npu import LayerRun, ProgramCache, add_layer, conv_layer, gemm_in_place, gemm_layer


@dataclass
class Execution:
    """Every tensor a run produced, and what each step cost."""

    values: dict[str, np.ndarray]
    runs: dict[str, LayerRun] = field(default_factory=dict)
    host_seconds: dict[str, float] = field(default_factory=dict)


def execute(net: Network, feeds: dict[str, np.ndarray], *, cache: ProgramCache | None,
            image: DramImage | None = None) -> Execution:
    """Run ``net`` on ``feeds`` (float inputs by name); ``cache`` None = the numpy reference.

    With an ``image`` the accelerator layers run in the network's one DRAM image: the host
    writes its steps' outputs (and the network's inputs) to their planned places, the layers
    read and write theirs there, and every step reads its inputs back from the image (a
    host step as well as the host's re-layout for a staged layer operand), so what a step
    sees is what is at the planned address, never a copy the host kept.
    """
    env: dict[str, np.ndarray] = dict(net.constants)
    env.update(feeds)
    ex = Execution(values=env)
    if image is not None:
        image.forget()
        for name, value in feeds.items():
            image.publish(name, value)
    for step in net.steps:
        run = LayerRun()
        t0 = time.perf_counter()
        view = env
        if image is not None:
            image.reset_staging()
            view = env | {name: v for name in step.inputs if name and (v := image.fetch(name)) is not None}
        outs = _run_step(step, view, cache, run, net, image)
        for i, (name, value) in enumerate(zip(step.outputs, outs, strict=False)):
            if name:
                if image is not None and i == 0 and run.output_in_image:
                    image.hold(name, value.shape, value.dtype)
                    value = image.read(name)  # what the program stored at the planned place
                elif image is not None:
                    image.publish(name, value)
                env[name] = value
        if step.where != NPU and not run.output_in_image:  # else the step counted what it moved
            run.host_bytes += sum(int(np.asarray(env[i]).nbytes) for i in step.inputs if i in env) + \
                sum(int(np.asarray(v).nbytes) for v in outs)
        ex.runs[step.name] = run
        ex.host_seconds[step.name] = time.perf_counter() - t0 - run.sim_seconds
    return ex


def reference_step(step: Step, env: dict[str, np.ndarray], net: Network) -> list[np.ndarray]:
    """One step's outputs from the values in ``env``, by the numpy integer reference."""
    return _run_step(step, env, None, LayerRun(), net, None)


def _run_step(step: Step, env: dict[str, np.ndarray], cache: ProgramCache | None, run: LayerRun,
              net: Network, image: DramImage | None) -> list[np.ndarray]:
    a = step.attrs
    if step.kind == "conv":
        y = conv_layer(step, env[step.inputs[0]], cache=cache, run=run, image=image)  # N x P x Q x K int8
        if not run.output_in_image:  # the host lays it back to NCHW; in the image the next layer reads it as is
            run.host_bytes += 2 * y.nbytes
        return [np.ascontiguousarray(y.transpose(0, 3, 1, 2))]
    if step.kind == "gemm":
        x = env[step.inputs[0]]
        if a["trans_a"]:  # Gemm's A arrives K x M: the host transposes it (a staged operand, counted)
            x = np.ascontiguousarray(x.T)
            run.host_bytes += 2 * x.nbytes
        x2 = x.reshape(-1, x.shape[-1])
        a_in, c_in = gemm_in_place(step, x.shape)
        names = (step.name, step.inputs[0] if a_in else "", step.outputs[0] if c_in else "")
        y = gemm_layer(x2, a["weight"], a["epilogue"], cache=cache, run=run, image=image, names=names)
        return [y.reshape(*x.shape[:-1], y.shape[-1])]
    if step.kind == "matmul":
        x, w = env[step.inputs[0]], env[step.inputs[1]]
        batch = np.broadcast_shapes(x.shape[:-2], w.shape[:-2])
        xb = np.broadcast_to(x, (*batch, *x.shape[-2:])).reshape(-1, *x.shape[-2:])
        wb = np.broadcast_to(w, (*batch, *w.shape[-2:])).reshape(-1, *w.shape[-2:])
        y = np.stack([gemm_layer(xb[i], np.ascontiguousarray(wb[i].T), a["epilogue"], cache=cache, run=run,
                                 image=image) for i in range(xb.shape[0])])
        run.host_bytes += 2 * wb.nbytes  # B transposed to N x K on the host
        return [y.reshape(*batch, *y.shape[-2:])]
    if step.kind == "add" and step.where == NPU:
        return [add_layer(step, [env[name] for name in step.inputs], cache=cache, run=run, image=image)]
    if step.kind == "add":
        terms = [(env[name].astype(np.int64) - zp, scale) for name, scale, zp in a["terms"]]
        return [rescale_sum(terms, zero_point=a["zero_point"], lo=a["lo"], hi=a["hi"])]
    if step.kind == "concat":
        y = np.concatenate([env[name] for name in step.inputs], axis=a["axis"])
        if image is not None and any(image.slice_of(name) for name in step.inputs):
            _join_in_place(step, env, image, run)
        return [y]
    if step.kind == "move":  # the ONNX operator, fed the int8 values in place of their dequantized copy
        node = a["node"]
        return _run_onnx(step, {node.input[0]: env[step.inputs[0]]} | {i: env[i] for i in node.input[1:] if i},
                         names=node.input)
    if step.kind == "maxpool":
        return [max_pool_int(env[step.inputs[0]], a["kernel"], a["strides"], a["pads"], a["ceil_mode"])]
    if step.kind == "avgpool":
        x = env[step.inputs[0]].astype(np.int64) - a["input_zero_point"]  # padding is the real 0
        sums, counts = sum_pool_int(x, a["kernel"], a["strides"], a["pads"], a["ceil_mode"],
                                    a["count_include_pad"])
        y = np.empty(sums.shape, dtype=np.int8)
        for count in np.unique(counts):  # one rescale per window size (several only where padded)
            at = counts == count
            y[:, :, at] = rescale_sum([(sums[:, :, at], a["input_scale"] / (a["scale"] * count))],
                                      zero_point=a["zero_point"],
                                      lo=-128, hi=127)
        return [y]
    return _run_onnx(step, env)


def _join_in_place(step: Step, env: dict[str, np.ndarray], image: DramImage, run: LayerRun) -> None:
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


def _run_onnx(step: Step, env: dict[str, np.ndarray], names: Any = None) -> list[np.ndarray]:
    """The ONNX operator itself (onnx.reference, numpy), on the values it names (``names``: the
    node's own input names, where the step's differ)."""
    feeds = {i: env[i] for i in (step.inputs if names is None else names) if i}
    ev = step.attrs.get("evaluator")
    if ev is None:
        ev = _evaluator(step.attrs["node"], step.attrs["opset"], feeds)
        step.attrs["evaluator"] = ev
    return [np.asarray(o) for o in ev.run(None, feeds)]


def _evaluator(node: Any, opset: int, feeds: dict[str, np.ndarray]) -> Any:
    """onnx.reference for one node; a function op (Gelu) is expanded in a one-node model with typed inputs."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    try:
        return ReferenceEvaluator(node, opsets={"": opset})
    except Exception:  # RuntimeContextError: the function body depends on the input types
        inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                  for name, a in feeds.items()]
        outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
        model = helper.make_model(helper.make_graph([node], "host_step", inputs, outputs),
                                  opset_imports=[helper.make_opsetid("", opset)])
        return ReferenceEvaluator(model)


__all__ = ["Execution", "execute", "reference_step"]
