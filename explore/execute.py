"""Running a sweep on dask.distributed: one task per (config, workload), cached, written as results arrive.

``DIR/results.csv`` is rewritten atomically after every finished task, so a
killed sweep keeps every finished point and ``--resume`` runs only the rest.
Each finished point is also kept in ``$TINYNPU_CACHE/sweep`` under the hash
of (config hash, workload, tinynpu version, the digest of the code that
computes a point: :mod:`tinynpu.explore.sources`), so a rerun of the same
points, in any directory, computes nothing, and a rerun after an edit to that
code computes them again; ``--resume`` likewise keeps only the rows the
current code computed.

When ``area_mm2`` is an objective, one more task per distinct RTL (configs
with the same :func:`~tinynpu.explore.task.area_identity` share it) runs
``tinynpu synth``; its figure fills the ``area_mm2`` column of every row of
those configs, and it is cached in the same directory by that identity.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tinynpu
from tinynpu.cache import cache_root
from tinynpu.errors import UsageError
from tinynpu.explore import llm_workload, machine
from tinynpu.explore.sources import code_digest
from tinynpu.explore.spec import DesignPoint, SweepSpec, Workload, design_points
from tinynpu.explore.task import area_identity, evaluate, synth_area, warm_up
from tinynpu.fsio import check_output_dir, read_text, write_atomic
from tinynpu.progress import progress, say
from tinynpu.simulator.energy import COMPONENTS

RESULTS = "results.csv"
FIGURES = ("cycles", "dram_bytes", "utilization", "energy_pj", "edp")
# energy_pj by component (energy_breakdown_pj of the run): one column each, energy_<component>_pj.
BREAKDOWN = tuple(f"energy_{component}_pj" for component in COMPONENTS)
AREA = "area_mm2"
AREA_COLUMNS = (AREA, "area_error")
#: Where a local cluster's scheduler serves HTTP: any free port of the loopback its own address is on.
SCHEDULER_HTTP_ADDRESS = "127.0.0.1:0"


@dataclass(frozen=True)
class SweepSummary:
    """What one ``tinynpu sweep`` did; ``seconds`` is the whole run, ``compute_seconds`` the Dask part."""

    points: int
    failed: int  # failed points, plus configs whose area failed
    computed: int
    cached: int
    resumed: int
    syntheses: int  # area tasks run in this sweep (each a distinct RTL whose area was neither cached nor resumed)
    workers: int
    seconds: float
    compute_seconds: float
    task_seconds: float  # sum over computed tasks of their own wall time, on the workers
    task_cpu_seconds: float  # sum over computed points of their thread's CPU time
    warmup_seconds: float  # the part of task_seconds spent importing and loading the native core
    dask_compute_seconds: float  # the scheduler's task stream: sum of the tasks' compute time
    machine_cpu_seconds: float | None  # CPU seconds of every process on the machine in the Dask phase (Linux)
    load_average_start: float | None  # the 1-minute load average as the Dask phase starts and ends
    load_average_end: float | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def cache_dir() -> Path:
    return cache_root() / "sweep"


def point_key(point: DesignPoint, workload: Workload) -> str:
    """The cache key (and the ``key`` column): config hash, workload, tinynpu version and the digest of the
    source files that compute a point (:func:`~tinynpu.explore.sources.code_digest`)."""
    return hashlib.sha256(f"{point.digest}|{workload.key}|{tinynpu.__version__}|{code_digest()}".encode()
                          ).hexdigest()[:24]


def rtl_fingerprint() -> str:
    """What every area depends on besides its config: the RTL sources and the area model's version."""
    from tinynpu.rtl import runner
    from tinynpu.rtl.synth import MODEL_VERSION

    h = hashlib.sha256(f"model {MODEL_VERSION}".encode())
    for path in sorted(runner.RTL_DIR.glob("*.sv")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def area_key(identity: str) -> str:
    """The cache key of an area: the RTL identity, the RTL sources (an edited module changes every area) and
    the tinynpu version."""
    return hashlib.sha256(f"area|{identity}|{rtl_fingerprint()}|{tinynpu.__version__}".encode()).hexdigest()[:24]


def _area_columns(area: dict[str, Any] | None) -> dict[str, Any]:
    if area is None:
        return {AREA: "", "area_error": ""}
    return {AREA: area.get(AREA, ""), "area_error": area.get("error", "")}


def _row(spec: SweepSpec, point: DesignPoint, workload: Workload, result: dict[str, Any],
         config_dir: Path, area: dict[str, Any] | None) -> dict[str, Any]:
    row: dict[str, Any] = {"key": point_key(point, workload), "config": point.config.name,
                           "config_file": str(config_dir / f"{point.config.name}.yaml")}
    row.update(dict(point.overrides))
    row.update({"workload": workload.key, "kind": workload.kind, "count": workload.count,
                "run_args": llm_workload.run_args(workload, config_dir.parent) if workload.kind == llm_workload.KIND
                else workload.cli_args(),
                "status": result["status"]})
    row.update({name: result.get(name, "") for name in (*FIGURES, *BREAKDOWN, *_llm_columns(spec))})
    if AREA in spec.objectives:
        row.update(_area_columns(area))
    row.update({"seconds": result.get("seconds", ""), "error": result.get("error", ""),
                "version": tinynpu.__version__, "spec_digest": spec.digest})
    return row


def _llm_columns(spec: SweepSpec) -> tuple[str, ...]:
    """The LLM figures' columns, when the spec has an llm workload."""
    return tuple(llm_workload.OBJECTIVES) if any(w.kind == llm_workload.KIND for w in spec.workloads) else ()


def _columns(spec: SweepSpec) -> list[str]:
    return ["key", "config", "config_file", *(p.key for p in spec.parameters), "workload", "kind", "count", "run_args",
            "status", *FIGURES, *BREAKDOWN, *_llm_columns(spec), *(AREA_COLUMNS if AREA in spec.objectives else ()),
            "seconds", "error", "version", "spec_digest"]


def read_results(path: Path) -> list[dict[str, str]]:
    """The rows of an earlier ``results.csv`` (empty when there is none)."""
    if not path.exists():
        return []
    return list(csv.DictReader(io.StringIO(read_text(path, what="sweep results"))))


def _write_results(path: Path, columns: list[str], rows: dict[str, dict[str, Any]]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows.values())
    write_atomic(path, buf.getvalue(), what="sweep results")


@contextlib.contextmanager
def dask_client(workers: int | None, scheduler: str | None) -> Iterator[Any]:
    """A client of ``scheduler``, or of a new LocalCluster of ``workers`` processes (one thread each)."""
    from dask.distributed import Client, LocalCluster

    if scheduler:
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as exc:
            raise UsageError(f"--scheduler {scheduler}: cannot reach a Dask scheduler there: {exc}.") from None
        with client:
            yield client
        return
    n = workers or os.cpu_count() or 1
    # The scheduler serves its HTTP routes (health, metrics) even with the dashboard off, on 8787 unless told
    # otherwise, and warns "Port 8787 is already in use" when another cluster has it: a free local port instead.
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                      scheduler_kwargs={"dashboard_address": SCHEDULER_HTTP_ADDRESS},
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        yield client


def run_sweep(spec: SweepSpec, out: Path, *, workers: int | None = None, scheduler: str | None = None,
              resume: bool = False, force: bool = False, use_cache: bool = True,
              quiet: bool = False, warm_workers: bool = False) -> SweepSummary:
    """Run every (config, workload) of ``spec`` not yet done and write ``out/results.csv``.

    With ``warm_workers``, every worker imports the compiler and loads the native core before the Dask
    phase's clock starts, so ``compute_seconds`` holds no warm-up (``tinynpu bench sweep`` compares runs).

    Raises:
        UsageError: ``out`` cannot be written, or holds results and neither ``resume`` nor ``force`` is given.
        SpecError: the grid is empty or a point is not a valid config.
    """
    t_start = time.perf_counter()
    results_path = out / RESULTS
    if results_path.exists() and not (resume or force):
        raise UsageError(f"{results_path} already exists: pass --resume to run only the points it lacks, or "
                         "--force to start the sweep over.")
    check_output_dir(out, [RESULTS], force=True, ours=True, what="sweep directory", inputs=[spec.source])
    config_dir = out / "configs"
    config_dir.mkdir(parents=True, exist_ok=True)
    points = design_points(spec, config_dir)
    llm_workload.write_models(spec.workloads, out / llm_workload.MODELS_DIR)
    tasks = {point_key(p, w): (p, w) for p in points for w in spec.workloads}
    rows: dict[str, dict[str, Any]] = {}
    if resume:
        rows = {r["key"]: r for r in read_results(results_path) if r.get("key") in tasks}
    resumed = len(rows)
    # Areas: one per distinct RTL identity, known from the earlier results, the cache, or a synth task.
    identity = {p.digest: area_identity(p.config) for p in points} if AREA in spec.objectives else {}
    sweep = _Sweep(spec, config_dir, results_path, _columns(spec), tasks, rows, identity,
                   _known_areas(rows, tasks, identity, use_cache), use_cache, quiet)
    area_todo: dict[str, DesignPoint] = {}
    for p in points:
        if p.digest in identity and identity[p.digest] not in sweep.areas:
            area_todo.setdefault(identity[p.digest], p)
    for key, row in rows.items():  # kept from the earlier results: they hold for this spec too
        row.update({**(_area_columns(sweep.area_of(tasks[key][0])) if identity else {}), "spec_digest": spec.digest})
    todo, cached = sweep.take_cached()
    sweep.write()
    phase = _DaskPhase()
    if todo or area_todo:
        phase = _compute(sweep, todo, area_todo, workers, scheduler, warm_workers)
    failed = (sum(r["status"] != "ok" for r in rows.values())
              + sum(a["status"] != "ok" for a in sweep.areas.values()))
    return SweepSummary(points=len(tasks), failed=failed, computed=len(todo), cached=cached, resumed=resumed,
                        syntheses=len(area_todo), workers=phase.workers, seconds=time.perf_counter() - t_start,
                        compute_seconds=phase.compute_seconds, task_seconds=phase.task_seconds,
                        task_cpu_seconds=phase.task_cpu_seconds, warmup_seconds=phase.warmup_seconds,
                        dask_compute_seconds=phase.dask_compute_seconds,
                        machine_cpu_seconds=machine.busy_between(phase.before, phase.after),
                        load_average_start=phase.before.load_average, load_average_end=phase.after.load_average)


def _known_areas(rows: dict[str, dict[str, Any]], tasks: dict[str, tuple[DesignPoint, Workload]],
                 identity: dict[str, str], use_cache: bool) -> dict[str, dict[str, Any]]:
    """The areas by RTL identity that need no synthesis: from the resumed rows first, then the cache."""
    areas: dict[str, dict[str, Any]] = {}
    for row in rows.values():
        point = tasks[row["key"]][0]
        if point.digest in identity and (row.get(AREA) or row.get("area_error")):
            areas[identity[point.digest]] = ({"status": "ok", AREA: float(row[AREA])} if row.get(AREA)
                                             else {"status": "failed", "error": row["area_error"]})
    for ident in dict.fromkeys(identity.values()):
        area_hit = cache_dir() / f"{area_key(ident)}.json"
        if ident not in areas and use_cache and area_hit.exists():
            areas[ident] = json.loads(read_text(area_hit, what="sweep cache"))
    return areas


@dataclass
class _Sweep:
    """One sweep's tasks and what is known of them so far; ``results.csv`` is rewritten from ``rows``."""

    spec: SweepSpec
    config_dir: Path
    results_path: Path
    columns: list[str]
    tasks: dict[str, tuple[DesignPoint, Workload]]  # by point key
    rows: dict[str, dict[str, Any]]  # by point key: the rows known so far
    identity: dict[str, str]  # config digest -> RTL identity (empty when area is no objective)
    areas: dict[str, dict[str, Any]]  # RTL identity -> area result
    use_cache: bool
    quiet: bool

    def area_of(self, point: DesignPoint) -> dict[str, Any] | None:
        return self.areas.get(self.identity.get(point.digest, ""))

    def write(self) -> None:
        _write_results(self.results_path, self.columns, self.rows)

    def take_cached(self) -> tuple[list[str], int]:
        """Fill in the rows the cache holds; the keys still to compute, and how many came from the cache."""
        cached = 0
        todo = []
        for key, (point, workload) in self.tasks.items():
            if key in self.rows:
                continue
            hit = cache_dir() / f"{key}.json" if self.use_cache else None
            if hit is not None and hit.exists():
                self.rows[key] = _row(self.spec, point, workload, json.loads(read_text(hit, what="sweep cache")),
                                      self.config_dir, self.area_of(point))
                cached += 1
            else:
                todo.append(key)
        return todo, cached

    def cache(self, what: str, key: str, result: dict[str, Any]) -> None:
        """Keep a task's result: a success, or a point's own error, is what a rerun would compute."""
        if self.use_cache and (result["status"] == "ok" or result.get("cacheable")):
            name = f"{key if what == 'point' else area_key(key)}.json"
            cache_dir().mkdir(parents=True, exist_ok=True)
            write_atomic(cache_dir() / name, json.dumps(result), what="sweep cache")

    def record_area(self, ident: str, result: dict[str, Any], point: DesignPoint) -> None:
        """An area task's result fills the area columns of every row of a config with that RTL."""
        self.areas[ident] = result
        for row_key, row in self.rows.items():
            if self.identity[self.tasks[row_key][0].digest] == ident:
                row.update(_area_columns(result))
        if result["status"] != "ok":
            say(f"failed: the area of {point.config.name} (and every config with the "
                f"same RTL): {result['error']}", quiet=self.quiet)

    def record_point(self, key: str, result: dict[str, Any]) -> None:
        point, workload = self.tasks[key]
        self.rows[key] = _row(self.spec, point, workload, result, self.config_dir, self.area_of(point))
        if result["status"] != "ok":
            say(f"failed: {point.config.name} {workload.key}: {result['error']}", quiet=self.quiet)


@dataclass
class _DaskPhase:
    """What the Dask phase measured; all zero when every point was already known."""

    workers: int = 0
    compute_seconds: float = 0.0
    task_seconds: float = 0.0
    task_cpu_seconds: float = 0.0
    warmup_seconds: float = 0.0
    dask_compute_seconds: float = 0.0
    before: machine.MachineSample = field(default_factory=lambda: machine.MachineSample(None, None))
    after: machine.MachineSample = field(default_factory=lambda: machine.MachineSample(None, None))


def _compute(sweep: _Sweep, todo: list[str], area_todo: dict[str, DesignPoint], workers: int | None,
             scheduler: str | None, warm_workers: bool) -> _DaskPhase:
    """Run the area tasks and the points ``todo`` on Dask, recording each result as it arrives."""
    from dask.distributed import as_completed, get_task_stream

    phase = _DaskPhase()
    with dask_client(workers, scheduler) as client:
        phase.workers = len(client.scheduler_info()["workers"])
        if warm_workers:
            client.run(warm_up)
        with get_task_stream(client) as stream:
            phase.before = machine.sample()
            t0 = time.perf_counter()
            futures: dict[Any, tuple[str, str]] = {}
            for ident, point in area_todo.items():  # first: a synthesis takes a minute or more
                future = client.submit(synth_area, point.config_text, point.digest, ident,
                                       key=f"tinynpu-area-{area_key(ident)}", pure=False)
                futures[future] = ("area", ident)
            for key in todo:
                point, workload = sweep.tasks[key]
                task = ((llm_workload.evaluate_llm, llm_workload.task_params(workload))
                        if workload.kind == llm_workload.KIND
                        else (evaluate, workload.kind, dict(workload.sizes), workload.model))
                future = client.submit(task[0], point.config_text, point.digest, *task[1:],
                                       key=f"tinynpu-point-{key}", pure=False)
                futures[future] = ("point", key)
            for future in progress(as_completed(futures), total=len(futures), desc="sweep tasks",
                                   quiet=sweep.quiet, unit="task"):
                what, key = futures[future]
                try:
                    result = future.result()
                except Exception as exc:  # noqa: BLE001 - e.g. a worker died: the task fails, the sweep goes on
                    result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
                else:
                    sweep.cache(what, key, result)
                phase.task_seconds += float(result.get("seconds") or 0.0)
                phase.task_cpu_seconds += float(result.get("cpu_seconds") or 0.0)
                phase.warmup_seconds += float(result.get("warmup_seconds") or 0.0)
                if what == "area":
                    sweep.record_area(key, result, area_todo[key])
                else:
                    sweep.record_point(key, result)
                sweep.write()
            phase.compute_seconds = time.perf_counter() - t0
            phase.after = machine.sample()
        phase.dask_compute_seconds = sum(part["stop"] - part["start"] for record in stream.data
                                         for part in record["startstops"] if part["action"] == "compute")
    return phase


__all__ = ["AREA", "RESULTS", "SweepSummary", "area_key", "cache_dir", "dask_client", "point_key", "read_results",
           "rtl_fingerprint", "run_sweep"]
