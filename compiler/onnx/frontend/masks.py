"""Additive attention masks that survive int8: calibrated apart from the scores, applied as a select.

An attention mask is added to the scores right before the softmax: 0 where a
position is attended, a huge negative number (``-inf``, the dtype's minimum,
``-1e4``) where it is not.  Quantized as one tensor with the scores, the sum's
range is the mask's: GPT-2's causal mask gives the scale ~2.7e36, every score
rounds to 0 and every softmax row comes out uniform.  So:

1. before quantization, :func:`mask_adds` finds each ``Add(scores, mask) ->
   Softmax(last axis)`` whose mask is *additive* (a constant whose every value
   is 0 or at most ``MASK_FLOOR``, or ``Where(cond, a, b)`` of two scalar
   constants that are), and the quantizer leaves that Add and Softmax out: the
   scores keep the scale calibrated on themselves (the matmul's output), the
   mask stays float, and the softmax output gets its own [0, 1] scale.
2. in the QDQ graph, :func:`masked_softmax_at` turns ``DQ(x) -> Add(mask) ->
   Softmax [-> Where(IsNaN(p), 0, p)] [-> Cast to float] -> Q`` into a
   :class:`~tinynpu.compiler.onnx.ir.MaskStep` (the select: kept scores
   clamped to [-127, 127], masked ones the code -128) and a masked
   :class:`~tinynpu.compiler.onnx.ir.SoftmaxStep` on the accelerator, whose
   first ``vlut`` moves the code -128 below any kept code so that it weighs
   nothing (:mod:`~tinynpu.compiler.onnx.lower.softmax`).

The planner then moves the select into the softmax program where that fits: a
constant mask's rows (:mod:`~tinynpu.compiler.onnx.lower.select`), a mask
computed at run time as int8 codes the run writes
(:mod:`~tinynpu.compiler.onnx.lower.mask_fusion`).

A masked entry then gets probability 0 exactly, as ``exp(-inf)`` does in
float; the guard after torch's softmax (it only replaces the NaN of a row with
every entry masked) is absorbed.  With ``--nonlinear host`` the same graph runs
the Add and the Softmax in float on the dequantized scores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.frontend.hostops import node_name
from tinynpu.compiler.onnx.ir import HOST, NPU, MaskStep, SoftmaxStep
from tinynpu.errors import OnnxError

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.frontend.qdq import QdqGraph

#: A mask value at or below this masks its position: ``exp(s - 1e4)`` is 0 in float32 for any score a network
#: computes, so float and int8 agree on what is masked.  (HF writes -1e4, the dtype's minimum, or -inf.)
MASK_FLOOR = -1.0e4


def is_additive_mask(values: np.ndarray) -> bool:
    """Whether every value is 0 (attended) or at most ``MASK_FLOOR`` (masked), ``-inf`` included."""
    v = np.asarray(values, dtype=np.float64)
    return bool(v.size) and bool(np.all((v == 0) | (v <= MASK_FLOOR)))


def _mask_source(consts: dict[str, np.ndarray], producer: dict[str, Any], name: str) -> bool:
    """Whether tensor ``name`` is an additive mask: such a constant, or ``Where`` of two such scalars."""
    if name in consts:
        return is_additive_mask(consts[name])
    node = producer.get(name)
    if node is None or node.op_type != "Where" or len(node.input) != 3:
        return False
    branches = [consts.get(i) for i in node.input[1:]]
    return all(b is not None and b.size == 1 and is_additive_mask(b) for b in branches)


def _last_axis_softmax(node: Any, rank: int | None) -> bool:
    from tinynpu.compiler.onnx.frontend.qdq import node_attrs

    axis = int(node_attrs(node).get("axis", -1))
    return node.op_type == "Softmax" and (axis == -1 or (rank is not None and axis == rank - 1))


def mask_adds(model: Any) -> list[str]:
    """The names of the mask ``Add`` and its ``Softmax``, for every masked softmax of the float ``model``
    (nodes without a name are given one, so that the quantizer can leave them out)."""
    from onnx import numpy_helper

    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    readers: dict[str, list[Any]] = {}
    for n in graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in graph.value_info}
    found: list[str] = []
    for k, sm in enumerate(graph.node):
        add = producer.get(sm.input[0]) if sm.op_type == "Softmax" else None
        if (add is None or add.op_type != "Add" or len(readers.get(add.output[0], [])) != 1
                or not _last_axis_softmax(sm, ranks.get(add.output[0]))):
            continue
        if sum(_mask_source(consts, producer, i) for i in add.input) != 1:
            continue  # no mask, or two (then neither is the scores)
        for j, n in enumerate((add, sm)):
            if not n.name:
                n.name = f"tinynpu_masked_softmax_{k}_{j}"
            found.append(n.name)
    return found


# -- the QDQ graph -----------------------------------------------------------------------------------------


def _guard(g: QdqGraph, p: str) -> list[Any] | None:
    """``[IsNaN, Where]`` of torch's guard ``Where(IsNaN(p), 0, p)`` when they are ``p``'s only readers."""
    readers = g.uses.get(p, [])
    isnan = next((r for r in readers if r.op_type == "IsNaN"), None)
    where = next((r for r in readers if r.op_type == "Where"), None)
    if len(readers) != 2 or isnan is None or where is None or p in g.outputs:
        return None
    zero = g.consts.get(where.input[1])
    if list(where.input) != [isnan.output[0], where.input[1], p] or zero is None or zero.size != 1 or zero.any():
        return None
    return [isnan, where]


def _tail(g: QdqGraph, p: str) -> list[Any]:
    """What follows the softmax output ``p`` before its QuantizeLinear and changes no value: torch's guard,
    a ``Cast`` to float (the TorchScript exporter's, after an eager softmax)."""
    from onnx import TensorProto

    from tinynpu.compiler.onnx.frontend.qdq import node_attrs

    nodes: list[Any] = []
    while True:
        guard = _guard(g, p)
        cast = g._only_reader(p, ("Cast",))
        if guard is not None:
            nodes += guard
        elif cast is not None and int(node_attrs(cast).get("to", 0)) == TensorProto.FLOAT:
            nodes.append(cast)
        else:
            return nodes
        p = nodes[-1].output[0]


def masked_softmax_at(g: QdqGraph, sm: Any) -> tuple[list[Any], list[tuple[Any, Any]]] | None:
    """At a Softmax: ``(absorbed nodes, [(anchor node, step), ...])`` of a masked softmax, or None.

    On the accelerator it is a :class:`MaskStep` anchored at the Add and a masked :class:`SoftmaxStep` at the
    final QuantizeLinear; where the softmax cannot be lowered, one host :class:`SoftmaxStep` (its ONNX
    nodes on the dequantized scores, the reason saying why).
    """
    from tinynpu.compiler.onnx.frontend.nonlinear import _host
    from tinynpu.compiler.onnx.lower.softmax import check_width, softmax_params

    add = next((n for n in g.nodes if n.output and n.output[0] == sm.input[0]), None) \
        if sm.op_type == "Softmax" else None
    if add is None or add.op_type != "Add" or len(g.uses.get(add.output[0], [])) != 1:
        return None
    scores = next(((i, hit) for i in add.input if (hit := g.act(i)) is not None), None)
    mask = next((i for i in add.input if scores is None or i != scores[0]), None)
    producer = {o: n for n in g.nodes for o in n.output}
    shape = g.shapes.get(add.output[0])
    if scores is None or mask is None or not _mask_source(g.consts, producer, mask) or shape is None:
        return None
    x, qx = scores[1]
    if g.shapes.get(x) != shape or not _last_axis_softmax(sm, len(shape)):
        return None  # a mask that widens the scores, or a softmax along another axis: the nodes stay as they are
    guard = _tail(g, sm.output[0])
    q = g.output_q((guard[-1] if guard else sm).output[0])
    if q is None:
        return None
    name = node_name(sm)
    out = g.qparams[q.output[0]]
    chain = tuple(_host(n, g.opset) for n in (g.dq_node(scores[0]), add, sm, *guard, q))
    absorbed = [add, sm, *guard, q]
    what = f"Softmax {name!r} (masked by {mask!r})"
    try:
        check_width(shape[-1], what=what)
        params = softmax_params(qx.s, out.s, out.z, what=what, masked=True)
    except OnnxError as exc:
        step = SoftmaxStep(name=name, op="Softmax", where=HOST, inputs=(x,), outputs=(q.output[0],), chain=chain,
                           params=None, reason=str(exc))
        return absorbed, [(q, step)]
    selected = f"{add.output[0]}_selected"
    g.shapes[selected] = shape
    g.qparams[selected] = qx
    select = MaskStep(name=node_name(add), op="Add", where=HOST, inputs=(x, mask), outputs=(selected,),
                      floor=MASK_FLOOR, reason="the mask as a select on the int8 scores (kept ones clamped to "
                      "[-127, 127], masked ones -128), on the host where the softmax program cannot take it")
    step = SoftmaxStep(name=name, op="Softmax", where=NPU, inputs=(selected,), outputs=(q.output[0],), chain=chain,
                       params=params, reason="masked softmax on the accelerator")
    return absorbed, [(add, select), (q, step)]


__all__ = ["MASK_FLOOR", "is_additive_mask", "mask_adds", "masked_softmax_at"]
