"""``compile_llm``: a decoder with past keys and values quantized once and compiled for every step of a run.

Beside :func:`~tinynpu.compiler.onnx.network.compile_onnx`: the same front end
(quantization, QDQ steps, folding) and lowering (per-layer programs, the DRAM
plan), but one network per step shape (:mod:`.steps`) over one DRAM image
(:mod:`.image`) with the KV cache in it.

Calibration: the quantizer calibrates on the run's own float trajectory,
the prompt's step and every decode step of the float model's greedy decoding
of the prompt (onnxruntime on the float model), so the cache's scale covers
the keys and values the run produces; the same trajectory gives the float
model's tokens the run is compared with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.frontend.calibration import MinMaxRanges, calibrated_tensors
from tinynpu.compiler.onnx.llm.buckets import build_steps
from tinynpu.compiler.onnx.llm.image import LlmImage, LlmLayout
from tinynpu.compiler.onnx.llm.interface import DecoderInterface, check_request, read_interface
from tinynpu.compiler.onnx.llm.steps import StepNetwork, StepShape, split_weights, step_shapes
from tinynpu.compiler.onnx.lower.programs import ProgramCache
from tinynpu.errors import OnnxError
from tinynpu.isa import ArchConfig, load_config


@dataclass
class CompiledDecoder:
    """A decoder ready to generate: its step networks, their programs and the DRAM image.

    Attributes:
        prompt: The prompts' token ids, one row per sequence (batch x prompt length).
        generate: Tokens to generate.
        float_tokens: The float model's greedy tokens per sequence (onnxruntime), the calibration trajectory's.
        calibration: The float feeds of every step (the quantizer's samples).
    """

    itf: DecoderInterface
    float_model: Any
    qmodel: Any
    cfg: ArchConfig
    cache: ProgramCache
    steps: list[StepNetwork]
    layout: LlmLayout
    image: LlmImage
    prompt: np.ndarray
    generate: int
    float_tokens: list[list[int]]
    calibration: list[dict[str, np.ndarray]]
    timings: dict[str, float] = field(default_factory=dict)

    def step(self, shape: StepShape) -> StepNetwork:
        return next(s for s in self.steps if s.shape == shape)

    @property
    def batch(self) -> int:
        return int(self.prompt.shape[0])


def feeds_for(itf: DecoderInterface, ids: np.ndarray, past: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """One step's inputs: the new token ids (batch x new), the past keys and values (float), a mask of ones."""
    feeds: dict[str, Any] = {itf.ids: np.asarray(ids, np.int64).reshape(past[0][0].shape[0], -1)}
    for (k_name, v_name), (k, v) in zip(itf.past, past, strict=True):
        feeds[k_name], feeds[v_name] = k, v
    if itf.mask:
        feeds[itf.mask] = np.ones((feeds[itf.ids].shape[0], past[0][0].shape[2] + feeds[itf.ids].shape[1]), np.int64)
    return feeds


def token_feeds(itf: DecoderInterface, ids: np.ndarray, total: int) -> dict[str, Any]:
    """A step's inputs without the past (it is in DRAM): the new token ids, a mask of ones over ``total``."""
    feeds: dict[str, Any] = {itf.ids: np.asarray(ids, np.int64)}
    if itf.mask:
        feeds[itf.mask] = np.ones((feeds[itf.ids].shape[0], total), np.int64)
    return feeds


def ort_greedy(model: Any, itf: DecoderInterface, prompt: np.ndarray, generate: int,
               ranges: MinMaxRanges | None = None, session: Any = None
               ) -> tuple[list[list[int]], list[dict[str, np.ndarray]]]:
    """Greedy decoding with onnxruntime (float or QDQ model) of each prompt row: the tokens per sequence
    and every step's feeds.

    ``ranges``: its tensors' ranges are measured at every step as well, on the graph as it is (onnxruntime's
    optimizations off, as its calibrator runs it), so the steps' feeds, the calibration samples, need no
    second run in a calibration session.  ``session``: ``model``'s :func:`ort_model_session`, made by the
    caller to run the model again (without ``ranges``); by default made here.
    """
    from tinynpu.compiler.onnx.verify.checks import session as ort_session

    extra = ranges.names if ranges is not None else []
    if session is None:  # int8 kept int8, as check (b) of `run onnx` runs it
        session = ort_session(model, extra, optimize=False) if ranges is not None else ort_model_session(model)
    prompt = np.asarray(prompt, np.int64).reshape(-1, np.shape(prompt)[-1])
    empty = np.zeros((prompt.shape[0], itf.kv_heads, 0, itf.head_dim), np.float32)
    past = [(empty, empty)] * itf.layers
    ids, steps, trajectory = prompt, [], []
    names = list(dict.fromkeys([itf.logits] + [n for pair in itf.present for n in pair] + extra))
    for _ in range(generate):
        feeds = feeds_for(itf, ids, past)
        trajectory.append(feeds)
        out = dict(zip(names, session.run(names, feeds), strict=True))
        if ranges is not None:
            ranges.add(out | feeds)
        steps.append(np.argmax(out[itf.logits][:, -1], axis=-1))
        past = [(out[k], out[v]) for k, v in itf.present]
        ids = steps[-1].reshape(-1, 1)
    return [[int(step[b]) for step in steps] for b in range(prompt.shape[0])], trajectory


def ort_model_session(model: Any) -> Any:
    """An onnxruntime session of ``model`` (int8 kept int8, optimized) with the model's own outputs: what
    :func:`ort_greedy` runs without ``ranges``, made once where a run needs the model more than once (the
    int8 model's free-running and teacher-forced passes; each session serializes the whole model)."""
    from tinynpu.compiler.onnx.verify.checks import session as ort_session

    return ort_session(model, [])


def seeded_prompt(itf: DecoderInterface, length: int, seed: int, batch: int = 1) -> np.ndarray:
    """``batch`` prompts of ``length`` token ids uniform in the vocabulary (batch x length)."""
    return np.random.default_rng(seed).integers(0, itf.vocab, size=(batch, length), dtype=np.int64)


def compile_llm(path: str | Path, *, prompt_tokens: int, generate: int, cfg: ArchConfig | None = None,
                seed: int = 0, batch: int = 1) -> CompiledDecoder:
    """Check, quantize and compile a decoder for a run of ``prompt_tokens`` then ``generate`` tokens, for
    ``batch`` sequences decoded together (each step's layers then take ``batch`` rows).

    Raises:
        OnnxError, UsageError: see :func:`~.interface.read_interface` and :func:`~.interface.check_request`
            (all checked before any quantizing or compiling).
    """
    from tinynpu.compiler.onnx.frontend.importer import load_model
    from tinynpu.compiler.onnx.frontend.quantize import quantize

    cfg = cfg or load_config("default")
    if not cfg.is_integer:
        raise OnnxError(f"config {cfg.name!r} is not an integer config; decoders run int8.")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    model = load_model(path)
    itf = read_interface(model, str(path))
    check_request(itf, model, prompt_tokens, generate, cfg, batch)
    prompt = seeded_prompt(itf, prompt_tokens, seed, batch)
    # the float run's steps are the calibration samples; their ranges are measured as they run
    ranges = MinMaxRanges(calibrated_tensors(model))
    float_tokens, trajectory = ort_greedy(model, itf, prompt, generate, ranges)
    timings["float_run"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    qmodel = quantize(model, trajectory, ranges.ranges())
    align_cache_scales(qmodel, itf)
    timings["quantize"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cache = ProgramCache(cfg, matmul_bucket=cfg.tile)  # attention: one program per T cache lengths
    weights = split_weights(qmodel)
    timings["split_weights"] = time.perf_counter() - t0
    # one network per bucket of cache lengths, specialized to the bucket's other steps (:mod:`.buckets`)
    steps = build_steps(weights, itf, step_shapes(prompt_tokens, generate), cache, batch)
    _check_cache_scales(steps, itf)
    image = LlmImage(cfg, itf, steps, cache, prompt_tokens + generate - 1, batch)
    layout = image.layout
    if layout.staging_base > cfg.dram_bytes:
        raise OnnxError(f"{path}: the run needs {layout.staging_base} bytes of DRAM before staging (activations "
                        f"{layout.activation_bytes}, weights {layout.weight_bytes}, KV cache {layout.cache_bytes}), "
                        f"more than the {cfg.dram_bytes} bytes of config {cfg.name!r}.")
    timings["plan_and_build"] = time.perf_counter() - t0 - cache.compile_seconds - timings["split_weights"]
    timings["compile"] = cache.compile_seconds
    return CompiledDecoder(itf=itf, float_model=model, qmodel=qmodel, cfg=cfg, cache=cache, steps=steps,
                           layout=layout, image=image, prompt=prompt, generate=generate,
                           float_tokens=float_tokens, calibration=trajectory, timings=timings)


def align_cache_scales(qmodel: Any, itf: DecoderInterface) -> None:
    """Quantize each past key/value input at its present output's scale and zero point.

    The int8 cache one step writes is then exactly what the next step reads (the dequantized past
    quantizes back to the same integers).  The quantizer aligns a Concat's inputs to its output only
    when the pattern around it allows (:func:`~tinynpu.compiler.onnx.frontend.quantize.align_concat_scales`);
    here it is done for the cache always.  Nothing saturates: the present's calibrated range covers the
    past's (the present of one step is the past of the next, plus the new tokens).
    """
    nodes = list(qmodel.graph.node)
    for past, present in zip(itf.past, itf.present, strict=True):
        for past_name, present_name in zip(past, present, strict=True):
            dq = next((n for n in nodes if n.op_type == "DequantizeLinear" and n.output[0] == present_name), None)
            q = next((n for n in nodes if n.op_type == "QuantizeLinear" and n.input[0] == past_name), None)
            if dq is None or q is None or len(dq.input) < 3 or len(q.input) < 3:
                raise OnnxError(f"{itf.source}: the int8 model does not quantize {past_name} and dequantize "
                                f"{present_name} (QuantizeLinear/DequantizeLinear with a zero point), so the cache "
                                "cannot be kept in int8.")
            for node in [q] + [n for n in nodes if n.op_type == "DequantizeLinear" and n.input[0] == q.output[0]]:
                node.input[1], node.input[2] = dq.input[1], dq.input[2]


def _check_cache_scales(steps: list[StepNetwork], itf: DecoderInterface) -> None:
    """The int8 cache one step writes must be what the next reads: the past input's quantization equal to
    the present output's (the quantizer aligns a Concat's inputs to its output), else the cache would be
    requantized on every step."""
    step = steps[0]
    for layer, (pair, scales) in enumerate(zip(itf.past, step.scales, strict=True)):
        for name, qp in zip(pair, scales, strict=True):
            q = next((s for s in step.net.steps if s.op == "QuantizeLinear" and s.inputs[0] == name), None)
            own = step.net.qparams.get(q.outputs[0]) if q is not None else None
            if own is None or not own.same_as(qp):
                raise OnnxError(f"{itf.source}: layer {layer}'s {name} is not quantized at its present output's "
                                "scale, so the int8 cache could not be appended in place.")


__all__ = ["CompiledDecoder", "compile_llm", "feeds_for", "ort_greedy", "ort_model_session", "seeded_prompt",
           "token_feeds"]
