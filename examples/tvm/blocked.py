"""A student's faster schedule for C = A @ B.T: output blocks in the accumulator, a resident B panel and a
double-buffered A stream (TVM's software pipeline), tensorized onto tmm16.

``tinynpu run tvm examples/tvm/blocked.py`` runs it at 1024^3;
``blocked_schedule(m, n, k, config, bm=, bn=)`` gives any size.  docs/tvm.md
puts it beside tinynpu's ``auto`` schedule.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tvm import s_tir

from tinynpu.isa import ArchConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lesson import start  # noqa: E402  (the lesson's MatmulModule, beside this file)


def blocked_schedule(m: int, n: int, k: int, config: ArchConfig | str = "default", *, bm: int = 4, bn: int = 8,
                     pipeline: bool = True, fold: bool = True) -> s_tir.Schedule:
    """Blocks of ``bm x bn`` tiles in the accumulator; B's ``bn``-tile panel (all of K) loaded once per block
    column; A streamed one ``bm x 1``-tile chunk per reduction step, the next chunk loading while the current
    one computes (``pipeline``)."""
    sch, intrin = start(m, n, k, config)
    t = intrin.tile
    block = sch.get_sblock("matmul")
    i, j, kk = sch.get_loops(block)
    i0, it, i1 = sch.split(i, [None, bm, t])
    j0, jt, j1 = sch.split(j, [None, bn, t])
    k0, k1 = sch.split(kk, [None, t])
    sch.reorder(j0, i0, k0, it, jt, i1, j1, k1)
    a_reg = sch.cache_read(block, 0, storage_scope="global.A_reg")
    b_reg = sch.cache_read(block, 1, storage_scope="global.B_reg")
    sch.compute_at(a_reg, k0)   # a bm-tile chunk of A per reduction step
    sch.compute_at(b_reg, j0)   # B's panel: bn tiles by all of K, once per block column
    acc = sch.cache_write(block, 0, storage_scope="global.accumulator")
    sch.reverse_compute_at(acc, i0)
    init = sch.decompose_reduction(block, k0)
    sch.tensorize(i1, intrin.name)
    if fold:  # the first tmm of each tile overwrites it: no zero fill of the accumulator
        sch.annotate(init, "tinynpu.fold_init", 1)
    if pipeline:  # k0's body is [copy A chunk, compute]: copy step k+1 while computing step k
        sch.annotate(k0, "software_pipeline_stage", [0, 1])
        sch.annotate(k0, "software_pipeline_order", [0, 1])
        # Two accumulator blocks, used in turn: block i's tmm need not wait for block i-1's store.
        sch.annotate(init, "double_buffer_scope", 0)
    return sch


def schedule(config: ArchConfig) -> s_tir.Schedule:
    """What ``tinynpu run tvm`` calls: 1024^3."""
    return blocked_schedule(1024, 1024, 1024, config, bm=16, bn=2)
