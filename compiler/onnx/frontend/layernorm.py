"""LayerNorm written out in primitive operators (torch's TorchScript exporter below opset 17, and some HF
models), found in a QDQ graph from its ``Div``.

``y = (x - mean(x)) / Sqrt(mean((x - mean(x))^2) + eps) [* gamma] [+ beta]`` along the last axis, the square
a ``Pow(d, 2)`` or ``Mul(d, d)``, the Q/DQ pairs the quantizer puts between the nodes skipped: one
:class:`~tinynpu.compiler.onnx.ir.NormStep`, the same program as ``LayerNormalization``
(:mod:`~tinynpu.compiler.onnx.lower.norm`), computed from the int8 ``x`` without the host path's
intermediate requantizations.  Every tensor inside must be read only inside; anything else leaves the nodes
on the host (:mod:`.rmsnorm` has the walking helpers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.frontend.nonlinear import Match, _host, _norm
from tinynpu.compiler.onnx.frontend.rmsnorm import _closed, _mean_axes, _producer, _reader, _scalar, root_mean

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.frontend.qdq import QdqGraph


def _variance(g: QdqGraph, div: Any, path: list[Any]) -> tuple[Any, Any, float] | None:
    """Back from ``div``'s divisor: ``Sqrt(ReduceMean(d * d) + eps)``, as (the centring Sub, the ReduceMean, eps)."""
    found = root_mean(g, div.input[1], path)
    if found is None:
        return None
    sqrt, add, mean, eps = found
    square = _producer(g, mean.input[0], path)
    if square is None:
        return None
    if square.op_type == "Pow" and _scalar(g, square.input[1]) == 2.0:
        subs = [_producer(g, square.input[0], path)]
    elif square.op_type == "Mul":
        subs = [_producer(g, i, path) for i in square.input]
    else:
        return None
    sub = subs[0]
    if sub is None or sub.op_type != "Sub" or any(s is not sub for s in subs):
        return None
    path += [sqrt, add, mean, square]
    return sub, mean, eps


def _affine(g: QdqGraph, node: Any, op: str, path: list[Any]) -> tuple[np.ndarray | None, Any]:
    """After ``node``: an ``op`` (Mul, Add) by a constant (added to ``path``) and its value, else (None, node)."""
    between: list[Any] = []
    nxt = _reader(g, node.output[0], between)
    name = None if nxt is None or nxt.op_type != op else next((i for i in nxt.input if i in g.consts), None)
    if name is None:
        return None, node
    path += between + [nxt]
    return np.asarray(g.consts[name], dtype=np.float64), nxt


def _centred(g: QdqGraph, div: Any, path: list[Any]) -> tuple[Any, Any, Any, Any, float] | None:
    """``div``'s numerator and divisor traced to one ``x - ReduceMean(x)`` over the last axis: (the Sub, that
    ReduceMean, x's int8 source, x's shape, eps), with the nodes added to ``path``; else None."""
    found = _variance(g, div, path)
    if found is None or _producer(g, div.input[0], path) is not found[0]:
        return None
    sub, var_mean, eps = found
    mean = _producer(g, sub.input[1], path)
    x, shape = g.dq_act.get(sub.input[0]), g.shapes.get(sub.input[0])
    if (mean is None or mean.op_type != "ReduceMean" or x is None or shape is None
            or g.dq_act.get(mean.input[0], ("",))[0] != x[0]):
        return None
    last = len(shape) - 1
    if _mean_axes(g, mean) not in ([-1], [last]) or _mean_axes(g, var_mean) not in ([-1], [last]):
        return None
    path += [sub, mean]
    return sub, mean, x, shape, eps


def _own_dequantizers(g: QdqGraph, dqs: list[Any], path: list[Any]) -> bool:
    """Whether x's DequantizeLinear nodes ``dqs`` are read by the norm's nodes (``path``) alone."""
    taken = {id(n) for n in path} | {id(d) for d in dqs}
    return all(id(u) in taken for d in dqs for u in g.uses.get(d.output[0], [])) and not any(
        d.output[0] in g.outputs for d in dqs)


def decomposed_layernorm_step(g: QdqGraph, div: Any) -> Match | None:
    """The :class:`~tinynpu.compiler.onnx.ir.NormStep` whose final ``Div`` is ``div``, or None."""
    path: list[Any] = [div]
    centred = _centred(g, div, path)
    if centred is None:
        return None
    sub, mean, x, shape, eps = centred
    gamma, end = _affine(g, div, "Mul", path)
    beta, end = _affine(g, end, "Add", path)
    q = g.output_q(end.output[0])
    width = shape[-1]
    if q is None or any(v is not None and v.size not in (1, width) for v in (gamma, beta)):
        return None
    path.append(q)
    dqs = [g.dq_node(t) for t in dict.fromkeys((sub.input[0], mean.input[0]))]
    inner = _own_dequantizers(g, dqs, path)
    if inner:  # x's DequantizeLinear nodes are the norm's alone
        path += dqs
    if not _closed(g, [n for n in path if n not in dqs], q):
        return None
    ids = {id(n) for n in path}
    nodes = [n for n in g.nodes if id(n) in ids]
    chain = tuple(_host(n, g.opset) for n in ([] if inner else dqs) + nodes)
    gamma_row = np.broadcast_to(1.0 if gamma is None else gamma.reshape(-1), (width,))
    beta_row = None if beta is None else np.broadcast_to(beta.reshape(-1), (width,))
    step = _norm(g, div, (x[0], x[1]), q, chain, shape, center=True, eps=eps, gamma=gamma_row, beta=beta_row,
                 last=True)
    return step, [n for n in nodes if n is not q] + [q]


__all__ = ["decomposed_layernorm_step"]
