"""``tinynpu sim`` (``tinynpu bench sim`` needs compiled programs: the compiler registers it)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

import numpy as np

from tinynpu import fsio
from tinynpu.argtypes import positive_int_at_most
from tinynpu.assembler.image import Program
from tinynpu.errors import UsageError
from tinynpu.isa import load_isa
from tinynpu.progress import step, wrote
from tinynpu.simulator.machine import ENGINES, Machine
from tinynpu.simulator.stats import Stats

TRACE_MAGIC = b'{"traceEvents"'
# Upper bound of --max-cycles: the config schema's limits.max_cycles maximum (cycle counters stay in 64 bits).
_SCHEMA = Path(__file__).resolve().parent.parent / "isa" / "config.schema.json"


def max_cycles_ceiling() -> int:
    """The largest cycle limit a run may have (from the config schema, the one place it is set)."""
    schema = json.loads(_SCHEMA.read_text(encoding="utf-8"))
    return int(schema["properties"]["limits"]["properties"]["max_cycles"]["maximum"])


def _pairs(items: list[str], what: str) -> list[tuple[str, Path]]:
    out = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"{what} must be NAME=FILE.npy, not {item!r}.")
        out.append((name, Path(path)))
    return out


def _note_zero_inputs(program: Program, given: set[str]) -> None:
    """Say on stderr which input tensors run as zeros because no ``--input`` gave them."""
    missing = [t for t in program.tensors if t.role == "input" and t.name not in given]
    if missing:
        listed = ", ".join(f"{t.name} ({'x'.join(map(str, t.shape))} {t.dtype})" for t in missing)
        print(f"tinynpu sim: note: no --input for {listed}: zero-filled. Give each as --input NAME=FILE.npy, a "
              f"numpy array of that shape and dtype saved with np.save.", file=sys.stderr)


def _summary(stats: Stats) -> str:
    lines = [
        f"cycles {stats.cycles:,}  instructions {stats.instructions_total:,}  macs {stats.macs:,}  "
        f"utilization {stats.utilization:.1%}",
        f"DRAM read {stats.dram_read_bytes:,} B  write {stats.dram_write_bytes:,} B  "
        f"(simulated in {stats.wall_seconds:.3f} s by the {stats.engine} core)",
        "busy " + "  ".join(f"{u} {c:,}" for u, c in stats.busy_cycles.items()),
        f"energy {stats.energy.total_pj / 1e6:,.3f} uJ  energy x delay {stats.energy.edp:.4g} pJ*s",
    ]
    for unit, causes in stats.stall_cycles.items():
        if causes:
            lines.append(f"stalls {unit}: " + ", ".join(f"{c} {n:,}" for c, n in causes.items()))
    return "\n".join(lines)


def _sim(args: argparse.Namespace) -> int:
    program_path = Path(args.program)
    inputs = _pairs(args.input, "--input")
    outputs = _pairs(args.output, "--output")
    if args.trace and args.no_timing:
        raise UsageError("--trace needs timing; drop --no-timing.")
    # Every target is checked before any work: a refusal never comes after a long simulation.
    read = [program_path, *(p for _, p in inputs)]
    targets: dict[Path, str] = {}
    for what, path, ours in [*((f"--output {n}=", p, None) for n, p in outputs),
                             *([("--trace", Path(args.trace), fsio.starts_with(TRACE_MAGIC))] if args.trace else [])]:
        target = fsio.check_output(path, force=args.force, ours=ours, inputs=read, what=what.rstrip("="))
        key = target.resolve()
        if key in targets:
            raise UsageError(f"{what.rstrip('=')} {path}: the same file is already the target of {targets[key]}; "
                             "give each output its own path.")
        targets[key] = what.rstrip("=")
    isa = load_isa()
    program = Program.load(program_path)
    cfg = program.config_for(isa, args.config, where=str(args.program))
    for name, _ in outputs:
        program.tensor(name)
    machine = Machine(cfg, isa)
    machine.load(program)
    for name, path in inputs:
        machine.write_tensor(name, fsio.read_npy(path, what=f"--input {name}"))
    _note_zero_inputs(program, {name for name, _ in inputs})
    log = (sys.stderr if args.json else sys.stdout) if args.log else None
    # Every output is written whole to a temporary name first; the renames over the targets come last,
    # back to back, when the stack closes.  They cannot be one atomic step: the targets are files the
    # user named, in any directories, beside the user's other files, and fsio's one-rename directory
    # swap (compile -o) would replace a whole directory.  So a kill leaves each file whole, old or new,
    # and a mixed set only within the few renames at the very end; a run that fails renames nothing.
    with contextlib.ExitStack() as stack:
        trace = stack.enter_context(fsio.staged(Path(args.trace), what="--trace")) if args.trace else None
        # No live line under --log: the log itself streams to the terminal.
        with step(f"simulating {len(program.words):,} instructions", quiet=args.json or args.log):
            stats = machine.run(timing=not args.no_timing, trace_path=trace, log=log, max_cycles=args.max_cycles,
                                check_races=not args.no_race_check, engine=args.engine)
        for name, path in outputs:
            buf = io.BytesIO()
            np.save(buf, machine.read_tensor(name))
            stack.enter_context(fsio.staged_data(path, buf.getvalue(), what=f"--output {name}"))
    written = [str(path) for _, path in outputs] + ([args.trace] if args.trace else [])
    if args.json:
        print(json.dumps(dict(stats.to_json(), files_written=written)))
    else:
        print(_summary(stats))
        if written:
            print(wrote(written))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``sim``."""
    p = subparsers.add_parser("sim", help="run a program image on the simulator (stats, trace, race check)")
    p.add_argument("program", metavar="PROGRAM.bin", help="program image from `tinynpu asm` or the compiler")
    p.add_argument("--config", help="config name or YAML (default: the one the program was built for)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input tensor of the program (its .tensor lines: `tinynpu disasm`) from a .npy of that "
                        "shape and dtype; repeatable (default: inputs not given are zero-filled, with a note)")
    p.add_argument("--output", action="append", default=[], metavar="NAME=FILE.npy",
                   help="save a tensor of the program after the run as .npy; repeatable (default: none saved)")
    p.add_argument("--json", action="store_true", help="print the stats as one JSON object")
    p.add_argument("--trace", metavar="FILE.json", help="write a Chrome/Perfetto trace (ui.perfetto.dev)")
    p.add_argument("--log", action="store_true", help="print one line per instruction with its cycles")
    p.add_argument("--no-timing", action="store_true", help="functional only (no cycles)")
    p.add_argument("--no-race-check", action="store_true", help="skip the data-race sanitizer")
    p.add_argument("--max-cycles", type=positive_int_at_most(max_cycles_ceiling),
                   help="cycle limit (default: the config's limits.max_cycles)")
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="simulator core: native (C, integer configs), python (the reference), or auto "
                        "(default: $TINYNPU_ENGINE, else auto = native where it can run); results are identical")
    p.add_argument("--force", action="store_true", help="overwrite output files tinynpu did not write")
    p.set_defaults(handler=_sim)


__all__ = ["max_cycles_ceiling", "register"]
