"""``tinynpu bench sim``: simulator speed on the seed workload, against numpy in the same process.

Simulates (functional + timing together) the size^3 int8 matmul twice, with
the compiler's naive seed schedule and its tiled ``auto`` schedule, each with
the race sanitizer on and off, verifies the results against numpy, and times
numpy's own float32 size^3 matmul in the same process as the yardstick.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from typing import Any

import numpy as np
from tinynpu.isa import load_config, load_isa
from tinynpu.simulator.machine import Machine

from tinynpu.errors import UsageError


def _numpy_seconds(size: int, repeats: int = 5) -> float:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    a @ b  # warm up BLAS threads
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return best


def _one(size: int, schedule: str, races: bool, numpy_s: float) -> dict[str, Any]:
    from tinynpu.compiler.matmul import compile_matmul

    isa = load_isa()
    cfg = load_config("default", isa)
    compiled = compile_matmul(size, size, size, dtype="int8", schedule=schedule, cfg=cfg)
    inputs = compiled.make_inputs(0)
    machine = Machine(cfg, isa)
    machine.load(compiled.program)
    for name, arr in compiled.to_device(inputs).items():
        machine.write_tensor(name, arr)
    t0 = time.perf_counter()
    stats = machine.run(check_races=races)
    wall = time.perf_counter() - t0
    ref = compiled.reference(inputs)
    verified = all(np.array_equal(machine.read_tensor(name), ref[name]) for name in compiled.outputs)
    n = stats.instructions_total
    return {
        "schedule": schedule, "races_checked": races, "verified": verified, "instructions": n,
        "cycles": stats.cycles, "utilization": stats.utilization, "wall_seconds": wall,
        "instructions_per_second": n / wall, "cycles_per_second": stats.cycles / wall,
        "ratio_to_numpy": wall / numpy_s, "program_bytes": 16 * n,
    }


def run_bench(args: argparse.Namespace) -> int:
    size = args.size
    if size % load_config("default").tile:
        raise UsageError(f"--size must be a multiple of the tile edge, not {size}.")
    numpy_s = _numpy_seconds(size)
    runs = [_one(size, sched, races, numpy_s) for sched in ("naive", "auto") for races in (True, False)]
    cfg = load_config("default")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    image = cfg.dram_bytes + max(r["program_bytes"] for r in runs)
    out = {"size": size, "numpy_float32_seconds": numpy_s, "runs": runs, "peak_rss_bytes": peak,
           "dram_plus_program_bytes": image, "peak_rss_ratio": peak / image,
           "targets": {"tiled_ratio_to_numpy_max": 10.0, "dma_heavy_instructions_per_second_min": 1e6,
                       "peak_rss_ratio_max": 2.0}}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"numpy float32 {size}^3 matmul: {numpy_s * 1e3:.1f} ms (best of 5)")
    for r in runs:
        races = "on " if r["races_checked"] else "off"
        print(f"{r['schedule']:6s} races={races} {r['instructions']:>8,} instr "
              f"{r['cycles']:>12,} cycles  {r['wall_seconds']:7.3f} s  "
              f"{r['instructions_per_second']:>10,.0f} instr/s "
              f"{r['cycles_per_second']:>13,.0f} cycles/s  {r['ratio_to_numpy']:7.1f}x numpy  "
              f"verified={r['verified']}")
    print(f"peak RSS {peak / 2**20:.0f} MiB vs DRAM image + program {image / 2**20:.0f} MiB "
          f"({peak / image:.2f}x)", file=sys.stdout)
    return 0


__all__ = ["run_bench"]
