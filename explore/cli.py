"""``tinynpu sweep SPEC -o DIR`` and ``tinynpu bench sweep``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tinynpu.errors import UsageError
from tinynpu.progress import step, wrote


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def _cmd_sweep(args: argparse.Namespace) -> int:
    from tinynpu.explore.execute import RESULTS, read_results, run_sweep
    from tinynpu.explore.report import summary, write_index
    from tinynpu.explore.spec import load_sweep

    if args.workers is not None and args.scheduler:
        raise UsageError("--workers sizes the local cluster; it cannot be combined with --scheduler, whose "
                         "cluster has its own workers.")
    spec = load_sweep(Path(args.spec))
    out = Path(args.output)
    run = run_sweep(spec, out, workers=args.workers, scheduler=args.scheduler, resume=args.resume,
                        force=args.force, use_cache=not args.no_cache, quiet=args.json)
    rows = read_results(out / RESULTS)
    with step("index.md and its figures", quiet=args.json):
        files = write_index(spec, out, rows)
    if args.json:
        print(json.dumps({**run.to_json(), **summary(spec, rows)}))
    else:
        print(f"{run.points} points: {run.computed} computed on {run.workers} workers, "
              f"{run.cached} from the cache, {run.resumed} from the earlier results; "
              f"{run.syntheses} area syntheses; {run.failed} failed; {run.seconds:.1f} s")
        print(wrote([out / RESULTS, *files]))
    return 1 if run.failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser("sweep", help="design-space exploration: run a sweep spec's (config, workload) "
                                            "points on Dask and report the Pareto front")
    p.add_argument("spec", help="the sweep spec (YAML; schema: explore/sweep.schema.json)")
    p.add_argument("-o", "--output", required=True,
                   help="output directory for results.csv, index.md, its pareto-*.png figures and the configs/ of each "
                        "point")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="worker processes of the local Dask cluster, one thread each (default: all cores)")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="run on this existing Dask scheduler instead of a local cluster (default: none)")
    p.add_argument("--resume", action="store_true",
                   help="keep the results.csv already in -o and run only the points it lacks (failed ones stay)")
    p.add_argument("--force", action="store_true", help="start over, replacing an existing results.csv in -o")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the per-point cache in $TINYNPU_CACHE/sweep (default: use it)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: points, failed, seconds, ..., the best config per objective and "
                        "the sensitivities")
    p.set_defaults(handler=_cmd_sweep)


def register_bench(bench_subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = bench_subparsers.add_parser("sweep", help="a sweep on 1 and on 2 Dask workers: wall time, throughput "
                                                  "speed-up and Dask's overhead, with the load average")
    p.add_argument("--full", action="store_true",
                   help="the target sweep: 8x8/16x16/32x32 x 2 acc sizes x 2 DRAM bandwidths x 2 latencies over "
                        "ResNet-50's conv layers, several minutes per run (default: a small 18-point sweep, "
                        "about 15 s)")
    p.add_argument("--cold", action="store_true",
                   help="leave imports and the native core's load to each worker's first task, inside the timed "
                        "phase, as a plain sweep does (default: every worker warmed before the clock starts)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    def handler(args: argparse.Namespace) -> int:
        from tinynpu.explore.bench import run_bench

        return run_bench(as_json=args.json, full=args.full, warm=not args.cold)

    p.set_defaults(handler=handler)


__all__ = ["positive_int", "register", "register_bench"]
