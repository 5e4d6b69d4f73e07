"""``tinynpu bench sweep``: one sweep on 1 and on 2 Dask workers, measured in the same run.

``speedup_2_over_1_workers`` is the ratio of the Dask phase's wall time (cluster
start excluded) on 1 worker to that on 2; ``overhead_fraction`` is the share of
the 2 workers' time not spent inside tasks: ``1 - task seconds / (2 x wall)``
(scheduling, transfer, result handling and the idle tail).  The cache is off,
so every point is computed in both runs.  ``seconds`` is the 2-worker sweep
from start to end (cluster start, every point, results written): the time a
user waits for the sweep on this machine.

What explains the speed-up is measured too.  With ``W`` the Dask phase's wall
time, ``n`` the workers, ``T`` the tasks' summed wall time, ``C`` their summed
CPU time (each task's own thread), the CPU share ``s = C / T`` (how much of a
core a task got while it ran) and the worker utilization ``u = T / (n W)``,
``W = C / (s n u)`` exactly, so::

    speedup = W1 / W2 = (n2 / n1) x (C1 / C2) x (s2 / s1) x (u2 / u1)

``C1 / C2`` above 1 means the 1-worker run did more work for the same points
(warm-up: imports, the native core's build), ``s2 / s1`` above 1 that its
tasks waited longer for a core (other jobs), ``u2 / u1`` is Dask's own cost.
Each run also records the warm-up inside its tasks, the scheduler's task
stream, the CPU time the whole machine used during its Dask phase (minus the
tasks': other jobs, Dask and the client) and the load average as it started
and ended.  Both runs start on warm workers (each has imported the compiler
and loaded the native core before the clock starts); ``--cold`` leaves that to
the first task of each worker, as a plain ``tinynpu sweep`` does.

By default the sweep is a small one (18 points, about 15 s in all);
``--full`` runs the target sweep: the 8x8, 16x16 and 32x32 arrays (the ``t8``,
``default`` and ``t32`` configs) x two accumulator sizes x two DRAM
bandwidths x two DRAM latencies over ResNet-50's distinct conv layers,
objectives cycles and energy (several minutes per run).
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


def run_figures(run: SweepSummary) -> dict[str, Any]:
    """One run's figures: its times, the factors of the speed-up identity and how busy the machine was."""
    other = None if run.machine_cpu_seconds is None else run.machine_cpu_seconds - run.task_cpu_seconds
    return {
        "workers": run.workers,
        "dask_seconds": run.compute_seconds,
        "task_seconds": run.task_seconds,
        "task_cpu_seconds": run.task_cpu_seconds,
        "warmup_seconds": run.warmup_seconds,
        "dask_compute_seconds": run.dask_compute_seconds,
        "cpu_share": run.task_cpu_seconds / run.task_seconds,
        "worker_utilization": run.task_seconds / (run.workers * run.compute_seconds),
        "machine_cpu_seconds": run.machine_cpu_seconds,
        # Cores' worth of CPU the machine spent outside the tasks, on average over the Dask phase.
        "other_cpu_cores": None if other is None else other / run.compute_seconds,
        "load_average_start": run.load_average_start,
        "load_average_end": run.load_average_end,
    }


def speedup_factors(one: dict[str, Any], two: dict[str, Any]) -> dict[str, float]:
    """The factors whose product is the speed-up (see the module's docstring)."""
    return {"workers_ratio": two["workers"] / one["workers"],
            "cpu_work_ratio": one["task_cpu_seconds"] / two["task_cpu_seconds"],
            "cpu_share_ratio": two["cpu_share"] / one["cpu_share"],
            "utilization_ratio": two["worker_utilization"] / one["worker_utilization"]}


def run_bench(*, as_json: bool, full: bool = False, warm: bool = True, spec_text: str | None = None) -> int:
    """Run the sweep on 1 and 2 workers and print the figures (or one JSON object).

    ``spec_text`` replaces the small sweep (for tests); ``warm`` warms every worker before the clock starts.
    """
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tinynpu-bench-sweep-") as tmp:
        spec_path = Path(tmp) / "sweep.yaml"
        spec_path.write_text(spec_text or (FULL_SPEC if full else SMALL_SPEC), encoding="utf-8")
        spec = load_sweep(spec_path)
        runs: dict[int, SweepSummary] = {}
        for workers in (1, 2):
            with step(f"sweep on {workers} worker(s)", quiet=as_json):
                runs[workers] = run_sweep(spec, Path(tmp) / f"w{workers}", workers=workers, use_cache=False,
                                          quiet=True, warm_workers=warm)
    one, two = runs[1], runs[2]
    per_run = {str(n): run_figures(run) for n, run in runs.items()}
    factors = speedup_factors(per_run["1"], per_run["2"])
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
        "warm_workers": warm,
        "runs": per_run,
        "speedup_factors": factors,
        # The speed-up had both runs' tasks got the same share of a core: Dask's scaling without the other
        # jobs' changing load (derived from the factors; the target is the measured speed-up).
        "speedup_at_equal_cpu_share": factors["workers_ratio"] * factors["cpu_work_ratio"]
        * factors["utilization_ratio"],
        "bench_seconds": time.perf_counter() - t0,
        "load_average_start": one.load_average_start,
        "load_average_end": two.load_average_end,
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
          f"{one.seconds:.1f} s on 1 (cluster start included); workers {'warmed' if warm else 'cold'}")
    print(f"{'':>9} {'Dask s':>8} {'task s':>8} {'CPU s':>8} {'warm-up s':>9} {'CPU share':>9} {'util':>6} "
          f"{'other cores':>11} {'load start-end':>14}")
    for n, run in per_run.items():
        other = "n/a" if run["other_cpu_cores"] is None else f"{run['other_cpu_cores']:.2f}"
        print(f"{n + ' worker' + ('s' if n != '1' else ''):>9} {run['dask_seconds']:8.2f} {run['task_seconds']:8.2f} "
              f"{run['task_cpu_seconds']:8.2f} {run['warmup_seconds']:9.2f} {run['cpu_share']:9.3f} "
              f"{run['worker_utilization']:6.3f} {other:>11} {_load(run['load_average_start'])}-"
              f"{_load(run['load_average_end'])}".rstrip())
    print(f"speed-up {figures['speedup_2_over_1_workers']:.3f} = workers {factors['workers_ratio']:.0f} x CPU work "
          f"{factors['cpu_work_ratio']:.3f} x CPU share {factors['cpu_share_ratio']:.3f} x utilization "
          f"{factors['utilization_ratio']:.3f} ({os.cpu_count()} cores); at equal CPU share: "
          f"{figures['speedup_at_equal_cpu_share']:.3f}")
    for name, target in targets.items():
        sign = ">=" if name.startswith("speedup") else ("==" if name == "failed" else "<=")
        print(f"target: {name} {sign} {target}: {figures[name]:.3f}: {'met' if met[name] else 'not met'}")
    return 0


def _load(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


__all__ = ["run_bench", "run_figures", "speedup_factors"]
