"""``tinynpu demo``: the course's seed matmul, naive schedule against tuned, verified, with a report.

The naive schedule is the course's ``lnumpy_tmm`` loop instruction for
instruction (~800K instructions at 1024^3); simulating it is the slowest step,
so the demo announces each step on stderr with a progress bar and the
expected instruction count instead of shrinking the problem.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tinynpu.errors import UsageError
from tinynpu.intmath import ceil_div
from tinynpu.isa import load_config
from tinynpu.progress import progress, say, wrote
from tinynpu.report.build import prepare_dir, write_report
from tinynpu.report.landscape import matmul_landscape
from tinynpu.report.markdown import table
from tinynpu.report.suite import Result, for_config, matmul, run_workload
from tinynpu.simulator.bench import numpy_matmul_seconds

MIB = 1024 * 1024
SCHEDULES = ("naive", "auto")


def comparison_rows(naive: Mapping[str, Any], tuned: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """The side-by-side table: (quantity, naive, tuned, tuned vs naive), all from the report dicts."""

    def moved(r: Mapping[str, Any]) -> int:
        return int(r["dram_read_bytes"]) + int(r["dram_write_bytes"])

    def instrs(r: Mapping[str, Any]) -> int:
        i = r["instructions"]
        return int(i["total"]) if isinstance(i, Mapping) else int(i)

    rows = [
        (
            "instructions",
            f"{instrs(naive):,}",
            f"{instrs(tuned):,}",
            f"{instrs(naive) / instrs(tuned):.1f}x fewer",
        ),
        (
            "cycles",
            f"{int(naive['cycles']):,}",
            f"{int(tuned['cycles']):,}",
            f"{int(naive['cycles']) / int(tuned['cycles']):.2f}x speed-up",
        ),
        ("roofline cycles", f"{int(naive['roofline_cycles']):,}", f"{int(tuned['roofline_cycles']):,}", ""),
        (
            "utilization",
            f"{100 * float(naive['utilization']):.2f}%",
            f"{100 * float(tuned['utilization']):.2f}%",
            "",
        ),
        (
            "DRAM traffic",
            f"{moved(naive) / MIB:.1f} MiB",
            f"{moved(tuned) / MIB:.1f} MiB",
            f"{moved(naive) / moved(tuned):.1f}x less",
        ),
        (
            "traffic / I/O bound",
            f"{moved(naive) / int(naive['io_lower_bound_bytes']):.2f}x",
            f"{moved(tuned) / int(tuned['io_lower_bound_bytes']):.2f}x",
            "",
        ),
        (
            "traffic / best tiling",
            f"{moved(naive) / int(naive['best_tiling_bytes']):.2f}x",
            f"{moved(tuned) / int(tuned['best_tiling_bytes']):.2f}x",
            "",
        ),
        ("verified vs numpy", _yes(naive["verified"]), _yes(tuned["verified"]), ""),
        (
            "simulator wall time",
            f"{float(naive['simulator_wall_seconds']):.2f} s",
            f"{float(tuned['simulator_wall_seconds']):.2f} s",
            "",
        ),
    ]
    return rows


def _yes(v: Any) -> str:
    return "yes" if v else "NO"


def format_table(rows: list[tuple[str, str, str, str]]) -> str:
    headers = ("", "naive (seed loop)", "tuned (auto)", "tuned vs naive")
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(4)]
    lines = [
        "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths, strict=True)))
    ]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        )
    return "\n".join(lines)


def run_demo(out: Path, *, size: int, config: str, force: bool, as_json: bool) -> int:
    """Compile, simulate, verify both schedules, print the table, write the report; 0 if both verify."""
    if size <= 0:
        raise UsageError(f"tinynpu demo: --size must be a positive integer, not {size}.")
    cfg = load_config(config)
    prepare_dir(out, force=force)
    tiles = ceil_div(size, cfg.tile)
    say(
        f"tinynpu demo: {size}x{size}x{size} {cfg.input_dtype} matmul on the '{cfg.name}' config "
        f"({cfg.macs_per_cycle} MAC/cycle, DRAM {cfg.dram_bytes_per_cycle} B/cycle).",
        quiet=as_json,
    )
    say(
        f"  naive = the course's seed loop, {tiles**3:,} tmm{cfg.tile} steps each with two tile loads: the "
        "longest step (about ten seconds at 1024^3, most of it compiling 800K instructions).",
        quiet=as_json,
    )
    results: dict[str, Result] = {}
    for sched in progress(SCHEDULES, total=len(SCHEDULES), desc="compile+simulate+verify", quiet=as_json,
                          unit="schedule"):
        t0 = time.perf_counter()
        w = for_config(matmul(size, size, size, schedule=sched, group="seed"), config, cfg)
        results[sched] = run_workload(w, cfg, timeline=True, say=lambda msg: say("  " + msg, quiet=as_json))
        say(f"  {w.label}: done in {time.perf_counter() - t0:.1f} s", quiet=as_json)
    naive, tuned = results["naive"], results["auto"]
    numpy_s = numpy_matmul_seconds(size, size, size)
    rows = comparison_rows(naive.report, tuned.report)
    rows.append(("numpy float32 matmul (same process)", f"{numpy_s:.3f} s", f"{numpy_s:.3f} s", ""))
    cmd = (
        f"tinynpu demo -o {out}"
        + (f" --size {size}" if size != 1024 else "")
        + (f" --config {config}" if config != "default" else "")
    )
    speed = {
        "runs": [
            {
                "label": f"{r.label}",
                "wall_seconds": float(r.report["simulator_wall_seconds"]),
                "instructions": _total(r.report),
                "cycles": int(r.report["cycles"]),
            }
            for r in (tuned, naive)
        ],
        "numpy_seconds": numpy_s,
        "command": cmd,
        "note": "Both simulations ran with timing and the data-race sanitizer; numpy timed in the same process.",
    }
    intro = (
        f"The course's seed program, a {size}x{size}x{size} {cfg.input_dtype} matmul over "
        f"{cfg.tile}x{cfg.tile} tiles, compiled twice: with the naive schedule that reproduces the course's "
        "`lnumpy_tmm` loop instruction for instruction, and with the tuned (`auto`) schedule. Both were "
        "simulated with timing and verified "
        f"{'bit-exactly' if cfg.is_integer else 'with rtol 1e-5'} against numpy. Generated by `{cmd}`.\n\n"
        + table(["", "naive (seed loop)", "tuned (auto)", "tuned vs naive"], [list(r) for r in rows], align="lrrr")
    )
    written = write_report(
        out,
        [tuned, naive],
        cfg=cfg,
        title=f"tinynpu demo: {size}^3 matmul, naive vs tuned",
        intro=intro,
        command=cmd,
        featured=[tuned, naive],
        speed=speed,
        landscape=matmul_landscape(size, size, size, cfg),
    )
    ok = bool(naive.report["verified"]) and bool(tuned.report["verified"])
    if as_json:
        summary = dict(written.summary)
        summary["comparison"] = [dict(zip(("quantity", "naive", "tuned", "ratio"), r, strict=True)) for r in rows]
        summary["numpy_seconds"] = numpy_s
        print(json.dumps(summary, default=str))
    else:
        print(format_table(rows))
        print(f"\nboth schedules verified against numpy: {_yes(ok)}")
        print(f"report with plots: {written.index}; {wrote(written.files)}")
    return 0 if ok else 1


def _total(report: Mapping[str, Any]) -> int:
    i = report["instructions"]
    return int(i["total"]) if isinstance(i, Mapping) else int(i)
