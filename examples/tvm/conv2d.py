"""Conv2d as a TensorIR schedule on tinynpu: implicit im2col through split/reorder/cache_read/tensorize.

The output is NHWC, the input NHWC, the weights a K x (R*S*C) matrix (the
filters KRSC, flattened).  Output pixels along a row (q) are the GEMM's rows,
output channels (k) its columns, and each filter tap (r, s) with a
16-channel slice (c0) one reduction tile: the A tile of a tap is 16
consecutive input pixels by 16 channels, one strided ``load`` from the NHWC
input (the im2col matrix is never built), the B tile 16 filters by the same
16 channels.  ``tinynpu run tvm examples/tvm/conv2d.py`` runs the default
shape below; ``conv2d_schedule(...)`` takes others (Q, K and C multiples of
the tile edge; stride 1, no padding).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import tvm
from tvm import s_tir
from tvm.script import tirx as T

from tinynpu.compiler import tvm as npu
from tinynpu.isa import ArchConfig, load_config

SHAPE = {"n": 1, "h": 18, "w": 34, "c": 64, "k": 64, "r": 3, "s": 3}  # P x Q = 16 x 32 output pixels


def conv2d_module(n: int, h: int, w: int, c: int, k: int, r: int, s: int, cfg: ArchConfig) -> tvm.IRModule:
    """O[n, p, q, k] = sum over (r, s, c) of X[n, p + r, q + s, c] * Wt[k, (r * S + s) * C + c]."""
    p, q = h - r + 1, w - s + 1
    in_dt, acc_dt = cfg.input_dtype, cfg.acc_dtype

    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((n, h, w, c), in_dt), Wt: T.Buffer((k, r * s * c), in_dt),
             O: T.Buffer((n, p, q, k), acc_dt)) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for b, y, x, f, dy, dx, ch in T.grid(n, p, q, k, r, s, c):
            with T.sblock("conv"):
                vb, vy, vx, vf, vdy, vdx, vc = T.axis.remap("SSSSRRR", [b, y, x, f, dy, dx, ch])
                with T.init():
                    O[vb, vy, vx, vf] = T.cast(0, acc_dt)
                O[vb, vy, vx, vf] = O[vb, vy, vx, vf] + T.cast(X[vb, vy + vdy, vx + vdx, vc], acc_dt) * T.cast(
                    Wt[vf, (vdy * s + vdx) * c + vc], acc_dt)

    return tvm.IRModule({"main": main})


def conv2d_schedule(n: int, h: int, w: int, c: int, k: int, r: int, s: int,
                    config: ArchConfig | str = "default") -> s_tir.Schedule:
    """One 16-pixel x 16-filter output tile in the accumulator; per tap and channel slice, one A and one B tile."""
    cfg = load_config(config) if isinstance(config, str) else config
    intrin = npu.register_intrinsics(cfg)
    t = intrin.tile
    sch = s_tir.Schedule(conv2d_module(n, h, w, c, k, r, s, cfg))
    block = sch.get_sblock("conv")
    b, y, x, f, dy, dx, ch = sch.get_loops(block)
    x0, x1 = sch.split(x, [None, t])
    f0, f1 = sch.split(f, [None, t])
    c0, c1 = sch.split(ch, [None, t])
    sch.reorder(b, y, x0, f0, dy, dx, c0, x1, f1, c1)
    a_reg = sch.cache_read(block, 0, storage_scope="global.A_reg")  # 16 pixels x 16 channels of the input
    b_reg = sch.cache_read(block, 1, storage_scope="global.B_reg")  # 16 filters x the same 16 channels
    sch.compute_at(a_reg, c0)
    sch.compute_at(b_reg, c0)
    acc = sch.cache_write(block, 0, storage_scope="global.accumulator")
    sch.reverse_compute_at(acc, f0)
    sch.decompose_reduction(block, dy)
    sch.tensorize(x1, intrin.name)
    return sch


def conv2d_reference(inputs: Mapping[str, np.ndarray], r: int, s: int) -> dict[str, np.ndarray]:
    """The convolution in numpy (int64 sums, wrapped to int32 as the accumulator)."""
    x = np.asarray(inputs["X"]).astype(np.int64)
    wt = np.asarray(inputs["Wt"]).astype(np.int64)
    n, h, w, c = x.shape
    p, q = h - r + 1, w - s + 1
    filters = wt.reshape(wt.shape[0], r, s, c)
    out = np.zeros((n, p, q, wt.shape[0]), dtype=np.int64)
    for dy in range(r):
        for dx in range(s):
            out += np.einsum("npqc,kc->npqk", x[:, dy:dy + p, dx:dx + q, :], filters[:, dy, dx, :])
    return {"O": out.astype(np.int32)}


def schedule(config: ArchConfig) -> s_tir.Schedule:
    """What ``tinynpu run tvm`` calls: the conv of SHAPE."""
    return conv2d_schedule(**SHAPE, config=config)


def reference(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What ``tinynpu run tvm`` verifies against."""
    return conv2d_reference(inputs, SHAPE["r"], SHAPE["s"])
