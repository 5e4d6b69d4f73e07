"""Where a network's int8 differences from onnxruntime arise: each step on onnxruntime's own inputs.

Differences compound through a deep network, so comparing each layer's output
along the whole run cannot say which step computes differently.  Here every
step is fed onnxruntime's own int8 inputs and its int8 output compared with
onnxruntime's: what differs then is that step's own arithmetic.

onnxruntime's intermediate tensors are read from the graph it actually runs.
Making the QDQ model's quantized tensors graph outputs would change that graph
(an output between two nodes stops their fusion: every DequantizeLinear ->
Conv -> QuantizeLinear would run as a float Conv), so the model is optimized
once as the comparison session optimizes it, and that optimized graph is run
unchanged with its own tensors added as outputs.  Each quantized tensor is
found by the names of the QuantizeLinear node that made it, of the
DequantizeLinear nodes that read it, or of the integer kernel made of its node
(onnxruntime keeps them; it may have moved int8 tensors to uint8 with zero
point 128, and a kernel's output to channels-last), and each step is labelled
with the operator that computed it there: an
integer kernel (``QLinearConv``, ``QGemm``, ...) or a float one (``Conv``,
``FusedConv``, ``FusedGemm``, ... between DequantizeLinear and QuantizeLinear).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.verify.checks import session

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.ir import Network
    from tinynpu.compiler.onnx.network import CompiledNetwork

#: Operators that only move, retype or re-lay data, or clamp it (a Relu/Clip between a DequantizeLinear
#: and a QuantizeLinear of one scale is an integer clamp): the step's kernel is further up.
_PASS_THROUGH = {"Transpose", "QuantizeLinear", "DequantizeLinear", "ReorderInput", "ReorderOutput", "Reshape",
                 "Identity", "Cast", "Relu", "Clip"}


def optimized_model(qmodel: Any) -> Any:
    """The graph onnxruntime runs for the quantized model (same session options as the comparison)."""
    import onnx

    fd, path = tempfile.mkstemp(suffix=".onnx", prefix="tinynpu-ort-")
    os.close(fd)
    try:
        session(qmodel, [], save_optimized=path)
        return onnx.load(path)
    finally:
        os.unlink(path)


#: Operators whose output keeps their first input's layout (onnxruntime's layout transformer
#: carries a channels-last tensor through them; the other inputs of an elementwise one follow it).
_LAYOUT_KEEPING = {"QuantizeLinear", "DequantizeLinear", "Relu", "Clip", "Identity", "Cast", "Sum", "Add", "Mul",
                   "Max", "Min"}

#: Operators onnxruntime runs on int8 tensors that keep their zero point (it moves a QuantizeLinear
#: above a MaxPool or Reshape, which commute with it).
_INT8_KEEPING = {"Transpose", "ReorderInput", "ReorderOutput", "Reshape", "Identity", "MaxPool", "NhwcMaxPool"}

#: onnxruntime's integer kernels and the input index of their output zero point.
_INTEGER_KERNELS = {"QLinearConv": 7, "QGemm": 8, "QLinearMatMul": 7, "QLinearAdd": 7, "QLinearMul": 7,
                    "QLinearAveragePool": 4, "QLinearGlobalAveragePool": 4, "QLinearConcat": 1,
                    "QLinearSoftmax": 4, "QLinearSigmoid": 4, "QLinearLeakyRelu": 4}


@dataclass(frozen=True)
class Carrier:
    """Where onnxruntime's optimized graph holds a quantized step output.

    Attributes:
        tensor: Its name there; ``zero_point``, ``scale``: its quantization there (``scale`` None where it is
            not a scalar constant), which onnxruntime's graph rewrites may have changed from the model's.
        kernel: The operator computing it; ``channels_last``: whether onnxruntime laid it channels-last.
    """

    tensor: str
    zero_point: int
    kernel: str
    channels_last: bool
    scale: float | None


def carriers(net: Network, qmodel: Any, opt: Any) -> dict[str, Carrier]:
    """Each quantized step output -> its :class:`Carrier` in the optimized graph.

    The tensor is the output of the QuantizeLinear node that made it (onnxruntime keeps its name),
    or the input of a DequantizeLinear that reads it, or, where both were fused away, the output
    of the integer kernel onnxruntime made of the step's node (named after it), or a tensor of the
    same name made by another node (a Reshape that onnxruntime moved after the QuantizeLinear).
    """
    from onnx import helper, numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in opt.graph.initializer}
    producer = {o: n for n in opt.graph.node for o in n.output}
    by_name = {n.name: n for n in opt.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")}
    kernels = {n.name.split("_token_")[0]: n for n in opt.graph.node if n.op_type in _INTEGER_KERNELS}
    names: dict[str, list[str]] = {}  # quantized tensor -> its Q node's name, then its DQ readers' names
    for n in qmodel.graph.node:
        if n.op_type == "QuantizeLinear":
            names.setdefault(n.output[0], []).insert(0, n.name)
        elif n.op_type == "DequantizeLinear":
            names.setdefault(n.input[0], []).append(n.name)

    def kernel(tensor: str) -> str:
        node = producer.get(tensor)
        while node is not None and node.op_type in _PASS_THROUGH:
            node = producer.get(node.input[0])
        return "input" if node is None else node.op_type

    def is_channels_last(node: Any) -> bool:
        return any(a.name == "channels_last" and helper.get_attribute_value(a) for a in node.attribute)

    model_nodes = {n.name for n in qmodel.graph.node}

    def channels_last(tensor: str) -> bool:
        """Whether onnxruntime's layout transformer left ``tensor`` channels-last: it comes from a
        channels-last kernel, an NHWC operator or a transpose to NHWC that onnxruntime inserted (not
        one of the model's own), through layout-keeping nodes."""
        node = producer.get(tensor)
        while node is not None and node.op_type in _LAYOUT_KEEPING:
            node = producer.get(node.input[0])
        if node is None:
            return False
        if node.op_type == "Transpose":
            perm = next((list(helper.get_attribute_value(a)) for a in node.attribute if a.name == "perm"), [])
            return perm == [0, 2, 3, 1] and node.name not in model_nodes
        return node.op_type.startswith("Nhwc") or is_channels_last(node)

    def zero_point(node: Any, index: int) -> int:
        zp = inits.get(node.input[index]) if len(node.input) > index and node.input[index] else None
        return 0 if zp is None else int(zp.reshape(-1)[0])

    def scale(node: Any, index: int) -> float | None:
        value = inits.get(node.input[index]) if len(node.input) > index and node.input[index] else None
        return None if value is None or value.size != 1 else float(value.reshape(-1)[0])

    def int8_source(tensor: str) -> tuple[int, float | None] | None:
        """The zero point and scale of the int8 ``tensor`` from the QuantizeLinear or integer kernel making it."""
        node = producer.get(tensor)
        while node is not None and node.op_type in _INT8_KEEPING:
            node = producer.get(node.input[0])
        if node is not None and node.op_type == "QuantizeLinear":
            return zero_point(node, 2), scale(node, 1)
        if node is not None and node.op_type in _INTEGER_KERNELS:
            return zero_point(node, _INTEGER_KERNELS[node.op_type]), scale(node, _INTEGER_KERNELS[node.op_type] - 1)
        return None

    out: dict[str, Carrier] = {}
    for step in net.steps:
        for name in step.outputs:
            if name not in net.qparams:
                continue
            node = next((by_name[n] for n in names.get(name, []) if n in by_name), None)
            if node is not None:
                tensor = node.output[0] if node.op_type == "QuantizeLinear" else node.input[0]
                out[name] = Carrier(tensor, zero_point(node, 2), kernel(tensor), channels_last(tensor), scale(node, 1))
            # A tensor of the step output's own name comes first: the kernel named after the step may make
            # an earlier tensor (a MatMul's product before the bias Add fused into the step).
            elif (source := int8_source(name)) is not None:
                out[name] = Carrier(name, source[0], kernel(name), channels_last(name), source[1])
            elif step.name in kernels and len(step.outputs) == 1 and not _output_viewed(step):
                node = kernels[step.name]
                index = _INTEGER_KERNELS[node.op_type]
                out[name] = Carrier(node.output[0], zero_point(node, index), node.op_type, is_channels_last(node),
                                    scale(node, index - 1))
    return out


def _output_viewed(step: Any) -> bool:
    """Whether the step writes its output through a view (a matmul with the head merge folded in): the
    kernel named after it makes the tensor before the merge, not the step's output."""
    views = getattr(step, "views", None)
    return views is not None and views[2] is not None


def as_ours(theirs: np.ndarray, shape: tuple[int, ...], channels_last: bool, what: str) -> np.ndarray | None:
    """onnxruntime's tensor in our NCHW layout: by its shape, or where both layouts fit (C = H = W),
    by ``channels_last`` (what the graph around it says).  None where it holds our tensor's dimensions in
    another order: onnxruntime moved a ``Transpose`` across the QuantizeLinear that names the tensor, which
    then quantizes the values before the transpose (not ours to compare)."""
    moved = np.moveaxis(theirs, -1, 1) if theirs.ndim == 4 else theirs
    fits = (theirs.shape == shape, theirs.ndim == 4 and moved.shape == shape)
    if fits == (True, True):
        return moved if channels_last else theirs
    if fits == (False, False):
        if sorted(theirs.shape) == sorted(shape):
            return None
        raise AssertionError(f"{what} has shape {theirs.shape}, ours {shape} (in no layout the same)")
    return theirs if fits[0] else moved


def ort_difference_origins(cn: CompiledNetwork, feeds: dict[str, np.ndarray]) -> dict[str, dict[str, int]]:
    """Per step kind and onnxruntime kernel: elements compared, how many differ, by how much.

    Returns:
        ``{"<kind> on <kernel>": {"elements": n, "differing": d, "max_abs_lsb": m}}`` (``conv on
        QLinearConv``, ``conv on FusedConv``, ...); quantized step outputs that onnxruntime's
        graph does not hold (fused away) count as ``"<kind> not observed"`` with 0 differing.
    """
    from tinynpu.compiler.onnx.verify.tensors import OrtTensors, tensor_differences

    origins: dict[str, dict[str, int]] = {}
    for d in tensor_differences(cn.net, OrtTensors(cn.qmodel), feeds):
        group = f"{d.kind} not observed" if d.kernel is None else f"{d.kind} on {d.kernel}"
        o = origins.setdefault(group, {"elements": 0, "differing": 0, "max_abs_lsb": 0})
        o["elements"] += d.elements
        o["differing"] += d.own_differing
        o["max_abs_lsb"] = max(o["max_abs_lsb"], d.own_max_abs_lsb)
    return origins


__all__ = ["Carrier", "as_ours", "carriers", "optimized_model", "ort_difference_origins"]
