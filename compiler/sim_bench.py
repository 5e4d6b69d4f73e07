"""``tinynpu bench sim``'s compiled programs, and its registration.

The simulator's benchmark (:mod:`tinynpu.simulator.bench`) measures the
seed workload the compiler makes, but the simulator sits below the compiler
and may not import it; so the compiler, which may import both, registers the
command and hands the benchmark the function that compiles the seed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from tinynpu.argtypes import positive_int


def prepare_seed(size: int, schedule: str, tmp: Path) -> tuple[Path, Path, Path]:
    """The int8 size^3 matmul of ``schedule`` on the default config (``gemv``: the 1 x size x size product of
    the ``auto`` schedule, a batch-1 decode step's shape): image, inputs and reference, in ``tmp``."""
    from tinynpu.compiler.matmul import compile_matmul
    from tinynpu.isa import load_config

    m = 1 if schedule == "gemv" else size
    compiled = compile_matmul(m, size, size, dtype="int8", schedule="auto" if schedule == "gemv" else schedule,
                              cfg=load_config("default"))
    inputs = compiled.make_inputs(0)
    binary, inp, ref = tmp / f"{schedule}.bin", tmp / f"{schedule}_in.npz", tmp / f"{schedule}_ref.npz"
    compiled.program.save(binary)
    np.savez(inp, **compiled.to_device(inputs))  # type: ignore[arg-type]  # numpy's stub types **kwds as bool
    reference = compiled.reference(inputs)
    np.savez(ref, **{name: reference[name] for name in compiled.outputs})  # type: ignore[arg-type]
    return binary, inp, ref


def _run(args: argparse.Namespace) -> int:
    from tinynpu.simulator.bench import run_bench

    return run_bench(args, prepare_seed)


def register_sim_bench(bench_subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``bench sim``."""
    p = bench_subparsers.add_parser("sim", help="simulator speed on the seed workload vs numpy's matmul")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--size", type=positive_int, default=1024, help="M = N = K (default 1024)")
    p.set_defaults(handler=_run)


__all__ = ["prepare_seed", "register_sim_bench"]
