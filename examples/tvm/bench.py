"""Measure the TVM front end against its baselines, in one run: the lesson's schedule against
examples/seed.py (instructions tokens aside, cycles, lowering time) and the student's blocked schedule
(examples/tvm/blocked.py) against tinynpu's own ``auto`` schedule (cycles, ratio).

Usage: ``python examples/tvm/bench.py 64 128 256 1024`` (sizes M = N = K; 1024 takes a few minutes).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from blocked import blocked_schedule  # noqa: E402
from lesson import lesson_schedule  # noqa: E402
from seed import seed_source  # noqa: E402

from tinynpu.assembler import Program, assemble  # noqa: E402
from tinynpu.compiler import tvm as npu  # noqa: E402
from tinynpu.compiler.matmul import compile_matmul  # noqa: E402
from tinynpu.compiler.run import run_compiled  # noqa: E402
from tinynpu.isa import ArchConfig, load_config, load_isa  # noqa: E402
from tinynpu.simulator import Machine  # noqa: E402

# The blocked schedule's blocks (bm x bn tiles) per size: a B panel of bn tiles by all of K fits b_reg.
BLOCKS = {256: (2, 8), 1024: (16, 2)}


def _cycles(program: Program, cfg: ArchConfig) -> int:
    machine = Machine(cfg, load_isa())
    machine.load(program)
    return int(machine.run(check_races=False).to_json()["cycles"])


def _stripped(program: Program) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    isa = load_isa()
    out = []
    for word in program.words:
        instr, fields = isa.decode(word)
        out.append((instr.mnemonic, tuple(sorted((k, v) for k, v in fields.items()
                                                 if instr.field_map[k].kind != "units"))))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("sizes", type=int, nargs="+", metavar="SIZE")
    args = parser.parse_args(argv)
    cfg = load_config("default")
    print("size  lesson = seed (tokens aside)  lesson cycles  seed cycles  lowering s  |  blocked cycles  "
          "auto cycles  blocked / auto")
    for size in args.sizes:
        sch = lesson_schedule(size, size, size, cfg)
        t0 = time.perf_counter()
        low = npu.lower(sch, cfg)
        seconds = time.perf_counter() - t0
        seed = assemble(seed_source(size, size, size, cfg.name), isa=load_isa(), cfg=cfg)
        same = _stripped(low.program) == _stripped(seed)
        row = (f"{size:>4}  {str(same):>27}  {_cycles(low.program, cfg):>13,}  {_cycles(seed, cfg):>11,}  "
               f"{seconds:>10.2f}")
        if size in BLOCKS:
            bm, bn = BLOCKS[size]
            blocked = run_compiled(npu.compile_tvm(blocked_schedule(size, size, size, cfg, bm=bm, bn=bn), config=cfg),
                                   cfg=cfg, check_races=False)
            auto = run_compiled(compile_matmul(size, size, size, cfg=cfg), cfg=cfg, check_races=False)
            assert blocked["verified"] and auto["verified"]
            row += (f"  |  {blocked['cycles']:>14,}  {auto['cycles']:>11,}  "
                    f"{blocked['cycles'] / auto['cycles']:>14.3f}")
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
