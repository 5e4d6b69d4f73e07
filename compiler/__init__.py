"""tinynpu.compiler: tile, schedule and tensorize GEMM-shaped workloads onto the tinynpu ISA.

Public API::

    compile_matmul(m, n, k, *, dtype="int8", schedule="auto", layout="nt", cfg=None,
                   out_dtype=None) -> Compiled
    run_compiled(compiled, *, cfg=None, seed=0, check_races=True) -> dict
"""

from tinynpu.compiler.compiled import Bounds, Compiled
from tinynpu.compiler.matmul import compile_matmul
from tinynpu.compiler.run import run_compiled
from tinynpu.compiler.schedule import Schedule, Tiling

__all__ = ["Bounds", "Compiled", "Schedule", "Tiling", "compile_matmul", "run_compiled"]
