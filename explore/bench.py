"""``tinynpu bench sweep``: one sweep on 1 and on 2 Dask workers, measured in the same run.

``speedup_2_over_1_workers`` is the ratio of the Dask phase's wall time (cluster
start excluded) on 1 worker to that on 2; ``overhead_fraction`` is the share of
the 2 workers' time not spent inside tasks: ``1 - task seconds / (2 x wall)``
(scheduling, transfer, result handling and the idle tail).  The cache is off,
so every point is computed in both runs.  ``seconds`` is the 2-worker sweep
from start to end (cluster start, every point, results written): the time a
user waits for the sweep on this machine.

By default the sweep is a small one (18 points, about 15 s in all);
``--full`` runs the target sweep: the 8x8, 16x16 and 32x32 arrays (the ``t8``,
``default`` and ``t32`` configs) x two accumulator sizes x two DRAM
bandwidths x two DRAM latencies over ResNet-50's distinct conv layers,
objectives cycles and energy (several minutes per run).  The load average at
the start and the end is printed beside the figures: 7 engineers share this
machine, and a busy one lowers the speed-up.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from tinynpu.explore.execute import SweepSummary, run_sweep
from tinynpu.explore.spec import load_sweep
from tinynpu.progress import step

SMALL_SPEC = """\
base: default
parameters:
  dram.bytes_per_cycle: [8, 16, 32]
  dram.latency_cycles: [50, 100]
workloads:
  gemm: [[512, 512, 256], [256, 1024, 256]]
  conv2d: [{c: 64, h: 28, w: 28, k: 64, r: 3, s: 3, pad: 1}]
objectives: [cycles, dram_bytes]
"""
FULL_SPEC = """\
base: [t8, default, t32]
parameters:
  scopes.acc.rows: [512, 1024]
  dram.bytes_per_cycle: [16, 32]
  dram.latency_cycles: [50, 100]
workloads:
  conv2d: resnet50
objectives: [cycles, energy_pj]
"""
TARGETS = {"speedup_2_over_1_workers": 1.7, "overhead_fraction": 0.10}
FULL_SECONDS_TARGET = 300.0


def _load() -> float:
    return os.getloadavg()[0]


def run_bench(*, as_json: bool, full: bool = False) -> int:
    """Run the sweep on 1 and 2 workers and print the figures (or one JSON object)."""
    load_start = _load()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tinynpu-bench-sweep-") as tmp:
        spec_path = Path(tmp) / "sweep.yaml"
        spec_path.write_text(FULL_SPEC if full else SMALL_SPEC, encoding="utf-8")
        spec = load_sweep(spec_path)
        runs: dict[int, SweepSummary] = {}
        for workers in (1, 2):
            with step(f"sweep on {workers} worker(s)", quiet=as_json):
                runs[workers] = run_sweep(spec, Path(tmp) / f"w{workers}", workers=workers, use_cache=False,
                                          quiet=True)
    one, two = runs[1], runs[2]
    targets = {**TARGETS, **({"seconds": FULL_SECONDS_TARGET, "failed": 0} if full else {})}
    figures: dict[str, Any] = {
        "sweep": "full" if full else "small",
        "configs": two.points // len(spec.workloads),
        "points": two.points,
        "failed": one.failed + two.failed,
        "seconds": two.seconds,
        "speedup_2_over_1_workers": one.compute_seconds / two.compute_seconds,
        "overhead_fraction": 1.0 - two.task_seconds / (two.workers * two.compute_seconds),
        "overhead_fraction_1_worker": 1.0 - one.task_seconds / one.compute_seconds,
        "seconds_1_worker": one.seconds,
        "dask_seconds_1_worker": one.compute_seconds,
        "dask_seconds_2_workers": two.compute_seconds,
        "bench_seconds": time.perf_counter() - t0,
        "load_average_start": load_start,
        "load_average_end": _load(),
    }
    met = {"speedup_2_over_1_workers": figures["speedup_2_over_1_workers"] >= TARGETS["speedup_2_over_1_workers"],
           "overhead_fraction": figures["overhead_fraction"] <= TARGETS["overhead_fraction"]}
    if full:
        met.update(seconds=figures["seconds"] <= FULL_SECONDS_TARGET, failed=figures["failed"] == 0)
    if as_json:
        print(json.dumps({**figures, "targets": targets, "met": met}))
        return 0
    print(f"{figures['sweep']} sweep: {figures['configs']} configs x {len(spec.workloads)} workloads = "
          f"{figures['points']} points, {figures['failed']} failed; {two.seconds:.1f} s on 2 workers, "
          f"{one.seconds:.1f} s on 1 (cluster start included)")
    print(f"Dask phase: {one.compute_seconds:.2f} s on 1 worker, {two.compute_seconds:.2f} s on 2; load average "
          f"{load_start:.2f} at the start, {figures['load_average_end']:.2f} at the end ({os.cpu_count()} cores)")
    for name, target in targets.items():
        sign = ">=" if name.startswith("speedup") else ("==" if name == "failed" else "<=")
        print(f"target: {name} {sign} {target}: {figures[name]:.3f}: {'met' if met[name] else 'not met'}")
    return 0


__all__ = ["run_bench"]
