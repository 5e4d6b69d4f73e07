"""The transformer nonlinearities of a QDQ graph as typed steps, and affine folds into matmuls.

With ``--nonlinear npu`` (the default) the front end takes, after the integer
patterns (:mod:`.patterns`), what used to run in float on the host:

``DQ(x) -> Softmax(axis=-1) -> Q``
    a :class:`~tinynpu.compiler.onnx.ir.SoftmaxStep` (:mod:`~tinynpu.compiler.onnx.lower.softmax`);
``DQ(x) -> LayerNormalization(axis=-1) -> Q`` and RMSNorm as exporters write it
    (``x * Reciprocal(Sqrt(ReduceMean(Pow(x, 2)) + eps)) * gamma``), and LayerNorm written out in primitive
    operators (:mod:`.layernorm`), Q/DQ pairs between the nodes allowed:
    a :class:`~tinynpu.compiler.onnx.ir.NormStep` (:mod:`~tinynpu.compiler.onnx.lower.norm`);
a unary elementwise segment
    a connected run of elementwise operators whose other inputs are scalar constants (GELU in its
    Erf, tanh or ``Gelu`` form, SiLU, sigmoid, tanh, HardSwish, scalar Mul/Div/Add/Sub, Pow by a
    scalar, the softmax guard ``Where(IsNaN(p), 0, p)``, Q/DQ pairs between them...) from one int8
    tensor to one QuantizeLinear: a
    :class:`~tinynpu.compiler.onnx.ir.LutStep`, its table the segment evaluated on all 256 codes by
    the host's own evaluator (:mod:`~tinynpu.compiler.onnx.lower.lut`).

A softmax along another axis, or a norm or scale the instructions cannot take,
becomes the same step on the host (its ONNX nodes, ``chain``), the reason
naming the node.  :func:`fold_affine` folds the bias ``Add`` (a per-column
constant) and scalar ``Mul``/``Div`` that follow a matmul into its epilogue,
where the matmul's output feeds only them (the bias before the requantization:
one rounding where the host rounded twice).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.frontend.hostops import node_name
from tinynpu.compiler.onnx.intops import Epilogue
from tinynpu.compiler.onnx.ir import HOST, NPU, GemmStep, MatmulStep, NormStep, OnnxStep, SoftmaxStep, Step
from tinynpu.errors import OnnxError

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.frontend.qdq import QdqGraph

Match = tuple[Step, list[Any]]

#: Operators a unary segment may hold: a function of one input element each.
UNARY = frozenset(("Abs", "Ceil", "Clip", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
                   "IsNaN", "LeakyRelu", "Neg", "Reciprocal", "Relu", "Sigmoid", "Softplus", "Sqrt", "Tanh"))
#: Operators of several inputs a segment may hold when each other input is a scalar constant or inside the
#: segment (``Where``: the softmax guard ``Where(IsNaN(p), 0, p)`` the exporters write after a softmax).
BINARY = frozenset(("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Where"))
QDQ = frozenset(("QuantizeLinear", "DequantizeLinear"))


def _attrs(node: Any) -> dict[str, Any]:
    from tinynpu.compiler.onnx.frontend.qdq import node_attrs

    return node_attrs(node)


def _host(node: Any, opset: int) -> OnnxStep:
    from tinynpu.compiler.onnx.frontend.hostops import host_reason

    return OnnxStep(name=node_name(node), op=node.op_type, where=HOST, inputs=tuple(node.input),
                    outputs=tuple(node.output), node=node, opset=opset, reason=host_reason(node.op_type))


# -- affine folds into a matmul's epilogue ---------------------------------------------------------------


def fold_affine(g: QdqGraph, match: Match) -> Match:
    """``match`` (a Gemm/MatMul step) with every bias Add and scalar scaling after it folded into its epilogue."""
    step, absorbed = match
    while isinstance(step, (GemmStep, MatmulStep)) and step.activation is None:
        folded = _fold_once(g, step, absorbed[-1])
        if folded is None:
            break
        step, extra = folded
        absorbed = absorbed + extra
    return step, absorbed


def _fold_once(g: QdqGraph, step: GemmStep | MatmulStep, q: Any) -> tuple[Step, list[Any]] | None:
    """``Q -> DQ -> Add/Sub/Mul/Div(constant) -> Q'`` after the step's Q, folded; None when it does not hold."""
    epi = step.epilogue
    dq = g._only_reader(q.output[0], ("DequantizeLinear",))
    op = None if dq is None else g._only_reader(dq.output[0], ("Add", "Sub", "Mul", "Div"))
    q2 = None if op is None else g.output_q(op.output[0])
    if dq is None or op is None or q2 is None or epi.lo != -128 or epi.hi != 127:
        return None
    const = _constant_operand(g, op, dq.output[0])
    if const is None:
        return None
    out = g.qparams[q2.output[0]]
    if not out.per_tensor or out.zero_point.dtype != np.int8 or not g.qparams[q.output[0]].per_tensor:
        return None
    n = epi.scale.size if epi.bias is None else epi.bias.size
    c = np.asarray(g.consts[const], dtype=np.float64)
    shape = g.shapes.get(op.output[0])
    if shape is None or not (c.size == 1 or (c.shape and c.shape[-1] == c.size and c.size == shape[-1])):
        return None
    col: np.ndarray = np.broadcast_to(c.reshape(-1), (shape[-1],))
    # the real value of one accumulator unit
    unit: np.ndarray = np.broadcast_to(epi.scale.astype(np.float64) * g.qparams[q.output[0]].s, col.shape)
    bias: np.ndarray = (np.zeros(col.shape) if epi.bias is None
                        else np.broadcast_to(epi.bias.astype(np.float64), col.shape))
    if op.op_type in ("Add", "Sub"):
        bias = bias + (col if op.op_type == "Add" else -col) / unit
    elif np.all(col > 0):
        unit = unit * (col if op.op_type == "Mul" else 1.0 / col)
    else:
        return None
    bias_i = np.rint(bias)
    if np.any(np.abs(bias_i) >= 2**31) or n not in (1, col.size):
        return None
    new = Epilogue(scale=(unit / out.s).astype(np.float32), bias=None if not bias_i.any() else bias_i.astype(np.int32),
                   zero_point=out.z, lo=-128, hi=127)
    reason = f"{op.op_type} {node_name(op)!r} folded into the epilogue"
    return replace(step, epilogue=new, outputs=(q2.output[0],),
                   reason=(step.reason + "; " if step.reason else "") + reason), [dq, op, q2]


def _constant_operand(g: QdqGraph, op: Any, x: str) -> str | None:
    """The constant ``op`` applies to ``x``: its second input, or for ``Add``/``Mul`` either one (the
    TorchScript exporter writes a Linear's bias first, ``Add(bias, MatMul)``); None when there is none."""
    first, second = op.input
    if first == x and second in g.consts:
        return str(second)
    if second == x and first in g.consts and op.op_type in ("Add", "Mul"):
        return str(first)
    return None


def nonlinear_at(g: QdqGraph, node: Any) -> Match | None:
    """The softmax or norm step at ``node``, or None."""
    if node.op_type == "Softmax":
        return softmax_step(g, node)
    if node.op_type == "LayerNormalization":
        return layernorm_step(g, node)
    if node.op_type == "Reciprocal":
        from tinynpu.compiler.onnx.frontend.rmsnorm import rmsnorm_step

        return rmsnorm_step(g, node)
    if node.op_type == "Add":
        from tinynpu.compiler.onnx.frontend.rotary import rotary_step

        return rotary_step(g, node)
    if node.op_type == "Div":
        from tinynpu.compiler.onnx.frontend.layernorm import decomposed_layernorm_step

        return decomposed_layernorm_step(g, node)
    return None


# -- softmax and norms ------------------------------------------------------------------------------------


def _last_axis(node: Any, rank: int | None, default: int) -> bool:
    axis = int(_attrs(node).get("axis", default))
    return rank is not None and axis in (-1, rank - 1)


def softmax_step(g: QdqGraph, node: Any) -> Match | None:
    """``DQ(x) -> Softmax -> Q``: on the accelerator along the last axis, else on the host (the reason says why)."""
    from tinynpu.compiler.onnx.lower.softmax import check_width, softmax_params

    x = g.act(node.input[0])
    q = g.output_q(node.output[0])
    if x is None or q is None:
        return None
    out = g.qparams[q.output[0]]
    shape = g.shapes.get(x[0]) or g.shapes.get(node.input[0])
    name = node_name(node)
    chain = (_host(g.dq_node(node.input[0]), g.opset), _host(node, g.opset), _host(q, g.opset))
    common: dict[str, Any] = {"name": name, "op": "Softmax", "inputs": (x[0],), "outputs": (q.output[0],),
                              "chain": chain}
    what = f"Softmax {name!r}"
    if shape is None or g.opset < 13 or not _last_axis(node, len(shape), -1):
        axis = _attrs(node).get("axis", -1)
        return SoftmaxStep(**common, where=HOST, params=None,
                           reason=f"softmax along axis {axis} of {shape}, not the last: on the host"), [node, q]
    try:
        check_width(shape[-1], what=what)
        params = softmax_params(x[1].s, out.s, out.z, what=what)
    except OnnxError as exc:
        return SoftmaxStep(**common, where=HOST, params=None, reason=str(exc)), [node, q]
    return SoftmaxStep(**common, where=NPU, params=params, reason="softmax on the accelerator"), [node, q]


def layernorm_step(g: QdqGraph, node: Any) -> Match | None:
    """``DQ(x) -> LayerNormalization(axis=-1) -> Q``."""
    x = g.act(node.input[0])
    q = g.output_q(node.output[0])
    if x is None or q is None or any(o for o in node.output[1:]):
        return None
    shape = g.shapes.get(x[0]) or g.shapes.get(node.input[0])
    gamma = g.consts.get(node.input[1])
    beta = g.consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if shape is None or gamma is None or (len(node.input) > 2 and node.input[2] and beta is None):
        return None
    chain = (_host(g.dq_node(node.input[0]), g.opset), _host(node, g.opset), _host(q, g.opset))
    eps = float(_attrs(node).get("epsilon", 1e-5))
    last = _last_axis(node, len(shape), -1)
    return _norm(g, node, x, q, chain, shape, center=True, eps=eps, gamma=gamma, beta=beta, last=last), [node, q]


def _norm(g: QdqGraph, node: Any, x: tuple[str, Any], q: Any, chain: tuple[OnnxStep, ...],
          shape: tuple[int, ...], *, center: bool, eps: float, gamma: np.ndarray, beta: np.ndarray | None,
          last: bool) -> NormStep:
    from tinynpu.compiler.onnx.lower.norm import check_norm_scale, norm_params

    name = node_name(node)
    out = g.qparams[q.output[0]]
    op = "LayerNormalization" if center else "RMSNorm"
    common: dict[str, Any] = {"name": name, "op": op, "inputs": (x[0],), "outputs": (q.output[0],), "chain": chain}
    what = f"{op} {name!r}"
    if not last:
        return NormStep(**common, where=HOST, params=None, reason=f"{what}: normalizes more than the last axis of "
                        f"{shape}: on the host")
    try:
        check_norm_scale(x[1].s, what=what)
        params = norm_params(shape[-1], center=center, s_in=x[1].s, z_in=x[1].z, eps=eps, gamma=gamma, beta=beta,
                             s_out=out.s, z_out=out.z, what=what)
    except OnnxError as exc:
        return NormStep(**common, where=HOST, params=None, reason=str(exc))
    return NormStep(**common, where=NPU, params=params, reason=f"{op.lower()} on the accelerator")


__all__ = ["BINARY", "QDQ", "UNARY", "fold_affine", "layernorm_step", "nonlinear_at", "softmax_step"]
