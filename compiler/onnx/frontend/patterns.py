"""The integer patterns of a QDQ graph, each matched at its operator node and built into one typed step.

:func:`step_at` tries the pattern of a node's op type (the list is in
:mod:`.qdq`); a pattern that does not hold (a zero point, a per-axis scale, a
shape it cannot take) gives None and the nodes stay ONNX operators on the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.frontend.hostops import host_reason, node_name
from tinynpu.compiler.onnx.frontend.requant import layer_scale
from tinynpu.compiler.onnx.intops import Epilogue
from tinynpu.compiler.onnx.ir import (
    HOST,
    NPU,
    AddStep,
    AddTerm,
    AvgPoolStep,
    ConcatStep,
    ConvStep,
    GemmStep,
    MatmulStep,
    MaxPoolStep,
    MoveStep,
    PoolWindow,
    ProductStep,
    QParam,
    Step,
)
from tinynpu.compiler.onnx.lower.eltwise import product_scale, term_scales

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.frontend.qdq import QdqGraph

#: A matched pattern: its step and the nodes it absorbs, the QuantizeLinear it ends at last.
Match = tuple[Step, list[Any]]

#: Operators that only move elements: on int8 values they give the int8 values a Q/DQ pair at one
#: scale around them would.
MOVES = ("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Expand")


def step_at(g: QdqGraph, node: Any) -> Match | None:
    """The step of the integer pattern at ``node``, or None."""
    op = node.op_type
    if op in ("Conv", "Gemm", "MatMul"):
        return layer_step(g, node)
    if op in ("Add", "Sum"):
        return add_step(g, node)
    if op == "Mul":
        return product_step(g, node)
    if op in ("AveragePool", "GlobalAveragePool", "MaxPool"):
        return pool_step(g, node)
    if op == "Concat":
        return concat_step(g, node)
    if op in MOVES:
        return move_step(g, node)
    if op == "Split":
        return split_step(g, node)
    return None


def _attrs(node: Any) -> dict[str, Any]:
    from tinynpu.compiler.onnx.frontend.qdq import node_attrs

    return node_attrs(node)


def clip_bounds(node: Any, consts: dict[str, np.ndarray]) -> tuple[float, float] | None:
    """A Clip's (min, max) from its attributes or constant inputs; None when an input is not constant."""
    a = _attrs(node)
    bounds = [float(a.get("min", -np.inf)), float(a.get("max", np.inf))]
    for idx in (1, 2):
        if len(node.input) > idx and node.input[idx]:
            v = consts.get(node.input[idx])
            if v is None:
                return None
            bounds[idx - 1] = float(v)
    return bounds[0], bounds[1]


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


def layer_step(g: QdqGraph, node: Any) -> Match | None:
    """Conv / Gemm / MatMul with int8 operands: an accelerator layer (or an activation matmul)."""
    x = g.act(node.input[0])
    end = g.tail(node) if x is not None and x[1].z == 0 else None
    if x is None or end is None:
        return None
    out_qp = g.qparams[end.q.output[0]]
    lo, hi = _clamp(out_qp, end.activation, end.clip)
    w_hit = g.qconst.get(node.input[1])
    if node.op_type == "MatMul" and w_hit is None:
        y = g.act(node.input[1])
        if y is None or y[1].z != 0 or end.activation is not None:
            return None
        epi = Epilogue(scale=layer_scale(x[1].s, y[1].s, out_qp.s), bias=None, zero_point=out_qp.z, lo=lo, hi=hi)
        return MatmulStep(name=node_name(node), op="MatMul", where=NPU, inputs=(x[0], y[0]),
                          outputs=(end.q.output[0],), epilogue=epi, activation=None), end.absorbed + [end.q]
    if w_hit is None or w_hit[0].dtype != np.int8 or np.any(w_hit[1].zero_point != 0):
        return None
    a = _attrs(node)
    w, wq = w_hit
    layout = _weight_layout(node.op_type, a, w)
    if layout is None:
        return None
    w_nk, ch_axis, alpha, beta = layout
    n_out = w_nk.shape[0]
    sw = wq.scale.reshape(-1).astype(np.float64)
    if sw.size not in (1, n_out) or (sw.size > 1 and wq.axis not in (ch_axis, ch_axis - w.ndim)):
        return None
    sw = np.broadcast_to(sw, (n_out,))
    sx = float(x[1].s)
    bias_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
    bias = None
    if bias_name is not None:
        bias = _integer_bias(g.qconst.get(bias_name), n_out, alpha * sx * sw, beta)
        if bias is None:
            return None
    epi = Epilogue(scale=layer_scale(sx, sw, out_qp.s, alpha=alpha), bias=bias, zero_point=out_qp.z, lo=lo, hi=hi)
    common = {"name": node_name(node), "op": node.op_type, "where": NPU, "inputs": (x[0],),
              "outputs": (end.q.output[0],), "epilogue": epi, "activation": end.activation,
              "weight_name": node.input[1]}
    if node.op_type == "Conv":
        step = _conv_step(a, w, common)
        return None if step is None else (step, end.absorbed + [end.q])
    return GemmStep(**common, weight=np.ascontiguousarray(w_nk),
                    trans_a=node.op_type == "Gemm" and bool(a.get("transA", 0))), end.absorbed + [end.q]


def _weight_layout(op: str, a: dict[str, Any], w: np.ndarray) -> tuple[np.ndarray, int, float, float] | None:
    """The weights as N x K (a conv's stay K x ...), their output-channel axis, and Gemm's alpha, beta."""
    if op == "Gemm":
        # alpha folds into the requantization scale and beta into the integer bias; a negative or
        # zero alpha would need a scale that is not positive, which the epilogue refuses.
        alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
        if alpha <= 0:
            return None
        trans_b = bool(a.get("transB", 0))
        return (w if trans_b else w.T), (0 if trans_b else 1), alpha, beta
    if op == "MatMul":
        return (w.T, 1, 1.0, 1.0) if w.ndim == 2 else None
    return w, 0, 1.0, 1.0


def _integer_bias(hit: tuple[np.ndarray, QParam] | None, n_out: int, acc_scale: np.ndarray,
                  beta: float) -> np.ndarray | None:
    """The bias in accumulator units, ``round(beta C / (alpha sx sw))`` (one rounding); None when
    it is not one constant per output channel or leaves int32."""
    if hit is None:
        return None
    bq, bqp = hit
    b_real = (bq.astype(np.float64) - bqp.zero_point.astype(np.float64)) * bqp.scale.astype(np.float64)
    if b_real.shape not in ((), (1,), (n_out,), (1, 1), (1, n_out)):
        return None  # a Gemm C that varies along the rows: not one bias per output channel
    bias = np.rint(beta * np.broadcast_to(b_real.reshape(-1), (n_out,)) / acc_scale).astype(np.int64)
    if np.any(np.abs(bias) >= 2**31):
        return None
    return bias.astype(np.int32)


def _conv_step(a: dict[str, Any], w: np.ndarray, common: dict[str, Any]) -> ConvStep | None:
    if w.ndim != 4 or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    return ConvStep(**common, weight=np.ascontiguousarray(w.transpose(0, 2, 3, 1)), group=int(a.get("group", 1)),
                    pads=tuple(a.get("pads", [0, 0, 0, 0])), strides=tuple(a.get("strides", [1, 1])),
                    dilations=tuple(a.get("dilations", [1, 1])))


def add_step(g: QdqGraph, node: Any) -> Match | None:
    """``DQ(x_i) -> Add | Sum [-> Relu] -> Q``: on the accelerator (:mod:`~tinynpu.compiler.onnx.lower.eltwise`)
    when the inputs have one shape and every zero point is 0, else in fixed point on the host."""
    ins = [g.act(i) for i in node.input]
    if len(ins) < 2 or any(i is None for i in ins):
        return None
    end = g.tail(node)
    if end is None or end.clip is not None:
        return None
    out_qp = g.qparams[end.q.output[0]]
    lo, hi = _clamp(out_qp, end.activation, None)
    terms = tuple(AddTerm(name, qp.s / out_qp.s, qp.z) for name, qp in (i for i in ins if i is not None))
    common = {"name": node_name(node), "op": node.op_type, "inputs": tuple(t.name for t in terms),
              "outputs": (end.q.output[0],), "terms": terms, "zero_point": out_qp.z, "lo": lo, "hi": hi}
    in_shapes = {g.shapes.get(t.name) for t in terms}
    scales = term_scales([t.ratio for t in terms])
    if (scales is not None and len(in_shapes) == 1 and None not in in_shapes and out_qp.z == 0 and hi == 127
            and lo in (-128, 0) and all(t.zero_point == 0 for t in terms)):
        return AddStep(**common, where=NPU, scales=scales, relu=lo == 0), end.absorbed + [end.q]
    return AddStep(**common, where=HOST, reason="residual add: fixed-point rescale of each input on the host "
                   "(broadcast, or a zero point)"), end.absorbed + [end.q]


def product_step(g: QdqGraph, node: Any) -> Match | None:
    """``DQ(x) * DQ(u) -> Q`` of two activations of one shape, every zero point 0 (Llama's SwiGLU, ``silu(gate) *
    up``): the product program (:mod:`~tinynpu.compiler.onnx.lower.eltwise`).  A Mul by a constant is not this
    pattern (the nonlinear and affine folds take it); a broadcast, a zero point, a fused activation or a ratio
    ``s_x s_u / s_y`` the program cannot hold leave the float ``Mul`` on the host (its reason in the report)."""
    ins = [g.act(i) for i in node.input]
    end = g.tail(node) if len(ins) == 2 and None not in ins else None
    if end is None or end.activation is not None:
        return None
    (x, qx), (u, qu) = (i for i in ins if i is not None)
    out_qp = g.qparams[end.q.output[0]]
    shapes = {g.shapes.get(i) for i in node.input} | {g.shapes.get(x), g.shapes.get(u)}
    scale = product_scale(qx.s * qu.s / out_qp.s)
    if (scale is None or len(shapes) != 1 or None in shapes or not (qx.per_tensor and qu.per_tensor)
            or (qx.z, qu.z, out_qp.z) != (0, 0, 0)):
        return None
    return ProductStep(name=node_name(node), op="Mul", where=NPU, inputs=(x, u), outputs=(end.q.output[0],),
                       scale=scale, reason="product of two activations on the accelerator"), end.absorbed + [end.q]


def concat_step(g: QdqGraph, node: Any) -> Match | None:
    """``DQ(x_i) -> Concat -> Q`` with every ``x_i`` at the output's scale: the int8 values concatenated."""
    ins = [g.act(i) for i in node.input]
    q = g.output_q(node.output[0])
    if q is None or any(i is None for i in ins):
        return None
    if not all(i is not None and i[1].same_as(g.qparams[q.output[0]]) for i in ins):
        return None  # each input requantized to the output's scale: the ONNX operators on the host
    return ConcatStep(name=node_name(node), op="Concat", where=HOST, inputs=tuple(i[0] for i in ins if i),
                      outputs=(q.output[0],), axis=int(_attrs(node)["axis"]), reason=host_reason("Concat")), [q]


def move_step(g: QdqGraph, node: Any) -> Match | None:
    """``DQ(x) -> Reshape | Transpose | ... -> Q`` at one scale: the operator on the int8 values."""
    x = g.act(node.input[0])
    q = g.output_q(node.output[0])
    if x is None or q is None or not x[1].same_as(g.qparams[q.output[0]]):
        return None
    return MoveStep(name=node_name(node), op=node.op_type, where=HOST, inputs=(x[0], *node.input[1:]),
                    outputs=(q.output[0],), node=node, opset=g.opset, reason=host_reason(node.op_type)), [q]


def split_step(g: QdqGraph, node: Any) -> Match | None:
    """``DQ(x) -> Split -> Q_i`` with every ``Q_i`` at ``x``'s scale (GPT-2's fused QKV projection split in
    three): the int8 values split, a host move.  The step takes the place of the first of the Q nodes (each
    later reader comes after it), so that Q ends the absorbed nodes."""
    x = g.act(node.input[0])
    found = [g.output_q(o) if o else None for o in node.output]
    qs = [q for q in found if q is not None]
    if x is None or len(qs) != len(found) or not all(x[1].same_as(g.qparams[q.output[0]]) for q in qs):
        return None
    order = {id(n): i for i, n in enumerate(g.nodes)}
    first, *rest = sorted(qs, key=lambda q: order[id(q)])
    return MoveStep(name=node_name(node), op="Split", where=HOST, inputs=(x[0], *node.input[1:]),
                    outputs=tuple(q.output[0] for q in qs), node=node, opset=g.opset,
                    reason="data movement (a split of int8 values at one scale) on the host"), [*rest, first]


def pool_step(g: QdqGraph, node: Any) -> Match | None:
    """``DQ(x) -> MaxPool | AveragePool | GlobalAveragePool -> Q``: on the int8 values (host)."""
    x = g.act(node.input[0])
    q = g.single_q(node.output[0])
    if x is None or q is None:
        return None
    out_qp = g.qparams[q.output[0]]
    window = _pool_window(node, g.shapes.get(x[0]) or g.shapes.get(node.input[0]))
    if window is None:
        return None
    common = {"name": node_name(node), "op": node.op_type, "where": HOST, "inputs": (x[0],),
              "outputs": (q.output[0],), "window": window}
    if node.op_type == "MaxPool":
        if len(node.output) > 1 or not x[1].same_as(out_qp):
            return None
        return MaxPoolStep(**common, reason=host_reason("MaxPool")), [q]
    # a window's average divides by its own count where it reaches into the pads (sum_pool_int)
    return AvgPoolStep(**common, input_scale=x[1].s, input_zero_point=x[1].z, scale=out_qp.s,
                       zero_point=out_qp.z, count_include_pad=bool(_attrs(node).get("count_include_pad", 0)),
                       reason=host_reason("AveragePool")), [q]


def _pool_window(node: Any, in_shape: tuple[int, ...] | None) -> PoolWindow | None:
    a = _attrs(node)
    if in_shape is None or len(in_shape) != 4 or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    if node.op_type == "GlobalAveragePool":
        return PoolWindow((in_shape[2], in_shape[3]), (1, 1), (0, 0, 0, 0), bool(a.get("ceil_mode", 0)))
    kernel = tuple(a["kernel_shape"])
    if tuple(a.get("dilations", [1, 1])) != (1, 1) or len(kernel) != 2:
        return None
    return PoolWindow(kernel, tuple(a.get("strides", [1, 1])), tuple(a.get("pads", [0, 0, 0, 0])),
                      bool(a.get("ceil_mode", 0)))


__all__ = ["MOVES", "Match", "add_step", "clip_bounds", "concat_step", "layer_step", "move_step", "pool_step",
           "product_step", "split_step", "step_at"]
