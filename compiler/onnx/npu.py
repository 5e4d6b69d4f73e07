"""Accelerator layers: each conv/GEMM step becomes a workload of the existing compiler, run on the simulator.

A network layer is compiled by :func:`~tinynpu.compiler.conv2d.compile_conv2d`
or :func:`~tinynpu.compiler.matmul.compile_matmul` (int8 operands, int32
accumulator output): no second tiler.  Programs are cached by shape, so a
shape that recurs (ResNet-50 has 53 convolutions of 20 shapes) is compiled
once and re-run with the next layer's data.  The epilogue (bias,
per-channel requantization, zero point, relu/clip) then runs on the host and
is reported as host work on that layer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynpu.compiler.compiled import Compiled
from tinynpu.compiler.onnx.graph import Step
from tinynpu.compiler.onnx.intops import conv_int32_general, gemm_int32
from tinynpu.isa import ArchConfig


@dataclass
class LayerRun:
    """What one accelerator layer cost (summed over its programs: groups, batch entries)."""

    cycles: int = 0
    macs: int = 0
    issued_macs: int = 0
    dram_bytes: int = 0
    compulsory_bytes: int = 0
    host_bytes: int = 0
    programs: int = 0
    sim_seconds: float = 0.0


@dataclass
class ProgramCache:
    """Compiled programs by workload key, with the time spent compiling."""

    cfg: ArchConfig
    programs: dict[tuple[Any, ...], Compiled] = field(default_factory=dict)
    compile_seconds: float = 0.0

    def get(self, key: tuple[Any, ...], build: Callable[[], Compiled]) -> Compiled:
        hit = self.programs.get(key)
        if hit is None:
            t0 = time.perf_counter()
            hit = build()
            self.compile_seconds += time.perf_counter() - t0
            self.programs[key] = hit
        return hit


def conv_on_npu(step: Step, shape: tuple[int, ...]) -> str:
    """Why a conv step cannot run on the accelerator ('' when it can)."""
    a = step.attrs
    pads, strides, dil = a["pads"], a["strides"], a["dilations"]
    c = shape[1]
    if tuple(dil) != (1, 1):
        return f"dilation {tuple(dil)}: the implicit-im2col conv lowering supports dilation 1 only"
    if strides[0] != strides[1]:
        return f"strides {tuple(strides)}: the conv lowering takes one stride for both axes"
    if len(set(pads)) != 1:
        return f"pads {tuple(pads)}: the conv lowering takes one padding on every side"
    if a["group"] > 1 and c // a["group"] < 8:
        return (f"grouped conv with {c // a['group']} input channels per group: one tmm step would use at "
                f"most {c // a['group']}/16 of the MAC array's reduction")
    return ""


def conv_accumulate(step: Step, x_nchw: np.ndarray, *, cache: ProgramCache | None,
                    run: LayerRun) -> np.ndarray:
    """int32 accumulators (N, P, Q, K) of a conv step; ``cache`` None = the numpy reference."""
    a = step.attrs
    w = a["weight"]  # K x R x S x C/g
    g = a["group"]
    x = np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1))
    run.host_bytes += 2 * x.nbytes
    k_per, c_per = w.shape[0] // g, x.shape[3] // g
    outs = []
    for gi in range(g):
        xg = x[..., gi * c_per:(gi + 1) * c_per]
        wg = w[gi * k_per:(gi + 1) * k_per]
        if cache is None or step.where != "npu":
            outs.append(conv_int32_general(xg, wg, a["pads"], a["strides"], a["dilations"]))
            continue
        outs.append(_conv_sim(xg, wg, a["pads"][0], a["strides"][0], cache, run))
    return outs[0] if g == 1 else np.concatenate(outs, axis=3)


def _conv_sim(x: np.ndarray, w: np.ndarray, pad: int, stride: int, cache: ProgramCache,
              run: LayerRun) -> np.ndarray:
    from tinynpu.compiler.conv2d import compile_conv2d

    n, h, wd, c = x.shape
    k, r, s, _ = w.shape
    key = ("conv2d", n, c, h, wd, k, r, s, stride, pad)
    comp = cache.get(key, lambda: compile_conv2d(n, c, h, wd, k, r, s, stride=stride, pad=pad, dtype="int8",
                                                 cfg=cache.cfg))
    return _simulate(comp, {"X": x, "W": w}, "Y", cache.cfg, run)


def gemm_accumulate(a2d: np.ndarray, w_nk: np.ndarray, *, cache: ProgramCache | None, run: LayerRun) -> np.ndarray:
    """int32 ``a2d @ w_nk.T`` on the simulator (``cache``) or in numpy (None)."""
    if cache is None:
        return gemm_int32(a2d, w_nk)
    from tinynpu.compiler.matmul import compile_matmul

    m, k = a2d.shape
    n = w_nk.shape[0]
    comp = cache.get(("matmul", m, n, k), lambda: compile_matmul(m, n, k, dtype="int8", cfg=cache.cfg))
    return _simulate(comp, {"A": np.ascontiguousarray(a2d), "B": np.ascontiguousarray(w_nk)}, "C", cache.cfg, run)


def _simulate(comp: Compiled, inputs: dict[str, np.ndarray], out: str, cfg: ArchConfig, run: LayerRun) -> np.ndarray:
    from tinynpu.simulator import Machine

    machine = Machine(cfg)
    machine.load(comp.program)
    for name, arr in comp.to_device(inputs).items():
        machine.write_tensor(name, arr)
    t0 = time.perf_counter()
    stats = machine.run(check_races=False).to_json()
    run.sim_seconds += time.perf_counter() - t0
    run.cycles += int(stats["cycles"])
    run.macs += comp.bounds.useful_macs
    run.issued_macs += comp.bounds.issued_macs
    run.dram_bytes += int(stats["dram_read_bytes"]) + int(stats["dram_write_bytes"])
    run.compulsory_bytes += comp.bounds.io_lower_bound_bytes if comp.bounds.bound_kind == "compulsory" else \
        sum(int(np.asarray(v).nbytes) for v in inputs.values()) + \
        int(np.prod(comp.program.tensor(out).shape)) * 4
    run.host_bytes += comp.host_traffic_bytes
    run.programs += 1
    return machine.read_tensor(out)


__all__ = ["LayerRun", "ProgramCache", "conv_accumulate", "conv_on_npu", "gemm_accumulate"]
