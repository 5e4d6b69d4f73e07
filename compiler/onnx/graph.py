"""The quantized (QDQ) ONNX graph as a list of steps, each on the accelerator or the host.

A QDQ graph computes every quantized operator in float between
``DequantizeLinear`` and ``QuantizeLinear`` nodes.  The patterns that are
integer computations are recognized and become one step each:

``DQ(x), DQ(w), DQ(b) -> Conv | Gemm | MatMul [[-> Q -> DQ] -> Relu | Clip] -> Q``
    an accelerator layer (``where="npu"``): int8 x int8 -> int32 on the MAC
    array, then the :class:`~tinynpu.compiler.onnx.intops.Epilogue` (bias,
    per-channel requantization, zero point, relu/clip).  A Q/DQ pair before
    the activation is absorbed when it has the activation output's scale and
    zero point (then it changes nothing; see ``quantize.py``).
``DQ(a), DQ(b) -> MatMul -> Q``
    a matmul between two activations (attention), batched: accelerator.
``DQ(x_i) -> Add | Sum [-> Relu] -> Q``
    a residual add: on the accelerator (:mod:`~tinynpu.compiler.onnx.eltwise`), or
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
cannot run either is refused naming node, op type and opset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.eltwise import term_scales
from tinynpu.compiler.onnx.importer import OnnxError
from tinynpu.compiler.onnx.intops import Epilogue
from tinynpu.compiler.onnx.requant import layer_scale

NPU = "npu"
HOST = "host"


@dataclass(frozen=True)
class QParam:
    """A QuantizeLinear/DequantizeLinear's scale and zero point (per tensor, or per ``axis``)."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None

    @property
    def per_tensor(self) -> bool:
        return self.scale.size == 1

    @property
    def s(self) -> float:
        return float(self.scale.reshape(-1)[0])

    @property
    def z(self) -> int:
        return int(self.zero_point.reshape(-1)[0])

    def same_as(self, other: QParam) -> bool:
        """Both per tensor, with one scale, zero point and type: a Q/DQ pair of the two is the identity."""
        return (self.per_tensor and other.per_tensor and self.s == other.s and self.z == other.z
                and self.zero_point.dtype == other.zero_point.dtype)


@dataclass
class Step:
    """One unit of work of the network, in execution order.

    Attributes:
        name: The ONNX node's name (or its first output's).
        op: The ONNX op type (``Conv``, ``Gemm``, ``MatMul``, ``Add``, ``QuantizeLinear``, ...).
        kind: How it runs: ``conv``, ``gemm``, ``matmul`` (accelerator), ``add``, ``avgpool``,
            ``maxpool`` (host integer), ``onnx`` (host, the ONNX operator on float values).
        where: ``npu`` or ``host``.
        inputs, outputs: Tensor names in the environment.
        attrs: Op parameters (weights in the accelerator's layout, epilogue, strides, ...).
        reason: Why a node that could in principle run on the accelerator runs on the host.
    """

    name: str
    op: str
    kind: str
    where: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


@dataclass
class Network:
    """The quantized network as steps, its constants and its interface."""

    steps: list[Step]
    constants: dict[str, np.ndarray]
    inputs: list[str]
    outputs: list[str]
    shapes: dict[str, tuple[int, ...]]
    opset: int
    qparams: dict[str, QParam]  # every quantized activation tensor (Q outputs)


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _node_name(node: Any) -> str:
    return str(node.name or node.output[0])


def build_network(model: Any) -> Network:
    """Turn a QDQ model into steps (see the module docstring)."""
    from onnx import numpy_helper

    g = model.graph
    opset = next((int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), 13)
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for node in g.node:  # Constant nodes are constants too
        if node.op_type == "Constant":
            consts[node.output[0]] = numpy_helper.to_array(_attrs(node)["value"])
    shapes: dict[str, tuple[int, ...]] = {}
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        dims = vi.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = tuple(int(d.dim_value) for d in dims)
    graph_inputs = [i.name for i in g.input if i.name not in consts]
    graph_outputs = [o.name for o in g.output]
    uses: dict[str, list[Any]] = {}
    for node in g.node:
        for i in node.input:
            uses.setdefault(i, []).append(node)

    def qparam(node: Any) -> QParam:
        scale = consts.get(node.input[1])
        if scale is None:
            raise OnnxError(f"node {_node_name(node)!r} ({node.op_type}): its scale {node.input[1]!r} is not "
                            "a constant; tinynpu needs static quantization parameters.")
        zp = consts[node.input[2]] if len(node.input) > 2 and node.input[2] else np.zeros((), np.int8)
        axis = int(_attrs(node).get("axis", 1)) if scale.size > 1 else None
        return QParam(np.asarray(scale, np.float32), np.asarray(zp), axis)

    # DequantizeLinear of a constant: a quantized weight or bias.
    qconst: dict[str, tuple[np.ndarray, QParam]] = {}
    # DequantizeLinear of an activation: float name -> (int8 name, its params).
    dq_act: dict[str, tuple[str, QParam]] = {}
    qparams: dict[str, QParam] = {}
    for node in g.node:
        if node.op_type == "DequantizeLinear":
            if node.input[0] in consts:
                qconst[node.output[0]] = (consts[node.input[0]], qparam(node))
            else:
                dq_act[node.output[0]] = (node.input[0], qparam(node))
        elif node.op_type == "QuantizeLinear":
            qparams[node.output[0]] = qparam(node)
    for name, (value, qp) in qconst.items():  # dequantized weights for the host operators
        from tinynpu.compiler.onnx.intops import dequantize

        consts[name] = dequantize(value, qp.scale, qp.zero_point, qp.axis)

    fused: set[int] = set()  # id() of nodes absorbed into a step
    anchored: dict[int, Step] = {}  # id(node) -> the step emitted at that node's position

    def single_q(float_name: str) -> Any | None:
        """The only consumer of ``float_name`` when it is one QuantizeLinear to int8 (zero point kept)."""
        us = uses.get(float_name, [])
        if len(us) != 1 or us[0].op_type != "QuantizeLinear" or float_name in graph_outputs:
            return None
        return us[0]

    def act(float_name: str) -> tuple[str, QParam] | None:
        """The int8 activation (symmetric, per tensor) behind a DequantizeLinear output."""
        hit = dq_act.get(float_name)
        if hit is None or not hit[1].per_tensor or hit[1].zero_point.dtype != np.int8:
            return None
        return hit

    def dq_node(float_name: str) -> Any:
        return next(n for n in g.node if n.output and n.output[0] == float_name)

    def requantized_at_same_scale(out: str) -> list[Any] | None:
        """``out -> Q -> DQ -> Relu/Clip -> Q'`` with Q and Q' alike: the [Q, DQ] to absorb, else None.

        At one scale and zero point, ``Q(act(DQ(q)))`` is the activation's clamp of the integer
        ``q`` itself, so the layer rounds once, as if the activation followed it directly.
        """
        q = single_q(out)
        if q is None or q.output[0] in graph_outputs:
            return None
        dqs = uses.get(q.output[0], [])
        if len(dqs) != 1 or dqs[0].op_type != "DequantizeLinear" or dqs[0].output[0] in graph_outputs:
            return None
        acts = uses.get(dqs[0].output[0], [])
        if len(acts) != 1 or acts[0].op_type not in ("Relu", "Clip"):
            return None
        q2 = single_q(acts[0].output[0])
        if q2 is None or not qparams[q.output[0]].same_as(qparams[q2.output[0]]):
            return None
        return [q, dqs[0]]

    def finish(node: Any) -> tuple[Any, list[Any], str | None, tuple[float, float] | None] | None:
        """Follow ``node``'s output through an optional Relu/Clip (directly, or between a Q/DQ pair
        at the activation's own scale) to its one int8 Q: (q, absorbed, act, clip)."""
        out = node.output[0]
        absorbed: list[Any] = []
        activation = None
        clip = None
        pair = requantized_at_same_scale(out)
        if pair is not None:
            absorbed += pair
            out = pair[1].output[0]
        us = uses.get(out, [])
        if len(us) == 1 and us[0].op_type in ("Relu", "Clip") and out not in graph_outputs:
            a = us[0]
            if a.op_type == "Clip":
                lo_hi = _clip_bounds(a, consts)
                if lo_hi is None:
                    return None
                clip = lo_hi
            activation = a.op_type
            absorbed.append(a)
            out = a.output[0]
        q = single_q(out)
        if q is None or q.output[0] in graph_outputs:
            return None
        qp = qparams[q.output[0]]
        if not qp.per_tensor or qp.zero_point.dtype != np.int8:
            return None
        return q, absorbed, activation, clip

    for node in g.node:
        op = node.op_type
        if op in ("Conv", "Gemm", "MatMul"):
            step = _layer_step(node, act, qconst, finish, shapes, qparams)
        elif op in ("Add", "Sum"):
            step = _add_step(node, act, finish, qparams, shapes)
        elif op in ("AveragePool", "GlobalAveragePool", "MaxPool"):
            step = _pool_step(node, act, single_q, qparams, shapes)
        elif op == "Concat":
            step = _concat_step(node, act, single_q, qparams, graph_outputs)
        elif op in _MOVES:
            step = _move_step(node, act, single_q, qparams, graph_outputs, opset)
        else:
            step = None
        if step is None:
            continue
        step_, absorbed = step
        q = absorbed[-1]
        for n in absorbed:
            fused.add(id(n))
        for i in node.input:  # the DQ nodes of its activations, if nothing else reads them
            if i in dq_act and all(id(u) in fused or u is node for u in uses.get(i, [])):
                fused.add(id(dq_node(i)))
        fused.add(id(node))
        anchored[id(q)] = step_

    steps: list[Step] = []
    supported = _host_ops()
    for node in g.node:
        if id(node) in anchored:
            steps.append(anchored[id(node)])
            continue
        if id(node) in fused or node.op_type == "Constant":
            continue
        if node.op_type == "DequantizeLinear" and node.input[0] in consts:
            continue  # a weight, already dequantized into consts for the host operators
        if node.op_type not in supported or node.domain not in ("", "ai.onnx"):
            check_supported(model)  # raises, naming the node
        steps.append(Step(name=_node_name(node), op=node.op_type, kind="onnx", where=HOST,
                          inputs=tuple(node.input), outputs=tuple(node.output),
                          attrs={"node": node, "opset": opset}, reason=_host_reason(node.op_type)))
    # the DQ of an activation consumed by both a fused step and a host node must stay: re-add if needed
    produced = set(graph_inputs) | set(consts)
    for s in steps:
        produced.update(s.outputs)
    missing = [i for s in steps for i in s.inputs if i and i not in produced]
    if missing:
        extra = {n.output[0]: n for n in g.node if n.op_type == "DequantizeLinear" and n.output[0] in missing}
        steps = _reinsert(steps, extra, opset)
    return Network(steps=steps, constants=consts, inputs=graph_inputs, outputs=graph_outputs, shapes=shapes,
                   opset=opset, qparams=qparams)


def _reinsert(steps: list[Step], extra: dict[str, Any], opset: int) -> list[Step]:
    out: list[Step] = []
    done: set[str] = set()
    for s in steps:
        for i in s.inputs:
            if i in extra and i not in done:
                n = extra[i]
                out.append(Step(name=_node_name(n), op=n.op_type, kind="onnx", where=HOST, inputs=tuple(n.input),
                                outputs=tuple(n.output), attrs={"node": n, "opset": opset}))
                done.add(i)
        out.append(s)
    return out


def _clip_bounds(node: Any, consts: dict[str, np.ndarray]) -> tuple[float, float] | None:
    a = _attrs(node)
    lo, hi = float(a.get("min", -np.inf)), float(a.get("max", np.inf))
    for idx, which in ((1, "lo"), (2, "hi")):
        if len(node.input) > idx and node.input[idx]:
            v = consts.get(node.input[idx])
            if v is None:
                return None
            if which == "lo":
                lo = float(v)
            else:
                hi = float(v)
    return lo, hi


def _clamp(qp: QParam, activation: str | None, clip: tuple[float, float] | None) -> tuple[int, int]:
    lo, hi = -128, 127
    if activation == "Relu":
        lo = max(lo, qp.z)
    if clip is not None:
        if np.isfinite(clip[0]):
            lo = max(lo, int(np.rint(clip[0] / qp.s)) + qp.z)
        if np.isfinite(clip[1]):
            hi = min(hi, int(np.rint(clip[1] / qp.s)) + qp.z)
    return lo, hi


def _layer_step(node: Any, act: Any, qconst: dict[str, tuple[np.ndarray, QParam]], finish: Any,
                shapes: dict[str, tuple[int, ...]], qparams: dict[str, QParam]) -> tuple[Step, list[Any]] | None:
    """Conv / Gemm / MatMul with int8 operands: an accelerator layer (or an activation matmul)."""
    op = node.op_type
    a = _attrs(node)
    x = act(node.input[0])
    if x is None or x[1].z != 0:
        return None
    end = finish(node)
    if end is None:
        return None
    q, absorbed, activation, clip = end
    out_qp = qparams[q.output[0]]
    lo, hi = _clamp(out_qp, activation, clip)
    w_hit = qconst.get(node.input[1])
    if op == "MatMul" and w_hit is None:
        y = act(node.input[1])
        if y is None or y[1].z != 0 or activation is not None:
            return None
        epi = Epilogue(scale=layer_scale(x[1].s, y[1].s, out_qp.s), bias=None, zero_point=out_qp.z, lo=lo, hi=hi)
        return Step(name=_node_name(node), op=op, kind="matmul", where=NPU, inputs=(x[0], y[0]),
                    outputs=(q.output[0],), attrs={"epilogue": epi, "activation": activation}), absorbed + [q]
    if w_hit is None:
        return None
    w, wq = w_hit
    if w.dtype != np.int8 or np.any(wq.zero_point != 0):
        return None
    alpha, beta = 1.0, 1.0
    if op == "Gemm":
        # alpha folds into the requantization scale and beta into the integer bias (below); a
        # negative or zero alpha would need a scale that is not positive, which the epilogue refuses.
        alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
        if alpha <= 0:
            return None
        w_nk = w if a.get("transB", 0) else w.T
        ch_axis = 0 if a.get("transB", 0) else 1
    elif op == "MatMul":
        if w.ndim != 2:
            return None
        w_nk, ch_axis = w.T, 1
    else:
        w_nk, ch_axis = w, 0
    n_out = w_nk.shape[0]
    sw = wq.scale.reshape(-1).astype(np.float64)
    if sw.size not in (1, n_out) or (sw.size > 1 and wq.axis not in (ch_axis, ch_axis - w.ndim)):
        return None
    sw = np.broadcast_to(sw, (n_out,))
    sx = float(x[1].s)
    bias = None
    bias_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
    if bias_name is not None:
        b_hit = qconst.get(bias_name)
        if b_hit is None:
            return None
        bq, bqp = b_hit
        b_real = (bq.astype(np.float64) - bqp.zero_point.astype(np.float64)) * bqp.scale.astype(np.float64)
        if b_real.shape not in ((), (1,), (n_out,), (1, 1), (1, n_out)):
            return None  # a Gemm C that varies along the rows: not one bias per output channel
        # alpha * (sx sw acc) + beta * C = alpha sx sw (acc + beta C / (alpha sx sw)): one rounding of the bias
        bias = np.rint(beta * np.broadcast_to(b_real.reshape(-1), (n_out,)) / (alpha * sx * sw)).astype(np.int64)
        if np.any(np.abs(bias) >= 2**31):
            return None
        bias = bias.astype(np.int32)
    epi = Epilogue(scale=layer_scale(sx, sw, out_qp.s, alpha=alpha), bias=bias, zero_point=out_qp.z, lo=lo, hi=hi)
    attrs: dict[str, Any] = {"epilogue": epi, "activation": activation, "weight_name": node.input[1],
                             "trans_a": op == "Gemm" and bool(a.get("transA", 0))}
    if op == "Conv":
        kshape = w.shape
        if len(kshape) != 4:
            return None
        pads = tuple(a.get("pads", [0, 0, 0, 0]))
        strides = tuple(a.get("strides", [1, 1]))
        dil = tuple(a.get("dilations", [1, 1]))
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            return None
        attrs.update(weight=np.ascontiguousarray(w.transpose(0, 2, 3, 1)), group=int(a.get("group", 1)),
                     pads=pads, strides=strides, dilations=dil)
        return Step(name=_node_name(node), op=op, kind="conv", where=NPU, inputs=(x[0],),
                    outputs=(q.output[0],), attrs=attrs), absorbed + [q]
    attrs.update(weight=np.ascontiguousarray(w_nk))
    return Step(name=_node_name(node), op=op, kind="gemm", where=NPU, inputs=(x[0],), outputs=(q.output[0],),
                attrs=attrs), absorbed + [q]


def _add_step(node: Any, act: Any, finish: Any, qparams: dict[str, QParam],
              shapes: dict[str, tuple[int, ...]]) -> tuple[Step, list[Any]] | None:
    """``DQ(x_i) -> Add | Sum [-> Relu] -> Q``: on the accelerator (:mod:`.eltwise`) when the inputs
    have one shape and every zero point is 0, else in fixed point on the host."""
    ins = [act(i) for i in node.input]
    if any(i is None for i in ins) or len(ins) < 2:
        return None
    end = finish(node)
    if end is None or end[3] is not None:
        return None
    q, absorbed, activation, _ = end
    out_qp = qparams[q.output[0]]
    lo, hi = _clamp(out_qp, activation, None)
    terms = [(name, qp.s / out_qp.s, qp.z) for name, qp in ins]
    attrs: dict[str, Any] = {"terms": terms, "zero_point": out_qp.z, "lo": lo, "hi": hi}
    in_shapes = {shapes.get(name) for name, _ in ins}
    scales = term_scales([r for _, r, _ in terms])
    if (scales is not None and len(in_shapes) == 1 and None not in in_shapes and out_qp.z == 0 and hi == 127
            and lo in (-128, 0) and all(z == 0 for _, _, z in terms)):
        attrs.update(scales=scales, relu=lo == 0)
        return Step(name=_node_name(node), op=node.op_type, kind="add", where=NPU,
                    inputs=tuple(t[0] for t in terms), outputs=(q.output[0],), attrs=attrs), absorbed + [q]
    return Step(name=_node_name(node), op=node.op_type, kind="add", where=HOST, inputs=tuple(t[0] for t in terms),
                outputs=(q.output[0],), attrs=attrs,
                reason="residual add: fixed-point rescale of each input on the host (broadcast, or a zero point)"), \
        absorbed + [q]


def _concat_step(node: Any, act: Any, single_q: Any, qparams: dict[str, QParam],
                 graph_outputs: list[str]) -> tuple[Step, list[Any]] | None:
    """``DQ(x_i) -> Concat -> Q`` with every ``x_i`` at the output's scale: the int8 values concatenated."""
    ins = [act(i) for i in node.input]
    q = single_q(node.output[0])
    if q is None or q.output[0] in graph_outputs or any(i is None for i in ins):
        return None
    if not all(qp.same_as(qparams[q.output[0]]) for _, qp in ins):
        return None  # each input requantized to the output's scale: the ONNX operators on the host
    return Step(name=_node_name(node), op="Concat", kind="concat", where=HOST, inputs=tuple(n for n, _ in ins),
                outputs=(q.output[0],), attrs={"axis": int(_attrs(node)["axis"])},
                reason=_host_reason("Concat")), [q]


#: Operators that only move elements: on int8 values they give the int8 values a Q/DQ pair at one
#: scale around them would.
_MOVES = ("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze")


def _move_step(node: Any, act: Any, single_q: Any, qparams: dict[str, QParam], graph_outputs: list[str],
               opset: int) -> tuple[Step, list[Any]] | None:
    """``DQ(x) -> Reshape | Transpose | ... -> Q`` at one scale: the operator on the int8 values."""
    x = act(node.input[0])
    q = single_q(node.output[0])
    if x is None or q is None or q.output[0] in graph_outputs:
        return None
    if not x[1].same_as(qparams[q.output[0]]):
        return None
    return Step(name=_node_name(node), op=node.op_type, kind="move", where=HOST,
                inputs=(x[0], *node.input[1:]), outputs=(q.output[0],), attrs={"node": node, "opset": opset},
                reason=_host_reason(node.op_type)), [q]


def _pool_step(node: Any, act: Any, single_q: Any, qparams: dict[str, QParam],
               shapes: dict[str, tuple[int, ...]]) -> tuple[Step, list[Any]] | None:
    x = act(node.input[0])
    q = single_q(node.output[0])
    if x is None or q is None:
        return None
    out_qp = qparams[q.output[0]]
    a = _attrs(node)
    in_shape = shapes.get(x[0]) or shapes.get(node.input[0])
    if in_shape is None or len(in_shape) != 4 or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    if node.op_type == "GlobalAveragePool":
        kernel, strides, pads = (in_shape[2], in_shape[3]), (1, 1), (0, 0, 0, 0)
    else:
        kernel = tuple(a["kernel_shape"])
        strides = tuple(a.get("strides", [1, 1]))
        pads = tuple(a.get("pads", [0, 0, 0, 0]))
        if tuple(a.get("dilations", [1, 1])) != (1, 1) or len(kernel) != 2:
            return None
    attrs: dict[str, Any] = {"kernel": kernel, "strides": strides, "pads": pads,
                             "ceil_mode": bool(a.get("ceil_mode", 0))}
    if node.op_type == "MaxPool":
        if len(node.output) > 1 or not x[1].same_as(out_qp):
            return None
        return Step(name=_node_name(node), op="MaxPool", kind="maxpool", where=HOST, inputs=(x[0],),
                    outputs=(q.output[0],), attrs=attrs, reason=_host_reason("MaxPool")), [q]
    # a window's average divides by its own count where it reaches into the pads (sum_pool_int)
    attrs.update(input_scale=x[1].s, input_zero_point=x[1].z, scale=out_qp.s, zero_point=out_qp.z,
                 count_include_pad=bool(a.get("count_include_pad", 0)))
    return Step(name=_node_name(node), op=node.op_type, kind="avgpool", where=HOST, inputs=(x[0],),
                outputs=(q.output[0],), attrs=attrs, reason=_host_reason("AveragePool")), [q]


_REASONS = {
    "MaxPool": "pooling: the accelerator has no max/compare unit",
    "AveragePool": "pooling: window sums on the host (the vector ALU adds rows, not windows)",
    "Softmax": "exp and division: no such unit on the accelerator",
    "LRN": "square, power and division: no such unit",
    "LayerNormalization": "mean, variance, rsqrt: no such unit",
    "Gelu": "erf: no such unit",
    "Erf": "erf: no such unit",
}


def _host_reason(op: str) -> str:
    if op in ("QuantizeLinear", "DequantizeLinear"):
        return "network input/output conversion, or around a float operator"
    if op in ("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Slice", "Split", "Gather"):
        return "data movement (layout) on the host"
    return _REASONS.get(op, "float operator on the host (no accelerator lowering)")


def check_supported(model: Any) -> None:
    """Refuse, before any work, a node no step can run (naming node, op type and opset)."""
    opset = next((int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), 1)
    ok = _host_ops()
    for node in model.graph.node:
        if node.op_type not in ok or node.domain not in ("", "ai.onnx"):
            raise OnnxError(f"node {_node_name(node)!r}: op type {node.op_type!r} "
                            f"(domain {node.domain or 'ai.onnx'!r}, opset {opset}) has no accelerator lowering "
                            "and no host fallback in tinynpu.")


def _host_ops() -> frozenset[str]:
    """ONNX operators the host fallback (onnx.reference, numpy) runs (function ops such as Gelu expanded)."""
    names = (
        "Abs", "Add", "AveragePool", "BatchNormalization", "Cast", "Ceil", "Clip", "Concat", "Constant",
        "ConstantOfShape", "Conv", "DequantizeLinear", "Div", "Dropout", "Einsum", "Elu", "Equal", "Erf", "Exp",
        "Expand", "Flatten", "Floor", "Gather", "Gelu", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid",
        "HardSwish", "Identity", "LRN", "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax", "MatMul", "Max",
        "MaxPool", "Mean", "Min", "Mul", "Neg", "Pad", "Pow", "PRelu", "QuantizeLinear", "Reciprocal", "ReduceMax",
        "ReduceMean", "ReduceMin", "ReduceSum", "Relu", "Reshape", "Resize", "Shape", "Sigmoid", "Slice", "Softmax",
        "Softplus", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Tile", "Transpose", "Unsqueeze", "Where",
    )
    return frozenset(names)


__all__ = ["HOST", "NPU", "Network", "QParam", "Step", "build_network", "check_supported"]
