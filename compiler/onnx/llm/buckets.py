"""One decode network per bucket of cache lengths, specialized to each length in the bucket without a rebuild.

The attention matmuls are compiled for the cache length rounded up to the
array's tile T (:attr:`~tinynpu.compiler.onnx.lower.programs.ProgramCache.matmul_bucket`),
so the decode steps whose ``past + new`` round up to the same multiple of T
(a *bucket*, up to T consecutive lengths) run the same programs but the
softmax's.  Their networks differ only in what the cache length decides:

- a few constants the graph computes from its inputs' shapes (the new token's
  position, the causal mask over the keys, a grouped-query ``Expand``'s shape),
  which the host steps reading them take as data at run time;
- the shapes of the tensors along the cache (past, present, scores,
  probabilities), each dimension ``a + b * past``;
- the scores matmul's epilogue, its one scale broadcast over the keys.

So a bucket's network is built once, at the longest step of the run in the
bucket (its DRAM plan then holds every shorter step's tensors), and every
other step of the bucket is that network *specialized*: its shapes moved along
their slopes (measured once per bucket from one more folding and import of the graph at a
second length), its length constants computed by folding only the small
subgraph that makes them from the inputs' shapes, the scores' epilogue
broadcast to the step's keys, then placed (the softmax's constant mask, if
any, fused per length as a full build fuses it) and its programs looked up:
the softmax's is compiled per width (a row of exactly ``past + new``
probabilities, so no padded lane enters its sum), the others are the
bucket's.  The per-step cache aliases are bound per step by the image
(:meth:`~.image.LlmImage.bind`).

Specializing is refused, and the step built as before, whenever the bucket's
network does not have that form: the two foldings differ in their nodes, a
length constant is read by anything but a step that takes it as an input at
run time, the subgraph making the constants reads anything but the decoder's
inputs and small constants, a shape shrinks as the cache grows, a step
whose parameters would depend on the length (a norm or a weight layer along
the cache, a matmul with folded head moves, an epilogue that is not one
scale) has a tensor along the cache, or a step lands elsewhere than in the
bucket's network.  ``tests/test_llm_buckets.py`` checks that a specialized
network equals the network built at its length, step for step.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.frontend.qdq import build_network
from tinynpu.compiler.onnx.intops import Epilogue
from tinynpu.compiler.onnx.ir import AddStep, ConcatStep, LutStep, MaskStep, MatmulStep, NodeStep, SoftmaxStep, Step
from tinynpu.compiler.onnx.llm.interface import DecoderInterface
from tinynpu.compiler.onnx.llm.steps import (
    Built,
    StepNetwork,
    StepShape,
    Weights,
    build_step,
    finish_step,
    fixed_model,
    input_dims,
)
from tinynpu.compiler.onnx.lower.plan import place
from tinynpu.compiler.onnx.lower.programs import ProgramCache, compile_programs

#: Steps that read their tensors along the cache at run time, whatever their length (the host's, and the
#: accelerator's residual adds, tables and softmax, whose parameters do not depend on the row's width).
_LENGTH_FREE = (NodeStep, ConcatStep, MaskStep, AddStep, LutStep, SoftmaxStep)


#: Operators whose output has their first input's shape (a ``Shape`` of theirs is a ``Shape`` of that input).
_SAME_SHAPE = ("QuantizeLinear", "DequantizeLinear", "Cast", "Identity")


class NotSpecializable(Exception):
    """The bucket's network is not of the form a specialization needs (the module docstring); the step is
    built instead."""


@dataclass(frozen=True)
class Bucket:
    """A bucket's network and what specializing it to another cache length needs.

    Attributes:
        built: The network, built at the bucket's longest step of the run.
        slopes: Per tensor whose shape follows the cache length, each dimension's change per cached token.
        constants: An evaluator (``onnx.reference``) of the subgraph computing the length constants from
            the inputs (their shapes), or None.
        names: The length constants (graph tensors the folding makes constants).
        inputs: The subgraph's inputs (ValueInfoProtos of decoder inputs).
    """

    built: Built
    slopes: dict[str, tuple[int, ...]]
    constants: Any
    names: tuple[str, ...]
    inputs: tuple[Any, ...]


def bucket_of(shape: StepShape, tile: int) -> tuple[int, int]:
    """The bucket of a step shape: its new tokens, and its cache length in whole tiles."""
    return shape.new, -(-shape.total // tile)


def build_steps(weights: Weights, itf: DecoderInterface, shapes: list[StepShape], cache: ProgramCache,
                batch: int = 1) -> list[StepNetwork]:
    """Every step's network in ``shapes``' order: one built per bucket of decode steps (the prompt's step is a
    bucket of its own), the bucket's others specialized from it where :class:`Bucket` allows."""
    groups: dict[tuple[int, int], list[StepShape]] = {}
    for shape in shapes:
        groups.setdefault(bucket_of(shape, cache.matmul_bucket) if shape.past else (shape.new, -1), []).append(shape)
    out: dict[StepShape, StepNetwork] = {}
    for group in groups.values():
        longest = max(group, key=lambda s: s.past)
        built = build_step(weights, itf, longest, cache, batch)
        out[longest] = built.step
        others = [s for s in group if s != longest]
        bucket = None
        if others:
            t0 = time.perf_counter()
            try:
                bucket = make_bucket(weights, itf, built, others[-1], batch)
            except NotSpecializable:
                bucket = None
            # the second folding is part of building the bucket's network
            out[longest] = replace(built.step, build_seconds=built.step.build_seconds + time.perf_counter() - t0)
        for shape in others:
            step = None
            if bucket is not None:
                try:
                    step = specialize(bucket, itf, shape, cache, batch)
                except NotSpecializable:
                    step = None
            out[shape] = step if step is not None else build_step(weights, itf, shape, cache, batch).step
    return [out[s] for s in shapes]


def make_bucket(weights: Weights, itf: DecoderInterface, built: Built, other: StepShape, batch: int) -> Bucket:
    """The :class:`Bucket` of ``built``, its shapes' slopes measured against the folding at ``other``'s length.

    Raises:
        NotSpecializable: see the module docstring.
    """
    model, second = built.model, fixed_model(weights, itf, other, batch)
    if _nodes(model) != _nodes(second):
        raise NotSpecializable("the graph folds to other nodes at another cache length")
    first_consts, second_consts = _initializers(model), _initializers(second)
    if first_consts.keys() != second_consts.keys():
        raise NotSpecializable("the graph folds to other constants at another cache length")
    names = tuple(n for n, v in first_consts.items() if not _same_array(v, second_consts[n]))
    _check_read_at_run_time(model, built.unplaced, names)
    delta = built.step.shape.past - other.past
    slopes = {}
    # the network's own shapes at the second length: the import adds tensors of its own (a move chain's int8
    # moves between scales, grouped-query attention's), which the folded graph does not name
    first, other_shapes = built.step.net.shapes, build_network(second, known=weights.known).shapes
    if first.keys() != other_shapes.keys():
        raise NotSpecializable("other tensors have a static shape at another cache length")
    for name, dims in first.items():
        if dims == other_shapes[name]:
            continue
        steps = [(a - b) // delta for a, b in zip(dims, other_shapes[name], strict=True)] \
            if len(dims) == len(other_shapes[name]) else []
        if not steps or any(s < 0 or b + s * delta != a for s, a, b in zip(steps, dims, other_shapes[name],
                                                                             strict=True)):
            raise NotSpecializable(f"{name}'s shape does not grow with the cache length")
        slopes[name] = tuple(steps)
    try:  # the subgraph run at the second length must give what the folding gave there
        evaluator, inputs = _constants_model(weights, itf, names)
        bucket = Bucket(built=built, slopes=slopes, constants=evaluator, names=names, inputs=inputs)
        values = length_constants(bucket, itf, other, batch)
    except NotSpecializable:
        raise
    except Exception as e:  # an operator onnx.reference does not run at that version: built, not specialized
        raise NotSpecializable(f"the length constants' subgraph does not run: {e}") from e
    if any(not _same_array(values[n], second_consts[n]) for n in names):
        raise NotSpecializable("the length constants' subgraph does not give the folded values")
    return bucket


def specialize(bucket: Bucket, itf: DecoderInterface, shape: StepShape, cache: ProgramCache,
               batch: int = 1) -> StepNetwork:
    """The bucket's network for ``shape`` (its cache length no longer than the bucket's network's).

    Raises:
        NotSpecializable: a step of the specialized network lands elsewhere than in the bucket's.
    """
    t0, compiling = time.perf_counter(), cache.compile_seconds
    base = bucket.built.step
    delta = shape.past - base.shape.past
    if delta > 0 or shape.new != base.shape.new:
        raise NotSpecializable("only a shorter step of the bucket is specialized (its tensors fit the plan)")
    shapes = dict(base.net.shapes)
    for name, slope in bucket.slopes.items():
        shapes[name] = tuple(d + s * delta for d, s in zip(base.net.shapes[name], slope, strict=True))
    constants = dict(base.net.constants) | length_constants(bucket, itf, shape, batch)
    steps = [_resized(step, shapes, base.net.shapes) for step in bucket.built.unplaced]
    # the host's evaluators of the ONNX steps are per node, not per length: shared with the bucket's network
    net = replace(base.net, steps=steps, constants=constants, shapes=shapes, evaluators=base.net.evaluators)
    place(net, cache.cfg)
    if [(s.name, s.where, type(s)) for s in net.steps] != [(s.name, s.where, type(s)) for s in base.net.steps]:
        raise NotSpecializable("a step is placed otherwise at this cache length")
    before = set(cache.programs)
    resized = [s for s in net.steps if any(shapes.get(n) != base.net.shapes.get(n) for n in (*s.inputs, *s.outputs))]
    programs = base.programs | compile_programs(replace(net, steps=resized), cache)
    compiled = cache.compile_seconds - compiling
    return finish_step(net, itf, shape, base.memory, programs, tuple(k for k in cache.programs if k not in before),
                       build_seconds=time.perf_counter() - t0 - compiled, compile_seconds=compiled,
                       specialized_from=base.shape.past)


def length_constants(bucket: Bucket, itf: DecoderInterface, shape: StepShape, batch: int) -> dict[str, np.ndarray]:
    """The length constants at ``shape``: the subgraph making them run on inputs of the step's shapes (their
    values are never read: only their shapes, by ``Shape`` nodes)."""
    from onnx import helper

    if not bucket.names:
        return {}
    feeds = {i.name: np.zeros(input_dims(i, itf, shape, batch),
                              helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)) for i in bucket.inputs}
    return dict(zip(bucket.names, bucket.constants.run(list(bucket.names), feeds), strict=True))


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


def _nodes(model: Any) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    return [(n.op_type, tuple(n.input), tuple(n.output)) for n in model.graph.node]


def _initializers(model: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def _check_read_at_run_time(model: Any, steps: tuple[Step, ...], names: tuple[str, ...]) -> None:
    """Every node reading a length constant is a step that takes it as an input (so it reads the step's
    value at run time), none folded it into its parameters."""
    for name in names:
        readers = sum(1 for n in model.graph.node for i in n.input if i == name)
        takers = sum(1 for s in steps for i in s.inputs if i == name)
        if readers != takers:
            raise NotSpecializable(f"the length constant {name} is folded into a step's parameters")


def _constants_model(weights: Weights, itf: DecoderInterface,
                     names: tuple[str, ...]) -> tuple[Any, tuple[Any, ...]]:
    """An evaluator of the skeleton's nodes making ``names`` from the decoder's inputs (their shapes) and small
    constants (None without length constants), and its inputs."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    if not names:
        return None, ()

    g = weights.skeleton.graph
    producer = {o: n for n in g.node for o in n.output}
    inits = {t.name: t for t in g.initializer}
    decoder_inputs = {itf.ids, itf.mask, *(n for pair in itf.past for n in pair)}
    inputs = {i.name: i for i in g.input if i.name in decoder_inputs}
    chosen: dict[int, Any] = {}
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if not name or name in seen or name in inits or name in inputs:
            seen.add(name)
            continue
        seen.add(name)
        node = producer.get(name)
        if node is None:  # a weight (a graph input of the skeleton) or anything not a shape computation
            raise NotSpecializable(f"the length constants are computed from {name}, not from shapes alone")
        if node.op_type == "Shape":  # only its input's shape counts: read it before the quantize/dequantize pair
            node = copy.deepcopy(node)
            while (up := producer.get(node.input[0])) is not None and up.op_type in _SAME_SHAPE:
                node.input[0] = up.input[0]
        chosen[id(producer[name])] = node
        todo.extend(node.input)
    nodes = [chosen[id(n)] for n in g.node if id(n) in chosen]
    read = tuple(inputs[n] for n in inputs if n in seen)
    graph = helper.make_graph(nodes, "length_constants", list(read),
                              [helper.make_empty_tensor_value_info(n) for n in names],
                              [inits[n] for n in inits if n in seen])
    return ReferenceEvaluator(helper.make_model(graph, opset_imports=list(weights.skeleton.opset_import),
                                                ir_version=weights.skeleton.ir_version)), read


def _resized(step: Step, shapes: dict[str, tuple[int, ...]], before: dict[str, tuple[int, ...]]) -> Step:
    """``step`` for its tensors at ``shapes`` (from ``before``): itself, or the scores matmul with its epilogue
    broadcast over the step's keys.

    Raises:
        NotSpecializable: a step whose parameters would depend on the cache length.
    """
    names = [n for n in (*step.inputs, *step.outputs) if n]
    if all(shapes.get(n) == before.get(n) for n in names) or isinstance(step, _LENGTH_FREE):
        return step
    if isinstance(step, MatmulStep) and step.views == (None, None, None):
        out = step.outputs[0]
        return replace(step, epilogue=_broadcast(step.epilogue, before[out][-1], shapes[out][-1], step.name))
    raise NotSpecializable(f"step {step.name!r} ({step.kind}) has a tensor along the cache")


def _broadcast(epi: Epilogue, was: int, now: int, name: str) -> Epilogue:
    """``epi`` of ``was`` output channels, every channel's parameters the same, for ``now`` channels."""
    def one(v: np.ndarray) -> np.ndarray:
        if v.size == 1:
            return v
        if v.shape != (was,) or not np.all(v == v[0]):
            raise NotSpecializable(f"step {name!r}: its epilogue differs per key")
        return np.full(now, v[0], v.dtype)

    return replace(epi, bias=None if epi.bias is None else one(epi.bias), scale=one(epi.scale))


__all__ = ["Bucket", "NotSpecializable", "bucket_of", "build_steps", "length_constants", "make_bucket",
           "specialize"]
