"""What the host can run, and why a node runs there: the front end's list of ONNX operators and reasons.

An operator neither the accelerator patterns (:mod:`.patterns`) nor the host
fallback (``onnx.reference``, onnxruntime, numpy: :mod:`.evaluate`) can run is refused before any work, naming
node, op type and opset.
"""

from __future__ import annotations

from typing import Any

from tinynpu.errors import OnnxError

_REASONS = {
    "MaxPool": "pooling: the accelerator has no max/compare unit",
    "AveragePool": "pooling: window sums on the host (the vector ALU adds rows, not windows)",
    "Softmax": "float softmax on the host (--nonlinear host, or a form the lowering does not take)",
    "LRN": "square, power and division: no such unit",
    "LayerNormalization": "float norm on the host (--nonlinear host, or a form the lowering does not take)",
    "Gelu": "float GELU on the host (--nonlinear host, or not one int8 input to one QuantizeLinear)",
    "Erf": "float erf on the host (--nonlinear host, or not one int8 input to one QuantizeLinear)",
    "Mul": ("float product on the host: not a product of two activations of one shape (a broadcast), a zero "
            "point, or a scale ratio s_x s_u / s_y of 2^16 or more, which the accelerator's product program "
            "cannot take; or a Mul by a constant no fold takes"),
}

_LAYOUT = ("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Expand", "Concat", "Slice", "Split", "Gather")

#: ONNX operators the host fallback (onnx.reference, numpy) runs (function ops such as Gelu expanded).
HOST_OPS = frozenset((
    "Abs", "Add", "AveragePool", "BatchNormalization", "Cast", "Ceil", "Clip", "Concat", "Constant",
    "ConstantOfShape", "Conv", "DequantizeLinear", "Div", "Dropout", "Einsum", "Elu", "Equal", "Erf", "Exp",
    "Expand", "Flatten", "Floor", "Gather", "Gelu", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid",
    "HardSwish", "Identity", "LRN", "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax", "MatMul", "Max",
    "MaxPool", "Mean", "Min", "Mul", "Neg", "Pad", "Pow", "PRelu", "QuantizeLinear", "Reciprocal", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceSum", "Relu", "Reshape", "Resize", "Shape", "Sigmoid", "Slice", "Softmax",
    "Softplus", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Tile", "Transpose", "Unsqueeze", "Where",
    # around embeddings, masks and attention in PyTorch exports (onnx.reference, else onnxruntime, else
    # tinynpu's own numpy: frontend/evaluate.py)
    "And", "CumSum", "GatherElements", "GatherND", "Greater", "GreaterOrEqual", "IsInf", "IsNaN", "Less",
    "LessOrEqual", "Not", "Or", "Range", "ScatterND", "Size", "Trilu", "Xor",
))


def node_name(node: Any) -> str:
    """A node's name in messages and steps: its own, or its first output's."""
    return str(node.name or node.output[0])


def host_reason(op: str) -> str:
    """Why a node of op type ``op`` runs on the host (the report's note)."""
    if op in ("QuantizeLinear", "DequantizeLinear"):
        return "network input/output conversion, or around a float operator"
    if op in _LAYOUT:
        return "data movement (layout) on the host"
    return _REASONS.get(op, "float operator on the host (no accelerator lowering)")


def runs_on_host(node: Any) -> bool:
    """Whether the host fallback can run ``node`` (an ONNX-domain operator it knows)."""
    return node.op_type in HOST_OPS and node.domain in ("", "ai.onnx")


def check_supported(model: Any) -> None:
    """Refuse, before any work, a node no step can run (naming node, op type and opset)."""
    opset = next((int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), 1)
    for node in model.graph.node:
        if not runs_on_host(node):
            raise OnnxError(f"node {node_name(node)!r}: op type {node.op_type!r} "
                            f"(domain {node.domain or 'ai.onnx'!r}, opset {opset}) has no accelerator lowering "
                            "and no host fallback in tinynpu.")


__all__ = ["HOST_OPS", "check_supported", "host_reason", "node_name", "runs_on_host"]
