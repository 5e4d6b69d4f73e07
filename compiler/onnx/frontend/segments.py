"""Unary elementwise segments of a QDQ graph: found, and turned into a 256-entry table of output codes.

A segment (see :mod:`.nonlinear`) grows from the DequantizeLinear nodes of one
int8 tensor through every node that is elementwise in that tensor alone
(:data:`~.nonlinear.UNARY`, :data:`~.nonlinear.BINARY` with a scalar constant
or another segment tensor as its other input, per-tensor Q/DQ).  It is a
table when exactly one of its tensors leaves it, written by a per-tensor int8
QuantizeLinear.  The table is the segment's nodes run in order on the 256
codes ``-128..127`` by the host's evaluator (:mod:`~tinynpu.compiler.onnx.runtime.host`),
each node exactly as the host path runs it, so each entry is the code the host
path gives that input code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.frontend.hostops import node_name
from tinynpu.compiler.onnx.frontend.nonlinear import BINARY, QDQ, UNARY, Match, _host
from tinynpu.compiler.onnx.ir import NPU, LutStep, Network, OnnxStep, QParam, Step

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.frontend.qdq import QdqGraph


def _scalar(g: QdqGraph, name: str) -> bool:
    v = g.consts.get(name)
    return v is not None and np.asarray(v).size == 1


def _joins(g: QdqGraph, node: Any, inside: set[str]) -> bool:
    """Whether ``node`` is elementwise in the segment's tensors ``inside`` alone."""
    ins = [i for i in node.input if i]
    if not ins or ins[0] not in inside and node.op_type not in BINARY:
        return False
    if node.op_type in QDQ:
        return ins[0] in inside and all(_scalar(g, i) for i in ins[1:]) and len(node.output) == 1
    if node.op_type in UNARY:
        return ins[0] in inside and all(_scalar(g, i) for i in ins[1:])
    if node.op_type in BINARY and len(ins) == (3 if node.op_type == "Where" else 2):
        return any(i in inside for i in ins) and all(i in inside or _scalar(g, i) for i in ins)
    return False


def _expand(g: QdqGraph, members: dict[int, Any], taken: set[int]) -> None:
    """Add to ``members`` every node elementwise in their tensors alone, until none joins.

    A worklist over the readers of each tensor as it joins (``g.uses``), so a segment costs the edges it
    touches, not a pass over the whole graph per joining node.  Whether a node joins only grows with the
    tensors inside (:func:`_joins` asks for its inputs to be inside), so a node refused early is asked
    again when its next input joins, and the result is the same closure a rescan to the fixed point finds.
    """
    inside = {t for n in members.values() for t in n.output}
    pending = list(inside)
    while pending:
        for node in g.uses.get(pending.pop(), []):
            if id(node) not in members and id(node) not in taken and _joins(g, node, inside):
                members[id(node)] = node
                fresh = [t for t in node.output if t not in inside]
                inside.update(fresh)
                pending.extend(fresh)


def _in_order(g: QdqGraph, members: dict[int, Any]) -> list[Any]:
    """The members in graph order."""
    return sorted(members.values(), key=lambda n: g.order[id(n)])


def _leaving(g: QdqGraph, members: dict[int, Any], start_ids: set[int]) -> list[tuple[Any, str]]:
    """The (node, tensor) pairs whose tensor is read outside the members (a start's dequantized values may
    be read elsewhere too: the DQ is then put back as a host step), after dropping the trailing DQ nodes:
    a DQ the segment ends with is the next operator's input, not the segment's; its Q is the end."""
    while True:
        nodes = _in_order(g, members)
        leaving = [(n, t) for n in nodes if id(n) not in start_ids for t in n.output
                   if t in g.outputs or any(id(u) not in members for u in g.uses.get(t, []))]
        trailing = [n for n, _ in leaving if n.op_type == "DequantizeLinear"]
        if not trailing:
            return leaving
        for n in trailing:
            del members[id(n)]


def _members(g: QdqGraph, x: str, taken: set[int]) -> list[Any] | None:
    """The nodes of int8 tensor ``x``'s segment in graph order, when one tensor leaves it, written by its last
    node, and it holds an operator besides Q/DQ; else None."""
    starts = [n for n in g.uses.get(x, []) if n.op_type == "DequantizeLinear" and id(n) not in taken
              and all(_scalar(g, i) for i in n.input[1:] if i)]
    if not starts:
        return None
    members = {id(n): n for n in starts}
    _expand(g, members, taken)
    leaving = _leaving(g, members, {id(n) for n in starts})
    nodes = _in_order(g, members)
    if len(leaving) != 1 or all(n.op_type in QDQ for n in nodes) or nodes[-1].output[0] != leaving[0][1]:
        return None
    return nodes


def grow(g: QdqGraph, x: str, taken: set[int]) -> list[Any] | None:
    """The segment of int8 tensor ``x`` (its nodes in graph order), or None when it is not one table."""
    nodes = _members(g, x, taken)
    if nodes is None or nodes[-1].op_type != "QuantizeLinear":
        return None
    qp = g.qparams[nodes[-1].output[0]]
    return nodes if qp.per_tensor and qp.zero_point.dtype == np.int8 else None


def lut_values(chain: tuple[OnnxStep, ...], x: str, constants: dict[str, np.ndarray], opset: int) -> np.ndarray:
    """The chain's last output for every input code ``-128..127`` (entry ``i`` for code ``i - 128``), as the
    host's evaluator computes it."""
    from tinynpu.compiler.onnx.runtime.host import onnx_operator

    net = Network(steps=[], constants=constants, inputs=[], outputs=[], shapes={}, opset=opset, qparams={})
    env = dict(constants)
    env[x] = np.arange(-128, 128, dtype=np.int8)
    for s in chain:
        env.update(zip(s.outputs, onnx_operator(s, env, net), strict=False))
    return np.asarray(env[chain[-1].outputs[0]]).reshape(-1)


def lut_table(chain: tuple[OnnxStep, ...], x: str, constants: dict[str, np.ndarray], opset: int) -> np.ndarray:
    """The segment's output code for every input code ``-128..127`` (entry ``i`` for code ``i - 128``)."""
    return lut_values(chain, x, constants, opset).astype(np.int64)


def segment_step(g: QdqGraph, x: str, taken: set[int]) -> Match | None:
    """The :class:`~tinynpu.compiler.onnx.ir.LutStep` of int8 tensor ``x``'s segment, or None."""
    qp = next((qp for src, qp in g.dq_act.values() if src == x), None)
    ok = qp is not None and qp.per_tensor and qp.zero_point.dtype == np.int8
    nodes = grow(g, x, taken) if ok else None
    return None if nodes is None else _lut_step(g, x, nodes)


def _lut_step(g: QdqGraph, x: str, nodes: list[Any]) -> Match:
    """The table step of segment ``nodes`` of int8 tensor ``x`` (its last node the QuantizeLinear)."""
    chain = tuple(_host(n, g.opset) for n in nodes)
    ops = [n for n in nodes if n.op_type not in QDQ]
    name = node_name(ops[0])
    desc = " -> ".join(n.op_type for n in ops)
    common: dict[str, Any] = {"name": name, "op": "+".join(dict.fromkeys(n.op_type for n in ops)), "inputs": (x,),
              "outputs": (nodes[-1].output[0],), "chain": chain}
    table = lut_table(chain, x, g.consts, g.opset)
    return LutStep(**common, where=NPU, table=table,
                   reason=f"{desc}: one vlut, its table the host's float evaluated on the 256 codes"), nodes


def float_output_segment(g: QdqGraph, x: str, taken: set[int]) -> tuple[list[Any], list[tuple[Any, Step]]] | None:
    """A segment of int8 tensor ``x`` that ends in a float graph output (BERT's pooler ``Tanh``): a table on
    the accelerator into int8 codes of a scale of its own, then their dequantization on the host (the
    network output's conversion, as after any int8 output).  None when ``x``'s segment is not one.

    The QDQ model has no scale for a float output, so the scale is the one that spans the segment's values
    on all 256 input codes (zero point 0, the largest magnitude at code 127): no input saturates, and the
    error is at most half of it (1/254 for a tanh).  A QuantizeLinear of that scale, added to the chain, makes
    the table (and the host path) exactly the host evaluator's codes, as for every other segment.

    Returns:
        The nodes absorbed, and each step with the node it takes its place at: the table at the segment's
        first node, the dequantization at its last.
    """
    from onnx import helper

    qp = next((qp for src, qp in g.dq_act.values() if src == x), None)
    nodes = _members(g, x, taken) if qp is not None and qp.per_tensor and qp.zero_point.dtype == np.int8 else None
    if (nodes is None or nodes[-1].op_type in QDQ or nodes[-1].output[0] not in g.outputs
            or any(n.op_type in QDQ and n.output[0] in g.outputs for n in nodes[:-1])):  # a DQ the user reads
        return None
    out = nodes[-1].output[0]
    codes, scale, zero = f"{out}__int8", f"{out}__int8_scale", f"{out}__int8_zero_point"
    chain = tuple(_host(n, g.opset) for n in nodes)
    values = lut_values(chain, x, g.consts, g.opset)
    if not np.all(np.isfinite(values)):
        return None
    g.consts[scale] = np.float32(np.abs(values).max() / 127 if np.abs(values).max() > 0 else 1.0)
    g.consts[zero] = np.int8(0)
    g.qparams[codes] = QParam(scale=np.asarray(g.consts[scale]), zero_point=np.asarray(g.consts[zero]), axis=None)
    if out in g.shapes:
        g.shapes[codes] = g.shapes[out]
    q = helper.make_node("QuantizeLinear", [out, scale, zero], [codes], name=f"{node_name(nodes[-1])}_quantize")
    dq = helper.make_node("DequantizeLinear", [codes, scale, zero], [out], name=f"{node_name(nodes[-1])}_dequantize")
    step, _ = _lut_step(g, x, [*nodes, q])
    return nodes, [(nodes[0], step), (nodes[-1], _host(dq, g.opset))]


__all__ = ["float_output_segment", "grow", "lut_table", "segment_step"]
