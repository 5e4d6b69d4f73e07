"""Attention's head split and merge folded into its matmuls: the layout moves around them become index maps.

The exporters write attention's head split as ``Reshape (S, H, d) -> Transpose (H, S, d)`` (after a
``Split`` of a fused QKV projection, and with a second ``Transpose`` for the keys) and its head merge as
``Transpose (S, H, d) -> Reshape (S, H*d)``.  On int8 values at one scale each of these is a host
:class:`~tinynpu.compiler.onnx.ir.MoveStep`: a copy of the whole tensor.  Here each chain of moves that
feeds a matmul operand (or takes its output) is replaced by an
:class:`~tinynpu.compiler.onnx.ir.OperandView`: which element of the tensor before the moves (after them)
each element of the operand is.  The runtime (:mod:`~tinynpu.compiler.onnx.runtime.attention`) then
reads a head's operand with the DMA's row stride where the view is a block of rows a pitch apart in
the DRAM image, and stages it only where it is not; a move whose output nothing else reads is gone.

Moves are composed on index arrays, so any chain of ``Reshape``, ``Flatten``, ``Squeeze``,
``Unsqueeze``, ``Transpose`` and ``Split`` folds, whatever its shape inputs (the tensors' inferred shapes
stand for them), and the view is exactly what the operators would compute.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tinynpu.compiler.onnx.ir import NPU, MatmulStep, MoveStep, Network, OperandView, Step

#: Moves that reorder elements without dropping any (a chain of them after a matmul is a permutation).
_PERMUTING = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose")
#: Moves a matmul operand can be read through (a Split picks some elements; an Expand repeats them: grouped-query
#: attention's kv heads, each read by the query heads of its group).
_READABLE = (*_PERMUTING, "Split", "Expand")


def fold_head_moves(net: Network) -> Network:
    """``net`` with the move chains before and after every accelerator matmul folded into its views (a table
    lookup between such a chain and its matmul first moved before the chain: :mod:`.movechains`)."""
    from tinynpu.compiler.onnx.frontend.movechains import tables_before_moves

    net = tables_before_moves(net)
    steps = list(net.steps)
    producer: dict[str, Step] = {o: s for s in steps for o in s.outputs if o}
    gone: set[int] = set()
    for i, step in enumerate(steps):
        if not isinstance(step, MatmulStep) or step.where != NPU or step.views != (None, None, None):
            continue
        a, b = (_read_through(net, producer, name) for name in step.inputs)
        out = _written_through(net, steps, step.outputs[0])
        if a is None and b is None and out is None:
            continue
        view_c = out[0] if out is not None else None
        if out is not None:
            gone.update(id(s) for s in out[1])
        steps[i] = replace(step, inputs=tuple(v.tensor if v else n for v, n in zip((a, b), step.inputs, strict=True)),
                           outputs=(view_c.tensor if view_c else step.outputs[0], *step.outputs[1:]),
                           views=(a, b, view_c))
    steps = _without_unread_moves([s for s in steps if id(s) not in gone], set(net.outputs))
    return replace(net, steps=steps)


def _shape(net: Network, name: str) -> tuple[int, ...] | None:
    shape = net.shapes.get(name)
    return tuple(int(d) for d in shape) if shape is not None else None


def _read_through(net: Network, producer: dict[str, Step], name: str) -> OperandView | None:
    """The view of operand ``name`` through the moves that produce it, back to the first tensor no move
    makes; None when no move does."""
    chain: list[tuple[MoveStep, str]] = []
    tensor = name
    while isinstance(s := producer.get(tensor), MoveStep) and s.op in _READABLE and _shape(net, s.inputs[0]):
        chain.append((s, tensor))
        tensor = s.inputs[0]
    shape, source = _shape(net, name), _shape(net, tensor)
    if not chain or shape is None or source is None:
        return None
    index: np.ndarray | None = np.arange(int(np.prod(source)), dtype=np.int64).reshape(source)
    for s, out in reversed(chain):
        index = _apply(net, s, index, out) if index is not None else None
    if index is None or index.shape != shape:
        return None
    return OperandView(tensor, source, shape, np.ascontiguousarray(index), tuple(s.name for s, _ in reversed(chain)))


def _written_through(net: Network, steps: list[Step], name: str) -> tuple[OperandView, list[MoveStep]] | None:
    """The view of a matmul's output ``name`` into the tensor the moves after it make (each the one reader
    of the one before, none a graph output), and those moves; None when no move follows."""
    chain: list[MoveStep] = []
    tensor = name
    while tensor not in net.outputs:
        readers = [s for s in steps if tensor in s.inputs]
        move = readers[0] if len(readers) == 1 else None
        if (not isinstance(move, MoveStep) or move.op not in _PERMUTING or move.inputs[0] != tensor
                or _shape(net, move.outputs[0]) is None):
            break
        chain.append(move)
        tensor = move.outputs[0]
    shape = _shape(net, name)
    if not chain or shape is None:
        return None
    size = int(np.prod(shape))
    placed: np.ndarray | None = np.arange(size, dtype=np.int64).reshape(shape)
    for s in chain:
        placed = _apply(net, s, placed, s.outputs[0]) if placed is not None else None
    if placed is None or placed.size != size:
        return None
    index = np.empty(size, dtype=np.int64)
    index[placed.reshape(-1)] = np.arange(size, dtype=np.int64)  # where each output element lands
    return OperandView(tensor, tuple(placed.shape), shape, index.reshape(shape), tuple(s.name for s in chain)), chain


def _apply(net: Network, step: MoveStep, x: np.ndarray, out: str) -> np.ndarray | None:
    """Move ``step`` on index array ``x``: its output ``out``, as the operator would compute it."""
    from tinynpu.compiler.onnx.frontend.qdq import node_attrs

    attrs = node_attrs(step.node)
    if step.op == "Transpose":
        perm = [int(p) for p in attrs.get("perm", range(x.ndim - 1, -1, -1))]
        return np.transpose(x, perm) if sorted(perm) == list(range(x.ndim)) else None
    shape = _shape(net, out)
    if shape is None:
        return None
    if step.op == "Expand":
        try:
            return np.broadcast_to(x, np.broadcast_shapes(x.shape, shape))
        except ValueError:
            return None
    if step.op == "Split":
        axis = int(attrs.get("axis", 0)) % x.ndim
        sizes = [_shape(net, o) for o in step.outputs]
        if any(s is None or len(s) != x.ndim for s in sizes):
            return None
        start = sum(s[axis] for s in sizes[:step.outputs.index(out)] if s is not None)
        return np.take(x, np.arange(start, start + shape[axis]), axis=axis)
    return x.reshape(shape) if int(np.prod(shape)) == x.size else None


def _without_unread_moves(steps: list[Step], outputs: set[str]) -> list[Step]:
    """``steps`` without the moves whose outputs no step reads and no graph output is (repeatedly: a
    move whose only reader was such a move goes too)."""
    while True:
        read = {i for s in steps for i in s.inputs}
        keep = [s for s in steps if not isinstance(s, MoveStep) or any(o in read or o in outputs
                                                                      for o in s.outputs if o)]
        if len(keep) == len(steps):
            return keep
        steps = keep


__all__ = ["fold_head_moves"]
