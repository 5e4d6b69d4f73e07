"""One decode step's network for each shape a run needs, from the decoder quantized once.

The decoder is quantized once, with its dimensions still dynamic (one set of
scales for every step, so the int8 cache one step writes is what the next step
reads), and its weights split off once (:func:`split_weights`: converted and
dequantized once; each step copies and folds a skeleton without them), then
each step shape (``new`` tokens after ``past`` cached ones: the
prompt's ``(P, 0)``, the decode steps' ``(1, P)``, ``(1, P + 1)``, ...) gets
its own network: the dimensions fixed, the shape arithmetic (positions, the
causal mask) folded into constants, the QDQ graph turned into steps.

Programs come from one :class:`~tinynpu.compiler.onnx.lower.programs.ProgramCache`
shared by every step, keyed by shape: the weight layers (the projections, the
MLP, the LM head) of every decode step have one shape (one token) and are
compiled once, at the first decode step, and reused by all later ones.  The
attention matmuls (scores ``q @ K^T`` and ``probs @ V``) read ``past + 1``
cached rows; a program's loop bounds and tile counts are immediates of its
instructions (a relocation moves addresses, not trip counts), so they are
compiled for the cache length rounded up to the array's tile T, their
operands zero-padded (:attr:`~tinynpu.compiler.onnx.lower.programs.ProgramCache.matmul_bucket`:
exact, and nearly free, since the array pads to T anyway): one program pair
serves T consecutive lengths.  The softmax over the scores is compiled per
length (its row width is its parameters').  Each step records which programs
it compiled (``compiled`` in the JSON) and its build and compile seconds.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.frontend.fold import fold_static
from tinynpu.compiler.onnx.frontend.qdq import build_network
from tinynpu.compiler.onnx.ir import Network, QParam, Step
from tinynpu.compiler.onnx.llm.interface import DecoderInterface
from tinynpu.compiler.onnx.lower.memory import MemoryPlan
from tinynpu.compiler.onnx.lower.plan import place, plan
from tinynpu.compiler.onnx.lower.programs import ProgramCache, ProgramKey, compile_programs
from tinynpu.errors import OnnxError


@dataclass(frozen=True)
class StepShape:
    """``new`` tokens run after ``past`` cached ones."""

    new: int
    past: int

    @property
    def total(self) -> int:
        return self.new + self.past


@dataclass(frozen=True)
class StepNetwork:
    """One shape's network, its DRAM plan, its programs and the int8 tensors the runtime reads.

    Attributes:
        logits: The int8 tensor the ``logits`` output dequantizes (argmax is taken on it).
        present: Per layer, the int8 (key, value) tensors the present outputs dequantize.
        scales: Per layer, the (key, value) quantization of the cache.
        compiled: The program keys this shape compiled (the others it reused).
        build_seconds: Wall time to fix the shape, fold, build and plan the network (the host's part).
        compile_seconds: Wall time compiling the programs it did not reuse.
        specialized_from: None when this network was built from the model; else the past length of its
            bucket's network it was specialized from (:mod:`.buckets`: no rebuild).
    """

    shape: StepShape
    net: Network
    memory: MemoryPlan
    programs: dict[str, tuple[ProgramKey, ...]]
    logits: str
    present: tuple[tuple[str, str], ...]
    scales: tuple[tuple[QParam, QParam], ...]
    compiled: tuple[ProgramKey, ...]
    build_seconds: float = 0.0
    compile_seconds: float = 0.0
    specialized_from: int | None = None


def step_shapes(prompt: int, generate: int) -> list[StepShape]:
    """The prefill, then one decode step per generated token after the first."""
    return [StepShape(prompt, 0)] + [StepShape(1, prompt + i) for i in range(generate - 1)]


#: Initializers with more elements than this are the decoder's weights (a norm's gamma of a GPT-2-small row,
#: 768, is not; its smallest projection, 768 x 768, is).
WEIGHT_ELEMENTS = 4096


@dataclass(frozen=True)
class Weights:
    """The quantized decoder split once for all its step shapes: ``skeleton``, the QDQ model with its weights
    declared as graph inputs of their type and shape (so each step's copy, folding and shape inference move
    kilobytes), and ``known``, the weights as the network builder reads them (int8, and dequantized for the
    host operators), converted once and read-only."""

    skeleton: Any
    known: dict[str, np.ndarray]


def split_weights(qmodel: Any) -> Weights:
    """:class:`Weights` of ``qmodel`` (the quantized decoder, dimensions dynamic)."""
    from onnx import helper

    from tinynpu.compiler.onnx.frontend.qdq import QdqGraph

    model = copy.deepcopy(qmodel)
    big = {t.name: t for t in model.graph.initializer if int(np.prod(t.dims)) > WEIGHT_ELEMENTS}
    kept = [t for t in model.graph.initializer if t.name not in big]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    model.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in big.values())
    consts = QdqGraph(qmodel).consts
    dequantized = [n.output[0] for n in qmodel.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in big]
    known = {name: consts[name] for name in [*big, *dequantized]}
    for name in _matmul_weights(qmodel, big):
        # a MatMul's K x N weights become the layer's N x K operand (a transposed view, made contiguous by the
        # pattern matcher); stored column-major once, that view is contiguous already, so no step copies them
        # (GPT-2-small: 124 MB per step)
        known[name] = np.asfortranarray(known[name])
    for value in known.values():
        value.setflags(write=False)  # shared by every step's network: nothing may change it in place
    return Weights(skeleton=model, known=known)


def _matmul_weights(qmodel: Any, names: Any) -> list[str]:
    """The 2-D int8 initializers among ``names`` whose dequantized values only a MatMul reads, as its weights."""
    readers: dict[str, list[Any]] = {}
    for n in qmodel.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    return [n.input[0] for n in qmodel.graph.node
            if n.op_type == "DequantizeLinear" and n.input[0] in names and readers.get(n.output[0])
            and all(r.op_type == "MatMul" and list(r.input).index(n.output[0]) == 1 for r in readers[n.output[0]])]


def input_dims(inp: Any, itf: DecoderInterface, shape: StepShape, batch: int) -> list[int]:
    """The dimensions of graph input ``inp`` (a ValueInfoProto) at ``shape`` for ``batch`` sequences."""
    sizes = {itf.ids: {0: batch, 1: shape.new}, itf.mask: {0: batch, 1: shape.total}}
    sizes |= {name: {0: batch, 2: shape.past} for pair in itf.past for name in pair}
    return [d.dim_value if d.HasField("dim_value") else sizes.get(inp.name, {}).get(axis, 1)
            for axis, d in enumerate(inp.type.tensor_type.shape.dim)]


def fix_dims(model: Any, itf: DecoderInterface, shape: StepShape, batch: int) -> None:
    """Set ``model``'s dynamic dimensions (its decoder inputs') for ``shape`` and ``batch`` sequences, in place."""
    for inp in model.graph.input:
        for d, value in zip(inp.type.tensor_type.shape.dim, input_dims(inp, itf, shape, batch), strict=True):
            d.dim_value = value


def opset_of(model: Any) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)


def fixed_model(weights: Weights, itf: DecoderInterface, shape: StepShape, batch: int) -> Any:
    """The skeleton with its dynamic dimensions set for ``shape`` and ``batch`` sequences, its shape
    arithmetic folded."""
    import onnx

    model = copy.deepcopy(weights.skeleton)
    fix_dims(model, itf, shape, batch)
    for out in model.graph.output:  # shape inference writes them for this shape
        out.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    model, _ = fold_static(model, opset_of(model))
    return onnx.shape_inference.infer_shapes(model)


def _int8_source(net: Network, output: str) -> str:
    """The int8 tensor a graph output dequantizes."""
    producer = next((s for s in net.steps if output in s.outputs), None)
    if producer is None or producer.op != "DequantizeLinear" or producer.inputs[0] not in net.qparams:
        raise OnnxError(f"the decoder's output {output!r} is not the dequantized value of an int8 tensor, so the "
                        "int8 cache and logits cannot be read from the DRAM image.")
    return producer.inputs[0]


@dataclass(frozen=True)
class Built:
    """A step shape's network as :func:`build_step` made it, with what specializing it to another cache length
    needs (:mod:`.buckets`): the folded model it was built from, and its steps before placement."""

    step: StepNetwork
    model: Any
    unplaced: tuple[Step, ...]


def build_step(weights: Weights, itf: DecoderInterface, shape: StepShape, cache: ProgramCache,
               batch: int = 1) -> Built:
    """The network of one step shape for ``batch`` sequences, its programs compiled (or reused from ``cache``)."""
    t0, compiling = time.perf_counter(), cache.compile_seconds
    model = fixed_model(weights, itf, shape, batch)
    net = build_network(model, known=weights.known)
    unplaced = tuple(net.steps)
    place(net, cache.cfg)
    memory = plan(net, cache.cfg.tile)
    before = set(cache.programs)
    programs = compile_programs(net, cache)
    compiled = cache.compile_seconds - compiling
    step = finish_step(net, itf, shape, memory, programs, tuple(k for k in cache.programs if k not in before),
                       build_seconds=time.perf_counter() - t0 - compiled, compile_seconds=compiled)
    return Built(step=step, model=model, unplaced=unplaced)


def finish_step(net: Network, itf: DecoderInterface, shape: StepShape, memory: MemoryPlan,
                programs: dict[str, tuple[ProgramKey, ...]], compiled: tuple[ProgramKey, ...], *,
                build_seconds: float, compile_seconds: float, specialized_from: int | None = None) -> StepNetwork:
    """The :class:`StepNetwork` of a network built (or specialized) and planned: its int8 outputs found."""
    present = tuple((_int8_source(net, k), _int8_source(net, v)) for k, v in itf.present)
    return StepNetwork(shape=shape, net=net, memory=memory, programs=programs,
                       logits=_int8_source(net, itf.logits), present=present,
                       scales=tuple((net.qparams[k], net.qparams[v]) for k, v in present), compiled=compiled,
                       build_seconds=build_seconds, compile_seconds=compile_seconds,
                       specialized_from=specialized_from)


__all__ = ["Built", "StepNetwork", "StepShape", "Weights", "build_step", "finish_step", "fix_dims", "fixed_model",
           "input_dims", "opset_of", "split_weights", "step_shapes"]
