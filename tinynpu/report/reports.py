"""The two report kinds: the benchmark suite and a single workload."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, load_config
from tinynpu.progress import progress, step
from tinynpu.report.build import Written, prepare_dir, write_report
from tinynpu.report.landscape import matmul_landscape
from tinynpu.report.suite import (
    Result,
    Workload,
    conv2d,
    for_config,
    matmul,
    mlp,
    run_workload,
    suite_workloads,
)
from tinynpu.simulator.bench import numpy_matmul_seconds


def _speed(results: list[Result], command: str) -> dict[str, Any] | None:
    """Simulator wall time of the matmul runs of one shape, against numpy's float32 matmul of that shape."""
    mm = [r for r in results if r.workload.kind == "matmul"]
    if not mm:
        return None
    shape = dict(mm[0].workload.params)
    same = [r for r in mm if dict(r.workload.params) == shape]
    runs = [
        {
            "label": r.label,
            "wall_seconds": float(r.report["simulator_wall_seconds"]),
            "instructions": _total(r.report["instructions"]),
            "cycles": int(r.report["cycles"]),
        }
        for r in same
    ]
    numpy_s = numpy_matmul_seconds(shape["m"], shape["n"], shape["k"])
    note = (
        f"Simulated runs of the {shape['m']}x{shape['n']}x{shape['k']} matmul (functional + timing, "
        f"race checking as in the summary), and numpy's float32 matmul of the same size, best of 5, timed by "
        "the report itself in the same process. `tinynpu bench sim` measures the same ratios on their own."
    )
    return {"runs": runs, "numpy_seconds": numpy_s, "command": command, "note": note}


def speed_from_bench(data: Mapping[str, Any], command: str) -> dict[str, Any]:
    """The simulator-speed figure's input from the JSON of ``tinynpu bench sim --json``.

    The benchmark times numpy's float32 matmul in each simulation's own process
    (``numpy_float32_seconds`` per run; older versions gave one top-level figure),
    and each run's ratio is against its own numpy time.
    """
    try:
        size = int(data["size"])
        runs: list[dict[str, Any]] = []
        for r in data["runs"]:
            numpy_s = r.get("numpy_float32_seconds", data.get("numpy_float32_seconds"))
            runs.append(
                {
                    "label": _bench_label(r, size),
                    "wall_seconds": float(r["wall_seconds"]),
                    "instructions": int(r["instructions"]),
                    "cycles": int(r["cycles"]),
                    "numpy_seconds": float(numpy_s),
                }
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(
            f"simulator benchmark JSON ({command}) lacks the field {exc} of `tinynpu bench sim --json`."
        ) from exc
    note = (
        f"From `{command}`: the simulator's own benchmark of the {size}^3 int8 seed workload, naive and tiled, "
        "on the default (native) core with and without the race sanitizer and on the Python reference core, "
        "each run in its own process with numpy's float32 matmul of the same size timed in that process; each "
        "ratio is against its own process's numpy time."
    )
    return {"runs": runs, "numpy_seconds": min(r["numpy_seconds"] for r in runs), "command": command, "note": note}


def _bench_label(run: Mapping[str, Any], size: int) -> str:
    races = f"races {'on' if run['races_checked'] else 'off'}"
    if "engine" in run:  # benchmarks from before the native core do not name one
        races = f"{run['engine']} core, {races}"
    if run["schedule"] in ("naive", "auto"):
        return f"{run['schedule']} {size}^3 matmul, {races}"
    # Other runs are synthetic instruction streams (e.g. back-to-back DMA loads), not a matmul.
    return f"{run['schedule']} stream ({int(run['instructions']):,} instr), {races}"


def read_json_file(path: Path, flag: str) -> Any:
    """A JSON file named on the command line, with file:line:col on a syntax error."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read the file ({exc.strerror}).") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} {path}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg}).") from exc


def run_tool_json(argv: list[str], *, quiet: bool) -> Any:
    """Run another ``tinynpu`` command with ``--json`` in a child process and parse its one JSON object."""
    with step(f"running `tinynpu {' '.join(argv)}`", quiet=quiet):
        proc = subprocess.run([sys.executable, "-m", "tinynpu", *argv], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise UsageError(f"`tinynpu {' '.join(argv)}` failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)


def _total(instr: Any) -> int:
    return int(instr["total"]) if isinstance(instr, Mapping) else int(instr)


def _run_all(
    workloads: list[Workload], cfg: ArchConfig, *, quiet: bool, check_races: bool, featured: set[Workload]
) -> list[Result]:
    results = []
    bar = progress(workloads, total=len(workloads), desc="simulating", quiet=quiet, unit="workload")
    for w in bar:
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(w.label)
        results.append(run_workload(w, cfg, timeline=w in featured, check_races=check_races))
    return results


def _cosim(given: dict[str, Any] | None, run: bool, cfg: ArchConfig, quiet: bool) -> dict[str, Any] | None:
    """Co-simulation rows: the given ones, else a fresh run when asked and possible, else why not."""
    if given is not None or not run:
        return given
    from tinynpu.report.cosim import run_cosim, unavailable_reason

    reason = unavailable_reason(cfg)
    if reason:
        return {"rows": [], "skipped": reason}
    with step("co-simulating small workloads on the RTL", quiet=quiet):
        return run_cosim(cfg)


def report_suite(
    out: Path,
    *,
    config: str,
    quick: bool,
    quiet: bool,
    force: bool,
    check_races: bool,
    cosim: dict[str, Any] | None,
    bench_sim: Path | None = None,
    run_cosim: bool = True,
    run_network: bool = True,
) -> Written:
    """The benchmark suite of docs/architecture.md (or its quick subset), with every figure.

    The simulator-speed section comes from ``bench_sim`` (a saved ``tinynpu bench sim --json``), else
    from running that benchmark (full suite), else (``quick``) from the quick runs themselves.
    """
    cfg = load_config(config)
    prepare_dir(out, force=force)
    workloads = [for_config(w, config, cfg) for w in suite_workloads(quick=quick)]
    seed = [w for w in workloads if w.kind == "matmul"][:2]  # the seed (or quick head) tuned + naive
    results = _run_all(workloads, cfg, quiet=quiet, check_races=check_races, featured=set(seed))
    cmd = f"tinynpu report --suite{' --quick' if quick else ''} -o {out}" + (
        f" --config {config}" if config != "default" else ""
    )
    cmd += " --no-race-check" if not check_races else ""
    cmd += "" if run_cosim else " --no-cosim"
    cmd += "" if run_network else " --no-network"
    cosim = _cosim(cosim, run_cosim, cfg, quiet)
    network = _network(run_network, quick, cfg, quiet)
    speed: dict[str, Any] | None
    if bench_sim is not None:
        cmd += f" --bench-sim {bench_sim}"
        speed = speed_from_bench(read_json_file(bench_sim, "--bench-sim"), f"tinynpu bench sim --json > {bench_sim}")
    elif not quick:
        speed = speed_from_bench(run_tool_json(["bench", "sim", "--json"], quiet=quiet), "tinynpu bench sim --json")
    else:
        speed = _speed(results, cmd)
    head = dict(seed[0].params)
    land = matmul_landscape(head["m"], head["n"], head["k"], cfg)
    scope = (
        "a quick subset (small shapes of every kind; `--quick`)"
        if quick
        else "the benchmark suite (listed in tinynpu's `docs/architecture.md`): the course's 1024^3 seed (tuned "
        "and naive), DeepBench and BERT-base GEMMs, the ResNet-50 convolutions and the course's MLP"
    )
    intro = (
        f"Performance of tinynpu's compiler and simulator on {scope}, on the `{cfg.name}` configuration. "
        f"Generated by `{cmd}`; every number below comes from a simulated run whose command is listed under "
        "its section. Conv2d rows use the compulsory-traffic bound (the matmul bound does not hold for "
        "sliding windows); GEMM and MLP rows the matmul bound."
    )
    return write_report(
        out,
        results,
        cfg=cfg,
        title="tinynpu benchmark report" + (" (quick)" if quick else ""),
        intro=intro,
        command=cmd,
        featured=[r for r in results if r.timeline],
        speed=speed,
        landscape=land,
        cosim=cosim,
        network=network,
    )


def _network(run: bool, quick: bool, cfg: ArchConfig, quiet: bool) -> dict[str, Any] | None:
    """ONNX network runs for the network section (SqueezeNet; ResNet-50 too in the full suite)."""
    if not run or not cfg.is_integer:  # networks run int8: an fp32 config has no network section
        return None
    from tinynpu.report.network import FULL_NETWORKS, QUICK_NETWORKS, run_networks

    return run_networks(QUICK_NETWORKS if quick else FULL_NETWORKS, cfg, quiet=quiet)


def report_workload(
    kind: str,
    sizes: dict[str, int],
    out: Path,
    *,
    config: str,
    schedule: str,
    quiet: bool,
    force: bool,
    check_races: bool,
    cosim: dict[str, Any] | None,
    run_cosim: bool = False,
) -> Written:
    """One workload: summary, roofline, traffic, cycle breakdown, Gantt (and landscape for matmul)."""
    cfg = load_config(config)
    prepare_dir(out, force=force)
    if kind == "matmul":
        w = matmul(sizes["m"], sizes["n"], sizes["k"], schedule=schedule)
    elif kind == "conv2d":
        w = conv2d([sizes[f] for f in ("n", "c", "h", "w", "k", "r", "s", "stride", "pad")], group="")
    else:
        w = mlp(sizes["batch"])
    w = for_config(w, config, cfg)
    results = _run_all([w], cfg, quiet=quiet, check_races=check_races, featured={w})
    flags = " ".join(f"--{k} {v}" for k, v in sizes.items())
    cmd = f"tinynpu report {kind} {flags}" + (f" --schedule {schedule}" if kind == "matmul" else "") + f" -o {out}"
    cmd += " --run-cosim" if run_cosim else ""
    cosim = _cosim(cosim, run_cosim, cfg, quiet)
    land = matmul_landscape(sizes["m"], sizes["n"], sizes["k"], cfg) if kind == "matmul" else None
    intro = (
        f"One workload, {w.label}, compiled, simulated with timing and verified against numpy on the "
        f"`{cfg.name}` configuration. Generated by `{cmd}`."
    )
    return write_report(
        out,
        results,
        cfg=cfg,
        title=f"tinynpu report: {w.label}",
        intro=intro,
        command=cmd,
        featured=results,
        speed=_speed(results, cmd) if kind == "matmul" else None,
        landscape=land,
        cosim=cosim,
    )


__all__ = ["report_suite", "report_workload"]
