"""``tinynpu sim`` and ``tinynpu bench sim``."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import numpy as np

from tinynpu.assembler.image import Program, write_output
from tinynpu.errors import UsageError
from tinynpu.isa import load_config, load_isa
from tinynpu.simulator.machine import ENGINES, Machine
from tinynpu.simulator.stats import Stats

NPY_MAGIC = b"\x93NUMPY"


def _pairs(items: list[str], what: str) -> list[tuple[str, Path]]:
    out = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"{what} must be NAME=FILE.npy, not {item!r}.")
        out.append((name, Path(path)))
    return out


def _load_npy(path: Path, name: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--input {name}={path}: cannot read a .npy array: {exc}.") from None


def _summary(stats: Stats) -> str:
    lines = [
        f"cycles {stats.cycles:,}  instructions {stats.instructions_total:,}  macs {stats.macs:,}  "
        f"utilization {stats.utilization:.1%}",
        f"DRAM read {stats.dram_read_bytes:,} B  write {stats.dram_write_bytes:,} B  "
        f"(simulated in {stats.wall_seconds:.3f} s by the {stats.engine} core)",
        "busy " + "  ".join(f"{u} {c:,}" for u, c in stats.busy_cycles.items()),
    ]
    for unit, causes in stats.stall_cycles.items():
        if causes:
            lines.append(f"stalls {unit}: " + ", ".join(f"{c} {n:,}" for c, n in causes.items()))
    return "\n".join(lines)


def _sim(args: argparse.Namespace) -> int:
    isa = load_isa()
    program = Program.load(Path(args.program))
    cfg = load_config(args.config or program.config_name, isa)
    program.check_built_for(isa, cfg, where=str(args.program))
    outputs = _pairs(args.output, "--output")
    for name, path in outputs:
        program.tensor(name)
        if path.exists() and not args.force:
            with path.open("rb") as fh:
                if fh.read(len(NPY_MAGIC)) != NPY_MAGIC:
                    raise UsageError(f"--output {name}={path}: the file exists and is not a .npy array; pass "
                                     "--force to overwrite it.")
    machine = Machine(cfg, isa)
    machine.load(program)
    for name, path in _pairs(args.input, "--input"):
        machine.write_tensor(name, _load_npy(path, name))
    if args.trace and args.no_timing:
        raise UsageError("--trace needs timing; drop --no-timing.")
    if args.trace and Path(args.trace).exists() and args.force:
        Path(args.trace).unlink()
    log = (sys.stderr if args.json else sys.stdout) if args.log else None
    trace = Path(args.trace) if args.trace else None
    stats = machine.run(timing=not args.no_timing, trace_path=trace, log=log, max_cycles=args.max_cycles,
                        check_races=not args.no_race_check, engine=args.engine)
    for name, path in outputs:
        buf = io.BytesIO()
        np.save(buf, machine.read_tensor(name))
        write_output(path, buf.getvalue(), overwrite=args.force, magic=NPY_MAGIC)
    if args.json:
        print(json.dumps(stats.to_json()))
    else:
        print(_summary(stats))
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {value}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``sim``."""
    p = subparsers.add_parser("sim", help="run a program image on the simulator (stats, trace, race check)")
    p.add_argument("program", metavar="PROGRAM.bin", help="program image from `tinynpu asm` or the compiler")
    p.add_argument("--config", help="config name or YAML (default: the one the program was built for)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="input tensor")
    p.add_argument("--output", action="append", default=[], metavar="NAME=FILE.npy",
                   help="output tensor to save")
    p.add_argument("--json", action="store_true", help="print the stats as one JSON object")
    p.add_argument("--trace", metavar="FILE.json", help="write a Chrome/Perfetto trace (ui.perfetto.dev)")
    p.add_argument("--log", action="store_true", help="print one line per instruction with its cycles")
    p.add_argument("--no-timing", action="store_true", help="functional only (no cycles)")
    p.add_argument("--no-race-check", action="store_true", help="skip the data-race sanitizer")
    p.add_argument("--max-cycles", type=_positive,
                   help="cycle limit (default: the config's limits.max_cycles)")
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="simulator core: native (C, integer configs), python (the reference), or auto "
                        "(default: $TINYNPU_ENGINE, else auto = native where it can run); results are identical")
    p.add_argument("--force", action="store_true", help="overwrite output files tinynpu did not write")
    p.set_defaults(handler=_sim)


def register_bench(bench_subparsers: argparse._SubParsersAction) -> None:
    """Add ``bench sim``."""
    from tinynpu.simulator.bench import run_bench

    p = bench_subparsers.add_parser("sim", help="simulator speed on the seed workload vs numpy's matmul")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--size", type=_positive, default=1024, help="M = N = K (default 1024)")
    p.set_defaults(handler=run_bench)


__all__ = ["register", "register_bench"]
