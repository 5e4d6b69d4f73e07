"""The ``tinynpu`` command: one argparse tree, each part registering its own subcommands.

Each part's ``cli`` module exposes ``register(subparsers)`` and, if it has a
benchmark, ``register_bench(bench_subparsers)``.  Every handler returns an
exit code; a :class:`~tinynpu.errors.TinyNpuError` becomes one paragraph on
stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from tinynpu.errors import TinyNpuError

# Order here is the order of `tinynpu --help`.
PART_CLIS = (
    "tinynpu.isa.cli",
    "tinynpu.assembler.cli",
    "tinynpu.simulator.cli",
    "tinynpu.compiler.cli",
    "tinynpu.rtl.cli",
    "tinynpu.report.cli",
    "tinynpu.explore.cli",
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one paragraph with exit code 2, and takes no abbreviations.

    ``allow_abbrev`` is off: ``--schedul`` is not ``--schedule``, so a typo is an error rather than a guess,
    and adding an option never changes what an old command line meant.  Subparsers inherit the class.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}. Run '{self.prog} --help' for the options.\n")


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost (sub)parser the command line chose (``tinynpu run matmul``'s), following each subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(args, action.dest, None)
            if name in action.choices:
                return _chosen(action.choices[name], args)
    return parser


def _unknown_options(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> str:
    """One paragraph naming what the command did not take and, for an option, the closest option it has."""
    chosen = _chosen(parser, args)
    known = [o for action in chosen._actions for o in action.option_strings if o.startswith("--")]
    hints = []
    for extra in extras:
        if extra.startswith("--"):
            close = difflib.get_close_matches(extra.partition("=")[0], known, n=1, cutoff=0.75)
            if close:
                hints.append(f"{extra}: did you mean {close[0]}?")
    said = f"{chosen.prog}: error: unrecognized arguments: {' '.join(extras)}"
    said += f"; {'; '.join(hints)}" if hints else "."
    return f"{said} Run '{chosen.prog} --help' for the options.\n"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tinynpu",
        description="tinynpu: a YAML-defined ML-accelerator ISA, its assembler, simulator, RTL co-simulation "
        "and tiling compiler. Every command that prints figures takes --json.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    bench = sub.add_parser("bench", help="measured benchmarks (ratios against baselines run in the same process)")
    bench_sub = bench.add_subparsers(dest="bench", required=True, metavar="WHAT", parser_class=_Parser)
    for name in PART_CLIS:
        module = importlib.import_module(name)
        module.register(sub)
        if hasattr(module, "register_bench"):
            module.register_bench(bench_sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        parser.exit(2, _unknown_options(parser, args, extras))
    try:
        return int(args.handler(args) or 0)
    except TinyNpuError as exc:
        print(f"tinynpu: error: {exc.message}", file=sys.stderr)  # one paragraph, unwrapped: greppable
        return exc.exit_code
    except BrokenPipeError:  # e.g. `tinynpu sim ... --json | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("tinynpu: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
