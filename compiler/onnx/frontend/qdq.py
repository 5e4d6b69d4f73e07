"""The quantized (QDQ) ONNX graph as a list of typed steps (:mod:`~tinynpu.compiler.onnx.ir`).

A QDQ graph computes every quantized operator in float between
``DequantizeLinear`` and ``QuantizeLinear`` nodes.  The patterns that are
integer computations are recognized (:mod:`.patterns`) and become one step each:

``DQ(x), DQ(w), DQ(b) -> Conv | Gemm | MatMul [[-> Q -> DQ] -> Relu | Clip] -> Q``
    an accelerator layer: int8 x int8 -> int32 on the MAC array, then the
    :class:`~tinynpu.compiler.onnx.intops.Epilogue` (bias, per-channel
    requantization, zero point, relu/clip).  A Q/DQ pair before the activation
    is absorbed when it has the activation output's scale and zero point (then
    it changes nothing; see ``quantize.py``).
``DQ(a), DQ(b) -> MatMul -> Q``
    a matmul between two activations (attention), batched: accelerator.
``DQ(x_i) -> Add | Sum [-> Relu] -> Q``
    a residual add: on the accelerator (:mod:`~tinynpu.compiler.onnx.lower.eltwise`), or
    in fixed point on the host where inputs broadcast or a zero point is not 0.
``DQ(x) -> AveragePool | GlobalAveragePool -> Q``
    window sums then one requantization (host, exact); MaxPool on int8 (host).
``DQ(x_i) -> Concat -> Q``, every input at the output's scale
    the int8 inputs concatenated (host, data movement).
``DQ(x) -> Reshape | Flatten | Transpose | Squeeze | Unsqueeze -> Q`` at one scale
    the operator on the int8 values (host, data movement).

Every other node runs on the host as the ONNX operator itself (numpy,
``onnx.reference``), on the dequantized float values, exactly as the QDQ
graph says: Softmax, LRN, LayerNormalization, Gelu/Erf, Div/Mul by constants,
Reshape/Transpose and the Q/DQ nodes that are left.  An operator the host
cannot run either is refused naming node, op type and opset
(:mod:`.hostops`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tinynpu.compiler.onnx.frontend.hostops import check_supported, host_reason, node_name, runs_on_host
from tinynpu.compiler.onnx.intops import dequantize
from tinynpu.compiler.onnx.ir import HOST, NPU, Network, OnnxStep, QParam, Step
from tinynpu.errors import OnnxError


def node_attrs(node: Any) -> dict[str, Any]:
    """An ONNX node's attributes as Python values."""
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class Tail(NamedTuple):
    """Where a layer's output ends: its int8 ``q``, the nodes absorbed on the way, the fused activation."""

    q: Any
    absorbed: list[Any]
    activation: str | None
    clip: tuple[float, float] | None


class QdqGraph:
    """A QDQ model indexed for pattern matching: constants, shapes, readers, Q/DQ parameters.

    Args:
        model: The QDQ ``onnx.ModelProto`` (shapes inferred).
        known: Constants by name already converted (initializers, and the dequantized weights by their
            DequantizeLinear's output), for graphs built again and again from one model's weights (a
            decoder's step shapes); a name here may be a graph input of ``model``, its stand-in.
    """

    def __init__(self, model: Any, known: dict[str, np.ndarray] | None = None) -> None:
        from onnx import numpy_helper

        g = model.graph
        known = known or {}
        self.model = model
        self.nodes = list(g.node)
        self.opset = next((int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), 13)
        self.consts = {t.name: known[t.name] if t.name in known else numpy_helper.to_array(t)
                       for t in g.initializer} | {i.name: known[i.name] for i in g.input if i.name in known}
        for node in g.node:  # Constant nodes are constants too
            if node.op_type == "Constant":
                self.consts[node.output[0]] = numpy_helper.to_array(node_attrs(node)["value"])
        self.shapes: dict[str, tuple[int, ...]] = {}
        for vi in list(g.value_info) + list(g.input) + list(g.output):
            dims = vi.type.tensor_type.shape.dim
            if dims and all(d.HasField("dim_value") for d in dims):
                self.shapes[vi.name] = tuple(int(d.dim_value) for d in dims)
        self.inputs = [i.name for i in g.input if i.name not in self.consts]
        self.outputs = [o.name for o in g.output]
        self.uses: dict[str, list[Any]] = {}
        for node in g.node:
            for i in node.input:
                self.uses.setdefault(i, []).append(node)
        # built once, so that matchers sort and look up in constant time rather than rescanning the nodes
        self.order, self.producer = _node_indexes(self.nodes)
        # DequantizeLinear of a constant: a quantized weight or bias.
        self.qconst: dict[str, tuple[np.ndarray, QParam]] = {}
        # DequantizeLinear of an activation: float name -> (int8 name, its params).
        self.dq_act: dict[str, tuple[str, QParam]] = {}
        self.qparams: dict[str, QParam] = {}
        for node in g.node:
            if node.op_type == "DequantizeLinear" and node.input[0] in self.consts:
                self.qconst[node.output[0]] = (self.consts[node.input[0]], self._qparam(node))
            elif node.op_type == "DequantizeLinear":
                self.dq_act[node.output[0]] = (node.input[0], self._qparam(node))
            elif node.op_type == "QuantizeLinear":
                self.qparams[node.output[0]] = self._qparam(node)
        for name, (value, qp) in self.qconst.items():  # dequantized weights for the host operators
            hit = known.get(name)
            self.consts[name] = hit if hit is not None else dequantize(value, qp.scale, qp.zero_point, qp.axis)

    def _qparam(self, node: Any) -> QParam:
        scale = self.consts.get(node.input[1])
        if scale is None:
            raise OnnxError(f"node {node_name(node)!r} ({node.op_type}): its scale {node.input[1]!r} is not "
                            "a constant; tinynpu needs static quantization parameters.")
        zp = self.consts[node.input[2]] if len(node.input) > 2 and node.input[2] else np.zeros((), np.int8)
        axis = int(node_attrs(node).get("axis", 1)) if scale.size > 1 else None
        return QParam(np.asarray(scale, np.float32), np.asarray(zp), axis)

    def single_q(self, float_name: str) -> Any | None:
        """The only reader of ``float_name`` when it is one QuantizeLinear, and not a graph output."""
        us = self.uses.get(float_name, [])
        if len(us) != 1 or us[0].op_type != "QuantizeLinear" or float_name in self.outputs:
            return None
        return us[0]

    def output_q(self, float_name: str) -> Any | None:
        """:meth:`single_q`, when its own output is not a graph output either."""
        q = self.single_q(float_name)
        return None if q is None or q.output[0] in self.outputs else q

    def act(self, float_name: str) -> tuple[str, QParam] | None:
        """The int8 activation (symmetric, per tensor) behind a DequantizeLinear output."""
        hit = self.dq_act.get(float_name)
        if hit is None or not hit[1].per_tensor or hit[1].zero_point.dtype != np.int8:
            return None
        return hit

    def dq_node(self, float_name: str) -> Any:
        return self.producer[float_name]

    def _only_reader(self, name: str, op_types: tuple[str, ...]) -> Any | None:
        us = self.uses.get(name, [])
        if len(us) != 1 or us[0].op_type not in op_types or name in self.outputs:
            return None
        return us[0]

    def requantized_at_same_scale(self, out: str) -> list[Any] | None:
        """``out -> Q -> DQ -> Relu/Clip -> Q'`` with Q and Q' alike: the [Q, DQ] to absorb, else None.

        At one scale and zero point, ``Q(act(DQ(q)))`` is the activation's clamp of the integer
        ``q`` itself, so the layer rounds once, as if the activation followed it directly.
        """
        q = self.output_q(out)
        if q is None:
            return None
        dq = self._only_reader(q.output[0], ("DequantizeLinear",))
        activation = None if dq is None else self._only_reader(dq.output[0], ("Relu", "Clip"))
        q2 = None if activation is None else self.single_q(activation.output[0])
        if q2 is None or not self.qparams[q.output[0]].same_as(self.qparams[q2.output[0]]):
            return None
        return [q, dq]

    def tail(self, node: Any) -> Tail | None:
        """Follow ``node``'s output through an optional Relu/Clip (directly, or between a Q/DQ pair
        at the activation's own scale) to its one symmetric per-tensor int8 Q."""
        from tinynpu.compiler.onnx.frontend.patterns import clip_bounds

        out = node.output[0]
        absorbed: list[Any] = []
        activation, clip = None, None
        pair = self.requantized_at_same_scale(out)
        if pair is not None:
            absorbed += pair
            out = pair[1].output[0]
        a = self._only_reader(out, ("Relu", "Clip"))
        if a is not None:
            if a.op_type == "Clip":
                clip = clip_bounds(a, self.consts)
                if clip is None:
                    return None
            activation = a.op_type
            absorbed.append(a)
            out = a.output[0]
        q = self.output_q(out)
        if q is None:
            return None
        qp = self.qparams[q.output[0]]
        if not qp.per_tensor or qp.zero_point.dtype != np.int8:
            return None
        return Tail(q, absorbed, activation, clip)


def _node_indexes(nodes: list[Any]) -> tuple[dict[int, int], dict[str, Any]]:
    """Each node's position in graph order (by ``id``), and each tensor's producer."""
    return ({id(n): position for position, n in enumerate(nodes)},
            {o: n for n in nodes for o in n.output if o})


def build_network(model: Any, *, nonlinear: str = NPU, known: dict[str, np.ndarray] | None = None) -> Network:
    """Turn a QDQ model into steps (see the module docstring).

    ``nonlinear``: ``npu`` lowers softmax, norms, unary segments and the affine ops after matmuls
    (:mod:`.nonlinear`); ``host`` keeps them ONNX operators on the host in float.  ``known``: see
    :class:`QdqGraph`.
    """
    from tinynpu.compiler.onnx.frontend.movechains import split_move_chains

    g = QdqGraph(split_move_chains(model), known)
    fused: set[int] = set()
    anchored: dict[int, Step] = {}
    if nonlinear == NPU:  # layers first (their folds), then what is nonlinear, then the other integer patterns
        _match_patterns(g, fused, anchored, fold=True, ops=("Conv", "Gemm", "MatMul"))
        _match_nonlinear(g, fused, anchored)
    _match_patterns(g, fused, anchored, fold=nonlinear == NPU)
    steps: list[Step] = []
    for node in g.nodes:
        if id(node) in anchored:
            steps.append(anchored[id(node)])
        elif not (id(node) in fused or node.op_type == "Constant"
                  or (node.op_type == "DequantizeLinear" and node.input[0] in g.consts)):
            # (a DequantizeLinear of a constant: a weight, already dequantized into consts)
            if not runs_on_host(node):
                check_supported(model)  # raises, naming the node
            steps.append(_onnx_step(node, g.opset, reason=host_reason(node.op_type)))
    # the DQ of an activation consumed by both a fused step and a host node must stay: re-add if needed
    produced = set(g.inputs) | set(g.consts)
    for s in steps:
        produced.update(s.outputs)
    missing = [i for s in steps for i in s.inputs if i and i not in produced]
    if missing:
        extra = {n.output[0]: n for n in g.nodes if n.op_type == "DequantizeLinear" and n.output[0] in missing}
        steps = _reinsert(steps, extra, g.opset)
    net = Network(steps=steps, constants=g.consts, inputs=g.inputs, outputs=g.outputs, shapes=g.shapes,
                  opset=g.opset, qparams=g.qparams)
    if nonlinear == NPU:  # SwiGLU's gate table into its product (frontend/gated.py)
        from tinynpu.compiler.onnx.frontend.gated import fuse_gated_products

        net = fuse_gated_products(net)
    return net


def _take(g: QdqGraph, fused: set[int], anchored: dict[int, Step], node: Any, step: Step,
          absorbed: list[Any]) -> None:
    """Record a matched pattern: the nodes it absorbs, and its step at the last of them."""
    fused.update(id(n) for n in absorbed)
    for i in node.input:  # the DQ nodes of its activations, if nothing else reads them (a graph output,
        # such as a decode step's present keys that its attention reads too, is read by the user)
        if (i in g.dq_act and i not in g.outputs
                and all(id(u) in fused or u is node for u in g.uses.get(i, []))):
            fused.add(id(g.dq_node(i)))
    fused.add(id(node))
    anchored[id(absorbed[-1])] = step


def _match_patterns(g: QdqGraph, fused: set[int], anchored: dict[int, Step], *, fold: bool,
                    ops: tuple[str, ...] | None = None) -> None:
    """The integer patterns (at nodes of ``ops``, default all) among the nodes not yet taken: the ``id()``
    of every node they absorb into ``fused``, and each step into ``anchored`` by the id of the
    QuantizeLinear it ends at (where it takes its place in execution order); ``fold``: with the
    bias adds and scalings after a matmul folded into it."""
    from tinynpu.compiler.onnx.frontend.nonlinear import fold_affine
    from tinynpu.compiler.onnx.frontend.patterns import step_at

    for node in g.nodes:
        if id(node) in fused or (ops is not None and node.op_type not in ops):
            continue
        found = step_at(g, node)
        if found is not None:
            _take(g, fused, anchored, node, *(fold_affine(g, found) if fold else found))


def _match_nonlinear(g: QdqGraph, fused: set[int], anchored: dict[int, Step]) -> None:
    """Softmax, norms, then the unary segments among the nodes no integer pattern took (:mod:`.nonlinear`)."""
    from tinynpu.compiler.onnx.frontend.masks import masked_softmax_at
    from tinynpu.compiler.onnx.frontend.nonlinear import nonlinear_at
    from tinynpu.compiler.onnx.frontend.segments import float_output_segment, segment_step

    for node in g.nodes:
        masked = None if id(node) in fused else masked_softmax_at(g, node)
        if masked is not None:  # two steps: the select at the Add, the softmax at the final Q
            absorbed, placed = masked
            _take(g, fused, anchored, absorbed[0], placed[-1][1], absorbed)
            anchored.update((id(at), step) for at, step in placed)
            continue
        found = None if id(node) in fused else nonlinear_at(g, node)
        if found is not None:
            _take(g, fused, anchored, node, *found)
    for node in g.nodes:
        if node.op_type == "DequantizeLinear" and node.output[0] in g.dq_act and id(node) not in fused:
            found = segment_step(g, node.input[0], fused)
            if found is not None:
                _take(g, fused, anchored, found[1][0], *found)
                continue
            ends_float = float_output_segment(g, node.input[0], fused)
            if ends_float is not None:  # two steps: the table, and the float output's dequantization
                absorbed, placed = ends_float
                _take(g, fused, anchored, absorbed[0], placed[-1][1], absorbed)
                anchored.update((id(at), step) for at, step in placed)


def _onnx_step(node: Any, opset: int, *, reason: str = "") -> OnnxStep:
    return OnnxStep(name=node_name(node), op=node.op_type, where=HOST, inputs=tuple(node.input),
                    outputs=tuple(node.output), node=node, opset=opset, reason=reason)


def _reinsert(steps: list[Step], extra: dict[str, Any], opset: int) -> list[Step]:
    out: list[Step] = []
    done: set[str] = set()
    for s in steps:
        for i in s.inputs:
            if i in extra and i not in done:
                out.append(_onnx_step(extra[i], opset))
                done.add(i)
        out.append(s)
    return out


__all__ = ["QdqGraph", "Tail", "build_network", "node_attrs"]
