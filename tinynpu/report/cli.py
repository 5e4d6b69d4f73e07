"""``tinynpu report`` (suite or one workload) and ``tinynpu demo`` (the seed matmul, naive vs tuned)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tinynpu.errors import UsageError
from tinynpu.progress import wrote
from tinynpu.report.llm_cli import add_llm_flags, llm_flags_given, report_llm

WORKLOAD_FLAGS = {
    "matmul": ("m", "n", "k"),
    "conv2d": ("n", "c", "h", "w", "k", "r", "s", "stride", "pad"),
    "mlp": ("batch",),
}
# What each size means; --n and --k differ between matmul and conv2d, so their help names both.
FLAG_HELP = {
    "m": "matmul: rows of A and C (elements)",
    "n": "matmul: columns of C (elements); conv2d: batch size N (images)",
    "k": "matmul: reduction size (elements); conv2d: output channels K",
    "c": "conv2d: input channels C",
    "h": "conv2d: input height H, pixels",
    "w": "conv2d: input width W, pixels",
    "r": "conv2d: filter height R, pixels",
    "s": "conv2d: filter width S, pixels",
    "stride": "conv2d: stride on both axes, pixels (default 1)",
    "pad": "conv2d: zero padding on every side, pixels (default 0)",
    "batch": "mlp: images per batch; llm: sequences decoded together (default 1)",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write a Markdown + PNG performance report (the benchmark suite, or one workload)",
        description=(
            "Compile, simulate and verify workloads, then write index.md, figures/*.png and report.json. "
            "With no workload: the benchmark suite (the course's seed, DeepBench and BERT-base GEMMs, ResNet-50 "
            "convolutions, the MLP; --quick: small shapes of every kind). "
            "With a workload (matmul, conv2d, mlp) and its sizes: a report for that one. "
            "With llm: a decoder's generation (`tinynpu run llm`, made with --model or read with --from-run): "
            "prefill and decode on the roofline, and the time per token as the context grows."
        ),
    )
    p.add_argument("workload", nargs="?", choices=sorted([*WORKLOAD_FLAGS, "llm"]), help="report one workload")
    p.add_argument("--suite", action="store_true", help="the benchmark suite (the default without a workload)")
    p.add_argument("--quick", action="store_true", help="small shapes of every kind instead of the full suite")
    p.add_argument("-o", "--out", type=Path, default=None, help="report directory (default: out/report)")
    p.add_argument("--config", default="default", help="architecture config name or YAML path (default: default)")
    p.add_argument("--schedule", default="auto", help="matmul schedule: naive or auto (default auto)")
    p.add_argument(
        "--cosim", type=Path, default=None, help="JSON of `tinynpu cosim --json` (one or a list) to tabulate"
    )
    p.add_argument(
        "--run-cosim",
        action="store_true",
        help="co-simulate small workloads on the RTL for the RTL-vs-model table (the suite does so by default)",
    )
    p.add_argument("--no-cosim", action="store_true", help="no RTL co-simulation, even for the suite")
    p.add_argument(
        "--no-network",
        action="store_true",
        help="no ONNX network section (default: the suite runs SqueezeNet, and ResNet-50 without --quick)",
    )
    p.add_argument(
        "--bench-sim",
        type=Path,
        default=None,
        help="JSON of `tinynpu bench sim --json` for the speed figure (default: run it; with --quick: "
        "time the quick runs)",
    )
    p.add_argument("--no-race-check", action="store_true", help="simulate without the data-race sanitizer")
    p.add_argument("--force", action="store_true", help="write into a non-empty directory that holds no report")
    p.add_argument("--json", action="store_true", help="print one JSON object (files, stats, figure data)")
    for flag in sorted({f for flags in WORKLOAD_FLAGS.values() for f in flags}):
        p.add_argument(f"--{flag}", type=int, default=None, help=FLAG_HELP[flag])
    add_llm_flags(p)
    p.set_defaults(handler=_report)

    d = sub.add_parser(
        "demo",
        help="the course's 1024^3 matmul: naive vs tuned schedule, simulated, verified, with a report",
        description=(
            "Compiles the course's seed matmul with the naive seed schedule and with the tuned schedule, "
            "simulates both, verifies both against numpy, prints a side-by-side table and writes a report."
        ),
    )
    d.add_argument("-o", "--out", type=Path, default=Path("out/demo"), help="report directory (default: out/demo)")
    d.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024, the course's seed)")
    d.add_argument("--config", default="default", help="architecture config name or YAML path (default: default)")
    d.add_argument("--force", action="store_true", help="write into a non-empty directory that holds no report")
    d.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    d.set_defaults(handler=_demo)


def _report(args: argparse.Namespace) -> int:
    # Imported here so `tinynpu --help` does not pay for matplotlib.
    from tinynpu.report.reports import report_suite, report_workload

    if args.workload and args.suite:
        raise UsageError("tinynpu report: give either a workload (matmul, conv2d, mlp, llm) or --suite, not both.")
    if args.workload == "llm" or llm_flags_given(args):
        return report_llm(args)
    if args.run_cosim and args.no_cosim:
        raise UsageError("tinynpu report: --run-cosim and --no-cosim contradict each other; give one.")
    cosim = _read_cosim(args.cosim) if args.cosim else None
    if args.workload:
        flags = WORKLOAD_FLAGS[args.workload]
        missing = [f"--{f}" for f in flags if getattr(args, f) is None and f not in ("stride", "pad")]
        if missing:
            raise UsageError(f"tinynpu report {args.workload}: missing {', '.join(missing)} (sizes of the workload).")
        sizes = {f: getattr(args, f) for f in flags}
        if args.workload == "conv2d":
            sizes["stride"] = 1 if sizes["stride"] is None else sizes["stride"]
            sizes["pad"] = 0 if sizes["pad"] is None else sizes["pad"]
        out = args.out or Path("out") / f"report-{args.workload}"
        written = report_workload(
            args.workload,
            sizes,
            out,
            config=args.config,
            schedule=args.schedule,
            quiet=args.json,
            force=args.force,
            check_races=not args.no_race_check,
            cosim=cosim,
            run_cosim=args.run_cosim,
        )
    else:
        out = args.out or Path("out/report")
        written = report_suite(
            out,
            bench_sim=args.bench_sim,
            config=args.config,
            quick=args.quick,
            quiet=args.json,
            force=args.force,
            check_races=not args.no_race_check,
            cosim=cosim,
            run_cosim=not args.no_cosim,
            run_network=not args.no_network,
        )
    if args.json:
        print(json.dumps(written.summary, default=str))
    else:
        for row in written.summary["workloads"]:
            status = "verified" if row["verified"] else "NOT VERIFIED"
            print(
                f"{row['workload']:<40} {row['cycles']:>14,} cycles  util {100 * row['utilization']:5.1f}%  "
                f"{row['traffic_over_bound']:6.2f}x I/O bound  {status}"
            )
        print(f"report: {written.index}; {wrote(written.files)}")
    return 0 if written.summary["all_verified"] else 1


def _read_cosim(path: Path) -> dict[str, Any]:
    from tinynpu.report.reports import read_json_file

    data = read_json_file(path, "--cosim")
    return cosim_rows(data, f"tinynpu cosim ... --json > {path}", str(path))


def cosim_rows(data: Any, command: str, origin: str) -> dict[str, Any]:
    """Accept a single cosim result, a list of them, or ``{"runs"/"results": [...]}``."""
    if isinstance(data, dict):
        for key in ("runs", "results", "rows"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
        else:
            data = [data]
    if not isinstance(data, list) or not data:
        raise UsageError(f"{origin}: expected a co-simulation result object or a list of them.")
    for i, row in enumerate(data):
        if not isinstance(row, dict) or "rtl_cycles" not in row or "model_cycles" not in row:
            raise UsageError(
                f"{origin}: entry {i} lacks 'rtl_cycles'/'model_cycles' (the keys of `tinynpu cosim --json`)."
            )
    return {"rows": data, "command": command}


def _demo(args: argparse.Namespace) -> int:
    from tinynpu.report.demo import run_demo

    return run_demo(args.out, size=args.size, config=args.config, force=args.force, as_json=args.json)
