"""Time each step of a GPT-2-shaped decoder on the simulator and on the integer reference, one after the other.

Builds a seeded decoder (``onnx.helper``, GPT-2's widths by default, fewer layers: a decode step's cost is per
layer plus the LM head), compiles it with ``compile_llm``, then runs every step as ``generate`` does, but the
simulator's run and the reference's in turn instead of side by side, so each one's time is its own: per step
the cycles (equal before and after any change to the simulator), the programs run, the simulator's wall and
CPU time (its thread: the native core and the Python around it), the reference's wall and CPU time (the
process: numpy's BLAS threads count), the token and the load average.  Both runs are checked against each
other as ``generate`` checks them.  ``--profile FILE`` writes cProfile data of the third step's simulation
and reference (FILE.sim, FILE.ref).

    python scripts/profile_decode_step.py --layers 2 --prompt 8 --generate 6
"""

from __future__ import annotations

import argparse
import cProfile
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from tinynpu.compiler.onnx.llm.compile import compile_llm, feeds_for, token_feeds
from tinynpu.compiler.onnx.llm.decoder import DecoderShape, build_decoder
from tinynpu.compiler.onnx.llm.generate import _check_cache, _check_step, _past
from tinynpu.compiler.onnx.llm.steps import step_shapes
from tinynpu.compiler.onnx.runtime.execute import execute
from tinynpu.isa import load_config

PROFILED_STEP = 2  # the second decode step: its programs are loaded, as every later step's are


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--prompt", type=int, default=8)
    p.add_argument("--generate", type=int, default=4)
    p.add_argument("--config", default="dram256")
    p.add_argument("--profile", default="", metavar="FILE")
    args = p.parse_args(argv)
    shape = DecoderShape(layers=args.layers, hidden=args.hidden, heads=args.heads, vocab=args.vocab,
                         positions=1024, ffn=4 * args.hidden)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "decoder.onnx"
        onnx.save(build_decoder(shape), str(path))
        t0 = time.perf_counter()
        cd = compile_llm(path, prompt_tokens=args.prompt, generate=args.generate, cfg=load_config(args.config))
    print(f"compile_llm {time.perf_counter() - t0:.1f} s:", {k: round(v, 1) for k, v in cd.timings.items()})
    itf, image = cd.itf, cd.image
    empty = np.zeros((cd.batch, itf.kv_heads, 0, itf.head_dim), np.int8)
    ref_cache = [(empty, empty)] * itf.layers
    ids = cd.prompt
    for index, sh in enumerate(step_shapes(args.prompt, args.generate)):
        step = cd.step(sh)
        _check_cache(image, ref_cache, index)
        profiler = cProfile.Profile() if args.profile and index == PROFILED_STEP else None
        load = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.thread_time()
        if profiler:
            profiler.enable()
        got = execute(step.net, token_feeds(itf, ids, sh.total), cache=cd.cache, image=image.views[sh])
        sim_wall, sim_cpu = time.perf_counter() - t0, time.thread_time() - c0
        if profiler:
            profiler.disable()
            profiler.dump_stats(args.profile + ".sim")
            profiler = cProfile.Profile()
            profiler.enable()
        t0, c0 = time.perf_counter(), time.process_time()
        want = execute(step.net, feeds_for(itf, ids, _past(step, ref_cache)), cache=None)
        ref_wall, ref_cpu = time.perf_counter() - t0, time.process_time() - c0
        if profiler:
            profiler.disable()
            profiler.dump_stats(args.profile + ".ref")
        _check_step(step, got, want, index)
        ref_cache = [(want.values[k], want.values[v]) for k, v in step.present]
        ids = np.argmax(got.values[step.logits][:, -1], axis=-1).reshape(-1, 1)
        runs = got.runs.values()
        print(f"step {index} (past {sh.past}, new {sh.new}): {sum(r.cycles for r in runs):,} cycles, "
              f"{sum(r.programs for r in runs)} programs | simulator {sim_wall:.2f} s wall, {sim_cpu:.2f} s CPU | "
              f"reference {ref_wall:.2f} s wall, {ref_cpu:.2f} s CPU | token {int(ids[0, 0])} | load {load:.1f}",
              flush=True)


if __name__ == "__main__":
    main()
