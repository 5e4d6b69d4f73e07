"""The course's lesson on specialised hardware, ported to TVM 0.27: C = A @ B.T, tensorized onto tmm16.

``tinynpu run tvm examples/tvm/lesson.py`` compiles, simulates and verifies it
at 1024^3; ``lesson_schedule(m, n, k, config)`` gives any size (multiples of
the tile edge).  docs/tvm.md walks through it cell by cell.
"""

from __future__ import annotations

import tvm
from tvm import s_tir
from tvm.script import tirx as T

from tinynpu.compiler import tvm as npu
from tinynpu.isa import ArchConfig, load_config


def matmul_module(m: int, n: int, k: int, cfg: ArchConfig) -> tvm.IRModule:
    """The lesson's MatmulModule, C[i, j] = sum_k A[i, k] * B[j, k], in the config's element types."""
    in_dt, acc_dt = cfg.input_dtype, cfg.acc_dtype

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((m, k), in_dt), B: T.Buffer((n, k), in_dt), C: T.Buffer((m, n), acc_dt)) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, kk in T.grid(m, n, k):
            with T.sblock("matmul"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, kk])
                with T.init():
                    C[vi, vj] = T.cast(0, acc_dt)
                C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], acc_dt) * T.cast(B[vj, vk], acc_dt)

    return tvm.IRModule({"main": main})


def start(m: int, n: int, k: int, config: ArchConfig | str) -> tuple[s_tir.Schedule, npu.Intrinsic]:
    """A schedule of the unscheduled MatmulModule, with the config's intrinsic registered."""
    cfg = load_config(config) if isinstance(config, str) else config
    return s_tir.Schedule(matmul_module(m, n, k, cfg)), npu.register_intrinsics(cfg)


def lesson_schedule(m: int, n: int, k: int, config: ArchConfig | str = "default", order: str = "mn"
                    ) -> s_tir.Schedule:
    """The lesson's schedule: split by the tile, reorder, cache into the special scopes, tensorize.

    ``order="nm"`` walks the output tiles column by column (j0 outside i0) instead.
    """
    sch, intrin = start(m, n, k, config)
    t = intrin.tile
    block = sch.get_sblock("matmul")
    i, j, kk = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, t])
    j0, j1 = sch.split(j, [None, t])
    k0, k1 = sch.split(kk, [None, t])
    outer, inner = (i0, j0) if order == "mn" else (j0, i0)
    sch.reorder(outer, inner, k0, i1, j1, k1)
    a_reg = sch.cache_read(block, 0, storage_scope="global.A_reg")
    b_reg = sch.cache_read(block, 1, storage_scope="global.B_reg")
    sch.compute_at(a_reg, k0)
    sch.compute_at(b_reg, k0)
    acc = sch.cache_write(block, 0, storage_scope="global.accumulator")
    sch.reverse_compute_at(acc, inner)
    sch.decompose_reduction(block, k0)
    sch.tensorize(i1, intrin.name)
    return sch


def schedule(config: ArchConfig) -> s_tir.Schedule:
    """What ``tinynpu run tvm`` calls: the lesson's 1024^3."""
    return lesson_schedule(1024, 1024, 1024, config)
