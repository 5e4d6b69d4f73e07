"""Chains of layout moves between a DequantizeLinear and a QuantizeLinear of one scale, split into single moves.

Grouped-query attention repeats each key/value head for the query heads of its group.  The exporters write it
``Unsqueeze -> Expand -> Reshape`` (and for the keys ``-> Transpose -> Reshape`` after it), and the quantizer
puts one Q/DQ pair around the whole chain, so in the QDQ graph it is ``DQ(x) -> Expand -> Reshape [-> Transpose
-> Reshape] -> Q`` with ``Q`` at ``x``'s own scale: float operators on the host, as each node alone has no Q/DQ
pair of its own for the move pattern (:func:`~tinynpu.compiler.onnx.frontend.patterns.move_step`) to match.

Between one scale's DQ and Q, moves (which only repeat and reorder elements) of values on the int8 grid give
values on that grid: a Q/DQ pair at that scale after each move of the chain changes no value
(``Q(DQ(q)) = q``).  :func:`split_move_chains` inserts those pairs, so every node of the chain becomes an int8
move at one scale, which the head folding (:mod:`.heads`) then turns into the attention matmul's operand
addressing: the matmul for query head ``h`` reads kv head ``h // group`` where it lies in DRAM, and the moves
are gone.

The keys' chain ends in a table lookup before their matmul (the exporters' score scaling ``k * d^-1/4`` is a
:class:`~tinynpu.compiler.onnx.ir.LutStep`), which would keep the moves apart from the matmul.  A table maps
each element on its own, so it commutes with any move: :func:`tables_before_moves` applies it to the chain's
source instead (the kv heads before their repetition: ``1 / group`` of the lookups) and lets the moves follow,
which the head folding then removes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.ir import NPU, LutStep, MoveStep, Network, OnnxStep, Step

#: Operators that only move or repeat elements (Expand: each kv head once per query head of its group).
CHAIN_OPS = frozenset(("Expand", "Reshape", "Transpose", "Unsqueeze", "Squeeze", "Flatten"))


def _same_params(consts: dict[str, np.ndarray], a: Any, b: Any) -> bool:
    """Whether Q/DQ nodes ``a`` and ``b`` have one per-tensor int8 scale and zero point (constants, equal)."""
    if len(a.input) != 3 or len(b.input) != 3:
        return False
    for i in (1, 2):
        x, y = consts.get(a.input[i]), consts.get(b.input[i])
        if x is None or y is None or x.size != 1 or x.dtype != y.dtype or not np.array_equal(x, y):
            return False
    return bool(consts[a.input[2]].dtype == np.int8)


def _chains(graph: Any) -> list[tuple[Any, list[Any]]]:
    """Each ``DQ -> move -> move ... -> Q`` (two moves or more, each the only reader of the one before, the Q
    the only reader of the last, at the DQ's scale): ``(dq, moves)``."""
    from onnx import numpy_helper

    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    uses: dict[str, list[Any]] = {}
    for node in graph.node:
        for i in node.input:
            uses.setdefault(i, []).append(node)
    outputs = {o.name for o in graph.output}
    found = []
    for dq in graph.node:
        if dq.op_type != "DequantizeLinear" or dq.input[0] in consts:
            continue
        for node in uses.get(dq.output[0], []):
            moves: list[Any] = []
            source = dq.output[0]
            while node.op_type in CHAIN_OPS and node.input[0] == source and node.output[0] not in outputs:
                moves.append(node)
                source = node.output[0]
                readers = uses.get(source, [])
                if len(readers) != 1:
                    break
                node = readers[0]
            if (len(moves) >= 2 and node.op_type == "QuantizeLinear" and node.input[0] == source
                    and _same_params(consts, dq, node)):
                found.append((dq, moves))
    return found


def split_move_chains(model: Any) -> Any:
    """``model`` with a Q/DQ pair at the chain's own scale after every move of each chain but the last (module
    docstring); the model itself when it has no such chain (else a copy: the caller's model is unchanged)."""
    import onnx
    from onnx import helper

    chains = _chains(model.graph)
    if not chains:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    nodes = list(graph.node)
    position = {id(n): i for i, n in enumerate(model.graph.node)}
    shapes = {vi.name: vi for vi in graph.value_info}
    pairs: dict[int, list[Any]] = {}  # node index -> the Q/DQ pair inserted after it
    for dq, moves in chains:
        for move, after in zip(moves, moves[1:], strict=False):
            t = move.output[0]
            q_name, dq_name = f"{t}__int8", f"{t}__int8_float"
            pairs[position[id(move)]] = [
                helper.make_node("QuantizeLinear", [t, *dq.input[1:]], [q_name], name=f"{t}__move_q"),
                helper.make_node("DequantizeLinear", [q_name, *dq.input[1:]], [dq_name], name=f"{t}__move_dq")]
            nodes[position[id(after)]].input[0] = dq_name
            vi = shapes.get(t)
            if vi is not None:
                dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
                graph.value_info.extend([helper.make_tensor_value_info(q_name, onnx.TensorProto.INT8, dims),
                                         helper.make_tensor_value_info(dq_name, vi.type.tensor_type.elem_type, dims)])
    ordered = []
    for i, n in enumerate(nodes):
        kept = onnx.NodeProto()
        kept.CopyFrom(n)  # a copy: deleting the graph's nodes below must not take it along
        ordered += [kept, *pairs.get(i, [])]
    del graph.node[:]
    graph.node.extend(ordered)
    return out


def _moves_before(net: Network, step: Step, readers: dict[str, int]) -> list[MoveStep]:
    """The moves (of :data:`CHAIN_OPS`) producing ``step``'s input, each read only by the next, first first."""
    producer = {o: s for s in net.steps for o in s.outputs if o}
    chain: list[MoveStep] = []
    tensor = step.inputs[0]
    while (isinstance(s := producer.get(tensor), MoveStep) and s.op in CHAIN_OPS and readers.get(tensor) == 1
           and tensor not in net.outputs):
        chain.insert(0, s)
        tensor = s.inputs[0]
    return chain


def _renamed(step: OnnxStep, old: str, new: str) -> OnnxStep:
    """A host ONNX step reading (writing) ``new`` where it read (wrote) ``old``: its node too, as the host
    evaluates the node on the values its step names."""
    import onnx

    node = onnx.NodeProto()
    node.CopyFrom(step.node)
    for field in (node.input, node.output):
        for k, name in enumerate(field):
            if name == old:
                field[k] = new

    def swap(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(new if n == old else n for n in names)

    return replace(step, node=node, inputs=swap(step.inputs), outputs=swap(step.outputs))


def tables_before_moves(net: Network) -> Network:
    """``net`` with each accelerator table lookup that reads a chain of moves applied before the chain (module
    docstring): the lookup reads the chain's source and writes a tensor of that shape at its own output's scale,
    the moves follow it and write the lookup's old output, so every reader of that output is unchanged."""
    steps = list(net.steps)
    for lut in [s for s in steps if isinstance(s, LutStep) and s.where == NPU]:
        readers: dict[str, int] = {}
        for s in steps:
            for name in s.inputs:
                readers[name] = readers.get(name, 0) + 1
        moves = _moves_before(replace(net, steps=steps), lut, readers)
        source = moves[0].inputs[0] if moves else ""
        if not moves or source not in net.shapes:
            continue
        out = lut.outputs[0]
        before = f"{out}__before_moves"
        net.shapes[before] = net.shapes[source]
        if out in net.qparams:
            for name in [before, *(m.outputs[0] for m in moves[:-1])]:  # the moves now carry the table's codes
                net.qparams[name] = net.qparams[out]
        chain = list(lut.chain)
        chain[0], chain[-1] = _renamed(chain[0], lut.inputs[0], source), _renamed(chain[-1], out, before)
        early = replace(lut, inputs=(source,), outputs=(before,), chain=tuple(chain))
        first = replace(moves[0], inputs=(before, *moves[0].inputs[1:]))
        last = replace(moves[-1], outputs=(out,))
        placed: dict[int, list[Step]] = {id(moves[0]): [early, first], id(moves[-1]): [last]}
        if len(moves) == 1:
            placed[id(moves[0])] = [early, replace(first, outputs=(out,))]
        steps = [t for s in steps if s is not lut for t in placed.get(id(s), [s])]
    return replace(net, steps=steps)


__all__ = ["CHAIN_OPS", "split_move_chains", "tables_before_moves"]
