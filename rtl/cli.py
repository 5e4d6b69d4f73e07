"""``tinynpu cosim`` and ``tinynpu bench cosim``: the RTL (Verilator or Icarus) next to the simulator.

Two forms share one command::

    tinynpu cosim PROGRAM.bin [--input NAME=FILE.npy ...] [--simulator S] [--json] [--waves FILE]
    tinynpu cosim matmul --m 64 --n 64 --k 64 [--simulator S] [--json] [--waves FILE]   (also conv2d, mlp)

The first token decides the form, so the workload flags are exactly those of
``tinynpu run``.  ``--simulator auto`` (the default) runs Verilator where it
builds, else Icarus; the output says which ran.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu import fsio
from tinynpu.errors import UsageError
from tinynpu.progress import step, wrote

# bench cosim targets: Verilator fast enough that whole workloads run on the RTL, cycle for cycle, in minutes.
TARGET_VERILATOR_OVER_ICARUS = 100.0  # cycles/s ratio on the same matmul in the same run
TARGET_SEED_SECONDS = 120.0           # the tuned 1024^3 seed (4.2 M cycles) co-simulated on Verilator
TARGET_RESNET50_SECONDS = 900.0       # every conv layer of ResNet-50 (--resnet50)
_DESCRIPTION = """Run one program on the RTL and on the simulator and compare outputs and cycles.

  tinynpu cosim PROGRAM.bin [--input NAME=FILE.npy ...] [--simulator S] [--json] [--waves FILE]
  tinynpu cosim matmul --m 64 --n 64 --k 64 [--simulator S] [--json] [--waves FILE]   (also conv2d, mlp)

The first token decides the form; the workload flags are those of `tinynpu run`
(`tinynpu cosim matmul --help` lists them).  --simulator auto (the default) runs
Verilator where it builds, else Icarus; the output says which ran."""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one paragraph (the inner parsers of the two forms); no abbreviated options."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}. Run 'tinynpu cosim --help' for the two forms.")


SIMULATOR_NAMES = {"verilator": "Verilator", "icarus": "Icarus"}


def _simulator_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--simulator", choices=("auto", "verilator", "icarus"), default="auto",
                   help="Verilog simulator for the RTL (default auto: Verilator where it builds, else Icarus)")


def _common(p: argparse.ArgumentParser) -> None:
    _simulator_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--waves", metavar="FILE.fst", help="dump every RTL signal for GTKWave (FST)")
    p.add_argument("--force", action="store_true", help="overwrite a --waves file that tinynpu did not write")


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
    from tinynpu.compiler.workload_args import add_workloads

    p = _Parser(prog="tinynpu cosim")
    for q in add_workloads(p):
        _common(q)
        q.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    return p


def _waves_path(args: argparse.Namespace) -> Path | None:
    """The checked --waves target (fsio's output rules), before any work; None without --waves."""
    if not args.waves:
        return None
    read = [Path(args.program), *(Path(p.partition("=")[2]) for p in args.input)] if "program" in args else []
    return fsio.check_output(args.waves, force=args.force, inputs=read, what="--waves")


def _case_from_program(args: argparse.Namespace) -> tuple[Any, Any, Any, dict[str, np.ndarray] | None]:
    from tinynpu.assembler.image import Program
    from tinynpu.isa import load_isa
    from tinynpu.rtl.compare import CosimCase

    isa = load_isa()
    program = Program.load(Path(args.program))
    cfg = program.config_for(isa, args.config, where=str(args.program))
    inputs: dict[str, np.ndarray] = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--input must be NAME=FILE.npy, not {item!r}.")
        program.tensor(name)
        inputs[name] = fsio.read_npy(path, what=f"--input {name}")
    case = CosimCase(Path(args.program).name, program, inputs, max_cycles=args.max_cycles)
    return isa, cfg, case, None


def _case_from_workload(args: argparse.Namespace) -> tuple[Any, Any, Any, dict[str, np.ndarray] | None]:
    from tinynpu.compiler.workload_args import compile_from_args
    from tinynpu.isa import load_config, load_isa
    from tinynpu.rtl.compare import CosimCase

    compiled = compile_from_args(args)
    isa = load_isa()
    # The config the program was compiled for: the user's file when --config names one (whatever its `name:`,
    # a built-in's included), else the built-in the compiler chose; never looked up again by the name inside.
    cfg = load_config(args.config, isa) if args.config else load_config(compiled.program.config_name, isa)
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
        f"RTL simulated on {SIMULATOR_NAMES[out['simulator']]} in {out['rtl_seconds']:.2f} s "
        f"({out['rtl_cycles_per_second']:,.0f} cycles/s)",
    ]
    if "verified" in out:
        lines.append(f"against numpy: {'verified' if out['verified'] else 'MISMATCH'}")
    for m in out["first_trace_mismatches"]:
        lines.append(f"  instruction {m['index']} {m['mnemonic']}: simulator (d, s, e) {tuple(m['model'])}, "
                     f"RTL {tuple(m['rtl'])}")
    if out["rtl_error"]:
        lines.append(f"RTL error: {out['rtl_error']}")
    if out["waves"]:
        lines.append(f"{wrote([out['waves']])} (open it with: gtkwave {out['waves']})")
    return "\n".join(lines)


def _cmd_cosim(args: argparse.Namespace) -> int:
    from tinynpu.compiler.kinds import KINDS
    from tinynpu.rtl.compare import cosimulate

    argv = [args.target, *args.rest]
    if args.target in KINDS:
        inner = _workload_parser().parse_args(argv)
        isa, cfg, case, reference = _case_from_workload(inner)
    else:
        inner = _program_parser().parse_args(argv)
        isa, cfg, case, reference = _case_from_program(inner)
    waves = _waves_path(inner)
    with contextlib.ExitStack() as stack:  # the waves replace an earlier file only once the run is complete
        staged = stack.enter_context(fsio.staged(waves, what="--waves")) if waves is not None else None
        with step(f"co-simulating {case.name} on the RTL and the simulator", quiet=inner.json):
            [report] = cosimulate(isa, cfg, [case], waves=staged, simulator=inner.simulator)
    if report.model_error is not None:
        raise UsageError(f"{case.name}: the simulator rejects the program, so there is nothing to compare: "
                         f"{report.model_error}")
    out = _report_json(report, reference, waves)
    print(json.dumps(out) if inner.json else _format(out))
    ok = report.agree and out.get("verified", True)
    return 0 if ok else 1


def _bench_case(isa: Any, cfg: Any, name: str, compiled: Any, simulator: str, *, quiet: bool) -> dict[str, Any]:
    """Co-simulate one compiled workload on ``simulator``; the figures of one row of ``bench cosim``."""
    from tinynpu.rtl.compare import CosimCase, cosimulate

    inputs = compiled.make_inputs(0)
    t0 = time.perf_counter()
    with step(f"co-simulating {name} on {SIMULATOR_NAMES.get(simulator, simulator)}", quiet=quiet):
        [report] = cosimulate(isa, cfg, [CosimCase(name, compiled.program, compiled.to_device(inputs))],
                              simulator=simulator)
    wall = time.perf_counter() - t0
    ref = compiled.reference(inputs)
    return {
        "workload": name,
        "simulator": report.simulator,
        "rtl_cycles": report.rtl_cycles,
        "model_cycles": report.model_cycles,
        "instructions_compared": report.instructions_compared,
        "trace_mismatches": len(report.trace_mismatches),
        "agree": report.agree,
        "verified": report.rtl_error is None and all(
            np.array_equal(report.outputs[k].reshape(ref[k].shape), ref[k]) for k in compiled.outputs),
        "rtl_sim_seconds": report.rtl_seconds,
        "rtl_cycles_per_second": report.rtl_cycles / report.rtl_seconds if report.rtl_seconds else 0.0,
        "model_seconds": report.model_seconds,
        "cosim_wall_seconds": wall,
    }


def resnet50_conv_layers() -> list[Any]:
    """Every conv layer of ResNet-50 (v1, batch 1) in network order: 53 layers.

    The stem, then per stage and bottleneck block a 1x1 reduce (carrying the
    stage's stride, as in v1), a 3x3 and a 1x1 expand, plus the projection
    shortcut of each stage's first block; the distinct shapes are
    ``tinynpu.compiler.conv_shape.RESNET50_CONVS``.
    """
    from tinynpu.compiler.conv_shape import ConvShape

    def conv(c: int, h: int, k: int, r: int, stride: int = 1, pad: int = 0) -> ConvShape:
        return ConvShape(n=1, c=c, h=h, w=h, k=k, r=r, s=r, stride=stride, pad=pad)

    layers = [conv(3, 224, 64, 7, stride=2, pad=3)]
    h, c_in = 56, 64  # after the stem's 3x3/2 max pool
    for blocks, width, stride in ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)):
        for block in range(blocks):
            s = stride if block == 0 else 1
            h_out = h // s
            layers += [conv(c_in, h, width, 1, stride=s), conv(width, h_out, width, 3, pad=1),
                       conv(width, h_out, 4 * width, 1)]
            if block == 0:
                layers.append(conv(c_in, h, 4 * width, 1, stride=s))
            c_in, h = 4 * width, h_out
    return layers


def _bench_resnet50(isa: Any, cfg: Any, *, quiet: bool) -> dict[str, Any]:
    """Every ResNet-50 conv layer co-simulated on Verilator in one simulator process."""
    from tinynpu.compiler.conv2d import compile_conv2d
    from tinynpu.rtl.compare import CosimCase, cosimulate

    t0 = time.perf_counter()
    layers = resnet50_conv_layers()
    compiled = {s: compile_conv2d(s.n, s.c, s.h, s.w, s.k, s.r, s.s, stride=s.stride, pad=s.pad) for s in set(layers)}
    inputs = {s: c.make_inputs(0) for s, c in compiled.items()}
    cases = [CosimCase(f"layer {i + 1}: {s}", compiled[s].program, compiled[s].to_device(inputs[s]))
             for i, s in enumerate(layers)]
    with step(f"co-simulating the {len(cases)} ResNet-50 conv layers on Verilator", quiet=quiet):
        reports = cosimulate(isa, cfg, cases, simulator="verilator")
    rows = []
    for s, report in zip(layers, reports, strict=True):
        ref = compiled[s].reference(inputs[s])
        rows.append({"workload": report.name, "simulator": report.simulator, "rtl_cycles": report.rtl_cycles,
                     "model_cycles": report.model_cycles, "agree": report.agree,
                     "verified": report.rtl_error is None and all(
                         np.array_equal(report.outputs[k].reshape(ref[k].shape), ref[k]) for k in compiled[s].outputs),
                     "rtl_sim_seconds": report.rtl_seconds})
    return {"layers": rows, "rtl_cycles": sum(r["rtl_cycles"] for r in rows),
            "agree": all(r["agree"] and r["verified"] for r in rows),
            "rtl_sim_seconds": sum(r["rtl_sim_seconds"] for r in rows),
            "wall_seconds": time.perf_counter() - t0, "target_wall_seconds": TARGET_RESNET50_SECONDS}


def _bench_figures(args: argparse.Namespace) -> dict[str, Any]:
    from tinynpu.compiler import compile_matmul
    from tinynpu.isa import load_config, load_isa
    from tinynpu.rtl.runner import missing_reason

    isa = load_isa()
    cfg = load_config("default", isa)
    size = args.size
    compiled = compile_matmul(size, size, size)
    out: dict[str, Any] = {"workload": f"matmul {size}x{size}x{size} int8"}
    speed = {}
    for sim in ("icarus", "verilator"):
        reason = missing_reason(sim)
        out[sim] = {"skipped": reason} if reason else _bench_case(isa, cfg, f"matmul{size}", compiled, sim,
                                                                       quiet=args.json)
        if not reason:
            speed[sim] = out[sim]["rtl_cycles_per_second"]
    # The target ratio: both simulators on the same program in this run.
    out["verilator_over_icarus"] = speed["verilator"] / speed["icarus"] if len(speed) == 2 else None
    out["target_verilator_over_icarus"] = TARGET_VERILATOR_OVER_ICARUS
    out["seed"] = None
    if args.seed_size and "verilator" in speed:
        n = args.seed_size
        row = _bench_case(isa, cfg, f"seed{n} tuned", compile_matmul(n, n, n), "verilator", quiet=args.json)
        out["seed"] = dict(row, target_wall_seconds=TARGET_SEED_SECONDS)
    out["resnet50"] = None
    if args.resnet50 and "verilator" in speed:
        out["resnet50"] = _bench_resnet50(isa, cfg, quiet=args.json)
    out["target_lines"] = _target_lines(out)
    return out


def _verdict(ok: bool) -> str:
    return "met" if ok else "not met"


def _target_lines(out: dict[str, Any]) -> list[str]:
    """One line per target: what it is, the figure measured in this run, met or not met."""
    lines = []
    ratio = out["verilator_over_icarus"]
    if ratio is not None:
        ok = ratio >= TARGET_VERILATOR_OVER_ICARUS
        lines.append(f"target: Verilator / Icarus cycles per second on the {out['workload']} >= "
                     f"{TARGET_VERILATOR_OVER_ICARUS:g}x: {ratio:,.0f}x: {_verdict(ok)}")
    seed = out["seed"]
    if seed:
        ok = seed["agree"] and seed["verified"] and seed["cosim_wall_seconds"] <= TARGET_SEED_SECONDS
        lines.append(f"target: {seed['workload']} on Verilator, bit-exact and cycle-exact, "
                     f"<= {TARGET_SEED_SECONDS:g} s: {seed['cosim_wall_seconds']:.1f} s: {_verdict(ok)}")
    resnet = out["resnet50"]
    if resnet:
        ok = resnet["agree"] and resnet["wall_seconds"] <= TARGET_RESNET50_SECONDS
        lines.append(f"target: every ResNet-50 conv layer on Verilator, bit-exact and cycle-exact, <= "
                     f"{TARGET_RESNET50_SECONDS:g} s: {resnet['wall_seconds']:.0f} s: {_verdict(ok)}")
    return lines


def _bench_ok(out: dict[str, Any]) -> bool:
    rows = [out[s] for s in ("icarus", "verilator") if "skipped" not in out[s]]
    rows += [out["seed"]] if out["seed"] else []
    rows += out["resnet50"]["layers"] if out["resnet50"] else []
    return bool(rows) and all(r["agree"] and r["verified"] for r in rows)


def _bench_row_text(r: dict[str, Any]) -> str:
    return (f"  {SIMULATOR_NAMES[r['simulator']]:9} {r['workload']}: {r['rtl_cycles']:,} cycles, "
            f"RTL == simulator: {r['agree']}, numpy verified: {r['verified']}; "
            f"{r['rtl_cycles_per_second']:,.0f} cycles/s ({r['rtl_sim_seconds']:.2f} s simulated, "
            f"{r['cosim_wall_seconds']:.1f} s in all)")


def _cmd_bench(args: argparse.Namespace) -> int:
    out = _bench_figures(args)
    if args.json:
        print(json.dumps(out))
        return 0 if _bench_ok(out) else 1
    print(out["workload"])
    for sim in ("icarus", "verilator"):
        row = out[sim]
        print(f"  {SIMULATOR_NAMES[sim]:9} skipped: {row['skipped']}" if "skipped" in row else _bench_row_text(row))
    if out["seed"]:
        print(_bench_row_text(out["seed"]))
    if out["resnet50"]:
        r = out["resnet50"]
        bad = [row["workload"] for row in r["layers"] if not (row["agree"] and row["verified"])]
        print(f"  Verilator ResNet-50, {len(r['layers'])} conv layers: {r['rtl_cycles']:,} cycles, "
              f"{'all agree with the simulator and numpy' if not bad else 'DIFFER: ' + ', '.join(bad)}; "
              f"{r['rtl_sim_seconds']:.1f} s simulated, {r['wall_seconds']:.0f} s in all")
    for line in out["target_lines"]:
        print(line)
    return 0 if _bench_ok(out) else 1


def _cmd_synth(args: argparse.Namespace) -> int:
    from tinynpu.isa import load_config, load_isa
    from tinynpu.rtl.synth import synthesize, with_tile
    from tinynpu.rtl.transformer_area import transformer_share

    isa = load_isa()
    cfg = load_config(args.config, isa)
    if args.tile is not None:
        cfg = with_tile(cfg, args.tile)
    with step(f"synthesizing the RTL for config {cfg.name!r} (minutes the first time, then cached)", quiet=args.json):
        report = synthesize(cfg, load_config("default", isa))
    out = report.to_json()
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"config {report.config} (T = {report.tile}): area by module (Yosys gates as NanGate 45 nm cells; "
          f"scratchpads from the SRAM model)")
    print(f"  {'module':44} {'inst':>4} {'cells':>10} {'transistors':>13} {'area mm^2':>10}  how")
    for m in report.modules:
        print(f"  {m.name:44} {m.instances:>4} {m.cells:>10,} {m.transistors:>13,} {m.area_um2 / 1e6:>10.4f}  {m.how}")
    print(f"  {'total':44} {'':>4} {report.cells:>10,} {report.transistors:>13,} {report.area_um2 / 1e6:>10.4f}")
    print(transformer_share(report.modules).line())
    for m in report.modules:
        if m.how == "extrapolated":
            print(f"note: {m.name}: {m.note}")
    ran = ", ".join(report.synthesized) if report.synthesized else "nothing (every part from the cache)"
    print(f"synthesized in this run: {ran}; {report.seconds:.1f} s")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``cosim`` and ``synth``."""
    synth = subparsers.add_parser(
        "synth", help="area of the RTL for a config: Yosys for the logic, an SRAM model for the scratchpads",
        description="Synthesize the RTL with Yosys and report gate cells, estimated transistors and area per "
                    "module and in total (NanGate FreePDK45 cell areas; scratchpads from a 45 nm SRAM bit-cell "
                    "model; MAC arrays above 32x32 extrapolated). Results are cached by the RTL sources and the config "
                    "values they read.")
    synth.add_argument("--config", default="default",
                       help="config name or YAML file (default: default)")
    synth.add_argument("--tile", type=int, default=None,
                       help="tile edge T of the array to report, 4 to 128, keeping the config's scratchpad rows "
                            "(default: the config's own)")
    synth.add_argument("--json", action="store_true", help="print one JSON object")
    synth.set_defaults(handler=_cmd_synth)

    p = subparsers.add_parser(
        "cosim", help="run a program or workload on the RTL (Verilator or Icarus) and the simulator and compare",
        description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="PROGRAM.bin|matmul|conv2d|mlp",
                   help="a program image, or a workload compiled as `tinynpu run` would")
    p.add_argument("rest", nargs=argparse.REMAINDER,
                   help="--input NAME=FILE.npy, --config, --max-cycles (program form) or the workload flags of "
                        "`tinynpu run`; both forms take --simulator auto|verilator|icarus, --json, "
                        "--waves FILE.fst, --force")
    p.set_defaults(handler=_cmd_cosim)


def register_bench(bench_subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``bench cosim``."""
    p = bench_subparsers.add_parser(
        "cosim", help="co-simulation speed: an int8 matmul on Verilator and Icarus, the tuned 1024^3 seed on Verilator")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--size", type=int, default=128,
                   help="M = N = K of the matmul run on both simulators (default 128)")
    p.add_argument("--seed-size", type=int, default=1024,
                   help="M = N = K of the tuned seed run on Verilator (default 1024; 0 skips it)")
    p.add_argument("--resnet50", action="store_true",
                   help="also co-simulate every ResNet-50 conv layer on Verilator (minutes; default off)")
    p.set_defaults(handler=_cmd_bench)
