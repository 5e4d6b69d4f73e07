"""Accelerator layers: each conv/GEMM step becomes a workload of the existing compiler, run on the simulator.

A network layer is compiled by :func:`~tinynpu.compiler.conv2d.compile_conv2d`
or :func:`~tinynpu.compiler.matmul.compile_matmul` (int8 operands, int32
int8 output): no second tiler.  The layer's epilogue (bias, per-channel
``vrequant``, zero point, relu/clip) runs in the program
(:class:`~tinynpu.compiler.epilogue.Epilogue`), its parameter rows written
to DRAM as data, so programs are cached by shape and epilogue form: a shape
that recurs (ResNet-50 has 53 convolutions of 20 shapes) is compiled once and
re-run with the next layer's data and parameters.  Only a layer with a scale
of 1 or more (a negative shift, which ``vrequant`` cannot take) stores int32
and runs its epilogue on the host, counted as host work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynpu.compiler.compiled import Compiled
from tinynpu.compiler.epilogue import Epilogue as NpuEpilogue
from tinynpu.compiler.onnx.graph import Step
from tinynpu.compiler.onnx.intops import Epilogue, conv_int32_general, gemm_int32
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
    host_epilogues: int = 0  # programs whose epilogue ran on the host (a scale vrequant cannot take)
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


def conv_program(cache: ProgramCache, n: int, c: int, h: int, w: int, k: int, r: int, s: int, *, stride: int,
                 pad: int, epilogue: NpuEpilogue | None) -> tuple[tuple[Any, ...], Compiled]:
    """The program of one conv shape, by shape and epilogue form (its parameter rows are data)."""
    from tinynpu.compiler.conv2d import compile_conv2d

    key = ("conv2d", n, c, h, w, k, r, s, stride, pad, _epilogue_form(epilogue))
    return key, cache.get(key, lambda: compile_conv2d(n, c, h, w, k, r, s, stride=stride, pad=pad, dtype="int8",
                                                      cfg=cache.cfg, epilogue=epilogue))


def gemm_program(cache: ProgramCache, m: int, n: int, k: int, *,
                 epilogue: NpuEpilogue | None) -> tuple[tuple[Any, ...], Compiled]:
    """The program of one GEMM shape, by shape and epilogue form (its parameter rows are data)."""
    from tinynpu.compiler.matmul import compile_matmul

    key = ("matmul", m, n, k, _epilogue_form(epilogue))
    return key, cache.get(key, lambda: compile_matmul(m, n, k, dtype="int8", cfg=cache.cfg, epilogue=epilogue))


def _epilogue_form(epi: NpuEpilogue | None) -> str:
    """What of an epilogue the instructions depend on (the rows it loads, the ALU ops it runs), as a name."""
    if epi is None:
        return "int32"
    return "_".join(["int8", *(["bias"] if epi.bias is not None else []), *(["zp"] if epi.zero_point else []),
                     f"clamp{epi.lo}to{epi.hi}"])


def conv_layer(step: Step, x_nchw: np.ndarray, *, cache: ProgramCache | None, run: LayerRun) -> np.ndarray:
    """int8 outputs (N, P, Q, K) of a conv step; ``cache`` None = the numpy reference.

    On the accelerator the layer's epilogue runs in its program when every shift fits
    ``vrequant`` (else on the host, after the int32 program).
    """
    a = step.attrs
    w = a["weight"]  # K x R x S x C/g
    g = a["group"]
    epi: Epilogue = a["epilogue"]
    x = np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1))
    run.host_bytes += 2 * x.nbytes
    k_per, c_per = w.shape[0] // g, x.shape[3] // g
    groups = [(x[..., gi * c_per:(gi + 1) * c_per], slice(gi * k_per, (gi + 1) * k_per)) for gi in range(g)]
    if cache is None or step.where != "npu":
        accs = [conv_int32_general(xg, w[ks], a["pads"], a["strides"], a["dilations"]) for xg, ks in groups]
        return epi.apply(accs[0] if g == 1 else np.concatenate(accs, axis=3))
    outs = []
    for xg, ks in groups:
        wg = w[ks]
        part = epi.channels(w.shape[0], ks)
        npu_epi = part.on_accelerator()
        n, h, wd, c = xg.shape
        k, r, s, _ = wg.shape
        _, comp = conv_program(cache, n, c, h, wd, k, r, s, stride=a["strides"][0], pad=a["pads"][0],
                               epilogue=npu_epi)
        y = _simulate(comp, {"X": xg, "W": wg}, "Y", npu_epi, cache.cfg, run)
        outs.append(y if npu_epi is not None else _host_epilogue(part, y, run))
    return outs[0] if g == 1 else np.concatenate(outs, axis=3)


def gemm_layer(a2d: np.ndarray, w_nk: np.ndarray, epi: Epilogue, *, cache: ProgramCache | None,
               run: LayerRun) -> np.ndarray:
    """int8 ``epilogue(a2d @ w_nk.T)`` on the simulator (``cache``) or in numpy (None)."""
    if cache is None:
        return epi.apply(gemm_int32(a2d, w_nk))
    m, k = a2d.shape
    n = w_nk.shape[0]
    epi = epi.channels(n)
    npu_epi = epi.on_accelerator()
    _, comp = gemm_program(cache, m, n, k, epilogue=npu_epi)
    y = _simulate(comp, {"A": np.ascontiguousarray(a2d), "B": np.ascontiguousarray(w_nk)}, "C", npu_epi,
                  cache.cfg, run)
    return y if npu_epi is not None else _host_epilogue(epi, y, run)


def _host_epilogue(epi: Epilogue, acc: np.ndarray, run: LayerRun) -> np.ndarray:
    """The epilogue on the host (a scale the instruction cannot take), counted as host work."""
    y = epi.apply(acc)
    run.host_bytes += acc.nbytes + y.nbytes
    run.host_epilogues += 1
    return y


def _simulate(comp: Compiled, inputs: dict[str, np.ndarray], out: str, epi: NpuEpilogue | None, cfg: ArchConfig,
              run: LayerRun) -> np.ndarray:
    from tinynpu.simulator import Machine

    machine = Machine(cfg)
    machine.load(comp.program)
    device = comp.to_device(inputs)
    if epi is not None:  # this layer's parameter rows (the program was compiled for the shape)
        device["P"] = epi.param_table(cfg.tile)
    for name, arr in device.items():
        machine.write_tensor(name, arr)
    t0 = time.perf_counter()
    stats = machine.run(check_races=False).to_json()
    run.sim_seconds += time.perf_counter() - t0
    run.cycles += int(stats["cycles"])
    run.macs += comp.bounds.useful_macs
    run.issued_macs += comp.bounds.issued_macs
    run.dram_bytes += int(stats["dram_read_bytes"]) + int(stats["dram_write_bytes"])
    y = machine.read_tensor(out)
    run.compulsory_bytes += comp.bounds.io_lower_bound_bytes if comp.bounds.bound_kind == "compulsory" else \
        sum(int(np.asarray(v).nbytes) for v in inputs.values()) + y.nbytes + \
        (epi.param_rows * epi.channels * cfg.elem_bytes("acc") if epi is not None else 0)
    run.host_bytes += comp.host_traffic_bytes
    run.programs += 1
    return y


__all__ = ["LayerRun", "ProgramCache", "conv_layer", "conv_on_npu", "conv_program", "gemm_layer", "gemm_program"]
