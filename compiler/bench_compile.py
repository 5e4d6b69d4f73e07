"""The compile phase of the GPT-2-small decoder run, this checkout's code against another's, interleaved.

``python -m tinynpu.compiler.bench_compile --baseline DIR [--rounds 2] [--prompt 32] [--generate 2] [--json]``

The decoder of ``tinynpu bench llm --model gpt2-small`` (:func:`~tinynpu.compiler.onnx.llm.decoder.build_decoder`
of ``GPT2_SMALL``, config ``dram256``) is written once; then, alternately, a fresh process of each checkout's
own Python (``DIR/.venv/bin/python`` for the baseline, this interpreter for this checkout) runs
:func:`~tinynpu.compiler.onnx.llm.compile.compile_llm` on it, and reports its compile phase
(``timings["compile"]``, what ``tinynpu bench llm`` prints as ``seconds.compile``: every program the run
compiles, the weight layers' GEMMs with their epilogues, the attention matmuls, the softmax and norm
programs) and, per program of the run's program cache, its words' digest.  Each process then compiles each
``matmul`` program of that cache again alone (:func:`~tinynpu.compiler.matmul.compile_matmul` with an
epilogue of the key's form, seeded values) and times it.

Printed: per round both compile phases and their ratio, per GEMM shape both times and their ratio, and
whether both checkouts' programs are word for word the same (they must be: the contract of any change to
the lowering).  Both workers use only functions both checkouts have, so this file runs under either.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PHASE = "compile"


def _digest(words: Any) -> str:
    return hashlib.sha256(repr([int(w) for w in words]).encode()).hexdigest()[:16]


def _epilogue_of_form(form: str, n: int, seed: int) -> Any:
    """An epilogue of ``n`` channels of the program cache's epilogue form (``int8_binary32_bias_zp_clamp-128to127``)."""
    import numpy as np

    from tinynpu.compiler.epilogue import Epilogue, quantize_multiplier

    parts = form.split("_")
    found = re.search(r"clamp(-?\d+)to(-?\d+)", form)
    if found is None:
        raise ValueError(f"not an epilogue form: {form!r}")
    lo, hi = int(found.group(1)), int(found.group(2))
    rng = np.random.default_rng(seed)
    real = rng.uniform(2e-5, 4e-4, n)
    requant: dict[str, Any] = {"scale": real.astype(np.float32)}
    if parts[1] == "q31":
        m, s = quantize_multiplier(real)
        requant = {"multiplier": m, "shift": s}
    zero_point = (lo if lo > -128 else 1) if "zp" in parts else 0
    return Epilogue(requantizer=parts[1], **requant, zero_point=zero_point, lo=lo, hi=hi,
                    bias=rng.integers(-20000, 20000, n, dtype=np.int32) if "bias" in parts else None)


def worker(path: str, prompt: int, generate: int) -> dict[str, Any]:
    """One checkout's figures: the run's compile phase, its programs' digests, each GEMM compiled alone."""
    from tinynpu.compiler.matmul import compile_matmul
    from tinynpu.compiler.onnx.llm.compile import compile_llm
    from tinynpu.isa import load_config

    cfg = load_config("dram256")
    cd = compile_llm(path, prompt_tokens=prompt, generate=generate, cfg=cfg)
    digests = {repr(key): _digest(c.program.words) for key, c in cd.cache.programs.items()}
    gemms: dict[str, dict[str, Any]] = {}
    for key in cd.cache.programs:
        if key[0] != "matmul":
            continue
        _, m, n, k, form = key
        epilogue = _epilogue_of_form(form, n, seed=n)
        t0 = time.perf_counter()
        comp = compile_matmul(m, n, k, dtype="int8", cfg=cfg, epilogue=epilogue)
        gemms[f"{m}x{n}x{k} {form}"] = {"seconds": time.perf_counter() - t0, "instructions": len(comp.program.words),
                                        "digest": _digest(comp.program.words)}
    return {"compile_seconds": cd.timings[PHASE], "programs": digests, "gemms": gemms}


def _run_worker(python: str, cwd: str, path: str, prompt: int, generate: int) -> dict[str, Any]:
    # -P: not this file's directory first on sys.path (its ``onnx`` package would hide the real one)
    cmd = [python, "-P", __file__, "--worker", path, "--prompt", str(prompt), "--generate", str(generate)]
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"bench_compile: {' '.join(cmd)} (in {cwd}) failed with exit code {done.returncode}:\n"
                         f"{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def compare(baseline: str, rounds: int, prompt: int, generate: int) -> dict[str, Any]:
    """Both checkouts' workers, alternately, ``rounds`` times each, on one decoder file."""
    import onnx

    from tinynpu.compiler.onnx.llm.decoder import GPT2_SMALL, build_decoder

    python = Path(baseline) / ".venv" / "bin" / "python"
    if not python.is_file():
        raise SystemExit(f"bench_compile: the baseline {baseline} has no .venv/bin/python (run its "
                         "scripts/bootstrap.sh first).")
    here = str(Path(__file__).resolve().parents[1])
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tinynpu-bench-compile-") as tmp:
        path = str(Path(tmp) / "decoder.onnx")
        onnx.save(build_decoder(GPT2_SMALL), path)
        for r in range(rounds):
            old = _run_worker(str(python), baseline, path, prompt, generate)
            new = _run_worker(sys.executable, here, path, prompt, generate)
            runs.append({"round": r + 1, "baseline": old, "this": new})
    return {"baseline": baseline, "prompt": prompt, "generate": generate, "runs": runs,
            "same_programs": all(run["baseline"]["programs"] == run["this"]["programs"]
                                 and all(g["digest"] == run["this"]["gemms"][key]["digest"]
                                         for key, g in run["baseline"]["gemms"].items())
                                 for run in runs)}


def format_result(doc: dict[str, Any]) -> str:
    lines = [f"compile phase of the GPT-2-small decoder run (prompt {doc['prompt']}, generate {doc['generate']}, "
             f"dram256), baseline {doc['baseline']} vs this checkout:"]
    for run in doc["runs"]:
        old, new = run["baseline"]["compile_seconds"], run["this"]["compile_seconds"]
        lines.append(f"  round {run['round']}: {old:7.2f} s -> {new:6.2f} s  ({new / old:.3f}x, "
                     f"{len(run['this']['programs'])} programs)")
    lines.append("  each GEMM program alone (last round):")
    last = doc["runs"][-1]
    for key, g in last["baseline"]["gemms"].items():
        mine = last["this"]["gemms"][key]
        lines.append(f"    {key:48s} {g['instructions']:7d} instr  {g['seconds']:6.2f} s -> {mine['seconds']:5.2f} s "
                     f"({mine['seconds'] / g['seconds']:.3f}x)")
    lines.append(f"  programs word for word the same in both checkouts: {'yes' if doc['same_programs'] else 'NO'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", help="a checkout (with its .venv) whose code is the baseline")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--generate", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", metavar="DECODER", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.prompt, args.generate)))
        return 0
    if not args.baseline:
        ap.error("--baseline DIR is needed (a checkout of the code to compare with, with its .venv)")
    doc = compare(args.baseline, args.rounds, args.prompt, args.generate)
    print(json.dumps(doc, indent=1) if args.json else format_result(doc))
    return 0 if doc["same_programs"] else 1


if __name__ == "__main__":
    sys.exit(main())
