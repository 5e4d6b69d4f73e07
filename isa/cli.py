"""``tinynpu isa check | doc | cheader | verilog``: validate the spec and regenerate what derives from it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tinynpu.fsio import write_output
from tinynpu.isa import implemented
from tinynpu.isa.config import CONFIG_DIR, ArchConfig, build_hash, load_config
from tinynpu.isa.gen_c import CORE_HEADER_PATH, generate_core_header
from tinynpu.isa.gen_c import MARKER as C_MARKER
from tinynpu.isa.gen_markdown import ISA_MD_PATH, MARKER, generate_markdown
from tinynpu.isa.gen_verilog import RTL_HEADER_PATH, generate_verilog
from tinynpu.isa.spec import DEFAULT_ISA_PATH, Isa, load_isa

DOC_CONFIGS = ("default", "fp32", "t8", "t32")

FORCE_HELP = "overwrite an output file that tinynpu did not write"
CHECK_HELP = "exit 1 if the file differs from what would be generated"
ISA_HELP = "ISA YAML (default: the built-in isa.yaml)"


def _configs(isa: Isa, names: list[str] | None) -> list[ArchConfig]:
    chosen = names or sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
    return [load_config(name, isa) for name in chosen]


def _summary(isa: Isa, cfgs: list[ArchConfig]) -> dict[str, Any]:
    return {
        "isa": {"name": isa.name, "version": isa.version, "source": str(isa.source), "digest": isa.digest,
                "word_bits": isa.word_bits},
        "units": [{"name": u.name, "id": u.id, "queue": u.queue} for u in isa.units],
        "scopes": [{"name": s.name, "config_key": s.config_key, "id": s.id} for s in isa.scopes],
        "instructions": [
            {"mnemonic": i.mnemonic, "unit": i.unit, "timing": i.timing, "match": f"{i.match:#x}",
             "mask": f"{i.mask:#x}", "fields": [f.name for f in i.fields]}
            for i in isa.instructions
        ],
        "configs": [
            {"name": c.name, "source": str(c.source), "build_hash": build_hash(isa, c).hex(),
             "input_dtype": c.input_dtype, "acc_dtype": c.acc_dtype, "tile": c.tile,
             "scope_bytes": {key: c.scope_bytes(key) for key, _ in c.scope_rows},
             "scope_rows": dict(c.scope_rows), "dram_bytes": c.dram_bytes,
             "dram_bytes_per_cycle": c.dram_bytes_per_cycle, "dram_latency_cycles": c.dram_latency_cycles,
             "macs_per_cycle": c.macs_per_cycle, "tmm_interval_cycles": c.tmm_interval_cycles,
             "tmm_latency_cycles": c.tmm_latency_cycles, "queue_depth": c.queue_depth}
            for c in cfgs
        ],
    }


def _check(args: argparse.Namespace) -> int:
    isa = load_isa(Path(args.isa))
    cfgs = _configs(isa, args.config)
    info = _summary(isa, cfgs)
    gaps = implemented.missing(isa)
    info["missing"] = {m: g for m, g in gaps.items() if g}
    if args.json:
        print(json.dumps(info))
        return 1 if info["missing"] else 0
    if info["missing"]:
        lines = "; ".join(f"{m} has no {', no '.join(g)}" for m, g in info["missing"].items())
        print(f"tinynpu: {isa.source}: every instruction needs Python semantics, C semantics and an RTL unit "
              f"(see CONTRIBUTING.md): {lines}.")
        return 1
    print(f"ISA {isa.name} v{isa.version} ({isa.source}): OK")
    print(f"  {len(isa.instructions)} instructions, {isa.word_bits}-bit words, every bit covered, "
          "no overlapping encodings; each has Python semantics, C semantics and an RTL unit")
    print(f"  units: {', '.join(u.name for u in isa.units)}; scopes: {', '.join(s.name for s in isa.scopes)}")
    for instr in isa.instructions:
        print(f"    {instr.mnemonic:8} unit {instr.unit:8} timing {instr.timing:9} match {instr.match:#04x} "
              f"({len(instr.fields)} fields)")
    for c in cfgs:
        scopes = ", ".join(f"{key} {c.scope_bytes(key) // 1024} KiB" for key, _ in c.scope_rows)
        print(f"  config {c.name} ({c.source}): OK: {c.input_dtype} -> {c.acc_dtype}, {scopes}, "
              f"DRAM {c.dram_bytes >> 20} MiB at {c.dram_bytes_per_cycle} B/cycle, "
              f"{c.macs_per_cycle} MACs/cycle, build hash {build_hash(isa, c).hex()}")
    return 0


def _write_or_check(path: Path, text: str, *, check: bool, force: bool, marker: str, what: str,
                    regenerate: str) -> int:
    if check:
        try:
            current = path.read_text(encoding="utf-8")
        except OSError:
            current = None
        if current != text:
            state = "missing" if current is None else "stale"
            print(f"tinynpu: {path} is {state}: it differs from what {what} generates now; "
                  f"run `{regenerate}`.")
            return 1
        print(f"{path}: up to date")
        return 0
    write_output(path, text, overwrite=force, magic=marker.encode())
    print(f"wrote {path}")
    return 0


def _doc(args: argparse.Namespace) -> int:
    isa = load_isa(Path(args.isa))
    text = generate_markdown(isa, [load_config(name, isa) for name in DOC_CONFIGS])
    if args.output == "-":
        print(text, end="")
        return 0
    return _write_or_check(Path(args.output), text, check=args.check, force=args.force, marker=MARKER,
                           what="the ISA", regenerate="tinynpu isa doc")


def _cheader(args: argparse.Namespace) -> int:
    text = generate_core_header(load_isa(Path(args.isa)))
    if args.output == "-":
        print(text, end="")
        return 0
    return _write_or_check(Path(args.output), text, check=args.check, force=args.force, marker=C_MARKER,
                           what="the ISA", regenerate="tinynpu isa cheader")


def _verilog(args: argparse.Namespace) -> int:
    isa = load_isa(Path(args.isa))
    cfg = load_config(args.config, isa)
    text = generate_verilog(isa, cfg)
    output = args.output
    if output == "-":
        print(text, end="")
        return 0
    first_line = text.splitlines()[0] if text else ""
    return _write_or_check(Path(output), text, check=args.check, force=args.force, marker=first_line[:24],
                           what="the ISA and config", regenerate="tinynpu isa verilog")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``isa check``, ``isa doc``, ``isa cheader`` and ``isa verilog``."""
    isa = subparsers.add_parser("isa", help="check the ISA and configs; generate the docs and RTL header")
    sub = isa.add_subparsers(dest="isa_command", required=True, metavar="WHAT")

    check = sub.add_parser("check", help="load and validate the ISA and configs; print a summary")
    check.add_argument("--isa", default=str(DEFAULT_ISA_PATH), help=ISA_HELP)
    check.add_argument("--config", action="append", metavar="NAME|FILE",
                       help="config to check (repeatable; default: every built-in config)")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(handler=_check)

    _generator(sub, "doc", "generate the Markdown ISA reference", ISA_MD_PATH, "isa/generated/ISA.md", _doc)
    _generator(sub, "cheader", "generate the native simulator core's C header (instruction kinds, access table)",
               CORE_HEADER_PATH, "simulator/generated/tinynpu_core.h", _cheader)
    ver = _generator(sub, "verilog", "generate the Verilog ISA header for rtl/", RTL_HEADER_PATH,
                     "rtl/generated/tinynpu_isa.vh", _verilog)
    ver.add_argument("--config", default="default", metavar="NAME|FILE", help="config (default: default)")


def _generator(sub: argparse._SubParsersAction, name: str, what: str, default: Path, shown: str,
               handler: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """A generator command: --isa, -o (``-`` for stdout), --check, --force."""
    parser = sub.add_parser(name, help=what)
    parser.add_argument("--isa", default=str(DEFAULT_ISA_PATH), help=ISA_HELP)
    parser.add_argument("-o", "--output", default=str(default), help=f"output file, - for stdout (default: {shown})")
    parser.add_argument("--check", action="store_true", help=CHECK_HELP)
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)
    parser.set_defaults(handler=handler)
    return parser


__all__ = ["register"]
