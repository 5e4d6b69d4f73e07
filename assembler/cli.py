"""``tinynpu asm`` and ``tinynpu disasm``."""

from __future__ import annotations

import argparse
from pathlib import Path

from tinynpu import fsio
from tinynpu.assembler.assemble import assemble
from tinynpu.assembler.disasm import disassemble
from tinynpu.assembler.image import MAGIC, Program
from tinynpu.isa import load_config, load_isa
from tinynpu.isa.spec import DEFAULT_ISA_PATH

# First bytes of every disassembly: an existing file starting with them is ours to replace.
DISASM_MAGIC = b"; tinynpu program"

FORCE_HELP = "overwrite an output file that tinynpu did not write"
ISA_HELP = "ISA YAML (default: the built-in isa.yaml)"


def read_source(src: Path) -> str:
    """The text of an assembly file; an unreadable one is a :class:`UsageError` naming it."""
    return fsio.read_text(src, what="the assembly source")


def _asm(args: argparse.Namespace) -> int:
    src = Path(args.source)
    out = Path(args.output) if args.output else src.with_suffix(".bin")
    target = fsio.check_output(out, force=args.force, ours=fsio.starts_with(MAGIC), inputs=[src], what="-o")
    text = read_source(src)
    isa = load_isa(Path(args.isa))
    cfg = load_config(args.config, isa)
    program = assemble(text, filename=str(src), isa=isa, cfg=cfg)
    fsio.write_atomic(target, program.to_bytes())
    print(f"{src} -> {out}: {len(program.words)} instructions, {len(program.tensors)} tensors, "
          f"config {cfg.name}, build hash {program.build_hash.hex()}")
    return 0


def _disasm(args: argparse.Namespace) -> int:
    to_file = args.output not in (None, "-")
    if to_file:
        target = fsio.check_output(Path(args.output), force=args.force, ours=fsio.starts_with(DISASM_MAGIC),
                                   inputs=[Path(args.binary)], what="-o")
    isa = load_isa(Path(args.isa))
    program = Program.load(Path(args.binary))
    cfg = load_config(args.config or program.config_name, isa)
    program.check_built_for(isa, cfg, where=str(args.binary))
    text = disassemble(program, isa, cfg=cfg)
    if not to_file:
        print(text, end="")
        return 0
    fsio.write_atomic(target, text)
    print(f"{args.binary} -> {args.output}: {len(program.words)} instructions")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``asm`` and ``disasm``."""
    asm = subparsers.add_parser("asm", help="assemble a .s file into a program image")
    asm.add_argument("source", metavar="FILE.s", help="assembly source")
    asm.add_argument("-o", "--output",
                     metavar="FILE.bin", help="output image (default: FILE.bin beside FILE.s)")
    asm.add_argument("--config", default="default", metavar="NAME|FILE", help="architecture config (default)")
    asm.add_argument("--isa", default=str(DEFAULT_ISA_PATH), help=ISA_HELP)
    asm.add_argument("--force", action="store_true", help=FORCE_HELP)
    asm.set_defaults(handler=_asm)

    dis = subparsers.add_parser("disasm", help="binary image -> source that reassembles to it")
    dis.add_argument("binary", metavar="FILE.bin", help="program image")
    dis.add_argument("-o", "--output", metavar="FILE.s", help="output source (default: stdout)")
    dis.add_argument("--config", default=None, metavar="NAME|FILE",
                     help="config the image must be built for (default: the one named in the image)")
    dis.add_argument("--isa", default=str(DEFAULT_ISA_PATH), help=ISA_HELP)
    dis.add_argument("--force", action="store_true", help=FORCE_HELP)
    dis.set_defaults(handler=_disasm)


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {value}")
    return value


def register_bench(bench_subparsers: argparse._SubParsersAction) -> None:
    """Add ``bench asm``."""
    from tinynpu.assembler.bench import run_bench

    p = bench_subparsers.add_parser("asm", help="assembler speed: the fast path vs the full parser on FILE.s")
    p.add_argument("source", metavar="FILE.s", help="assembly source (e.g. from examples/seed.py)")
    p.add_argument("--config", default="default", metavar="NAME|FILE", help="architecture config (default)")
    p.add_argument("--repeat", type=_positive, default=3,
                   help="timed samples of each, each at least 0.05 s of repeated calls; the best counts (default 3)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run_bench)


__all__ = ["register", "register_bench"]
