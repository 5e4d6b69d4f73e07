"""``tinynpu bench sweep``: one small sweep on 1 and on 2 Dask workers, measured in the same run.

``speedup_2_over_1_workers`` is the ratio of the Dask phase's wall time (cluster
start excluded) on 1 worker to that on 2; ``overhead_fraction`` is the share of
the 2 workers' time not spent inside tasks: ``1 - task seconds / (2 x wall)``
(scheduling, transfer, result handling and the idle tail).  The cache is off,
so every point is computed in both runs.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from tinynpu.explore.execute import run_sweep
from tinynpu.explore.spec import load_sweep
from tinynpu.progress import step

SPEC = """\
base: default
parameters:
  dram.bytes_per_cycle: [8, 16, 32]
  dram.latency_cycles: [50, 100]
workloads:
  gemm: [[512, 512, 256], [256, 1024, 256]]
  conv2d: [{c: 64, h: 28, w: 28, k: 64, r: 3, s: 3, pad: 1}]
objectives: [cycles, dram_bytes]
"""
TARGETS = {"speedup_2_over_1_workers": 1.7, "overhead_fraction": 0.10}


def run_bench(*, as_json: bool) -> int:
    """Run the sweep on 1 and 2 workers and print the figures (or one JSON object)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tinynpu-bench-sweep-") as tmp:
        spec_path = Path(tmp) / "sweep.yaml"
        spec_path.write_text(SPEC, encoding="utf-8")
        spec = load_sweep(spec_path)
        runs = {}
        for workers in (1, 2):
            with step(f"sweep on {workers} worker(s)", quiet=as_json):
                runs[workers] = run_sweep(spec, Path(tmp) / f"w{workers}", workers=workers, use_cache=False,
                                          quiet=True)
    one, two = runs[1], runs[2]
    figures = {
        "points": two.points,
        "failed": one.failed + two.failed,
        "seconds": time.perf_counter() - t0,
        "speedup_2_over_1_workers": one.compute_seconds / two.compute_seconds,
        "overhead_fraction": 1.0 - two.task_seconds / (two.workers * two.compute_seconds),
        "overhead_fraction_1_worker": 1.0 - one.task_seconds / one.compute_seconds,
        "seconds_1_worker": one.compute_seconds,
        "seconds_2_workers": two.compute_seconds,
    }
    met = {"speedup_2_over_1_workers": figures["speedup_2_over_1_workers"] >= TARGETS["speedup_2_over_1_workers"],
           "overhead_fraction": figures["overhead_fraction"] <= TARGETS["overhead_fraction"]}
    if as_json:
        print(json.dumps({**figures, "targets": TARGETS, "met": met}))
        return 0
    print(f"{figures['points']} points, {figures['failed']} failed, {figures['seconds']:.1f} s in all")
    print(f"Dask phase: {one.compute_seconds:.2f} s on 1 worker, {two.compute_seconds:.2f} s on 2")
    for name, target in TARGETS.items():
        sign = ">=" if name.startswith("speedup") else "<="
        print(f"target: {name} {sign} {target}: {figures[name]:.3f}: {'met' if met[name] else 'not met'}")
    return 0


__all__ = ["run_bench"]
