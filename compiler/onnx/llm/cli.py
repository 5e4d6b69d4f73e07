"""``tinynpu run llm`` and ``tinynpu bench llm``.

A subcommand of its own rather than a ``--generate`` mode of ``run onnx``:
the two take different inputs (a prompt length and a token count, not
``--input`` tensors, ``--batch`` or ``--compare``), run different loops (one
network per step shape over one DRAM image with a KV cache, not one network
once), check different things (tokens and the cache at every step) and report
different figures (time to first token, per output token, the decode lower
bound), so a mode would be a second command behind one name, with half of
each one's options refused in the other.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from tinynpu.compiler.onnx.cli import SEED_MAX, bounded_int
from tinynpu.compiler.onnx.llm.interface import TOKENS_MAX
from tinynpu.errors import UsageError


def add_llm_workload(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The ``llm`` workload under ``tinynpu run``."""
    p = sub.add_parser("llm", help="a decoder with past keys and values: prefill a prompt, then greedy decode "
                                   "with the KV cache in DRAM; tokens checked, time per token measured")
    p.add_argument("model", help="the .onnx decoder (float; inputs input_ids and past_key_values.L.key/.value "
                                 "with a dynamic past length)")
    p.add_argument("--prompt-tokens", required=True, metavar="P",
                   help=f"prompt length, 1 to {TOKENS_MAX} (seeded token ids within the vocabulary)")
    p.add_argument("--generate", required=True, metavar="N", help=f"tokens to generate, 1 to {TOKENS_MAX}")
    p.add_argument("--batch", default="1", metavar="B",
                   help=f"sequences decoded together, each with its own seeded prompt and cache, 1 to {TOKENS_MAX} "
                        "(default 1); each step's layers take B rows of the array instead of one")
    p.add_argument("--seed", default="0", help=f"seed of the prompt's token ids, 0 to {SEED_MAX} (default 0)")
    p.add_argument("--config", default=None, help="architecture config name or YAML path (default: default)")
    p.add_argument("--json", action="store_true", help="print one JSON object (default: text)")
    p.set_defaults(handler=_cmd_run)


def _cmd_run(args: argparse.Namespace) -> int:
    from tinynpu.compiler.onnx.libout import explained
    from tinynpu.compiler.onnx.llm.run import format_run, run_llm
    from tinynpu.isa import load_config

    # the options are checked before the model is read (check_request checks them against it)
    prompt = bounded_int(args.prompt_tokens, "--prompt-tokens", -(2**31), 2**31)
    count = bounded_int(args.generate, "--generate", -(2**31), 2**31)
    batch = bounded_int(args.batch, "--batch", -(2**31), 2**31)
    seed = bounded_int(args.seed, "--seed", 0, SEED_MAX)
    if not args.model:
        raise UsageError("the ONNX model path is empty; give the decoder's .onnx file.")
    cfg = load_config(args.config) if args.config else None
    with explained(args.model):
        report = run_llm(Path(args.model), prompt_tokens=prompt or 0, generate_tokens=count or 0, cfg=cfg,
                         seed=seed or 0, batch=batch or 0)
    print(json.dumps(report) if args.json else format_run(report))
    return 0


#: ``bench llm --model``: the decoders it runs, and the config each runs on by default.
BENCH_MODELS = {"tiny": "default", "gpt2-small": "dram256"}
#: The GPT-2-small target: prompt and generation within this wall time, compile included.
GPT2_SMALL_SECONDS = 60.0


def register_llm_bench(bench_sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``tinynpu bench llm``."""
    p = bench_sub.add_parser("llm", help="a decoder with seeded weights (the tiny one, 2 layers, hidden 64, and with "
                                         "grouped-query attention; or GPT-2-small's shape): tokens checked, time to "
                                         "first token and per token against the DRAM lower bound, wall time against "
                                         "onnxruntime's")
    p.add_argument("--model", default="tiny", choices=sorted(BENCH_MODELS),
                   help="tiny (default): the tiny decoder, multi-head and grouped-query; gpt2-small: 12 layers, "
                        f"hidden 768, 12 heads, vocabulary 50257 (target: {GPT2_SMALL_SECONDS:.0f} s wall for a "
                        "32-token prompt and 32 generated tokens, compile included)")
    p.add_argument("--prompt-tokens", default=None, metavar="P", help="prompt length (default 8; gpt2-small 32)")
    p.add_argument("--generate", default=None, metavar="N", help="tokens to generate (default 8; gpt2-small 32)")
    p.add_argument("--config", default=None, help="architecture config (default: default; gpt2-small dram256)")
    p.add_argument("--json", action="store_true", help="print one JSON object (default: text)")
    p.set_defaults(handler=_cmd_bench)


def _cmd_bench(args: argparse.Namespace) -> int:
    print(json.dumps(bench(args)) if args.json else _bench_text(bench(args)))
    return 0


def bench(args: argparse.Namespace) -> dict[str, Any]:
    """The chosen decoder(s) end to end, with onnxruntime's int8 generation timed in the same run."""
    import onnx

    from tinynpu.compiler.onnx.llm.decoder import GPT2_SMALL, TINY, TINY_GQA, build_decoder
    from tinynpu.compiler.onnx.llm.run import run_llm
    from tinynpu.isa import load_config

    big = args.model == "gpt2-small"
    prompt = bounded_int(args.prompt_tokens or ("32" if big else "8"), "--prompt-tokens", 1, TOKENS_MAX) or 1
    count = bounded_int(args.generate or ("32" if big else "8"), "--generate", 1, TOKENS_MAX) or 1
    cfg = load_config(args.config or BENCH_MODELS[args.model])
    runs = []
    for shape in (GPT2_SMALL,) if big else (TINY, TINY_GQA):
        with tempfile.TemporaryDirectory(prefix="tinynpu-llm-") as tmp:
            path = Path(tmp) / "decoder.onnx"
            t0 = time.perf_counter()
            onnx.save(build_decoder(shape), str(path))
            built = time.perf_counter() - t0
            t0 = time.perf_counter()
            r = run_llm(path, prompt_tokens=prompt, generate_tokens=count, cfg=cfg)
            wall = time.perf_counter() - t0
        r["model"] = (f"{'GPT-2-small-shaped' if big else 'tiny'} decoder ({shape.layers} layers, hidden "
                      f"{shape.hidden}, {shape.heads} heads, {shape.kv} key/value heads, vocab {shape.vocab})")
        sec = r["seconds"]
        ort = sec["onnxruntime_int8_generation"]
        # tinynpu's generation: calibration, quantization and compile, then every step simulated and checked
        # against the integer reference; onnxruntime's runs (the baseline and the comparisons) are timed apart
        own = sec["compile_total"] + sec["simulate_and_reference"]
        runs.append(r | {"wall_seconds": wall, "tinynpu_seconds": own,
                         "tinynpu_over_onnxruntime": own / ort if ort else 0.0, "model_build_seconds": built,
                         "target_seconds": GPT2_SMALL_SECONDS if big else None})
    return {"runs": runs}


def _bench_text(doc: dict[str, Any]) -> str:
    from tinynpu.compiler.onnx.llm.run import format_run

    out = []
    for r in doc["runs"]:
        out.append(format_run(r))
        sec = r["seconds"]
        out.append(f"  tinynpu {r['tinynpu_seconds']:.1f} s (calibrate, quantize, compile; simulate every step, "
                   "checked against the integer reference) against onnxruntime's int8 generation "
                   f"{sec['onnxruntime_int8_generation']:.3f} s: {r['tinynpu_over_onnxruntime']:.0f}x; wall "
                   f"{r['wall_seconds']:.1f} s with onnxruntime's runs")
        if r["target_seconds"] is not None:
            met = "met" if r["tinynpu_seconds"] <= r["target_seconds"] else "NOT met"
            out.append(f"  target {r['target_seconds']:.0f} s for tinynpu's part: {met}")
        rest = r["wall_seconds"] - r["tinynpu_seconds"] - sec["onnxruntime_int8_generation"]
        out.append("  where the wall time goes (s): " + ", ".join(
            f"{k} {sec[k]:.1f}" for k in ("float_run", "quantize", "split_weights", "plan_and_build", "compile",
                                          "simulate_and_reference", "onnxruntime_int8_generation") if k in sec)
                   + f", the other comparisons and the report {rest:.1f}"
                   + f" (the model file built beforehand in {r['model_build_seconds']:.1f})")
    return "\n".join(out)


__all__ = ["BENCH_MODELS", "GPT2_SMALL_SECONDS", "add_llm_workload", "bench", "register_llm_bench"]
