"""One ONNX node evaluated on numpy values: ``onnx.reference``, then onnxruntime, then tinynpu's own numpy.

Three evaluators, tried in this order, because none of them takes every node
the PyTorch exporters write:

1. ``onnx.reference`` (what the host steps have always used): the ONNX
   specification in Python, every operator, but with bugs in some (its
   ``GatherElements`` cannot take indices smaller than the data along a
   non-gathered axis, e.g. data (1, 512) and indices (1, 32), which is how
   torch writes ``position_ids[:, :seq]``);
2. onnxruntime on a one-node model: a maintained implementation, but it
   refuses type combinations it has no kernel for (``Equal`` on bool, ...);
3. :data:`OWN_OPS`: numpy implementations, written from the ONNX operator
   specification, of the mask and indexing operators of the exports.

The first that succeeds gives the values.  An error from all three is the
first one's (the specification's evaluator says best what is wrong).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _gather_elements(node: Any, data: np.ndarray, indices: np.ndarray) -> list[np.ndarray]:
    axis = int(_attrs(node).get("axis", 0)) % data.ndim
    idx = np.where(indices < 0, indices + data.shape[axis], indices)
    # output[i][j][k] = data[i][idx[i][j][k]][k] (axis 1): every other axis indexes by its own position
    grid: list[np.ndarray] = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    return [data[tuple(grid)]]


def _gather_nd(node: Any, data: np.ndarray, indices: np.ndarray) -> list[np.ndarray]:
    b = int(_attrs(node).get("batch_dims", 0))
    k = indices.shape[-1]
    batch = data.shape[:b]
    d = data.reshape((-1, *data.shape[b:]))
    ix = indices.reshape((d.shape[0], -1, k))
    ix = np.where(ix < 0, ix + np.array(d.shape[1:1 + k]), ix)
    out = np.stack([d[n][tuple(ix[n].T)] for n in range(d.shape[0])])
    return [out.reshape(batch + indices.shape[b:-1] + data.shape[b + k:])]


def _scatter_nd(node: Any, data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> list[np.ndarray]:
    reduction = _attrs(node).get("reduction", b"none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    out = np.array(data, copy=True)
    k = indices.shape[-1]
    flat_i = indices.reshape(-1, k)
    flat_u = updates.reshape((flat_i.shape[0], *data.shape[k:]))
    ops: dict[str, Callable[[Any, Any], Any]] = {"add": np.add, "mul": np.multiply, "max": np.maximum,
                                                  "min": np.minimum}
    for i, u in zip(flat_i, flat_u, strict=True):
        at = tuple(int(v) for v in i)
        out[at] = u if reduction == "none" else ops[reduction](out[at], u)
    return [out]


def _trilu(node: Any, x: np.ndarray, k: np.ndarray | None = None) -> list[np.ndarray]:
    diagonal = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    upper = bool(_attrs(node).get("upper", 1))
    return [np.triu(x, diagonal) if upper else np.tril(x, diagonal)]


def _cum_sum(node: Any, x: np.ndarray, axis: np.ndarray) -> list[np.ndarray]:
    a = _attrs(node)
    ax = int(np.asarray(axis).reshape(-1)[0])
    y = np.flip(x, ax) if a.get("reverse", 0) else x
    if a.get("exclusive", 0):  # each sum of the elements before: the running sum shifted one place
        head = np.zeros_like(np.take(y, [0], axis=ax))
        y = np.concatenate([head, np.delete(y, -1, axis=ax)], axis=ax)
    s = np.cumsum(y, axis=ax, dtype=x.dtype)
    return [np.flip(s, ax) if a.get("reverse", 0) else s]


def _range(node: Any, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> list[np.ndarray]:
    """``start + i * delta`` for ``i < ceil((limit - start) / delta)``, in the inputs' type (the
    specification's formula: np.arange accumulates floats differently)."""
    dtype = np.asarray(start).dtype
    count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    return [(np.asarray(start, dtype) + np.arange(count).astype(dtype) * np.asarray(delta, dtype)).astype(dtype)]


def _is_inf(node: Any, x: np.ndarray) -> list[np.ndarray]:
    a = _attrs(node)
    positive = np.isposinf(x) if a.get("detect_positive", 1) else np.zeros(x.shape, bool)
    negative = np.isneginf(x) if a.get("detect_negative", 1) else np.zeros(x.shape, bool)
    return [positive | negative]


def _elementwise(fn: Callable[..., np.ndarray]) -> Callable[..., list[np.ndarray]]:
    return lambda node, *xs: [np.asarray(fn(*xs))]


#: The operators tinynpu evaluates itself when onnx.reference and onnxruntime both fail.
OWN_OPS: dict[str, Callable[..., list[np.ndarray]]] = {
    "GatherElements": _gather_elements,
    "GatherND": _gather_nd,
    "ScatterND": _scatter_nd,
    "Trilu": _trilu,
    "CumSum": _cum_sum,
    "IsNaN": _elementwise(np.isnan),
    "IsInf": _is_inf,
    "And": _elementwise(np.logical_and),
    "Or": _elementwise(np.logical_or),
    "Xor": _elementwise(np.logical_xor),
    "Not": _elementwise(np.logical_not),
    "Equal": _elementwise(np.equal),
    "Less": _elementwise(np.less),
    "LessOrEqual": _elementwise(np.less_equal),
    "Greater": _elementwise(np.greater),
    "GreaterOrEqual": _elementwise(np.greater_equal),
    "Where": _elementwise(np.where),
    "Expand": lambda node, x, shape: [x * np.ones(tuple(int(s) for s in shape), dtype=x.dtype)],
    "Range": _range,
}


def reference_evaluator(node: Any, opset: int, feeds: dict[str, np.ndarray]) -> Any:
    """onnx.reference for one node; a function op (Gelu) is expanded in a one-node model with typed inputs."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    try:
        return ReferenceEvaluator(node, opsets={"": opset})
    except Exception:  # RuntimeContextError: the function body depends on the input types
        inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                  for name, a in feeds.items()]
        outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
        model = helper.make_model(helper.make_graph([node], "host_step", inputs, outputs),
                                  opset_imports=[helper.make_opsetid("", opset)])
        return ReferenceEvaluator(model)


def run_onnxruntime(node: Any, opset: int, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """``node`` alone in onnxruntime (CPU, one thread), on ``feeds``."""
    import onnxruntime as ort
    from onnx import helper

    inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for name, a in feeds.items()]
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
    model = helper.make_model(helper.make_graph([node], "one_node", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", opset)])
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return [np.asarray(v) for v in sess.run(None, feeds)]


def run_own(node: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """``node`` by tinynpu's own numpy (:data:`OWN_OPS`); KeyError for an operator it does not have."""
    fn = OWN_OPS[node.op_type]
    args = [feeds[i] if i else None for i in node.input]
    while args and args[-1] is None:
        args.pop()
    return [np.asarray(v) for v in fn(node, *args)]


def evaluate_node(node: Any, opset: int, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """``node``'s outputs on ``feeds`` (by input name): the first of the three evaluators that succeeds."""
    first: Exception | None = None
    try:
        return [np.asarray(v) for v in reference_evaluator(node, opset, feeds).run(None, feeds)]
    except Exception as exc:
        first = exc
    try:
        return run_onnxruntime(node, opset, feeds)
    except Exception:
        pass
    if node.op_type in OWN_OPS:
        try:
            return run_own(node, feeds)
        except Exception:
            pass
    raise first


__all__ = ["OWN_OPS", "evaluate_node", "reference_evaluator", "run_onnxruntime", "run_own"]
