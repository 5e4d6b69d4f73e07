"""Benchmark of the quantize phase: tinynpu's QDQ writer against onnxruntime's ``quantize_static``, same run.

``python -m tinynpu.compiler.onnx.bench_quantize [--shape tiny|gpt2-small] [--repeat N]`` builds a decoder of
:mod:`.llm.decoder`, decodes a short prompt with onnxruntime on the float model measuring the calibration
ranges (as ``compile_llm`` does), and then, alternating ``--repeat`` times, quantizes it with the writer
(:func:`~.frontend.qdq_write.write_qdq`) and with ``quantize_static`` handed the same ranges as its
calibration cache (:func:`~.frontend.quantize.quantize_static`, the path the writer replaces).  It prints
each time, their ratio, the load average around each, and whether the two models are equal node for node and
initializer for initializer.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any


def _same(a: Any, b: Any) -> bool:
    """Equal nodes (in order) and initializers (name, type, shape, bytes, in order)."""
    from onnx import numpy_helper

    def inits(m: Any) -> list[tuple[str, int, tuple[int, ...], bytes]]:
        return [(t.name, t.data_type, tuple(t.dims), numpy_helper.to_array(t).tobytes()) for t in m.graph.initializer]

    nodes = [n.SerializeToString() for n in a.graph.node] == [n.SerializeToString() for n in b.graph.node]
    return nodes and inits(a) == inits(b)


def _timed(f: Any) -> tuple[Any, float, float]:
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0, load


def run(shape_name: str, prompt: int, steps: int, repeat: int) -> dict[str, Any]:
    """The measurement (see the module docstring), as a JSON-ready dict."""
    from tinynpu.compiler.onnx.frontend.calibration import MinMaxRanges, calibrated_tensors
    from tinynpu.compiler.onnx.frontend.qdq_write import write_qdq
    from tinynpu.compiler.onnx.frontend.quantize import prepare, quantize_static
    from tinynpu.compiler.onnx.llm import decoder
    from tinynpu.compiler.onnx.llm.compile import ort_greedy, seeded_prompt
    from tinynpu.compiler.onnx.llm.interface import read_interface

    shape = {"tiny": decoder.TINY, "gpt2-small": decoder.GPT2_SMALL}[shape_name]
    model = decoder.build_decoder(shape)
    itf = read_interface(model, shape_name)
    ranges = MinMaxRanges(calibrated_tensors(model))
    ort_greedy(model, itf, seeded_prompt(itf, prompt, 0), steps, ranges)
    model, excluded = prepare(model, [], ranges.ranges())
    writer, ort, equal = [], [], True
    for _ in range(repeat):
        mine, seconds, load = _timed(lambda: write_qdq(model, ranges.ranges(), excluded))
        writer.append({"seconds": round(seconds, 3), "load": load})
        theirs, seconds, load = _timed(lambda: quantize_static(model, excluded, ranges=ranges.ranges()))
        ort.append({"seconds": round(seconds, 3), "load": load})
        equal = equal and _same(mine, theirs)
        del mine, theirs
    best_w, best_o = min(r["seconds"] for r in writer), min(r["seconds"] for r in ort)
    return {"shape": shape_name, "layers": shape.layers, "hidden": shape.hidden, "vocab": shape.vocab,
            "prompt_tokens": prompt, "steps": steps, "writer": writer, "quantize_static": ort,
            "ratio_best": round(best_w / best_o, 4), "equal": equal}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tinynpu.compiler.onnx.bench_quantize", description=__doc__)
    p.add_argument("--shape", choices=("tiny", "gpt2-small"), default="tiny")
    p.add_argument("--prompt-tokens", type=int, default=8)
    p.add_argument("--steps", type=int, default=2, help="float decoding steps calibrated on (prompt included)")
    p.add_argument("--repeat", type=int, default=2, help="alternating runs of each quantizer")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    result = run(args.shape, args.prompt_tokens, args.steps, max(1, args.repeat))
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{result['shape']}: {result['layers']} layers, hidden {result['hidden']}, vocabulary {result['vocab']}; "
          f"calibrated on {result['steps']} steps of a {result['prompt_tokens']}-token prompt")
    for w, o in zip(result["writer"], result["quantize_static"], strict=True):
        print(f"  writer {w['seconds']:8.3f} s (load {w['load']:.1f})   quantize_static {o['seconds']:8.3f} s "
              f"(load {o['load']:.1f})   ratio {w['seconds'] / o['seconds']:.4f}")
    print(f"  best writer / best quantize_static: {result['ratio_best']:.4f}x; models equal: {result['equal']}")
    return 0 if result["equal"] else 1


__all__ = ["main", "run"]

if __name__ == "__main__":
    raise SystemExit(main())
