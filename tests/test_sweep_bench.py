"""`tinynpu bench sweep`: the figures that explain the speed-up, and what they are measured from."""

from __future__ import annotations

import json
import math
import os
import sys
import time

import pytest

from tinynpu.explore import machine
from tinynpu.explore.bench import run_bench, run_figures, speedup_factors
from tinynpu.explore.execute import SweepSummary

TINY_SPEC = """\
base: default
parameters:
  dram.latency_cycles: [50, 100]
workloads:
  gemm: [[64, 64, 64], [32, 96, 64]]
objectives: [cycles, energy_pj]
"""


def _summary(*, workers: int, wall: float, task: float, cpu: float) -> SweepSummary:
    return SweepSummary(points=4, failed=0, computed=4, cached=0, resumed=0, syntheses=0, workers=workers,
                        seconds=wall + 1.0, compute_seconds=wall, task_seconds=task, task_cpu_seconds=cpu,
                        warmup_seconds=0.0, dask_compute_seconds=task, machine_cpu_seconds=cpu + 0.5 * wall,
                        load_average_start=1.0, load_average_end=2.0)


def test_the_factors_multiply_to_the_speedup() -> None:
    # 1 worker: 10 s of CPU over 20 s of task time (half a core) in a 21 s phase; 2 workers: 11 s of CPU,
    # 12 s of task time in a 6.5 s phase.
    one = run_figures(_summary(workers=1, wall=21.0, task=20.0, cpu=10.0))
    two = run_figures(_summary(workers=2, wall=6.5, task=12.0, cpu=11.0))
    factors = speedup_factors(one, two)
    assert factors["cpu_work_ratio"] == pytest.approx(10 / 11)
    assert factors["cpu_share_ratio"] == pytest.approx((11 / 12) / (10 / 20))
    assert factors["utilization_ratio"] == pytest.approx((12 / 13) / (20 / 21))
    assert math.prod(factors.values()) == pytest.approx(21.0 / 6.5)
    assert one["other_cpu_cores"] == pytest.approx(0.5)


def test_machine_cpu_time_counts_this_process_work() -> None:
    if sys.platform != "linux":
        pytest.skip("/proc/stat is Linux's")
    t0 = time.perf_counter()
    start = machine.sample()
    cpu0 = time.thread_time()
    while time.thread_time() - cpu0 < 0.3:
        pass
    busy = machine.busy_between(start, machine.sample())
    wall = time.perf_counter() - t0
    assert busy is not None
    # At least the 0.3 s this thread burnt, at most every core the whole time; the kernel counts in clock
    # ticks per core, so either end may be a few ticks off.
    assert 0.3 - 0.1 <= busy <= wall * (os.cpu_count() or 1) + 0.1


def test_bench_json_explains_its_speedup(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_bench(as_json=True, spec_text=TINY_SPEC) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["points"], out["failed"], out["warm_workers"]) == (4, 0, True)
    assert math.prod(out["speedup_factors"].values()) == pytest.approx(out["speedup_2_over_1_workers"])
    for n, run in out["runs"].items():
        assert run["workers"] == int(n)
        assert run["task_cpu_seconds"] > 0 and 0 < run["cpu_share"] <= 1
        assert run["dask_compute_seconds"] > 0  # the scheduler saw the tasks run
        # Warmed workers: the tasks import nothing and load no native core (microseconds in all).
        assert run["warmup_seconds"] < 0.05
