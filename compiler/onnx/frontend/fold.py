"""Fold what a static-shape network computes from constants and shapes alone into initializers.

PyTorch's exporters write the shapes of attention and masks as graph
arithmetic: ``Shape -> Gather -> Range -> Unsqueeze -> Expand``,
``Trilu``/``LessOrEqual`` causal masks, ``GatherND`` of position ids,
``IsNaN -> Where`` guards around a softmax of fully masked rows.  Once every
input dimension is fixed (:mod:`.importer`), all of that is a constant: the
``Shape`` of a tensor shape inference knows, and every node all of whose
inputs are constants.  Folding it leaves the host the nodes that depend on the
data, and gives the quantizer tensors it can calibrate (a causal mask that is
an initializer is not an activation).

Nodes are evaluated by :func:`~.evaluate.evaluate_node` (``onnx.reference``,
then onnxruntime, then tinynpu's own numpy), so an operator one of them gets
wrong still folds.  The graph is folded again after each round of shape
inference, as long as a round folds something: a ``Reshape`` whose shape
became a constant gives its output a static shape, whose ``Shape`` then folds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinynpu.compiler.onnx.frontend.evaluate import evaluate_node

#: Nodes kept even on constant inputs: a quantized weight's DequantizeLinear is what marks it quantized.
NOT_FOLDED = ("Dropout", "DequantizeLinear", "QuantizeLinear")

#: Rounds of (shape inference, folding) at most; the exports fold in two or three.
MAX_ROUNDS = 8


def _static_shapes(graph: Any) -> dict[str, tuple[int, ...]]:
    out = {}
    for vi in list(graph.value_info) + list(graph.input) + list(graph.output):
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        dims = tt.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            out[vi.name] = tuple(int(d.dim_value) for d in dims)
    return out


def _shape_value(node: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A ``Shape`` (with its ``start``/``end``, opset 15) or ``Size`` node's value for an input of ``shape``."""
    from onnx import helper

    if node.op_type == "Size":
        return np.asarray(int(np.prod(shape)), dtype=np.int64)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    start, end = attrs.get("start", 0), attrs.get("end")
    return np.asarray(shape[start:end], dtype=np.int64)


def _fold_round(model: Any, opset: int) -> int:
    from onnx import numpy_helper

    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    shapes = _static_shapes(graph)
    outputs = {o.name for o in graph.output}
    kept = []
    folded = 0
    for node in graph.node:
        value: list[np.ndarray] | None = None
        if set(node.output) & outputs or node.op_type in NOT_FOLDED:
            value = None
        elif node.op_type in ("Shape", "Size") and node.input[0] in shapes:
            value = [_shape_value(node, shapes[node.input[0]])]
        elif node.op_type == "Constant" or (node.input and all((not i) or i in consts for i in node.input)):
            try:
                value = evaluate_node(node, opset, {i: consts[i] for i in node.input if i})
            except Exception:  # an operator no evaluator takes stays a node (the host may still run it)
                value = None
        if value is None:
            kept.append(node)
            continue
        for name, v in zip(node.output, value, strict=False):
            if name:
                consts[name] = np.asarray(v)
        folded += 1
    if folded:
        used = {i for n in kept for i in n.input} | outputs
        del graph.node[:]
        graph.node.extend(kept)
        del graph.initializer[:]
        graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in consts.items() if k in used)
        # value_info of folded tensors would now describe initializers: drop them, inference rewrites the rest
        keep_vi = [vi for vi in graph.value_info if vi.name not in consts]
        del graph.value_info[:]
        graph.value_info.extend(keep_vi)
    return folded


def fold_static(model: Any, opset: int) -> tuple[Any, int]:
    """``model`` with its shape and constant subgraphs folded (see the module docstring), and how many
    nodes were folded.  Shape inference runs before each round; its failure stops the folding there
    (the importer's own inference then reports it)."""
    import onnx

    total = 0
    for _ in range(MAX_ROUNDS):
        try:
            model = onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception:
            break
        n = _fold_round(model, opset)
        total += n
        if not n:
            break
    return model, total


__all__ = ["NOT_FOLDED", "fold_static"]
