"""Planning a per-run attention mask into the masked softmax programs (:mod:`.runtime_mask`): the graph side.

:func:`fuse_runtime_masks` turns each host select of a mask computed at run time
(a :class:`~tinynpu.compiler.onnx.ir.MaskStep` whose mask is no constant) and the
accelerator softmax that alone reads it into that softmax reading the mask's int8
codes, and makes the codes once per mask (:class:`~tinynpu.compiler.onnx.ir.MaskCodesStep`):

1. **Their shape** (:func:`codes_shape`): the mask's, 1 along every leading axis it does
   not vary on, found through its producers, so BERT's ``[1, 1, S, T]`` mask is ``T`` bytes.
2. **Their input**: a ``Where(cond, a, b)`` of two scalar constants that only the codes read
   is dropped, the codes reading ``cond`` (the float mask is never made); codes of the same
   condition (the legacy exporter's one ``Where`` per layer) are one step.
3. **The input's conversion**: the host operators between a network input and that condition
   (``Cast`` to bool, the exporter's ``Reshape``/``GatherND``/``Expand`` and ``And`` with a
   constant) that nothing else reads become the codes step's own nodes.  It then computes
   from the network input alone, once per run, the bytes the programs read: the network
   input's conversion into the accelerator's form, as quantizing an input is, not a layer's
   computation (docs/onnx.md, "Runtime masks").
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from tinynpu.compiler.onnx.ir import NPU, MaskCodesStep, MaskStep, OnnxStep, SoftmaxStep, Step
from tinynpu.compiler.onnx.lower.runtime_mask import RuntimeMask
from tinynpu.errors import OnnxError

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.ir import Network
    from tinynpu.isa import ArchConfig

#: Operators whose output varies along an axis only where one of their inputs does (broadcasting).
_ELEMENTWISE = frozenset({"Cast", "Not", "And", "Or", "Xor", "Where", "Equal", "Less", "Greater", "LessOrEqual",
                          "GreaterOrEqual", "Add", "Sub", "Mul", "Div", "Neg", "Identity"})
#: What the codes step may take over from the host between a network input and the mask: conversions and moves.
_CONVERSION = _ELEMENTWISE | {"Expand", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Transpose", "Gather",
                              "GatherND", "Slice"}
_REASON = ("the per-run mask as one int8 code per position the programs read (-128 masked, 0 kept), broadcast over "
           "rows and heads by their addressing: the network input's conversion")


def codes_shape(net: Network, mask: str, scores: tuple[int, ...]) -> tuple[int, ...]:
    """The mask's shape right-aligned to the scores', 1 along every leading axis it does not vary on (the keys'
    axis always the scores'): found through its producers (an elementwise operator or ``Expand`` varies where
    an input does, a constant where its values differ, anything else along every axis longer than 1).

    Raises:
        OnnxError: the mask's shape does not broadcast to the scores (the message names the mask).
    """
    rank = len(scores)
    shape = net.shapes.get(mask)
    lead = rank - len(shape) if shape is not None else -1
    if shape is None or lead < 0 or any(d not in (1, scores[lead + a]) for a, d in enumerate(shape)):
        raise OnnxError(f"the attention mask {mask!r} has the shape {shape!r}, which does not broadcast to the "
                        f"scores {scores!r} it is added to, so no program can read one mask row per score row: "
                        "the model's shapes disagree (re-export it, or give the mask the scores' shape).")
    axes = _varying(net, mask, rank, {}, {o: s for s in net.steps for o in s.outputs})
    return tuple(scores[a] if a in axes or a == rank - 1 else 1 for a in range(rank))


def _varying(net: Network, name: str, rank: int, memo: dict[str, frozenset[int]],
             producers: dict[str, Step]) -> frozenset[int]:
    """The axes (of ``rank``, right-aligned) along which tensor ``name`` may take different values."""
    if name in memo:
        return memo[name]
    step = producers.get(name)
    if name in net.constants:
        v = np.asarray(net.constants[name])
        v = v.reshape((1,) * (rank - v.ndim) + v.shape) if v.ndim <= rank else v
        found = frozenset(a for a in range(v.ndim) if v.shape[a] > 1
                          and not np.array_equal(v, np.broadcast_to(np.take(v, [0], axis=a), v.shape)))
    elif isinstance(step, OnnxStep) and (step.op in _ELEMENTWISE or step.op == "Expand"):
        sources = step.inputs[:1] if step.op == "Expand" else step.inputs
        found = frozenset().union(*(_varying(net, i, rank, memo, producers) for i in sources if i))
    else:
        shape = net.shapes.get(name) or ()
        lead = rank - len(shape)
        found = frozenset(lead + a for a, d in enumerate(shape) if d != 1) if lead >= 0 else frozenset(range(rank))
    memo[name] = found
    return found


def fuse_runtime_masks(net: Network, cfg: ArchConfig) -> None:
    """Each host select of a per-run mask and the accelerator's masked softmax that alone reads its output become
    that softmax reading the mask's codes (one :class:`MaskCodesStep` per mask, where its first select was),
    where the program fits; else both stay, the select saying why.

    Raises:
        OnnxError: a mask whose shape does not broadcast to its scores (naming the Add and the Softmax).
    """
    from tinynpu.compiler.onnx.lower.nonlinear import check_fits

    readers: dict[str, list[Step]] = {}
    for step in net.steps:
        for name in step.inputs:
            readers.setdefault(name, []).append(step)
    swap: dict[int, Step | None] = {}
    made: dict[tuple[str, tuple[int, ...]], MaskCodesStep] = {}
    for step in net.steps:
        sm = readers.get(step.outputs[0], []) if isinstance(step, MaskStep) else []
        if (not isinstance(step, MaskStep) or step.inputs[1] in net.constants or len(sm) != 1
                or not isinstance(sm[0], SoftmaxStep) or sm[0].where != NPU or sm[0].params is None
                or step.outputs[0] in net.outputs or step.inputs[0] not in net.shapes):
            continue
        scores, mask = tuple(net.shapes[step.inputs[0]]), step.inputs[1]
        try:
            rm = RuntimeMask(scores, codes_shape(net, mask, scores))
        except OnnxError as exc:
            raise OnnxError(f"Add {step.name!r} (the mask before Softmax {sm[0].name!r}): {exc}") from None
        codes = made.get((mask, rm.codes))
        if codes is None:
            name = f"{mask}_codes" + (f"_{len(made)}" if any(m == mask for m, _ in made) else "")
            codes = MaskCodesStep(name=name, op="MaskCodes", where=step.where, inputs=(mask,), outputs=(name,),
                                  floor=step.floor, shape=rm.codes, reason=_REASON)
        inline = replace(sm[0], inputs=(step.inputs[0], codes.outputs[0]), params=replace(sm[0].params, runtime=rm),
                         reason=f"masked softmax on the accelerator, the per-run mask {mask!r} applied in its program "
                                "(vmax, its codes by strided DMA, tmm by 2I)")
        why = check_fits(inline, scores, cfg)
        if why:
            swap[id(step)] = replace(step, reason=f"{step.reason}; not in the softmax program: {why}")
            continue
        first = (mask, rm.codes) not in made
        if first:  # the first select of this mask gives way to its codes, the others go
            made[(mask, rm.codes)] = codes
            net.shapes[codes.outputs[0]] = (rm.rows, scores[-1])
        swap[id(step)] = codes if first else None
        swap[id(sm[0])] = inline
    net.steps[:] = [s for s in (swap.get(id(s), s) for s in net.steps) if s is not None]
    for codes in made.values():
        _read_the_condition(net, codes)
    _merge_same_codes(net)
    for step in list(net.steps):
        if isinstance(step, MaskCodesStep):
            _absorb_input_conversion(net, step)


def _replace(net: Network, old: Step, new: Step | None, drop: tuple[Step, ...] = ()) -> None:
    """``old`` becomes ``new`` (None: goes) and the steps of ``drop`` go."""
    gone = {id(s) for s in drop}
    kept = [new if s is old else s for s in net.steps if id(s) not in gone]
    net.steps[:] = [s for s in kept if s is not None]


def _read_the_condition(net: Network, codes: MaskCodesStep) -> None:
    """When the mask is ``Where(cond, a, b)`` of two scalar constants that only the codes read, the codes read
    ``cond`` and the ``Where`` goes: its float mask is never made."""
    where = next((s for s in net.steps if codes.inputs[0] in s.outputs), None)
    if (not isinstance(where, OnnxStep) or where.op != "Where" or len(where.inputs) != 3
            or codes.inputs[0] in net.outputs
            or any(codes.inputs[0] in s.inputs for s in net.steps if s is not codes)):
        return
    branches = [np.asarray(net.constants[i]) for i in where.inputs[1:] if i in net.constants]
    if len(branches) != 2 or any(v.size != 1 for v in branches):
        return
    a, b = (float(v.reshape(-1)[0]) for v in branches)
    _replace(net, codes, replace(codes, inputs=(where.inputs[0],), branches=(a, b)), drop=(where,))


def _merge_same_codes(net: Network) -> None:
    """Codes steps computing the same bytes from the same tensor become the first of them."""
    first: dict[tuple[object, ...], MaskCodesStep] = {}
    renamed: dict[str, str] = {}
    for step in list(net.steps):
        if not isinstance(step, MaskCodesStep):
            continue
        key = (step.inputs, step.branches, step.shape, step.floor)
        if key in first:
            renamed[step.outputs[0]] = first[key].outputs[0]
            _replace(net, step, None)
        else:
            first[key] = step
    if renamed:
        net.steps[:] = [replace(s, inputs=tuple(renamed.get(i, i) for i in s.inputs))
                        if any(i in renamed for i in s.inputs) else s for s in net.steps]


def _absorb_input_conversion(net: Network, codes: MaskCodesStep) -> None:
    """The host operators between network inputs and the codes' input, read by nothing else, become the codes
    step's own nodes (:attr:`MaskCodesStep.chain`), when they are conversions and moves (:data:`_CONVERSION`,
    a gather's indices constant) starting from network inputs and constants alone; else the codes read their
    input as it is."""
    producers = {o: s for s in net.steps for o in s.outputs}
    chain: dict[int, OnnxStep] = {}
    roots: list[str] = []
    todo = [codes.inputs[0]]
    while todo:
        name = todo.pop()
        src = producers.get(name)
        if name in net.constants or name in roots or (src is not None and id(src) in chain):
            continue
        if src is None and name in net.inputs:
            roots.append(name)
            continue
        if (not isinstance(src, OnnxStep) or src.op not in _CONVERSION or len(src.outputs) != 1
                or (src.op.startswith("Gather") and src.inputs[1] not in net.constants)):
            return  # computed by a layer or an operator that is no conversion: the codes read the tensor as it is
        chain[id(src)] = src
        todo.extend(i for i in src.inputs if i)
    inside = {id(codes), *chain}
    if not chain or any(o in net.outputs or any(o in r.inputs and id(r) not in inside for r in net.steps)
                        for s in chain.values() for o in s.outputs):
        return  # something else reads a tensor of the chain: the host computes it for that anyway
    nodes = tuple(chain[id(s)] for s in net.steps if id(s) in chain)  # in network order
    lean = replace(codes, inputs=tuple(roots), source=codes.inputs[0], chain=nodes)
    _replace(net, codes, lean, drop=nodes)


def is_input_conversion(step: Step, net: Network) -> bool:
    """Whether ``step`` is a per-run mask's codes computed from network inputs alone (no layer's output): the
    conversion of an input into the form the accelerator reads, once per run, not a computation of a layer."""
    return isinstance(step, MaskCodesStep) and all(i in net.inputs for i in step.inputs)


__all__ = ["codes_shape", "fuse_runtime_masks", "is_input_conversion"]
