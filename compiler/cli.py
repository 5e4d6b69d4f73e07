"""``tinynpu compile|run|tune`` and ``tinynpu bench sim|compiler|onnx``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tinynpu import fsio
from tinynpu.compiler.workload_args import (
    CONFIG_HELP,
    DTYPE_HELP,
    add_gemm_sizes,
    add_workloads,
    compile_from_args,
    note_dtype_config,
)
from tinynpu.errors import UsageError
from tinynpu.progress import step, wrote

_GENERATOR = "tinynpu compile"


# Most tilings `tune --trials` samples: the sampler gives up after 20 attempts per trial, so this bounds a run.
MAX_TRIALS = 100_000


def _check_seed(seed: int) -> None:
    if seed < 0:
        raise UsageError(f"--seed must be an integer >= 0, not {seed}.")


def _check_fits_dram(cfg: Any, m: int, n: int, k: int) -> None:
    """Positive sizes, and the GEMM's A, B and C fit DRAM as the compiler lays them out (else a UsageError)."""
    from tinynpu.compiler.workload import DramAllocator, check_sizes

    check_sizes(m=m, n=n, k=k)
    alloc = DramAllocator(cfg)
    for name, shape, dtype in (("A", (m, k), cfg.input_dtype), ("B", (n, k), cfg.input_dtype),
                               ("C", (m, n), cfg.acc_dtype)):
        alloc.add(name, shape, dtype, "input")


# -- compile -------------------------------------------------------------------------------------
_COMPILE_FILES = ("program.s", "program.bin", "schedule.json", "manifest.json")


def _earlier_compile(out: Path) -> bool:
    """Whether ``out`` holds an earlier ``tinynpu compile`` output (its manifest names the generator)."""
    try:
        manifest = json.loads(fsio.read_text(out / "manifest.json", what="the manifest", limit=1 << 24))
    except (UsageError, json.JSONDecodeError, RecursionError):
        return False
    return isinstance(manifest, dict) and manifest.get("generator") == _GENERATOR


def _cmd_compile(args: argparse.Namespace) -> int:
    from tinynpu.isa import load_config

    out = Path(args.output)
    # Checked before compiling; the four files are then replaced as one set (old set or new, never a mix).
    fsio.check_output_dir(out, _COMPILE_FILES, force=args.force, ours=_earlier_compile(out), what="-o")
    with step(f"compiling {args.workload}", quiet=False):
        compiled = compile_from_args(args)
    cfg = load_config(args.config) if args.config else load_config(compiled.workload.get("config", "default"))
    manifest = {
        "generator": _GENERATOR,
        "workload": compiled.workload,
        "config": cfg.name,
        "tensors": [t.to_json() for t in compiled.program.tensors],
        "bounds": compiled.bounds.to_json(),
        "host_traffic_bytes": compiled.host_traffic_bytes,
        "instructions": len(compiled.program.words),
        "files": {"asm": "program.s", "binary": "program.bin", "schedule": "schedule.json"},
    }
    fsio.write_dir(out, {
        "program.bin": compiled.program.to_bytes(),
        "program.s": compiled.asm(cfg),
        "schedule.json": json.dumps({"name": compiled.schedule_name, "steps": list(compiled.trace)}, indent=1) + "\n",
        "manifest.json": json.dumps(manifest, indent=1) + "\n",
    }, what="-o")
    print(f"{wrote([out / name for name in _COMPILE_FILES])} "
          f"({len(compiled.program.words)} instructions, compiled in {compiled.compile_seconds:.3f} s)")
    return 0


# -- run -----------------------------------------------------------------------------------------
def _fmt_bytes(x: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(x) < 1024 or unit == "GiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.2f} {unit}"
        x /= 1024
    return f"{x}"


def format_report(r: dict[str, Any]) -> str:
    """A human-readable table of a run report, with units, and the schedule trace."""
    from tinynpu.compiler.schedule import Schedule
    from tinynpu.isa.config import CONFIG_DIR

    # A built-in config is named by `config=`; its path is this machine's install, noise in a table people share.
    builtin = str(CONFIG_DIR / f"{r['workload'].get('config')}.yaml")
    wl = ", ".join(f"{k}={v}" for k, v in r["workload"].items()
                   if not isinstance(v, dict) and not (k == "config_path" and v == builtin))
    rows = [
        ("workload", wl),
        ("schedule", r.get("schedule", "")),
        ("verified vs numpy", str(r["verified"])),
        ("cycles", f"{r['cycles']:,}"),
        ("roofline cycles", f"{r['roofline_cycles']:,}"),
        ("utilization (useful MACs)", f"{100 * r['utilization']:.2f} %"),
        ("padding ceiling", f"{100 * r['padding_ceiling']:.2f} %"),
        ("utilization / ceiling", f"{100 * r['utilization'] / r['padding_ceiling']:.2f} %"),
        ("DRAM read", _fmt_bytes(r["dram_read_bytes"])),
        ("DRAM write", _fmt_bytes(r["dram_write_bytes"])),
        ("best tiling traffic", f"{_fmt_bytes(r['best_tiling_bytes'])}  (traffic is "
                                f"{r['traffic_over_best_tiling']:.3f}x)"),
        (f"I/O lower bound ({r['io_bound_kind']})", f"{_fmt_bytes(r['io_lower_bound_bytes'])}  (traffic is "
                                                    f"{r['traffic_over_io_lower_bound']:.3f}x)"),
        ("host layout traffic", _fmt_bytes(r["host_traffic_bytes"])),
        ("instructions", f"{r['instructions']['total']:,}  " + ", ".join(
            f"{k} {v:,}" for k, v in r["instructions"]["by_mnemonic"].items() if v)),
        ("busy cycles", ", ".join(f"{k} {v:,}" for k, v in r["busy_cycles"].items())),
        ("MACs useful / issued", f"{r['macs']:,} / {r['issued_macs']:,}"),
        ("energy", f"{r['energy_pj'] / 1e6:,.3f} uJ  (" + ", ".join(
            f"{k} {v / r['energy_pj']:.0%}" for k, v in r["energy_breakdown_pj"].items() if v) + ")"),
        ("energy figures", _figures_text(r["energy_figures"])),
        ("energy x delay", f"{r['edp']:.4g} {r['edp_units']}"),
        ("compile time", f"{r['compile_seconds']:.3f} s"),
        ("simulator wall time", f"{r['simulator_wall_seconds']:.2f} s"
                                + ("" if r["races_checked"] else " (race check off)")),
    ]
    width = max(len(k) for k, _ in rows)
    text = "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
    trace = Schedule(name=str(r.get("schedule", "")), steps=tuple(r["trace"])).pretty()
    return text + "\n\nschedule trace:\n" + "\n".join("  " + line for line in trace.splitlines())


def _figures_text(table: dict[str, Any]) -> str:
    """Which per-action energies the config's sizes gave and which the config set itself."""
    given = table["given"]
    derived = len(table["figures"]) - len(given)
    dram = f"; DRAM {table['dram_interface']}, {table['dram_channels']} channel(s)" if table["dram_interface"] else ""
    gating = "; clock gating on" if table["clock_gating"] else ""
    return (f"{derived} derived from the config's sizes, {len(given)} given"
            + (f" ({', '.join(given)})" if given else "") + dram + gating + "  (--json: energy_figures)")


def _cmd_run(args: argparse.Namespace) -> int:
    from tinynpu.compiler.run import run_compiled
    from tinynpu.isa import load_config

    _check_seed(args.seed)
    with step(f"compiling {args.workload}", quiet=args.json):
        compiled = compile_from_args(args)
    cfg = load_config(args.config) if args.config else None
    with step(f"simulating {len(compiled.program.words):,} instructions and verifying against numpy",
              quiet=args.json):
        report = run_compiled(compiled, cfg=cfg, seed=args.seed, check_races=not args.no_race_check)
    if args.json:
        print(json.dumps(report))
    else:
        print(format_report(report))
    return 0


# -- tune ----------------------------------------------------------------------------------------
def format_tiling(tiling: dict[str, Any], tile: int) -> str:
    """A tiling in elements and in tiles, with its buffering spelled out (the JSON keeps tiles)."""
    bm, bn, bk = tiling["bm"], tiling["bn"], tiling["bk"]
    buffering = (f"streamed through a ring of {tiling['stream_buffers']} buffers"
                 if tiling.get("stream_buffers", 0) > 2 else
                 f"{'double' if tiling['double_buffer'] else 'single'}-buffered")
    text = (f"block {bm * tile}x{bn * tile}x{bk * tile} elements (bm={bm}, bn={bn}, bk={bk} tiles of {tile}), "
            f"order {tiling['order']}, inputs {buffering}, {tiling['acc_buffers']} acc block(s)")
    if tiling.get("resident", "none") != "none":
        text += f", {tiling['resident'].upper()} panel resident in {tiling['panel_buffers']} buffer(s)"
    return text


def _cmd_tune(args: argparse.Namespace) -> int:
    from tinynpu.compiler.search import tune_matmul
    from tinynpu.compiler.workload import resolve_config
    from tinynpu.isa import load_config

    if args.trials < 1:
        raise UsageError(f"tune: --trials must be at least 1 (tilings to sample), not {args.trials}.")
    if args.trials > MAX_TRIALS:
        raise UsageError(f"tune: --trials must be at most {MAX_TRIALS:,} (tilings to sample), not {args.trials}.")
    if args.simulate_best < 1:
        raise UsageError(f"tune: --simulate-best must be at least 1 (the winner is chosen by simulation), "
                         f"not {args.simulate_best}.")
    target = fsio.check_output(Path(args.output), force=args.force, what="-o") if args.output else None
    cfg = resolve_config(args.dtype, load_config(args.config) if args.config else None)
    note_dtype_config(args)
    _check_seed(args.seed)
    _check_fits_dram(cfg, args.m, args.n, args.k)  # as `run` does, before a search over a shape that cannot run
    with step(f"tuning: ranking {args.trials} sampled tilings, simulating the best {args.simulate_best}",
              quiet=args.json):
        result = tune_matmul(args.m, args.n, args.k, cfg=cfg, dtype=args.dtype, trials=args.trials,
                             seed=args.seed, verify=args.simulate_best)
    if target is not None:
        fsio.write_atomic(target, json.dumps(result["schedule"], indent=1) + "\n", what="-o")
    result["files_written"] = [str(args.output)] if args.output else []
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"tuned {args.m}x{args.n}x{args.k} ({args.dtype}): {result['trials']} sampled tilings ranked by "
          f"the cost model in {result['search_seconds']:.2f} s; best {len(result['verified'])} simulated:")
    for v in result["verified"]:
        print(f"  {format_tiling(v['tiling'], cfg.tile)}: model {v['model_cycles']:,} cycles, "
              f"simulated {v['cycles']:,} cycles, traffic {_fmt_bytes(v['dram_bytes'])}")
    print(f"best: {format_tiling(result['best']['tiling'], cfg.tile)} "
          f"({result['best']['cycles']:,} simulated cycles)")
    print("trace:")
    from tinynpu.compiler.schedule import Schedule

    trace = Schedule("tuned", tuple(result["schedule"]["steps"])).pretty()
    print("\n".join("  " + x for x in trace.splitlines()))
    if args.output:
        print(f"{wrote([args.output])} (replay it: tinynpu run matmul ... --schedule {args.output})")
    return 0


# -- registration --------------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    comp = subparsers.add_parser("compile",
                                 help="compile matmul, conv2d or the MLP to program.s/.bin + manifest")
    for q in add_workloads(comp, onnx="compile"):
        q.add_argument("-o", "--output", required=True,
                       help="output directory for program.s, program.bin, manifest.json, schedule.json")
        q.add_argument("--force", action="store_true", help="overwrite files that tinynpu did not write")
        q.set_defaults(handler=_cmd_compile)

    run = subparsers.add_parser("run", help="compile, simulate, verify against numpy and report")
    for q in add_workloads(run, onnx="run"):
        q.add_argument("--json", action="store_true", help="print one JSON object")
        q.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
        q.add_argument("--no-race-check", action="store_true", help="skip the simulator's race sanitizer")
        q.set_defaults(handler=_cmd_run)

    tune = subparsers.add_parser("tune", help="search tile sizes and loop orders for a workload")
    tsub = tune.add_subparsers(dest="workload", required=True, metavar="WORKLOAD")
    tm = tsub.add_parser("matmul", help="tune a GEMM")
    add_gemm_sizes(tm)
    tm.add_argument("--dtype", default="int8", choices=("int8", "fp32"), help=DTYPE_HELP)
    tm.add_argument("--config", default=None, help=CONFIG_HELP)
    tm.add_argument("--seed", type=int, default=0,
                    help="seed of the sampling and of the random inputs (default 0)")
    tm.add_argument("--trials", type=int, default=256,
                    help="tilings sampled and ranked by the cost model, at least 1 (default 256)")
    tm.add_argument("--simulate-best", type=int, default=3, metavar="N",
                    help="how many of the best-ranked tilings to simulate and verify; the fastest simulated "
                         "one wins; at least 1 (default 3)")
    tm.add_argument("--json", action="store_true", help="print one JSON object")
    tm.add_argument("-o", "--output", default=None,
                    help="write the winning schedule (JSON) here; replay it with --schedule FILE (default: none)")
    tm.add_argument("--force", action="store_true", help="overwrite an -o file that tinynpu did not write")
    tm.set_defaults(handler=_cmd_tune)


def register_bench(bench_subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``bench sim`` (the simulator's, on programs only the compiler can make), ``bench compiler`` and
    ``bench onnx``."""
    from tinynpu.compiler.sim_bench import register_sim_bench

    register_sim_bench(bench_subparsers)
    p = bench_subparsers.add_parser("compiler", help="GEMM (+ conv) suite: utilization, traffic vs bounds, "
                                                     "speed-up over the naive seed, search gap")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quick", action="store_true",
                   help="small shapes only: a smoke test, too small to meet the utilization targets")
    p.add_argument("--race-check", action="store_true", help="run the race sanitizer too (slow)")

    def handler(args: argparse.Namespace) -> int:
        from tinynpu.compiler.bench import run_bench

        return run_bench(quick=args.quick, as_json=args.json, check_races=args.race_check)

    p.set_defaults(handler=handler)
    from tinynpu.compiler.onnx.cli import register_onnx_bench

    register_onnx_bench(bench_subparsers)
    from tinynpu.compiler.onnx.llm.cli import register_llm_bench

    register_llm_bench(bench_subparsers)


__all__ = ["compile_from_args", "format_report", "register", "register_bench"]
