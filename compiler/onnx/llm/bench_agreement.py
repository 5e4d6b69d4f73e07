"""tinynpu against onnxruntime int8 on a decoder, as compiled and with the matmuls' bias Adds left unfolded.

``python -m tinynpu.compiler.onnx.llm.bench_agreement [--layers 12] [--hidden 768] [--heads 12]
[--vocab 50257] [--ffn 3072] [--positions 1024] [--prompt 32] [--generate 32] [--config dram256] [--compare-steps 4]``

The front end folds a matmul's bias ``Add`` into its epilogue
(:func:`~tinynpu.compiler.onnx.frontend.nonlinear.fold_affine`): one rounding where the QDQ model, and
onnxruntime with it (``QLinearMatMul`` then ``QLinearAdd``), rounds twice.  This runs the same decoder
twice in one process, as compiled and with that fold switched off (the bias Adds then run as their own
steps on the host, at the QDQ model's two roundings), and prints for each: onnxruntime's teacher-forced
argmax agreement on tinynpu's tokens, the misses' margins, and per step kind and onnxruntime operator how
many values of the first ``--compare-steps`` steps differ from onnxruntime on onnxruntime's own inputs
(:mod:`~tinynpu.compiler.onnx.verify.tensors`).  The experiment measures how much of the disagreement
the fold's single rounding makes; the unfolded variant is not a mode of the compiler.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tinynpu.compiler.onnx.llm.agreement import by_kind, step_differences
from tinynpu.compiler.onnx.llm.compile import compile_llm
from tinynpu.compiler.onnx.llm.decoder import DecoderShape, build_decoder
from tinynpu.compiler.onnx.llm.generate import generate
from tinynpu.compiler.onnx.llm.run import teacher_forced, teacher_forced_logits
from tinynpu.compiler.onnx.verify.tensors import OrtTensors
from tinynpu.isa import load_config


@contextmanager
def bias_adds_unfolded() -> Iterator[None]:
    """Within: the front end leaves every matmul's bias Add and scaling as its own step."""
    from tinynpu.compiler.onnx.frontend import nonlinear

    folded = nonlinear.fold_affine
    nonlinear.fold_affine = lambda g, match: match  # type: ignore[assignment]
    try:
        yield
    finally:
        nonlinear.fold_affine = folded  # type: ignore[assignment]


def measure(path: Path, *, prompt: int, count: int, config: str, compare_steps: int) -> dict[str, Any]:
    """One variant: compile and generate, onnxruntime teacher-forced on its tokens, per-kind differences."""
    t0 = time.perf_counter()
    cd = compile_llm(path, prompt_tokens=prompt, generate=count, cfg=load_config(config))
    gen = generate(cd)
    forced = teacher_forced(cd, gen, teacher_forced_logits(cd, gen))
    ort = OrtTensors(cd.qmodel)
    kinds: dict[str, dict[str, int]] = {}
    for index in range(min(compare_steps, len(gen.steps))):
        for kind, o in by_kind(step_differences(cd, gen, index, ort)).items():
            into = kinds.setdefault(kind, dict.fromkeys(o, 0))
            for field, value in o.items():
                into[field] = max(into[field], value) if "max" in field else into[field] + value
    return {"tokens": gen.tokens, "teacher_forced_equal": sum(s["argmax_equal"] for s in forced["steps"]),
            "steps": len(forced["steps"]), "miss_margins_lsb": forced["differing_steps_margin_lsb"],
            "miss_steps": [s["step"] for s in forced["steps"] if not s["argmax_equal"]],
            "by_kind": kinds, "seconds": time.perf_counter() - t0}


def _text(name: str, r: dict[str, Any]) -> str:
    lines = [f"{name}: teacher-forced {r['teacher_forced_equal']}/{r['steps']} equal argmax; misses at steps "
             f"{r['miss_steps']}, tinynpu margins {r['miss_margins_lsb']} LSB ({r['seconds']:.1f} s)"]
    for kind, o in sorted(r["by_kind"].items()):
        lines.append(f"  {kind:36s} {o['elements']:9d} values; on onnxruntime's inputs {o['own_differing']:8d} "
                     f"differ ({o['own_differing'] / o['elements']:7.3%}), max {o['own_max_abs_lsb']} LSB; along "
                     f"the run max {o['max_abs_lsb']} LSB")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import onnx

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("layers", 12), ("hidden", 768), ("heads", 12), ("vocab", 50257), ("ffn", 3072),
                          ("positions", 1024), ("prompt", 32), ("generate", 32), ("compare-steps", 4)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--config", default="dram256")
    args = ap.parse_args(argv)
    shape = DecoderShape(layers=args.layers, hidden=args.hidden, heads=args.heads, vocab=args.vocab,
                         positions=max(args.positions, args.prompt + args.generate + 1), ffn=args.ffn)
    with tempfile.TemporaryDirectory(prefix="tinynpu-agree-") as tmp:
        path = Path(tmp) / "decoder.onnx"
        onnx.save(build_decoder(shape), str(path), save_as_external_data=True, location="decoder.data")
        kw: dict[str, Any] = {"prompt": args.prompt, "count": args.generate, "config": args.config,
                              "compare_steps": args.compare_steps}
        folded = measure(path, **kw)
        print(_text("as compiled (bias Adds folded: one rounding)", folded), flush=True)
        with bias_adds_unfolded():
            unfolded = measure(path, **kw)
        print(_text("bias Adds unfolded (the QDQ model's two roundings)", unfolded))
        print(f"same tokens: {folded['tokens'] == unfolded['tokens']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
