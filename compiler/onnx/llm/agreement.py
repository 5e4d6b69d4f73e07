"""Why tinynpu's tokens and onnxruntime int8's part: each teacher-forced miss explained, measured.

tinynpu runs the QDQ model's int8 arithmetic with its GEMMs exact and its
nonlinear layers (layer norm, softmax, the GELU/ReLU tables) as integer
approximations, where onnxruntime computes those in float between
DequantizeLinear and QuantizeLinear; so logits may differ by a few LSBs, and
at a near-tie the argmax with them.  For each step where onnxruntime's argmax
on tinynpu's own token sequence is not tinynpu's token, the report gives:

- both runs' top-1 minus top-2 margins (LSBs of the logits' scale), and the
  token the float model prefers there (teacher-forced float logits, one pass);
- the first tensor of that step (layer, step, operator) where the two differ by
  more than 1 LSB, onnxruntime run on the same step with tinynpu's own cache
  (so what differs is that step's arithmetic, not an earlier step's cache),
  and the step among those whose *own* arithmetic (on onnxruntime's inputs)
  differs most.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.llm.compile import CompiledDecoder, feeds_for
from tinynpu.compiler.onnx.llm.generate import Generation
from tinynpu.compiler.onnx.verify.tensors import OrtTensors, TensorDifference, tensor_differences

#: A difference of one LSB is a rounding tie decided the other way (onnxruntime rounds float values to
#: nearest even, an integer approximation to nearest up to its documented error): the first tensor
#: "differing" is the first beyond it.
ROUNDING_LSB = 1


def step_inputs(cd: CompiledDecoder, gen: Generation, index: int) -> dict[str, Any]:
    """Step ``index``'s model inputs as tinynpu ran it: its token ids and, as the float past, tinynpu's
    own int8 cache after the step before (dequantized at the cache's scale, so the model's past
    QuantizeLinear gives back exactly those int8 values)."""
    itf, step = cd.itf, cd.steps[index]
    if index == 0:
        empty = np.zeros((cd.batch, itf.kv_heads, 0, itf.head_dim), np.float32)
        return feeds_for(itf, cd.prompt, [(empty, empty)] * itf.layers)
    before = gen.steps[index - 1].execution.values
    past = []
    for (k, v), (qk, qv) in zip(cd.steps[index - 1].present, step.scales, strict=True):
        past.append(tuple(((before[name].astype(np.float32) - np.float32(qp.z)) * np.float32(qp.s)).astype(np.float32)
                          for name, qp in ((k, qk), (v, qv))))
    ids = np.asarray(gen.steps[index - 1].tokens, np.int64).reshape(-1, 1)
    return feeds_for(itf, ids, past)  # type: ignore[arg-type]


def step_differences(cd: CompiledDecoder, gen: Generation, index: int, ort: OrtTensors) -> list[TensorDifference]:
    """Every quantized tensor of step ``index``: tinynpu's run against onnxruntime on the same inputs."""
    return tensor_differences(cd.steps[index].net, ort, step_inputs(cd, gen, index), gen.steps[index].execution.values)


def _where(d: TensorDifference) -> dict[str, Any]:
    return {"layer": d.layer, "step": d.step, "kind": d.kind, "onnxruntime_op": d.kernel}


def first_divergence(diffs: list[TensorDifference]) -> dict[str, Any] | None:
    """The first tensor (step order) tinynpu and onnxruntime differ in by more than :data:`ROUNDING_LSB`,
    and the step whose own arithmetic differs most (None: no tensor differs so)."""
    beyond = [d for d in diffs if (d.max_abs_lsb or 0) > ROUNDING_LSB]
    if not beyond:
        return None
    first = beyond[0]
    worst = max(diffs, key=lambda d: (d.own_max_abs_lsb, d.own_differing))
    return _where(first) | {"max_abs_lsb": first.max_abs_lsb, "differing": first.differing,
                            "elements": first.elements, "own_max_abs_lsb": first.own_max_abs_lsb,
                            "largest_own_difference": _where(worst) | {"own_max_abs_lsb": worst.own_max_abs_lsb,
                                                                       "own_differing": worst.own_differing}}


def by_kind(diffs: list[TensorDifference]) -> dict[str, dict[str, int]]:
    """Per step kind and onnxruntime operator: elements, how many differ and by how much, along the run and
    on onnxruntime's inputs (``own``)."""
    out: dict[str, dict[str, int]] = {}
    for d in diffs:
        if d.kernel is None:
            continue
        o = out.setdefault(f"{d.kind} on {d.kernel}", {"elements": 0, "differing": 0, "max_abs_lsb": 0,
                                                        "own_differing": 0, "own_max_abs_lsb": 0})
        o["elements"] += d.elements
        o["differing"] += d.differing or 0
        o["max_abs_lsb"] = max(o["max_abs_lsb"], d.max_abs_lsb or 0)
        o["own_differing"] += d.own_differing
        o["own_max_abs_lsb"] = max(o["own_max_abs_lsb"], d.own_max_abs_lsb)
    return out


def margin(logits: np.ndarray) -> int:
    """Top-1 minus top-2 of a row of integer logits."""
    top2 = np.sort(logits.astype(np.int64))[-2:]
    return int(top2[1] - top2[0])


def sequence_logits(cd: CompiledDecoder, gen: Generation, model: Any, made: Any = None) -> np.ndarray:
    """``model``'s (float) logits on tinynpu's token sequence: one onnxruntime pass over prompt and generated
    tokens, from an empty cache (``model``: a ModelProto or a model file's path; ``made``: a session of it
    with its own outputs, if the caller has one)."""
    from tinynpu.compiler.onnx.verify.checks import session

    ids = np.concatenate([cd.prompt, np.asarray(gen.tokens, np.int64)[:, :-1]], axis=1)
    empty = np.zeros((cd.batch, cd.itf.kv_heads, 0, cd.itf.head_dim), np.float32)
    return np.asarray((made or session(model, [])).run([cd.itf.logits], feeds_for(
        cd.itf, ids, [(empty, empty)] * cd.itf.layers))[0])


def float_logits(cd: CompiledDecoder, gen: Generation) -> np.ndarray:
    """The float model's logits on tinynpu's token sequence (:func:`sequence_logits`)."""
    # the model's file where it still is: serializing GPT-2-small's float weights again takes seconds
    source = Path(cd.itf.source)
    return sequence_logits(cd, gen, str(source) if source.is_file() else cd.float_model)


def explain_misses(cd: CompiledDecoder, gen: Generation, forced: dict[str, Any],
                   ort_logits: np.ndarray) -> dict[str, Any]:
    """Each teacher-forced miss of ``forced`` (:func:`~.run.teacher_forced`) explained (module docstring),
    with this analysis' own seconds."""
    t0 = time.perf_counter()
    misses = [s for s in forced["steps"] if not s["argmax_equal"]]
    out: list[dict[str, Any]] = []
    if misses:
        ort, fl = OrtTensors(cd.qmodel), float_logits(cd, gen)
        diffs: dict[int, list[TensorDifference]] = {}
        for s in misses:
            index, b = s["step"], s["sequence"]
            if index not in diffs:
                diffs[index] = step_differences(cd, gen, index, ort)
            row = cd.prompt.shape[1] - 1 + index
            theirs = np.rint(ort_logits[b, row] / cd.steps[index].net.qparams[cd.steps[index].logits].s)
            out.append({"step": index, "sequence": b, "token": gen.tokens[b][index],
                        "onnxruntime_token": int(np.argmax(theirs)), "float_token": int(np.argmax(fl[b, row])),
                        "our_margin_lsb": s["our_margin_lsb"], "onnxruntime_margin_lsb": margin(theirs),
                        "first_difference_over_1_lsb": first_divergence(diffs[index]),
                        "by_kind": by_kind(diffs[index])})
    return {"misses": out, "seconds": time.perf_counter() - t0}


def _place(w: dict[str, Any]) -> str:
    layer = "" if w["layer"] is None else f"layer {w['layer']} "
    return f"{layer}{w['step']} ({w['kind']}; onnxruntime {w['onnxruntime_op']})"


def format_misses(misses: list[dict[str, Any]]) -> list[str]:
    """The explained misses as report lines."""
    lines = []
    for m in misses:
        first = m["first_difference_over_1_lsb"]
        where = ("no tensor differs by more than 1 LSB" if first is None else
                 f"first > 1 LSB: {_place(first)} by {first['max_abs_lsb']} LSB in {first['differing']} of "
                 f"{first['elements']}; largest own difference {_place(first['largest_own_difference'])} "
                 f"{first['largest_own_difference']['own_max_abs_lsb']} LSB")
        lines.append(f"    miss at step {m['step']} (sequence {m['sequence']}): tinynpu {m['token']} by "
                     f"{m['our_margin_lsb']} LSB, onnxruntime {m['onnxruntime_token']} by "
                     f"{m['onnxruntime_margin_lsb']} LSB, float prefers {m['float_token']}; {where}")
    return lines


__all__ = ["ROUNDING_LSB", "by_kind", "explain_misses", "first_divergence", "float_logits", "format_misses",
           "margin", "sequence_logits", "step_differences", "step_inputs"]
