"""``run_llm``: compile, generate on the simulator, compare with onnxruntime and the float model, report."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.llm.agreement import explain_misses, format_misses, sequence_logits
from tinynpu.compiler.onnx.llm.compile import CompiledDecoder, compile_llm, ort_greedy, ort_model_session
from tinynpu.compiler.onnx.llm.figures import summary
from tinynpu.compiler.onnx.llm.generate import Generation, generate
from tinynpu.isa import ArchConfig


def agreement(ours: list[list[int]], theirs: list[list[int]]) -> dict[str, Any]:
    """Fraction of equal tokens over every sequence, and per sequence the first step where the two differ
    (None: nowhere)."""
    same = [[a == b for a, b in zip(o, t, strict=True)] for o, t in zip(ours, theirs, strict=True)]
    flat = [x for row in same for x in row]
    return {"tokens": theirs, "equal_fraction": sum(flat) / len(flat) if flat else 1.0,
            "first_divergence": [row.index(False) if False in row else None for row in same]}


def run_llm(path: str | Path, *, prompt_tokens: int, generate_tokens: int, cfg: ArchConfig | None = None,
            seed: int = 0, batch: int = 1) -> dict[str, Any]:
    """A decoder's prefill and greedy decode of ``batch`` sequences on the simulator, verified and measured
    (the JSON report)."""
    t0 = time.perf_counter()
    cd = compile_llm(path, prompt_tokens=prompt_tokens, generate=generate_tokens, cfg=cfg, seed=seed, batch=batch)
    compile_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    gen = generate(cd)
    run_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    # onnxruntime's generation is timed with its session's creation, as before the session was shared
    session = ort_model_session(cd.qmodel)
    ort_tokens, _ = ort_greedy(cd.qmodel, cd.itf, cd.prompt, generate_tokens, session=session)
    ort_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    forced_logits = teacher_forced_logits(cd, gen, session)
    forced = teacher_forced(cd, gen, forced_logits)
    forced_seconds = time.perf_counter() - t0
    misses = explain_misses(cd, gen, forced, forced_logits)
    return report(cd, gen.tokens, gen.reference_tokens, ort_tokens, summary(cd, gen)) | {
        "onnxruntime_int8_teacher_forced": forced | {"misses": misses["misses"]},
        "seconds": cd.timings | {"compile_total": compile_seconds, "simulate_and_reference": run_seconds,
                                 "onnxruntime_int8_generation": ort_seconds,
                                 "onnxruntime_int8_teacher_forced": forced_seconds,
                                 "teacher_forced_misses_explained": misses["seconds"]}}


def teacher_forced_logits(cd: CompiledDecoder, gen: Generation, session: Any = None) -> np.ndarray:
    """onnxruntime's int8 model's (float) logits on tinynpu's own token sequence: one pass over prompt and
    generated tokens.  ``session``: the int8 model's :func:`~.compile.ort_model_session`, when the caller has
    made it already."""
    return sequence_logits(cd, gen, cd.qmodel, session)


def teacher_forced(cd: CompiledDecoder, gen: Generation, logits: np.ndarray) -> dict[str, Any]:
    """onnxruntime's int8 model on tinynpu's own token sequence (``logits``, :func:`teacher_forced_logits`):
    per step, whether its argmax is tinynpu's token, how far its logits are from tinynpu's in
    LSBs of the logits' scale, and tinynpu's margin (top-1 minus top-2, LSBs) where they differ.  Free of
    the cascade of free-running generation, it says whether a divergence is a near-tie."""
    steps = []
    for record, step in zip(gen.steps, cd.steps, strict=True):
        for b, token in enumerate(record.tokens):
            ours = record.execution.values[step.logits][b, -1].astype(np.int64)
            theirs = np.rint(logits[b, cd.prompt.shape[1] - 1 + record.index] / step.net.qparams[step.logits].s)
            top2 = np.sort(ours)[-2:]
            steps.append({"step": record.index, "sequence": b, "argmax_equal": int(np.argmax(theirs)) == token,
                          "max_abs_lsb": int(np.max(np.abs(theirs - ours))),
                          "our_margin_lsb": int(top2[1] - top2[0])})
    equal = [s["argmax_equal"] for s in steps]
    return {"equal_fraction": sum(equal) / len(equal), "steps": steps,
            "differing_steps_margin_lsb": [s["our_margin_lsb"] for s in steps if not s["argmax_equal"]]}


def report(cd: CompiledDecoder, tokens: list[list[int]], reference: list[list[int]], ort_tokens: list[list[int]],
           figures: dict[str, Any]) -> dict[str, Any]:
    """The run's JSON: model, tokens, the three comparisons, the image layout, the figures."""
    compiled = [{"step": i, "past": s.shape.past, "new": s.shape.new, "specialized_from_past": s.specialized_from,
                 "programs": [list(map(str, k)) for k in s.compiled]} for i, s in enumerate(cd.steps)]
    return {
        "model": cd.itf.source, "config": cd.cfg.name, "clock_mhz": cd.cfg.clock_mhz,
        "prompt": cd.prompt.tolist(), "generated": tokens,
        "verified": tokens == reference,
        "integer_reference": {"tokens": reference, "bit_exact": tokens == reference},
        "onnxruntime_int8": agreement(tokens, ort_tokens),
        "float_model": agreement(tokens, cd.float_tokens),
        "layout": cd.layout.to_json() | {"weights_placed": [
            {"layer": k[0], "tensor": k[1], "address": a, "bytes": n} for k, (a, n) in cd.image.weights.items()]},
        "programs_compiled": len(cd.cache.programs),
        "recompiled_per_step": "the softmax over the scores at each cache length; the attention matmuls once per "
                               "tile of cache lengths (compiled for the length rounded up to T, operands "
                               "zero-padded); the weight layers' programs once per step shape, reused; one "
                               "network built per tile of cache lengths, specialized to the others "
                               "(specialized_from_past)",
        "compiled": compiled,
        **figures,
    }


def format_run(r: dict[str, Any]) -> str:
    """The report as text."""
    lines = [f"{r['model']} on {r['config']} ({r['clock_mhz']:.0f} MHz): batch {r['batch']}, prompt "
             f"{len(r['prompt'][0])} tokens, {len(r['generated'][0])} generated per sequence",
             f"  tokens:            {r['generated']}",
             f"  integer reference: {'bit-exact (every step: logits, present keys and values, cache in DRAM)'}",
             f"  onnxruntime int8:  {r['onnxruntime_int8']['equal_fraction']:.0%} equal, first divergence "
             f"{r['onnxruntime_int8']['first_divergence']}",
             f"  onnxruntime int8 on these tokens (teacher-forced): "
             f"{r['onnxruntime_int8_teacher_forced']['equal_fraction']:.0%} equal argmax; where not, tinynpu's "
             f"top-2 margin {r['onnxruntime_int8_teacher_forced']['differing_steps_margin_lsb']} LSB",
             *format_misses(r["onnxruntime_int8_teacher_forced"].get("misses", [])),
             f"  float model:       {r['float_model']['equal_fraction']:.0%} equal, first divergence "
             f"{r['float_model']['first_divergence']}",
             f"  time to first token {r['time_to_first_token_s'] * 1e6:.1f} us, per output token "
             f"{r['time_per_output_token_s'] * 1e6:.1f} us ({r['tokens_per_second']:.0f} tokens/s over the batch)",
             f"  decode: {r['decode_cycles_per_token']:.0f} cycles/step, lower bound "
             f"{r['decode_lower_bound_cycles_per_token']:.0f} ({r['decode_over_lower_bound']:.2f}x); DRAM "
             f"{r['decode_dram_bytes_per_token']:.0f} bytes/token, bound {r['decode_lower_bound_bytes_per_token']:.0f}",
             f"  energy: prefill {r['prefill_energy_pj'] / 1e6:.2f} uJ, decode "
             f"{r['decode_energy_per_token_pj'] / 1e6:.2f} uJ/token (accelerator only)",
             f"  decode utilization {r['decode_utilization']:.1%} (batch-1 ceiling {r['batch1_row_ceiling']:.1%}); "
             f"prefill {r['prefill_utilization']:.1%}",
             f"  KV cache: {r['layout']['kv_cache']['bytes']} bytes at {r['layout']['kv_cache']['address']} for "
             f"{r['layout']['kv_cache']['capacity_tokens']} tokens; {r['programs_compiled']} programs compiled",
             "  step  past  new  cycles  weights  attention  residual  nonlinear  host_bytes  compiled  "
             "build_s  compile_s"]
    for s in r["steps"]:
        k = s["cycles_by_kind"]
        lines.append(f"  {s['step']:4d}  {s['past_tokens']:4d}  {s['new_tokens']:3d}  {s['cycles']:6d}  "
                     f"{k['weights']:7d}  {k['attention']:9d}  {k['residual']:8d}  {k['nonlinear']:9d}  "
                     f"{s['host_bytes']:10d}  "
                     f"{s['programs_compiled']:8d}  {s['build_seconds']:7.2f}  {s['compile_seconds']:9.2f}")
    return "\n".join(lines)


__all__ = ["agreement", "format_run", "report", "run_llm", "teacher_forced", "teacher_forced_logits"]
