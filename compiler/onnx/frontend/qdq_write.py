"""The QDQ int8 model onnxruntime's ``quantize_static`` writes, written by tinynpu, its arithmetic in numpy.

Why: ``quantize_static`` computes a weight's per-channel scales and integers
in a Python loop over the channels (``compute_data_quant_params`` and
``quantize_nparray`` per channel: 133,277 channels at GPT-2-small), searches
lists by name for every node it adds, and saves and loads the model.  At
GPT-2-small that is minutes; the same arithmetic on whole arrays takes about a
second.

What it writes is what ``quantize_static`` writes with tinynpu's options
(``quantize.quantize``: QDQ format, per-channel int8 weights, symmetric int8
activations, nodes excluded by name), read off onnxruntime's quantization code
(``qdq_quantizer.py``, ``base_quantizer.py``, ``quant_utils.py``,
``onnx_model.py``):

- the marks of :mod:`.qdq_rules`, in graph order;
- ranges: a Relu/Clip's input takes its output's range when it has no other
  reader, a Softmax's output is [0, 1] (``adjust_tensor_ranges``);
- scale and zero point (``compute_scale_zp``): the range widened to hold 0,
  made symmetric, ``scale = float32(float64(2 max|r|) / 254)``, zero point 0;
  a scale below float32's smallest normal becomes 1.0;
- a weight's integers ``clip(round_half_even(float32(w) / scale) + 0, -128, 127)``
  per channel along the operator's axis (Conv 0, MatMul 1, Gemm by ``transB``);
- a bias ``clip(round(float64(b) / float64(input scale x weight scale x beta)))``
  in int32, the weight's scale raised first where that bias scale would make
  the int32 overflow (``_adjust_weight_scale_for_int32_bias``);
- the nodes and initializers named, added, renamed, cleaned and topologically
  sorted as onnxruntime does, so the model is the same proto, node for node.

Where the model is outside what this covers (float16 weights, subgraphs, a model
holding Q/DQ nodes already, an opset below 13, another onnxruntime operator
list), :func:`write_qdq` raises :class:`~.qdq_rules.WriterDeclines` and the
caller quantizes with ``quantize_static`` (docs/onnx.md, "Quantization").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.frontend.qdq_rules import Bias, Marking, WriterDeclines, check_registry, mark
from tinynpu.errors import OnnxError

QMIN, QMAX = -128, 127  # int8; a symmetric range uses -127..127
_TINY = np.finfo(np.float32).tiny
Ranges = dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Params:
    """A tensor's int8 scale (float32, 0-d or one per channel) and channel ``axis``; the zero point is 0."""

    scale: np.ndarray
    axis: int | None = None


def symmetric_scale(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``compute_scale_zp`` for int8 symmetric ranges, element by element (float32 in and out)."""
    low = np.minimum(low, np.float32(0))
    high = np.maximum(high, np.float32(0))
    absmax = np.maximum(np.abs(low), np.abs(high))
    wide = absmax.astype(np.float64) - (-absmax).astype(np.float64)
    scale = wide / (np.float64(127) - np.float64(-127))
    return np.where(scale < _TINY, np.float32(1.0), scale.astype(np.float32)).astype(np.float32)


def _activation_params(model: Any, ranges: Ranges, excluded: frozenset[str]) -> dict[str, Params]:
    """Each calibrated tensor's scale, after onnxruntime's range adjustments."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    known = set(QLinearOpsRegistry) | set(QDQRegistry)
    adjusted: dict[str, tuple[Any, Any]] = dict(ranges)
    readers: dict[str, int] = {}
    for n in model.graph.node:
        for i in n.input:
            if i:
                readers[i] = readers.get(i, 0) + 1
    for n in model.graph.node:
        if n.op_type not in known or n.name in excluded:
            continue
        if n.op_type in ("Clip", "Relu") and readers.get(n.input[0]) == 1 and n.input[0] in adjusted \
                and n.output[0] in adjusted:
            adjusted[n.input[0]] = adjusted[n.output[0]]
        elif n.op_type == "Softmax":
            adjusted[n.output[0]] = (np.float32(0.0), np.float32(1.0))
    names = list(adjusted)
    if not names:
        return {}
    low = np.array([np.asarray(adjusted[n][0], np.float32).reshape(-1)[0] for n in names], np.float32)
    high = np.array([np.asarray(adjusted[n][1], np.float32).reshape(-1)[0] for n in names], np.float32)
    return {n: Params(s) for n, s in zip(names, symmetric_scale(low, high), strict=True)}


def _initializer_params(data: np.ndarray, axis: int | None) -> Params:
    """``_calc_initializer_quant_params``: per tensor, or per channel along ``axis`` (each channel's min/max)."""
    if axis is None:
        if not data.size:
            return Params(np.array(1.0, np.float32))
        return Params(symmetric_scale(np.array(data.min()), np.array(data.max())).reshape(()))
    rows = np.moveaxis(data, axis, 0).reshape(data.shape[axis], -1)
    if not rows.shape[1]:
        return Params(np.ones(rows.shape[0], np.float32), axis)
    return Params(symmetric_scale(rows.min(axis=1), rows.max(axis=1)), axis)


def quantize_weight(data: np.ndarray, params: Params) -> np.ndarray:
    """``quantize_nparray`` of each channel at once: ``clip(round(float32 / scale) + 0, -128, 127)`` in int8."""
    scale = params.scale
    if params.axis is not None:
        shape = [1] * data.ndim
        shape[params.axis] = -1
        scale = scale.reshape(shape)
    q = np.asarray(data.astype(np.float32) / scale)  # (onnxruntime adds the zero point 0 here: no value changes)
    np.round(q, out=q)
    np.clip(q, QMIN, QMAX, out=q)
    return q.astype(np.int8)


def _adjust_for_bias(bias: np.ndarray, input_scale: np.ndarray, params: Params) -> Params:
    """Raise the weight's scale where input scale x weight scale would push the int32 bias past its range."""
    qrange = np.float64(np.iinfo(np.int32).max) - np.float64(np.iinfo(np.int32).min + 1)
    scale = params.scale
    if not scale.size:
        return params
    if params.axis is None:
        low = np.minimum(bias.min(), np.float64(0))
        high = np.maximum(bias.max(), np.float64(0))
        smallest = 1.0001 * (2.0 * np.maximum(np.abs(low), np.abs(high))) / qrange
    elif scale.ndim == 1:
        smallest = 1.0001 * (2.0 * np.abs(bias[: scale.shape[0]])) / qrange
    else:
        return params
    candidate = np.float64(input_scale.item()) * scale.astype(np.float64)
    raise_it = (candidate < smallest) & (candidate > 0.0)
    if not raise_it.any():
        return params
    ratio = np.where(raise_it, smallest / np.where(raise_it, candidate, 1.0), 1.0)
    raised = (scale.astype(np.float64) * ratio).astype(np.float32)
    return Params(np.where(raise_it, raised, scale).astype(np.float32).reshape(scale.shape), params.axis)


class _Writer:
    """The second half of ``QDQQuantizer.quantize_model``: Q/DQ nodes and initializers for the marks."""

    def __init__(self, marking: Marking, activations: dict[str, Params]) -> None:
        self.m = marking
        self.graph = marking.model.graph
        self.activations = activations
        self.params: dict[str, Params] = {}
        self.written: dict[str, tuple[str, str]] = {}  # tensor -> (scale name, zero point name)
        self.outputs = {o.name for o in self.graph.output}
        self.readers: dict[str, list[tuple[Any, int]]] = {}
        self.producers: dict[str, list[tuple[Any, int]]] = {}
        for n in self.graph.node:
            for i, x in enumerate(n.input):
                self.readers.setdefault(x, []).append((n, i))
            for i, x in enumerate(n.output):
                self.producers.setdefault(x, []).append((n, i))
        self.init_names = {t.name for t in self.graph.initializer}
        self.scales: dict[str, np.ndarray] = {}  # the scale initializers written, by name
        self._arrays: dict[str, np.ndarray] = {}  # each weight read once (GPT-2-small: 500 MB)

    def _array(self, name: str) -> np.ndarray:
        """An initializer's values: float32 raw bytes viewed in place, else through onnx."""
        from onnx import TensorProto, numpy_helper

        if name not in self._arrays:
            init = self.m.initializers[name]
            if init.data_type == TensorProto.FLOAT and init.HasField("raw_data") and sys.byteorder == "little":
                self._arrays[name] = np.frombuffer(init.raw_data, np.float32).reshape(tuple(init.dims))
            else:
                self._arrays[name] = numpy_helper.to_array(init)
        return self._arrays[name]

    def _add_init(self, tensor: Any) -> None:
        if tensor.name not in self.init_names:  # ``add_initializer`` keeps the first of a name
            self.graph.initializer.append(tensor)
            self.init_names.add(tensor.name)

    def _rename_input(self, old: str, new: str) -> None:
        for node, i in self.readers.pop(old, []):
            node.input[i] = new
            self.readers.setdefault(new, []).append((node, i))

    def _scale_zp(self, name: str, params: Params) -> tuple[str, str]:
        from onnx import TensorProto, helper

        zp = np.zeros(params.scale.shape, np.int8)
        self.scales.setdefault(f"{name}_scale", params.scale)
        self._add_init(helper.make_tensor(f"{name}_zero_point", TensorProto.INT8, zp.shape, zp.ravel().tolist()))
        self._add_init(helper.make_tensor(f"{name}_scale", TensorProto.FLOAT, params.scale.shape,
                                          params.scale.ravel().tolist()))
        return f"{name}_scale", f"{name}_zero_point"

    def _node(self, op: str, inputs: list[str], output: str, name: str, axis: int | None = None) -> None:
        from onnx import helper

        self.graph.node.append(helper.make_node(op, inputs, [output], name, axis=axis))

    def weights(self) -> None:
        """Each marked initializer's parameters (``_calc_initializer_quant_params``) and the bias adjustment."""
        for name, mk in self.m.marks.items():
            init = self.m.initializers.get(name)
            if init is not None:
                self.params[name] = _initializer_params(self._array(name), mk.axis)
        for bias_name, b in self.m.biases.items():
            src = self.activations.get(b.input)
            if src is None or b.input not in self.m.marks or b.weight not in self.params:
                continue
            bias = self._array(bias_name)
            self.params[b.weight] = _adjust_for_bias(bias, src.scale, self.params[b.weight])

    def tensors(self) -> None:
        """``_quantize_normal_tensors`` then ``_quantize_sharing_param_tensors``."""
        pending = dict(self.m.marks)
        for name, mk in list(pending.items()):
            if mk.shared is None:
                self._normal(name)
                del pending[name]
        while pending:  # onnxruntime's passes: one over the waiting tensors, each written once its source is
            progressed = False
            for name, mk in list(pending.items()):
                source = mk.shared[0] if mk.shared is not None else None
                if source is None or source not in self.written:
                    continue
                del pending[name]
                progressed = True
                if name in self.m.initializers:
                    raise WriterDeclines(f"initializer {name!r} would share another tensor's parameters")
                self._pair(name, *self.written[source])
            if not progressed:
                raise WriterDeclines(f"tensor {next(iter(pending))!r} shares the parameters of a tensor that is "
                                     "never quantized")

    def _normal(self, name: str) -> None:
        from onnx import TensorProto

        if name in self.written:
            return
        init = self.m.initializers.get(name)
        if init is None:
            params = self.activations.get(name)
            if params is None:
                raise OnnxError(f"quantization: tensor {name!r} is to be quantized but has no calibrated range "
                                "(the ranges given do not name it); calibrate on the model as given.")
            self._pair(name, *self._scale_zp(name, params))
            return
        params = self.params[name]
        scale, zp = self._scale_zp(name, params)
        self._rename_input(name, f"{name}_DequantizeLinear_Output")
        q = quantize_weight(self._array(name), params)
        del self._arrays[name]  # read for the last time
        if f"{name}_quantized" not in self.init_names:  # numpy_helper.from_array's tensor, built in place
            t = self.graph.initializer.add()
            t.name, t.data_type, t.raw_data = f"{name}_quantized", TensorProto.INT8, q.tobytes()
            t.dims.extend(init.dims)
            self.init_names.add(t.name)
        self._node("DequantizeLinear", [f"{name}_quantized", scale, zp], f"{name}_DequantizeLinear_Output",
                   f"{name}_DequantizeLinear", params.axis)
        self.written[name] = (scale, zp)

    def _pair(self, name: str, scale: str, zp: str) -> None:
        """``_add_qdq_pair_for_activation``: producer -> Q -> DQ -> readers (a graph output keeps its name)."""
        q_in, dq_out = name, f"{name}_DequantizeLinear_Output"
        if name in self.outputs:
            q_in, dq_out = f"{name}_QuantizeLinear_Input", name
            for node, i in self.producers.pop(name, []):
                node.output[i] = q_in
        else:
            self._rename_input(name, dq_out)
        self._node("QuantizeLinear", [q_in, scale, zp], f"{name}_QuantizeLinear_Output", f"{name}_QuantizeLinear")
        self._node("DequantizeLinear", [f"{name}_QuantizeLinear_Output", scale, zp], dq_out,
                   f"{name}_DequantizeLinear")
        self.written[name] = (scale, zp)

    def biases(self) -> None:
        """``_quantize_bias_tensors``: int32 integers at input scale x weight scale x beta, then a DQ."""
        for name, b in self.m.biases.items():
            if name not in self.written:  # a bias another node reads as a weight keeps that quantization
                self._bias(name, b)

    def _bias(self, name: str, b: Bias) -> None:
        from onnx import TensorProto, helper, numpy_helper

        if b.weight not in self.written or b.input not in self.written:
            missing = b.weight if b.weight not in self.written else b.input
            raise OnnxError(f"quantization: the bias {name!r} of node {b.node!r} needs the scale of {missing!r}, "
                            "which is not quantized.")
        weight_scale = self._scale_of(b.weight)
        input_scale = self._scale_of(b.input)
        init = self.m.initializers[name]
        data = self._array(name)
        beta = b.beta
        if beta == 0:
            data, beta = np.zeros_like(data), 1.0
        scale = input_scale * weight_scale * np.float32(beta)
        q = np.clip((np.asarray(data, np.float64) / np.asarray(scale, np.float64)).round(),
                    np.float64(np.iinfo(np.int32).min), np.float64(np.iinfo(np.int32).max)).astype(np.int32)
        self.graph.initializer.append(numpy_helper.from_array(q.reshape(tuple(init.dims)), f"{name}_quantized"))
        flat = np.asarray(scale, data.dtype).reshape(-1)
        self.graph.initializer.append(numpy_helper.from_array(flat, f"{name}_quantized_scale"))
        zp = (numpy_helper.from_array(np.zeros(flat.shape, np.int32), f"{name}_quantized_zero_point")
              if scale.size > 1 else helper.make_tensor(f"{name}_quantized_zero_point", TensorProto.INT32, [], [0]))
        self.graph.initializer.append(zp)
        self.init_names.update((f"{name}_quantized", f"{name}_quantized_scale", f"{name}_quantized_zero_point"))
        _drop_initializers(self.graph, [next(i for i, t in enumerate(self.graph.initializer) if t.name == name)])
        self._node("DequantizeLinear", [f"{name}_quantized", f"{name}_quantized_scale",
                                        f"{name}_quantized_zero_point"], name, f"{name}_DequantizeLinear",
                   0 if flat.size > 1 else None)

    def _scale_of(self, tensor: str) -> np.ndarray:
        """The scale a tensor was written with, as onnxruntime reads it back (float32, 0-d or per channel)."""
        from onnx import numpy_helper

        name = self.written[tensor][0]
        if name in self.scales and name not in self.m.initializers:
            return self.scales[name]
        init = next(t for t in self.graph.initializer if t.name == name)  # a scale the model had already
        return np.asarray(numpy_helper.to_array(init), np.float32)


def write_qdq(model: Any, ranges: Ranges, excluded: list[str]) -> Any:
    """The QDQ model ``quantize_static`` writes for the float ``model`` with tinynpu's options and the
    calibrated ``ranges`` (tensor -> (min, max)); ``model`` is not changed.

    Raises:
        WriterDeclines: the model is outside what the writer reproduces (the caller uses ``quantize_static``).
        OnnxError: a tensor to quantize has no range, as ``quantize_static`` would refuse it.
    """
    import onnx

    from tinynpu.compiler.onnx.frontend.calibration import infer_light

    check_registry()
    opset = next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    _check_model(model, opset)
    inferred = infer_light(model)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for field in ("value_info", "output"):  # onnxruntime quantizes the model shape inference returned
        del getattr(out.graph, field)[:]
        getattr(out.graph, field).extend(getattr(inferred, field))
    types = {v.name: int(v.type.tensor_type.elem_type) for v in [*inferred.value_info, *model.graph.output,
                                                                 *model.graph.input]
             if v.type.HasField("tensor_type")}
    excluded_names = frozenset(excluded)
    activations = _activation_params(out, ranges, excluded_names)
    marking = mark(out, types, opset, excluded_names)
    writer = _Writer(marking, activations)
    writer.weights()
    writer.tensors()
    writer.biases()
    _clean_initializers(out.graph)
    out.producer_name, out.producer_version = "onnx.quantize", "0.1.0"
    props = {"onnx.infer": "onnxruntime.quant"} | {p.key: p.value for p in model.metadata_props}
    onnx.helper.set_model_props(out, props)
    _topological_sort(out.graph)
    return out


def _check_model(model: Any, opset: int) -> None:
    from onnx import AttributeProto, TensorProto

    if opset < 13:
        raise WriterDeclines(f"the model's opset is {opset} (the writer handles 13 and later)")
    for t in model.graph.initializer:
        if t.data_type == TensorProto.FLOAT16:
            raise WriterDeclines(f"initializer {t.name!r} is float16 (the writer handles float32 weights)")
    for n in model.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            raise WriterDeclines(f"node {n.name!r} ({n.op_type}): the model is partly quantized already")
        if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in n.attribute):
            raise WriterDeclines(f"node {n.name!r} ({n.op_type}) holds a subgraph")


def _clean_initializers(graph: Any) -> None:
    """``clean_initializers``: drop initializers no node or output reads (and their graph inputs); of two
    initializers of one name the second goes too."""
    wanted = {i for n in graph.node for i in n.input if i} | {o.name for o in graph.output if o.name}
    wanted -= {o for n in graph.node for o in n.output}
    unused = []
    for index, t in enumerate(graph.initializer):
        if t.name in wanted:
            wanted.remove(t.name)
        else:
            unused.append(index)
    _drop_initializers(graph, unused)


def _drop_initializers(graph: Any, indexes: list[int]) -> None:
    """Remove the initializers at ``indexes`` and the graph inputs of their names (by position: removing a
    message by value compares it with every other, weights included)."""
    names = {graph.initializer[i].name for i in indexes}
    for i in sorted(indexes, reverse=True):
        del graph.initializer[i]
    first = []
    for i, inp in enumerate(graph.input):
        if inp.name in names:  # onnxruntime removes the first input of the name
            names.discard(inp.name)
            first.append(i)
    for i in reversed(first):
        del graph.input[i]


def _topological_sort(graph: Any) -> None:
    """``ONNXModel.topological_sort``: nodes without inputs first, then those the sorted initializer and input
    names free, then breadth first by outputs."""
    nodes = list(graph.node)
    count = [0] * len(nodes)
    waiting: dict[str, list[int]] = {}
    order: list[Any] = []
    for idx, node in enumerate(nodes):
        count[idx] = sum(1 for x in node.input if x)
        if not count[idx]:
            order.append(node)
            continue
        for x in node.input:
            if x:
                waiting.setdefault(x, []).append(idx)
    for name in sorted(set([t.name for t in graph.initializer] + [i.name for i in graph.input])):
        for idx in waiting.get(name, []):
            count[idx] -= 1
            if not count[idx]:
                order.append(nodes[idx])
    start = 0
    while start < len(order):
        for out in order[start].output:
            for idx in waiting.get(out, []):
                count[idx] -= 1
                if not count[idx]:
                    order.append(nodes[idx])
        start += 1
    if len(order) != len(nodes):
        raise OnnxError("quantization: the quantized graph has a cycle (a node reads what it writes, directly or "
                        "not); the float model is not a valid ONNX graph.")
    del graph.node[:]
    graph.node.extend(order)


__all__ = ["Params", "quantize_weight", "symmetric_scale", "write_qdq"]
