"""RMSNorm as exporters write it, found in a QDQ graph from its ``Reciprocal``.

``y = x * Reciprocal(Sqrt(ReduceMean(Pow(x, 2), axes=[-1]) + eps)) [* gamma]``
(Llama's ``LlamaRMSNorm``), with the Q/DQ pairs the quantizer puts between the
nodes skipped: the accelerator computes the norm from the int8 ``x`` in one
program (:mod:`~tinynpu.compiler.onnx.lower.norm`), without the intermediate
requantizations the host path makes.  Every tensor inside must be read only
inside; anything else leaves the nodes on the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.frontend.nonlinear import Match, _host, _norm

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.frontend.qdq import QdqGraph


def _producer(g: QdqGraph, tensor: str, path: list[Any]) -> Any | None:
    """The node writing ``tensor``, through ``Q -> DQ`` pairs (added to ``path``)."""
    by_output = {o: n for n in g.nodes for o in n.output}
    node = by_output.get(tensor)
    while node is not None and node.op_type == "DequantizeLinear" and node.input[0] not in g.consts:
        q = by_output.get(node.input[0])
        if q is None or q.op_type != "QuantizeLinear":
            return node
        path += [node, q]
        node = by_output.get(q.input[0])
    return node


def _reader(g: QdqGraph, tensor: str, path: list[Any]) -> Any | None:
    """The one node reading ``tensor``, through ``Q -> DQ`` pairs (added to ``path``)."""
    node = g._only_reader(tensor, tuple({n.op_type for n in g.nodes}))
    while node is not None and node.op_type == "QuantizeLinear":
        dq = g._only_reader(node.output[0], ("DequantizeLinear",))
        if dq is None:
            return node
        path += [node, dq]
        node = g._only_reader(dq.output[0], tuple({n.op_type for n in g.nodes}))
    return node


def _scalar(g: QdqGraph, name: str) -> float | None:
    v = g.consts.get(name)
    return float(np.asarray(v).reshape(-1)[0]) if v is not None and np.asarray(v).size == 1 else None


def _mean_axes(g: QdqGraph, node: Any) -> list[int] | None:
    from tinynpu.compiler.onnx.frontend.qdq import node_attrs

    a = node_attrs(node)
    axes = a.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        v = g.consts.get(node.input[1])
        axes = None if v is None else [int(i) for i in np.asarray(v).reshape(-1)]
    return None if axes is None or not int(a.get("keepdims", 1)) else list(axes)


def root_mean(g: QdqGraph, tensor: str, path: list[Any]) -> tuple[Any, Any, Any, float] | None:
    """Back from ``tensor``: ``Sqrt(ReduceMean(...) + eps)``, as (the Sqrt, the Add, the ReduceMean, eps)."""
    sqrt = _producer(g, tensor, path)
    add = _producer(g, sqrt.input[0], path) if sqrt is not None and sqrt.op_type == "Sqrt" else None
    if add is None or add.op_type != "Add":
        return None
    mean = next((m for i in add.input if (m := _producer(g, i, path)) is not None and m.op_type == "ReduceMean"),
                None)
    eps = next((v for i in add.input if (v := _scalar(g, i)) is not None), None)
    return None if mean is None or eps is None else (sqrt, add, mean, eps)


def _mean_of_squares(g: QdqGraph, recip: Any, path: list[Any]) -> tuple[Any, Any, float] | None:
    """Back from ``recip``: ``Sqrt(ReduceMean(Pow(x, 2)) + eps)``, as (the Pow, the ReduceMean, eps)."""
    found = root_mean(g, recip.input[0], path)
    if found is None:
        return None
    sqrt, add, mean, eps = found
    pow_ = _producer(g, mean.input[0], path)
    if pow_ is None or pow_.op_type != "Pow" or _scalar(g, pow_.input[1]) != 2.0:
        return None
    path += [sqrt, add, mean, pow_]
    return pow_, mean, eps


def _scaled(g: QdqGraph, mul: Any, path: list[Any]) -> tuple[np.ndarray, Any]:
    """After ``x * rsqrt``: a ``Mul`` by the constant gamma (added to ``path``), else gamma 1; and the last node."""
    between: list[Any] = []
    scale = _reader(g, mul.output[0], between)
    gname = None if scale is None or scale.op_type != "Mul" else next((i for i in scale.input if i in g.consts), None)
    if gname is None:
        return np.ones(1), mul
    path += between + [scale]
    return np.asarray(g.consts[gname], dtype=np.float64), scale


def _closed(g: QdqGraph, path: list[Any], q: Any) -> bool:
    """Whether every tensor the nodes of ``path`` write (but ``q``'s) is read inside only."""
    ids = {id(n) for n in path}
    return not any(t in g.outputs or any(id(u) not in ids for u in g.uses.get(t, []))
                   for n in path if n is not q for t in n.output)


def rmsnorm_step(g: QdqGraph, recip: Any) -> Match | None:
    """The :class:`~tinynpu.compiler.onnx.ir.NormStep` whose ``Reciprocal`` is ``recip``, or None."""
    path: list[Any] = [recip]
    found = _mean_of_squares(g, recip, path)
    if found is None:
        return None
    pow_, mean, eps = found
    x, shape = g.dq_act.get(pow_.input[0]), g.shapes.get(pow_.input[0])
    mul = _reader(g, recip.output[0], path)
    if x is None or shape is None or mul is None or mul.op_type != "Mul" or pow_.input[0] not in mul.input:
        return None
    path.append(mul)
    gamma, last = _scaled(g, mul, path)
    q = g.output_q(last.output[0])
    if q is None or gamma.size not in (1, shape[-1]) or _mean_axes(g, mean) not in ([-1], [len(shape) - 1]):
        return None
    path.append(q)
    dq = g.dq_node(pow_.input[0])
    taken = {id(n) for n in path}
    inner = all(id(u) in taken for u in g.uses.get(dq.output[0], [])) and pow_.input[0] not in g.outputs
    if inner:  # x's DequantizeLinear is the norm's alone
        path.append(dq)
    if not _closed(g, [n for n in path if n is not dq], q):
        return None
    ids = {id(n) for n in path}
    nodes = [n for n in g.nodes if id(n) in ids]
    chain = tuple(_host(n, g.opset) for n in ([] if inner else [dq]) + nodes)
    step = _norm(g, recip, (x[0], x[1]), q, chain, shape, center=False, eps=eps, gamma=gamma, beta=None, last=True)
    return step, [n for n in nodes if n is not q] + [q]


__all__ = ["rmsnorm_step", "root_mean"]
