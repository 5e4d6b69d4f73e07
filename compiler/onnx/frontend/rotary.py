"""Rotary position embeddings found in a graph: ``Add(Mul(x, C), Mul(rotate(x), S))`` as one step.

Llama-style exports (transformers' ``apply_rotary_pos_emb``) write ``q*cos + rotate_half(q)*sin`` as
``Mul``, two ``Slice``, ``Neg``, ``Concat``, ``Mul``, ``Add``, with ``cos`` and ``sin`` constants of one row
per position in a fixed-shape export.  Two places need the pattern:

1. before quantization, :func:`rotary_muls` names the two ``Mul`` nodes, and the quantizer leaves them
   out (as it does a mask's ``Add``): ``cos`` and ``sin`` then stay float constants instead of int8
   ones, whose half-step rounding (1/254 of the largest entry) would cost up to one LSB of the output;
2. in the QDQ graph, :func:`rotary_step` turns ``DQ(x) -> ... -> Add -> Q`` into a
   :class:`~tinynpu.compiler.onnx.ir.RotaryStep` (:mod:`~tinynpu.compiler.onnx.lower.rotary`), the Q/DQ
   pairs between the nodes absorbed: the program computes the sum from ``x`` with one rounding.

``rotate`` is any chain of ``Slice``, ``Neg`` and ``Concat`` (and Q/DQ pairs) from ``x``; the front end
does not assume ``rotate_half``'s form but reads the matrix off the nodes, running them on a probe whose
every element is distinct (element ``i`` of the flattened tensor is ``i + 1``): each output element is
then ``±`` (its source + 1) or 0, which gives the signed permutation ``M`` with ``rotate(x) = x @ M`` and
proves it is the same for every row.  A chain that mixes rows, or is no signed permutation, is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.frontend.hostops import node_name
from tinynpu.compiler.onnx.ir import HOST, NPU, RotaryStep
from tinynpu.errors import OnnxError

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.frontend.qdq import QdqGraph

#: Operators of the rotated branch (each a move or a negation along the last axis).
ROTATE_OPS = frozenset(("Slice", "Split", "Neg", "Concat"))
QDQ_OPS = frozenset(("QuantizeLinear", "DequantizeLinear"))


def _branch(name: str, producer: dict[str, Any], consts: dict[str, np.ndarray], is_source: Callable[[str], bool],
            ops: frozenset[str]) -> list[Any] | None:
    """The nodes from the source to ``name`` when each is one of ``ops`` whose other inputs are constants
    (``Concat``: all its inputs data), else None."""
    if is_source(name):
        return []
    node = producer.get(name)
    if node is None or node.op_type not in ops:
        return None
    data = list(node.input) if node.op_type == "Concat" else [node.input[0]]
    if any(i and i not in consts for i in node.input if i not in data):
        return None
    found: list[Any] = []
    for i in data:
        sub = _branch(i, producer, consts, is_source, ops)
        if sub is None:
            return None
        found += [n for n in sub if all(n is not f for f in found)]
    return found + [node]


def _mul_operands(node: Any, consts: dict[str, np.ndarray]) -> tuple[str, np.ndarray] | None:
    """A ``Mul``'s data operand and its constant (in either order), or None."""
    if node is None or node.op_type != "Mul" or len(node.input) != 2:
        return None
    a, b = node.input
    if b in consts and a not in consts:
        return str(a), consts[b]
    if a in consts and b not in consts:
        return str(b), consts[a]
    return None


def _split(add: Any, muls: list[Any], producer: dict[str, Any], consts: dict[str, np.ndarray],
           source_of: Callable[[str], str | None], ops: frozenset[str]) -> tuple[int, str, list[Any]] | None:
    """Which Mul is the direct term (index), its data operand, and the rotated branch's nodes."""
    operands = [_mul_operands(m, consts) for m in muls]
    if add.op_type != "Add" or len(operands) != 2:
        return None
    data = [o[0] for o in operands if o is not None]
    if len(data) != 2:
        return None
    for direct in (0, 1):
        src = source_of(data[direct])
        if src is None:
            continue

        def same(name: str, s: str = src) -> bool:
            return source_of(name) == s

        nodes = _branch(data[1 - direct], producer, consts, same, ops)
        if nodes and any(n.op_type in ROTATE_OPS for n in nodes):
            return direct, data[direct], nodes
    return None


def rotary_muls(model: Any) -> list[str]:
    """The names of the two ``Mul`` nodes of every rotary embedding of the float ``model`` (nodes without a
    name are given one, so that the quantizer can leave them out)."""
    from onnx import numpy_helper

    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    found: list[str] = []
    for k, add in enumerate(graph.node):
        if add.op_type != "Add" or len(add.input) != 2:
            continue
        muls = [m for i in add.input if (m := producer.get(i)) is not None]
        if _split(add, muls, producer, consts, lambda n: n, ROTATE_OPS) is None:
            continue
        for j, m in enumerate(muls):
            if not m.name:
                m.name = f"tinynpu_rotary_{k}_{j}"
            found.append(m.name)
    return found


# -- the QDQ graph -----------------------------------------------------------------------------------------


def _through_pair(g: QdqGraph, name: str, producer: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """``name`` = ``DQ(Q(t))``: ``t`` and ``[Q, DQ]``, else None."""
    dq = producer.get(name)
    q = producer.get(dq.input[0]) if dq is not None and dq.op_type == "DequantizeLinear" else None
    if q is None or q.op_type != "QuantizeLinear":
        return None
    return str(q.input[0]), [q, dq]


def rotation_matrix(g: QdqGraph, nodes: list[Any], sources: list[str], shape: tuple[int, ...],
                    out: str) -> np.ndarray | None:
    """The signed permutation ``M`` (``[d, d]``, int8) with ``out = x @ M`` row by row, read off ``nodes`` run on
    a probe (module docstring), or None when they are no such map."""
    from tinynpu.compiler.onnx.frontend.evaluate import evaluate_node

    d = shape[-1]
    size = int(np.prod(shape))
    if size >= 2**24:
        return None  # the probe's values must be exact in float32
    probe = (np.arange(size, dtype=np.float32) + 1).reshape(shape)
    env: dict[str, np.ndarray] = dict.fromkeys(sources, probe)
    for node in nodes:
        if node.op_type in QDQ_OPS:  # the probe passes unrounded: M is the float operators' map
            env[node.output[0]] = env[node.input[0]]
            continue
        feeds = {i: env[i] if i in env else g.consts[i] for i in node.input if i}
        env.update(zip(node.output, evaluate_node(node, g.opset, feeds), strict=False))
    y = np.asarray(env.get(out))
    if y.shape != tuple(shape):
        return None
    v = np.rint(y).astype(np.int64).reshape(-1, d)
    src = np.abs(v) - 1
    rows = np.arange(v.shape[0])[:, None]
    if np.any((v != 0) & (src // d != rows)):
        return None  # an element from another row
    m = np.zeros((d, d), dtype=np.int64)
    hit = v[0] != 0
    m[src[0][hit] % d, np.nonzero(hit)[0]] = np.sign(v[0][hit])
    if not np.array_equal(probe.reshape(-1, d).astype(np.int64) @ m, v) or np.any(np.count_nonzero(m, axis=0) != 1):
        return None  # not the same map on every row, or not one source per column
    return m.astype(np.int8)


@dataclass(frozen=True)
class _Found:
    """A rotary pattern in the QDQ graph: its int8 input, the tables' operands, the nodes to take."""

    x_float: str
    terms: tuple[tuple[str, np.ndarray], tuple[str, np.ndarray]]  # (direct, rotated): (data operand, table)
    branch: list[Any]
    absorbed: list[Any]
    q: Any


def _find(g: QdqGraph, add: Any) -> _Found | None:
    """``Add(DQ(Q(Mul(x, C))), DQ(Q(Mul(rotate(x), S)))) -> Q`` at ``add``, or None."""
    q = g.output_q(add.output[0]) if add.op_type == "Add" and len(add.input) == 2 else None
    producer = {o: n for n in g.nodes for o in n.output}
    pairs = [p for i in add.input if (p := _through_pair(g, i, producer)) is not None]
    if q is None or len(pairs) != 2:
        return None
    muls = [producer.get(p[0]) for p in pairs]

    def source_of(name: str) -> str | None:
        hit = g.act(name)
        return None if hit is None else hit[0]

    split = _split(add, muls, producer, g.consts, source_of, ROTATE_OPS | QDQ_OPS)
    if split is None:
        return None
    direct, x_float, branch = split
    terms = [t for mul in (muls[direct], muls[1 - direct]) if (t := _mul_operands(mul, g.consts)) is not None]
    if len(terms) != 2:
        return None
    return _Found(x_float, (terms[0], terms[1]), branch, [*muls, *(n for p in pairs for n in p[1]), *branch, add, q],
                  q)


def _own_nodes(g: QdqGraph, found: _Found, sources: list[str]) -> list[Any] | None:
    """The nodes the step takes (x's DequantizeLinear too when nothing else reads it), or None when a tensor
    in between is read outside the pattern."""
    absorbed = list(found.absorbed)
    inside = {id(n) for n in absorbed}
    for dq in (g.dq_node(s) for s in sources):
        if dq.output[0] not in g.outputs and all(id(u) in inside for u in g.uses.get(dq.output[0], [])):
            absorbed.insert(0, dq)
            inside.add(id(dq))
    for n in absorbed:
        if n is not found.q and any(o in g.outputs or any(id(u) not in inside for u in g.uses.get(o, []))
                                    for o in n.output):
            return None
    return absorbed


def rotary_step(g: QdqGraph, add: Any) -> tuple[RotaryStep, list[Any]] | None:
    """At an ``Add``: the rotary embedding ending at its QuantizeLinear (``(step, absorbed nodes)``), or None."""
    from tinynpu.compiler.onnx.frontend.nonlinear import _host
    from tinynpu.compiler.onnx.lower.rotary import rotary_params

    found = _find(g, add)
    hit = None if found is None else g.act(found.x_float)
    shape = None if found is None else g.shapes.get(found.x_float)
    out = None if found is None else g.qparams[found.q.output[0]]
    if (found is None or hit is None or shape is None or out is None or hit[1].z != 0 or not out.per_tensor
            or out.z != 0 or out.zero_point.dtype != np.int8):
        return None
    x, qx = hit
    sources = sorted({i for n in found.branch for i in n.input if (a := g.act(i)) is not None and a[0] == x}
                     | {found.x_float})
    m = rotation_matrix(g, found.branch, sources, shape, found.terms[1][0])
    absorbed = None if m is None else _own_nodes(g, found, sources)
    if m is None or absorbed is None:
        return None
    order = {id(n): i for i, n in enumerate(g.nodes)}
    nodes = {id(n): n for n in [*(g.dq_node(s) for s in sources), *absorbed]}.values()
    chain = tuple(_host(n, g.opset) for n in sorted(nodes, key=lambda n: order[id(n)]))
    tables = [np.broadcast_to(np.asarray(t[1], np.float64), shape).reshape(-1, shape[-1]) for t in found.terms]
    name = node_name(add)
    common: dict[str, Any] = {"name": name, "op": "Rotary", "inputs": (x,), "outputs": (found.q.output[0],),
                              "chain": chain}
    try:
        params = rotary_params(m, tables[0], tables[1], qx.s, out.s, what=f"rotary embedding {name!r}")
    except OnnxError as exc:
        return RotaryStep(**common, where=HOST, params=None, reason=str(exc)), absorbed
    return RotaryStep(**common, where=NPU, params=params, reason="rotary embedding on the accelerator"), absorbed


__all__ = ["ROTATE_OPS", "rotary_muls", "rotary_step", "rotation_matrix"]
