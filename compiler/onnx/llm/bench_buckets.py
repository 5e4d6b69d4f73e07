"""Building a decode step's network against specializing its bucket's, timed in one process, interleaved.

``python -m tinynpu.compiler.onnx.llm.bench_buckets [--layers 2] [--hidden 768] [--heads 12] [--vocab 2000]
[--ffn 3072] [--prompt 32] [--steps 4]``: the decoder is built and quantized once (a float run of ``--steps``
decode steps calibrates it), the bucket's network built at its longest step, then every shorter step of
the bucket built from the model (:func:`~.steps.build_step`, what every step did before) and specialized
(:func:`~.buckets.specialize`), alternately, on one program cache (so neither compiles more than the
other: the softmax of each width once, and the times are without compiling, each step's ``build_seconds``).
Printed: each length's two times and their ratio, and whether the two networks have the same shapes and
programs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tinynpu.compiler.onnx.llm import buckets
from tinynpu.compiler.onnx.llm.compile import align_cache_scales, ort_greedy, seeded_prompt
from tinynpu.compiler.onnx.llm.decoder import DecoderShape, build_decoder
from tinynpu.compiler.onnx.llm.interface import read_interface
from tinynpu.compiler.onnx.llm.steps import StepShape, build_step, split_weights
from tinynpu.compiler.onnx.lower.programs import ProgramCache
from tinynpu.isa import load_config


def main(argv: list[str] | None = None) -> int:
    import onnx

    from tinynpu.compiler.onnx.frontend.calibration import MinMaxRanges, calibrated_tensors
    from tinynpu.compiler.onnx.frontend.importer import load_model
    from tinynpu.compiler.onnx.frontend.quantize import quantize

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("layers", 2), ("hidden", 768), ("heads", 12), ("vocab", 2000), ("ffn", 3072),
                          ("prompt", 32), ("steps", 4)):
        ap.add_argument(f"--{name}", type=int, default=default)
    args = ap.parse_args(argv)
    shape = DecoderShape(layers=args.layers, hidden=args.hidden, heads=args.heads, vocab=args.vocab,
                         positions=args.prompt + args.steps + 1, ffn=args.ffn)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "decoder.onnx"
        onnx.save(build_decoder(shape), path)
        model = load_model(path)
    itf = read_interface(model, str(path))
    ranges = MinMaxRanges(calibrated_tensors(model))
    _, trajectory = ort_greedy(model, itf, seeded_prompt(itf, args.prompt, 0), args.steps + 1, ranges)
    qmodel = quantize(model, trajectory, ranges.ranges())
    align_cache_scales(qmodel, itf)
    weights = split_weights(qmodel)
    cfg = load_config("dram256")
    cache = ProgramCache(cfg, matmul_bucket=cfg.tile)
    lengths = [args.prompt + i for i in range(args.steps)]
    longest = max(lengths)
    t0 = time.perf_counter()
    built = build_step(weights, itf, StepShape(1, longest), cache)
    t1 = time.perf_counter()
    bucket = buckets.make_bucket(weights, itf, built, StepShape(1, longest - 1), 1)
    t2 = time.perf_counter()
    print(f"{shape}: bucket's network built at past {longest} in {t1 - t0:.2f} s (compile "
          f"{built.step.compile_seconds:.2f} s of it); its slopes and length constants in {t2 - t1:.2f} s")
    ratios = []
    for past in lengths[:-1]:
        theirs = build_step(weights, itf, StepShape(1, past), cache).step
        ours = buckets.specialize(bucket, itf, StepShape(1, past), cache)
        same = ours.net.shapes == theirs.net.shapes and ours.programs == theirs.programs
        ratios.append(ours.build_seconds / theirs.build_seconds)
        print(f"past {past}: built {theirs.build_seconds:.3f} s, specialized {ours.build_seconds:.3f} s: "
              f"{ratios[-1]:.3f}x; same shapes and programs: {same}")
    if ratios:
        print(f"specialized / built: {min(ratios):.3f}x to {max(ratios):.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
