"""QOperator models (``QLinearConv``, ``QLinearMatMul``, ``MatMulInteger``, ...) rewritten to QDQ form.

onnxruntime's ``quantize_static(quant_format=QOperator)`` writes each
quantized operator as one node that takes its operands' scales and zero
points as inputs.  Every such node computes exactly what the QDQ pattern
``DequantizeLinear`` (each operand) -> the float operator ->
``QuantizeLinear`` (the output) computes, so it is rewritten into that
pattern here, and the rest of the front end (which recognizes QDQ patterns
as accelerator layers and runs the remaining nodes on the host) takes a
QOperator model like any QDQ model: no second lowering.

``MatMulInteger`` and ``ConvInteger`` have int32 outputs and no output
scale: they become ``DequantizeLinear`` with scale 1 (the integer value
minus its zero point), the float operator, and a ``Cast`` back to int32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

MICROSOFT = "com.microsoft"

#: QLinear operators of the form (x, x_scale, x_zp, y_scale, y_zp) -> y: their float operator.
_UNARY = {"QLinearGlobalAveragePool": "GlobalAveragePool", "QLinearAveragePool": "AveragePool",
          "QLinearSoftmax": "Softmax", "QLinearLeakyRelu": "LeakyRelu", "QLinearSigmoid": "Sigmoid"}
#: QLinear operators of the form (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) -> y.
_BINARY = {"QLinearAdd": "Add", "QLinearMul": "Mul"}
#: Attributes of the QLinear node that its float operator does not have.
_DROPPED_ATTRS = {"channels_last", "opset"}


class _Rewriter:
    """Builds the replacement nodes of one QOperator node (names derived from its name, so unique)."""

    def __init__(self, model: Any) -> None:
        from onnx import numpy_helper

        self.graph = model.graph
        self.consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        self.new_inits: list[Any] = []

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.new_inits.append(numpy_helper.from_array(value, name))
        self.consts[name] = value
        return name

    @staticmethod
    def dq(x: str, scale: str, zp: str, out: str, *, axis: int | None = None) -> Any:
        from onnx import helper

        ins = [x, scale] + ([zp] if zp else [])
        node = helper.make_node("DequantizeLinear", ins, [out], name=out)
        if axis is not None:
            node.attribute.append(helper.make_attribute("axis", axis))
        return node

    @staticmethod
    def q(x: str, scale: str, zp: str, out: str) -> Any:
        from onnx import helper

        return helper.make_node("QuantizeLinear", [x, scale] + ([zp] if zp else []), [out], name=f"{out}_q")

    def per_axis(self, scale: str, axis: int) -> int | None:
        """``axis`` when ``scale`` is a per-channel vector, else None (per tensor)."""
        value = self.consts.get(scale)
        return axis if value is not None and value.size > 1 else None

    def bias(self, node_name: str, bias: str, x_scale: str, w_scale: str, out: str) -> Any:
        """The int32 bias dequantized with scale ``x_scale * w_scale`` (per channel when the weight is)."""
        sx, sw = self.consts.get(x_scale), self.consts.get(w_scale)
        if sx is None or sw is None:
            from tinynpu.errors import OnnxError

            raise OnnxError(f"node {node_name!r}: the scales {x_scale!r} and {w_scale!r} of its bias must be "
                            "constants (tinynpu needs static quantization parameters).")
        if np.size(sx) != 1 or np.ndim(sw) > 1:
            from tinynpu.errors import OnnxError

            raise OnnxError(f"node {node_name!r}: its input scale {x_scale!r} has shape {list(np.shape(sx))} and "
                            f"its weight scale {w_scale!r} {list(np.shape(sw))}; the input scale is one number "
                            "and the weight scale one number or one per output channel.")
        scale = (np.asarray(sx, np.float32) * np.asarray(sw, np.float32)).astype(np.float32)
        scale_name = self.const(f"{node_name}_bias_scale", scale)
        return self.dq(bias, scale_name, "", out, axis=0 if scale.size > 1 else None)

    def integer_operand(self, x: str, zp: str, out: str, *, axis: int) -> Any:
        """``x - zp`` as float (scale 1) for MatMulInteger / ConvInteger; ``axis`` of a per-channel ``zp``."""
        one = self.const(f"{out}_one", np.array(1.0, np.float32))
        return self.dq(x, one, zp, out, axis=self.per_axis(zp, axis) if zp else None)


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name not in _DROPPED_ATTRS}


def _name(node: Any) -> str:
    return str(node.name or node.output[0])


def _inputs(node: Any, count: int) -> list[str]:
    return list(node.input) + [""] * (count - len(node.input))


def _qlinear_conv(rw: _Rewriter, node: Any) -> list[Any]:
    from onnx import helper

    x, xs, xz, w, ws, wz, ys, yz, b = _inputs(node, 9)
    n = _name(node)
    nodes = [rw.dq(x, xs, xz, f"{n}_x"), rw.dq(w, ws, wz, f"{n}_w", axis=rw.per_axis(ws, 0))]
    ins = [f"{n}_x", f"{n}_w"]
    if b:
        nodes.append(rw.bias(n, b, xs, ws, f"{n}_b"))
        ins.append(f"{n}_b")
    nodes += [helper.make_node("Conv", ins, [f"{n}_y"], name=n, **_attrs(node)), rw.q(f"{n}_y", ys, yz, node.output[0])]
    return nodes


def _qlinear_matmul(rw: _Rewriter, node: Any) -> list[Any]:
    from onnx import helper

    a, as_, az, b, bs, bz, ys, yz = _inputs(node, 8)
    n = _name(node)
    return [rw.dq(a, as_, az, f"{n}_a"), rw.dq(b, bs, bz, f"{n}_b", axis=rw.per_axis(bs, 1)),
            helper.make_node("MatMul", [f"{n}_a", f"{n}_b"], [f"{n}_y"], name=n),
            rw.q(f"{n}_y", ys, yz, node.output[0])]


def _qgemm(rw: _Rewriter, node: Any) -> list[Any]:
    from onnx import helper

    a, as_, az, b, bs, bz, c, ys, yz = _inputs(node, 9)
    n = _name(node)
    attrs = _attrs(node)
    nodes = [rw.dq(a, as_, az, f"{n}_a"),
             rw.dq(b, bs, bz, f"{n}_b", axis=rw.per_axis(bs, 0 if attrs.get("transB", 0) else 1))]
    ins = [f"{n}_a", f"{n}_b"]
    if c:
        nodes.append(rw.bias(n, c, as_, bs, f"{n}_c"))
        ins.append(f"{n}_c")
    if ys:  # quantized output
        nodes += [helper.make_node("Gemm", ins, [f"{n}_y"], name=n, **attrs), rw.q(f"{n}_y", ys, yz, node.output[0])]
    else:  # float output
        nodes.append(helper.make_node("Gemm", ins, [node.output[0]], name=n, **attrs))
    return nodes


def _unary(rw: _Rewriter, node: Any) -> list[Any]:
    from onnx import helper

    x, xs, xz, ys, yz = _inputs(node, 5)
    n = _name(node)
    return [rw.dq(x, xs, xz, f"{n}_x"),
            helper.make_node(_UNARY[node.op_type], [f"{n}_x"], [f"{n}_y"], name=n, **_attrs(node)),
            rw.q(f"{n}_y", ys, yz, node.output[0])]


def _binary(rw: _Rewriter, node: Any) -> list[Any]:
    from onnx import helper

    a, as_, az, b, bs, bz, ys, yz = _inputs(node, 8)
    n = _name(node)
    return [rw.dq(a, as_, az, f"{n}_a"), rw.dq(b, bs, bz, f"{n}_b"),
            helper.make_node(_BINARY[node.op_type], [f"{n}_a", f"{n}_b"], [f"{n}_y"], name=n, **_attrs(node)),
            rw.q(f"{n}_y", ys, yz, node.output[0])]


def _qlinear_concat(rw: _Rewriter, node: Any) -> list[Any]:
    from onnx import helper

    ys, yz, *triples = list(node.input)
    n = _name(node)
    nodes, parts = [], []
    for i in range(0, len(triples), 3):
        x, xs, xz = triples[i:i + 3]
        parts.append(f"{n}_x{i // 3}")
        nodes.append(rw.dq(x, xs, xz, parts[-1]))
    return nodes + [helper.make_node("Concat", parts, [f"{n}_y"], name=n, **_attrs(node)),
                    rw.q(f"{n}_y", ys, yz, node.output[0])]


def _integer(op: str) -> Callable[[_Rewriter, Any], list[Any]]:
    """MatMulInteger / ConvInteger: (a - a_zp) op (b - b_zp) in float, cast to int32."""

    def rewrite(rw: _Rewriter, node: Any) -> list[Any]:
        from onnx import TensorProto, helper

        a, b, az, bz = _inputs(node, 4)
        n = _name(node)
        b_axis = 1 if op == "MatMul" else 0  # a per-channel weight zero point: per column, per filter
        return [rw.integer_operand(a, az, f"{n}_a", axis=0), rw.integer_operand(b, bz, f"{n}_b", axis=b_axis),
                helper.make_node(op, [f"{n}_a", f"{n}_b"], [f"{n}_y"], name=n, **_attrs(node)),
                helper.make_node("Cast", [f"{n}_y"], [node.output[0]], name=f"{n}_cast", to=TensorProto.INT32)]

    return rewrite


_REWRITES: dict[str, Callable[[_Rewriter, Any], list[Any]]] = {
    "QLinearConv": _qlinear_conv, "QLinearMatMul": _qlinear_matmul, "QGemm": _qgemm,
    "QLinearConcat": _qlinear_concat, "MatMulInteger": _integer("MatMul"), "ConvInteger": _integer("Conv"),
    **{op: _unary for op in _UNARY}, **{op: _binary for op in _BINARY},
}

#: Every operator :func:`to_qdq` rewrites.
QOPERATOR_OPS = frozenset(_REWRITES)


def to_qdq(model: Any) -> int:
    """Rewrite every QOperator node of ``model`` (in place) into its QDQ pattern; the number rewritten."""
    rw = _Rewriter(model)
    out: list[Any] = []
    count = 0
    for node in model.graph.node:
        rewrite = _REWRITES.get(node.op_type)
        if rewrite is None or node.domain not in ("", "ai.onnx", MICROSOFT):
            out.append(node)
            continue
        out += rewrite(rw, node)
        count += 1
    if count:
        del model.graph.node[:]
        model.graph.node.extend(out)
        model.graph.initializer.extend(rw.new_inits)
        if not any(n.domain == MICROSOFT for n in model.graph.node):
            keep = [o for o in model.opset_import if o.domain != MICROSOFT]
            del model.opset_import[:]
            model.opset_import.extend(keep)
    return count


__all__ = ["QOPERATOR_OPS", "to_qdq"]
