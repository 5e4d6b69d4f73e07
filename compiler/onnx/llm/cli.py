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


def register_llm_bench(bench_sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``tinynpu bench llm``."""
    p = bench_sub.add_parser("llm", help="the tiny decoder (2 layers, hidden 64; and with grouped-query attention): "
                                         "tokens checked, time to first token and per token against the DRAM lower "
                                         "bound, onnxruntime's time")
    p.add_argument("--prompt-tokens", default="8", metavar="P", help="prompt length (default 8)")
    p.add_argument("--generate", default="8", metavar="N", help="tokens to generate (default 8)")
    p.add_argument("--config", default=None, help="architecture config (default: default)")
    p.add_argument("--json", action="store_true", help="print one JSON object (default: text)")
    p.set_defaults(handler=_cmd_bench)


def _cmd_bench(args: argparse.Namespace) -> int:
    print(json.dumps(bench(args)) if args.json else _bench_text(bench(args)))
    return 0


def bench(args: argparse.Namespace) -> dict[str, Any]:
    """The tiny decoder end to end, with onnxruntime's int8 generation timed in the same run."""
    import onnx

    from tinynpu.compiler.onnx.llm.decoder import TINY, TINY_GQA, build_decoder
    from tinynpu.compiler.onnx.llm.run import run_llm
    from tinynpu.isa import load_config

    prompt = bounded_int(args.prompt_tokens, "--prompt-tokens", 1, TOKENS_MAX) or 1
    count = bounded_int(args.generate, "--generate", 1, TOKENS_MAX) or 1
    cfg = load_config(args.config) if args.config else None
    runs = []
    for shape in (TINY, TINY_GQA):
        with tempfile.TemporaryDirectory(prefix="tinynpu-llm-") as tmp:
            path = Path(tmp) / "decoder.onnx"
            onnx.save(build_decoder(shape), str(path))
            t0 = time.perf_counter()
            r = run_llm(path, prompt_tokens=prompt, generate_tokens=count, cfg=cfg)
            wall = time.perf_counter() - t0
        r["model"] = (f"tiny decoder ({shape.layers} layers, hidden {shape.hidden}, {shape.heads} heads, "
                      f"{shape.kv} key/value heads, vocab {shape.vocab})")
        ort = r["seconds"]["onnxruntime_int8_generation"]
        runs.append(r | {"wall_seconds": wall, "wall_over_onnxruntime": wall / ort if ort else 0.0})
    return {"runs": runs}


def _bench_text(doc: dict[str, Any]) -> str:
    from tinynpu.compiler.onnx.llm.run import format_run

    out = []
    for r in doc["runs"]:
        out.append(format_run(r))
        out.append(f"  wall {r['wall_seconds']:.1f} s (compile, simulate, reference, checks) against onnxruntime's "
                   f"int8 generation {r['seconds']['onnxruntime_int8_generation']:.3f} s: "
                   f"{r['wall_over_onnxruntime']:.0f}x")
    return "\n".join(out)


__all__ = ["add_llm_workload", "bench", "register_llm_bench"]
