"""Which tensors of a float model the QDQ writer quantizes, and how: onnxruntime's per-operator rules.

:mod:`.qdq_write` writes the QDQ model that onnxruntime's ``quantize_static``
writes with the options tinynpu passes (QDQ format, per-channel int8 weights,
symmetric int8 activations, ``nodes_to_exclude``, every other option at its
default).  This module is its first half: a walk over the nodes in graph order
that marks tensors as onnxruntime's QDQ operator quantizers mark them
(``onnxruntime/quantization/operators/*.py``, ``QDQQuantizer.__quantize_tensor``
and friends in ``qdq_quantizer.py``), so the walk's order effects (an operator
that quantizes its output only when its input is marked already) are the same.

The marks:

- an *activation* (per tensor, the activation type), also a float constant
  read where an activation is expected (an ``Add``'s constant operand);
- a *weight* (per tensor, or per channel along an axis);
- a *shared* activation, quantized with the scale and zero point of another
  tensor (a ``Reshape``'s output takes its input's);
- a *bias* (int32, scale = input scale x weight scale x ``beta``).

Every operator type onnxruntime's quantizer handles has a rule here
(:data:`RULES`); an operator it does not handle is left in float, as
onnxruntime leaves it.  :func:`check_registry` compares the table with the
installed onnxruntime's, so a newer onnxruntime with another operator makes
the writer decline instead of writing a different model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FLOAT_TYPES = (1, 10)  # TensorProto.FLOAT, FLOAT16: what onnxruntime's quantizer quantizes


class WriterDeclines(Exception):
    """The writer does not write this model the way onnxruntime would (the message says why): the caller
    falls back to ``quantize_static``."""


@dataclass(frozen=True)
class Mark:
    """How one tensor is quantized: ``weight`` (else activation), its channel ``axis`` (per channel), or
    ``shared``: the (input tensor, node name) whose scale and zero point it takes."""

    weight: bool = False
    axis: int | None = None
    shared: tuple[str, str] | None = None


@dataclass(frozen=True)
class Bias:
    """A bias quantized to int32 for node ``node``: its scale is ``input``'s x ``weight``'s x ``beta``."""

    node: str
    input: str
    weight: str
    beta: float


@dataclass
class Marking:
    """The walk's state: the graph (whose nodes a bias copy or a Gemm's ``beta`` edits), its initializers, the
    tensors' element types, and the marks in the order onnxruntime records them."""

    model: Any
    types: dict[str, int]
    opset: int
    initializers: dict[str, Any] = field(default_factory=dict)  # name -> TensorProto, grown by bias copies
    original: frozenset[str] = frozenset()  # the initializers before the walk (per-channel checks read these)
    marks: dict[str, Mark] = field(default_factory=dict)
    biases: dict[str, Bias] = field(default_factory=dict)

    def quantizable(self, name: str) -> bool:
        init = self.initializers.get(name)
        if init is not None:
            return int(init.data_type) in FLOAT_TYPES
        return self.types.get(name) in FLOAT_TYPES

    def marked(self, name: str) -> bool:
        return name in self.marks or name in self.biases

    def activation(self, name: str, weight: bool = False) -> None:
        if self.quantizable(name) and name not in self.marks:
            self.marks[name] = Mark(weight=weight)

    def same_as(self, output: str, source: str, node: Any) -> None:
        if self.quantizable(output):
            self.marks[output] = Mark(shared=(source, node.name))  # replaces an earlier mark, as onnxruntime does

    def weight(self, name: str, default_axis: int) -> None:
        """A weight, per channel along ``default_axis`` when that axis exists (``is_tensor_per_channel``)."""
        init = self.initializers.get(name) if name in self.original else None
        rank = len(init.dims) if init is not None else 0
        if init is not None and -rank <= default_axis < rank:
            if int(init.data_type) in FLOAT_TYPES:
                self.marks[name] = Mark(weight=True, axis=default_axis % rank)
        else:
            self.activation(name, weight=True)

    def bias(self, node: Any, name: str, source: str, weight: str, beta: float = 1.0) -> None:
        init = self.initializers.get(name)
        if init is None or int(init.data_type) not in FLOAT_TYPES:
            return
        if name in self.biases:  # a bias two nodes read: each gets a copy, its scale depends on the node
            name = self._copy_bias(init, node)
        self.biases[name] = Bias(node.name, source, weight, beta)

    def _copy_bias(self, init: Any, node: Any) -> str:
        import onnx

        prefix, suffix = init.name, -1
        for other in self.initializers:
            if other.startswith(prefix) and other[len(prefix):].isdigit():
                suffix = max(suffix, int(other[len(prefix):]))
        copy = onnx.TensorProto()
        copy.CopyFrom(init)
        copy.name = f"{prefix}{suffix + 1}"
        self.model.graph.initializer.append(copy)
        self.initializers[copy.name] = copy
        for n in self.model.graph.node:  # onnxruntime replaces the input of every node of that name
            if n.name == node.name:
                for i, x in enumerate(n.input):
                    if x == init.name:
                        n.input[i] = copy.name
        return str(copy.name)


def _attr(node: Any, name: str, default: Any) -> Any:
    from onnx import helper

    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def _generic(m: Marking, node: Any) -> None:
    for name in [*node.input, *node.output]:
        m.activation(name)


def _conv(m: Marking, node: Any) -> None:
    m.activation(node.input[0])
    m.activation(node.output[0])
    m.weight(node.input[1], 0 if node.op_type == "Conv" else 1)
    if len(node.input) == 3:
        m.bias(node, node.input[2], node.input[0], node.input[1])


def _gemm(m: Marking, node: Any) -> None:
    m.activation(node.input[0])
    m.activation(node.output[0])
    m.weight(node.input[1], 0 if _attr(node, "transB", 0) > 0 else 1)
    if len(node.input) == 3 and node.input[2] in m.initializers:
        m.bias(node, node.input[2], node.input[0], node.input[1], float(_attr(node, "beta", 1.0)))
        for a in node.attribute:  # the bias carries beta now
            if a.name == "beta":
                a.f = 1.0


def _matmul(m: Marking, node: Any) -> None:
    for name in [*node.input, *node.output]:
        if name in m.initializers:
            m.weight(name, 1)
        else:
            m.activation(name)


def _removable(m: Marking, node: Any) -> None:
    """Relu/Clip: with symmetric activations onnxruntime keeps them (no fusing into the producer's range)."""
    if m.marked(node.input[0]):
        m.activation(node.input[0])
        m.activation(node.output[0])


def _direct(m: Marking, node: Any) -> None:
    if m.marked(node.input[0]):
        m.same_as(node.output[0], node.input[0], node)


def _since(opset: int, rule: Callable[[Marking, Any], None]) -> Callable[[Marking, Any], None]:
    def apply(m: Marking, node: Any) -> None:
        if m.opset >= opset:
            rule(m, node)

    return apply


def _split(m: Marking, node: Any) -> None:
    if not m.marked(node.input[0]):
        m.activation(node.input[0])
    for out in node.output:
        m.same_as(out, node.input[0], node)


def _gather(m: Marking, node: Any) -> None:
    init = m.initializers.get(node.input[0])
    if init is not None and int(init.data_type) in FLOAT_TYPES:
        m.activation(node.input[0])
        m.same_as(node.output[0], node.input[0], node)
    elif m.marked(node.input[0]):
        m.same_as(node.output[0], node.input[0], node)


def _where(m: Marking, node: Any) -> None:
    if m.marked(node.input[1]) and m.marked(node.input[2]):
        for out in node.output:
            m.activation(out)


def _norm(m: Marking, node: Any) -> None:
    m.activation(node.input[0])
    if node.input[1] in m.initializers:
        m.weight(node.input[1], 1)
    else:
        m.activation(node.input[1])
    if len(node.input) > 2 and node.input[2]:
        m.bias(node, node.input[2], node.input[0], node.input[1])
    for out in node.output:
        m.activation(out)


def _pad(m: Marking, node: Any) -> None:
    for name in node.input:
        if name:
            m.activation(name)
    if _pads_with_input_values(m, node):
        m.same_as(node.output[0], node.input[0], node)
    else:
        m.activation(node.output[0])


def _pads_with_input_values(m: Marking, node: Any) -> bool:
    """Whether a Pad's output takes its input's scale: a mode that repeats input values, or a constant 0."""
    import numpy as np
    from onnx import helper, numpy_helper

    mode = _attr(node, "mode", b"constant")
    if mode in (b"reflect", b"edge", b"wrap"):
        return True
    if mode != b"constant" or m.types.get(node.input[0]) is None:
        return False
    if m.opset < 11:  # the padding value was an attribute, of the input's type
        value = np.asarray(_attr(node, "value", 0.0), dtype=helper.tensor_dtype_to_np_dtype(m.types[node.input[0]]))
    elif len(node.input) >= 3 and node.input[2]:
        value = _constant(m, node.input[2], numpy_helper)
        if value is None:
            return False
    else:
        return True
    return bool(value.dtype in (np.float32, np.float16) and float(value.item()) == 0)


def _constant(m: Marking, name: str, numpy_helper: Any) -> Any:
    for n in m.model.graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            return next((numpy_helper.to_array(a.t) for a in n.attribute if a.name == "value"), None)
    init = m.initializers.get(name)
    return numpy_helper.to_array(init) if init is not None else None


#: Each operator type onnxruntime's ``quantize_static`` quantizes in QDQ format (the union of its
#: ``QLinearOpsRegistry`` and ``QDQRegistry``), with its rule.
RULES: dict[str, Callable[[Marking, Any], None]] = {
    **{op: _generic for op in ("ArgMax", "Add", "Mul", "LeakyRelu", "Sigmoid", "GlobalAveragePool", "Concat",
                               "Softmax", "EmbedLayerNormalization", "CumSum")},
    "Conv": _conv, "ConvTranspose": _conv, "Gemm": _gemm, "MatMul": _matmul,
    "Relu": _removable, "Clip": _removable,
    **{op: _direct for op in ("Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "AveragePool", "Slice",
                              "TopK")},
    "MaxPool": _since(12, _direct), "Resize": _since(11, _direct), "Pad": _pad, "Split": _split,
    "Gather": _gather, "GatherElements": _gather, "Where": _where,
    "InstanceNormalization": _norm, "LayerNormalization": _norm, "BatchNormalization": _norm,
}


def check_registry() -> None:
    """Decline when the installed onnxruntime quantizes another set of operators than :data:`RULES` knows."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    theirs = set(QLinearOpsRegistry) | set(QDQRegistry)
    if theirs != set(RULES):
        differ = sorted(theirs ^ set(RULES))
        raise WriterDeclines(f"this onnxruntime's quantizer handles another set of operators (differing in "
                             f"{', '.join(differ)})")


def mark(model: Any, types: dict[str, int], opset: int, excluded: frozenset[str]) -> Marking:
    """The marks of ``model``'s tensors, walking its nodes in order (``QDQQuantizer.quantize_model``)."""
    inits = {t.name: t for t in model.graph.initializer}
    m = Marking(model, types, opset, inits, frozenset(inits))
    for node in list(model.graph.node):
        rule = RULES.get(node.op_type)
        if rule is not None and node.name not in excluded:
            rule(m, node)
    return m


__all__ = ["RULES", "Bias", "Mark", "Marking", "WriterDeclines", "check_registry", "mark"]
