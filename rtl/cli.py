"""``tinynpu cosim`` and ``tinynpu bench cosim``: the RTL on Icarus next to the simulator.

Two forms share one command::

    tinynpu cosim PROGRAM.bin [--input NAME=FILE.npy ...] [--json] [--waves FILE]
    tinynpu cosim matmul --m 64 --n 64 --k 64 [--json] [--waves FILE]   (also conv2d, mlp)

The first token decides the form, so the workload flags are exactly those of
``tinynpu run``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.errors import UsageError

WORKLOADS = ("matmul", "conv2d", "mlp")
COSIM_TARGET_SECONDS = 60.0  # bench cosim: a 128^3 matmul co-simulated within a minute keeps RTL checks routine
_DESCRIPTION = """Run one program on the RTL (Icarus) and on the simulator and compare outputs and cycles.

  tinynpu cosim PROGRAM.bin [--input NAME=FILE.npy ...] [--json] [--waves FILE]
  tinynpu cosim matmul --m 64 --n 64 --k 64 [--json] [--waves FILE]   (also conv2d, mlp)

The first token decides the form; the workload flags are those of `tinynpu run`
(`tinynpu cosim matmul --help` lists them)."""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one paragraph (the inner parsers of the two forms)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}. Run 'tinynpu cosim --help' for the two forms.")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--waves", metavar="FILE.fst", help="dump every RTL signal for GTKWave (FST)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --waves file")


def _program_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tinynpu cosim PROGRAM.bin")
    p.add_argument("program", metavar="PROGRAM.bin", help="program image from `tinynpu asm` or `tinynpu compile`")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="a tensor of the image's manifest from a .npy file, repeatable (default: the simulator's "
                        "zero-filled DRAM)")
    p.add_argument("--config", default=None, help="config name or YAML (default: the one the program was built for)")
    p.add_argument("--max-cycles", type=int, default=5_000_000,
                   help="stop both sides after this many cycles (default 5,000,000)")
    _common(p)
    return p


def _workload_parser() -> argparse.ArgumentParser:
    from tinynpu.compiler.cli import _add_workloads

    p = _Parser(prog="tinynpu cosim")
    for q in _add_workloads(p):
        _common(q)
        q.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    return p


def _waves_path(args: argparse.Namespace) -> Path | None:
    if not args.waves:
        return None
    path = Path(args.waves)
    if path.exists() and not args.force:
        raise UsageError(f"--waves {path}: the file exists; pass --force to overwrite it or choose another path.")
    if not path.parent.exists():
        raise UsageError(f"--waves {path}: the directory {path.parent} does not exist.")
    return path


def _case_from_program(args: argparse.Namespace) -> tuple[Any, Any, Any, dict[str, np.ndarray] | None]:
    from tinynpu.assembler.image import Program
    from tinynpu.isa import load_config, load_isa
    from tinynpu.rtl.compare import CosimCase

    isa = load_isa()
    program = Program.load(Path(args.program))
    cfg = load_config(args.config or program.config_name, isa)
    program.check_built_for(isa, cfg, where=str(args.program))
    inputs: dict[str, np.ndarray] = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--input must be NAME=FILE.npy, not {item!r}.")
        program.tensor(name)
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--input {name}={path}: cannot read a .npy array: {exc}.") from None
    case = CosimCase(Path(args.program).name, program, inputs, max_cycles=args.max_cycles)
    return isa, cfg, case, None


def _case_from_workload(args: argparse.Namespace) -> tuple[Any, Any, Any, dict[str, np.ndarray] | None]:
    from tinynpu.compiler.cli import compile_from_args
    from tinynpu.isa import load_config, load_isa
    from tinynpu.rtl.compare import CosimCase

    if getattr(args, "schedule", None) is None:
        args.schedule = "auto"
    compiled = compile_from_args(args)
    isa = load_isa()
    cfg = load_config(compiled.program.config_name, isa)
    inputs = compiled.make_inputs(args.seed)
    ref = compiled.reference(inputs)
    case = CosimCase(args.workload, compiled.program, compiled.to_device(inputs))
    return isa, cfg, case, {name: ref[name] for name in compiled.outputs}


def _report_json(report: Any, reference: dict[str, np.ndarray] | None, waves: Path | None) -> dict[str, Any]:
    out = report.to_json()
    out["rtl_cycles_per_second"] = report.rtl_cycles / report.rtl_seconds if report.rtl_seconds else 0.0
    if reference is not None:
        out["verified"] = report.rtl_error is None and all(
            np.array_equal(report.outputs[name].reshape(want.shape), want) for name, want in reference.items())
    out["waves"] = str(waves) if waves else None
    return out


def _format(out: dict[str, Any]) -> str:
    lines = [
        f"{out['name']}: RTL {out['rtl_cycles']:,} cycles, simulator {out['model_cycles']:,} cycles "
        f"(difference {out['cycle_diff']:+,})",
        f"outputs {'match' if out['outputs_match'] else 'DIFFER: ' + ', '.join(out['output_mismatches'])}; "
        f"{out['instructions_compared']:,} instructions compared, {out['trace_mismatches']} with other cycles",
        f"RTL simulated in {out['rtl_seconds']:.2f} s ({out['rtl_cycles_per_second']:,.0f} cycles/s on Icarus)",
    ]
    if "verified" in out:
        lines.append(f"against numpy: {'verified' if out['verified'] else 'MISMATCH'}")
    for m in out["first_trace_mismatches"]:
        lines.append(f"  instruction {m['index']} {m['mnemonic']}: simulator (d, s, e) {tuple(m['model'])}, "
                     f"RTL {tuple(m['rtl'])}")
    if out["rtl_error"]:
        lines.append(f"RTL error: {out['rtl_error']}")
    if out["waves"]:
        lines.append(f"waves: {out['waves']} (gtkwave {out['waves']})")
    return "\n".join(lines)


def _cmd_cosim(args: argparse.Namespace) -> int:
    from tinynpu.rtl.compare import cosimulate

    argv = [args.target, *args.rest]
    if args.target in WORKLOADS:
        inner = _workload_parser().parse_args(argv)
        isa, cfg, case, reference = _case_from_workload(inner)
    else:
        inner = _program_parser().parse_args(argv)
        isa, cfg, case, reference = _case_from_program(inner)
    waves = _waves_path(inner)
    if waves is not None and waves.exists():
        waves.unlink()
    [report] = cosimulate(isa, cfg, [case], waves=waves)
    if report.model_error is not None:
        raise UsageError(f"{case.name}: the simulator rejects the program, so there is nothing to compare: "
                         f"{report.model_error}")
    out = _report_json(report, reference, waves)
    print(json.dumps(out) if inner.json else _format(out))
    ok = report.agree and out.get("verified", True)
    return 0 if ok else 1


def _cmd_bench(args: argparse.Namespace) -> int:
    from tinynpu.compiler import compile_matmul
    from tinynpu.isa import load_config, load_isa
    from tinynpu.rtl.compare import CosimCase, cosimulate

    isa = load_isa()
    cfg = load_config("default", isa)
    size = args.size
    t0 = time.perf_counter()
    compiled = compile_matmul(size, size, size)
    inputs = compiled.make_inputs(0)
    case = CosimCase(f"matmul{size}", compiled.program, compiled.to_device(inputs))
    [report] = cosimulate(isa, cfg, [case])
    wall = time.perf_counter() - t0
    ref = compiled.reference(inputs)["C"]
    out = {
        "workload": f"matmul {size}x{size}x{size} int8",
        "rtl_cycles": report.rtl_cycles,
        "model_cycles": report.model_cycles,
        "cycle_diff": report.cycle_diff,
        "outputs_match": report.outputs_match,
        "verified": bool(np.array_equal(report.outputs["C"].reshape(ref.shape), ref)),
        "instructions_compared": report.instructions_compared,
        "trace_mismatches": len(report.trace_mismatches),
        "rtl_sim_seconds": report.rtl_seconds,
        "rtl_cycles_per_second": report.rtl_cycles / report.rtl_seconds,
        "model_seconds": report.model_seconds,
        "model_cycles_per_second": report.model_cycles / report.model_seconds,
        # Baseline measured in the same run: how much slower the RTL is than the Python model.
        "rtl_slowdown_vs_model": report.rtl_seconds / report.model_seconds,
        "cosim_wall_seconds": wall,
        "target_wall_seconds": COSIM_TARGET_SECONDS,
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['workload']}: {out['rtl_cycles']:,} cycles, RTL == simulator: {report.agree}, "
              f"numpy verified: {out['verified']}")
        print(f"Icarus {out['rtl_cycles_per_second']:,.0f} cycles/s ({out['rtl_sim_seconds']:.2f} s); "
              f"simulator {out['model_cycles_per_second']:,.0f} cycles/s; RTL is "
              f"{out['rtl_slowdown_vs_model']:,.0f}x slower")
        print(f"target: co-simulation of the {args.size}^3 matmul <= {COSIM_TARGET_SECONDS:g} s wall: {wall:.1f} s: "
              f"{'met' if wall <= COSIM_TARGET_SECONDS else 'not met'}")
    return 0 if report.agree and out["verified"] else 1


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``cosim``."""
    p = subparsers.add_parser(
        "cosim", help="run a program or workload on the RTL (Icarus) and the simulator and compare",
        description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="PROGRAM.bin|matmul|conv2d|mlp",
                   help="a program image, or a workload compiled as `tinynpu run` would")
    p.add_argument("rest", nargs=argparse.REMAINDER,
                   help="--input NAME=FILE.npy, --config, --max-cycles (program form) or the workload flags of "
                        "`tinynpu run`; both forms take --json, --waves FILE.fst, --force")
    p.set_defaults(handler=_cmd_cosim)


def register_bench(bench_subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``bench cosim``."""
    p = bench_subparsers.add_parser("cosim", help="co-simulation speed: the int8 matmul on Icarus vs the simulator")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--size", type=int, default=128, help="M = N = K (default 128)")
    p.set_defaults(handler=_cmd_bench)
