"""``run_network``: a compiled network on the simulator, verified three ways (:mod:`.checks`), reported per layer.

The per-layer figures (cycles, utilization against the padding ceiling, DRAM
and compulsory traffic, host bytes) are the report's and the benchmark's rows.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.ir import HOST, NPU
from tinynpu.compiler.onnx.runtime.execute import Execution, execute
from tinynpu.compiler.onnx.runtime.layers import LayerRun
from tinynpu.compiler.onnx.verify.checks import check_inputs, ort_compare, verify_exact
from tinynpu.compiler.onnx.verify.outputs import compare_outputs
from tinynpu.simulator.energy import EDP_UNITS

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.network import CompiledNetwork


def run_network(cn: CompiledNetwork, *, feeds: dict[str, np.ndarray] | None = None, seed: int = 0,
                extra_seeds: int = 0) -> dict[str, Any]:
    """Run on the simulator, verify (a), (b), (c), and report per layer and in total.

    Args:
        cn: The compiled network.
        feeds: Float inputs by name (default: seeded random inputs from ``seed``).
        seed: Seed of the random inputs.
        extra_seeds: Further seeded inputs on which the integer reference (bit-exact with the
            simulator on the first input) is compared against onnxruntime too (checks b, c).
    """
    feeds = check_inputs(cn, feeds or {}) if feeds else cn.make_inputs(seed)
    t0 = time.perf_counter()
    got = execute(cn.net, feeds, cache=cn.cache, image=cn.image)
    run_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    want = execute(cn.net, feeds, cache=None)
    verify_exact(cn.net, got, want)
    lq = cn.logits[0]
    feeds_list, ours, values = [feeds], [got.values[lq]], [got.values]
    for i in range(extra_seeds):
        f = cn.make_inputs(seed + 1 + i)
        feeds_list.append(f)
        values.append(execute(cn.net, f, cache=None).values)
        ours.append(values[-1][lq])
    ref_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    q_cmp, f_cmp, ort_times = ort_compare(cn, feeds_list, ours)
    exact = {name: bool(np.array_equal(got.values[name], want.values[name])) for name in cn.net.outputs}
    outputs = compare_outputs(cn, feeds_list, values, exact)  # every graph output: see verify/outputs.py
    ort_seconds = time.perf_counter() - t0
    return _report(cn, got, {
        "run": run_seconds, "reference": ref_seconds, "onnxruntime_compare": ort_seconds, **ort_times,
    }) | {"ort_quantized": q_cmp, "ort_float": f_cmp, "inputs_compared": len(feeds_list), "outputs": outputs}


def _npu_note(run: LayerRun) -> str:
    note = "epilogue on the accelerator (bias, vrequantf, zero point, clamp; int8 store)"
    if run.groups_per_program > 1:
        note += (f"; {run.groups_per_program} groups per program, their kernels block-diagonal (each output "
                 f"channel uses 1/{run.groups_per_program} of the reduction lanes)")
    return note


def _report(cn: CompiledNetwork, ex: Execution, times: dict[str, float]) -> dict[str, Any]:
    cfg = cn.cfg
    peak = cfg.macs_per_cycle
    layers = []
    npu_cycles = 0
    macs = issued = 0
    host_bytes = 0
    for step in cn.net.steps:
        run = ex.runs[step.name]
        npu = step.where == NPU
        util = run.macs / (run.cycles * peak) if npu and run.cycles else 0.0
        ceiling = run.macs / run.issued_macs if npu and run.issued_macs else 0.0
        layers.append({
            "name": step.name, "op": step.op, "where": step.where, "cycles": run.cycles,
            "utilization": util, "padding_ceiling": ceiling, "dram_bytes": run.dram_bytes,
            "compulsory_bytes": run.compulsory_bytes, "macs": run.macs, "host_bytes": run.host_bytes,
            "programs": run.programs, "host_seconds": ex.host_seconds[step.name],
            "energy_pj": run.energy_pj, "energy_breakdown_pj": dict(run.energy_breakdown_pj),
            "epilogue": "npu" if npu else "",
            "note": run.note or (step.reason if not npu else _npu_note(run)),
        })
        npu_cycles += run.cycles
        macs += run.macs
        issued += run.issued_macs
        host_bytes += run.host_bytes
    dram = sum(run.dram_bytes for run in ex.runs.values())
    # utilization / ceiling of a layer = issued MACs / (cycles * peak): weighted by the layer's useful MACs
    weighted = sum(run.macs * run.issued_macs / (run.cycles * peak) for run in ex.runs.values() if run.cycles)
    host_seconds = sum(ex.host_seconds.values())
    sim_seconds = sum(r.sim_seconds for r in ex.runs.values())
    # loading the programs (relocated into the image, decoded by the simulator: once per program and image, on
    # the first run) is neither the host's work nor the accelerator's run: reported apart
    load_seconds = sum(r.load_seconds for r in ex.runs.values())
    clock_hz = cfg.clock_mhz * 1e6
    breakdown: dict[str, float] = {}
    for run in ex.runs.values():
        for component, pj in run.energy_breakdown_pj.items():
            breakdown[component] = breakdown.get(component, 0.0) + pj
    energy = sum(breakdown.values())
    return {
        "model": cn.imported.source,
        "config": cfg.name,
        "verified": True,
        "cycles": npu_cycles,
        "clock_mhz": clock_hz / 1e6,
        "inferences_per_second": clock_hz / npu_cycles if npu_cycles else 0.0,
        "dram_bytes": dram,
        # The accelerator's layers run one after another: total energy x total delay.
        "energy_pj": energy, "energy_breakdown_pj": breakdown, "edp": energy * npu_cycles / clock_hz,
        "edp_units": EDP_UNITS,
        "host_bytes": host_bytes,
        "macs": macs,
        "issued_macs": issued,
        "utilization": macs / (npu_cycles * peak) if npu_cycles else 0.0,
        "padding_ceiling": macs / issued if issued else 0.0,
        "utilization_over_ceiling_mac_weighted": weighted / macs if macs else 0.0,
        "host_share_of_wall_time": (host_seconds / (host_seconds + sim_seconds + load_seconds)
                                    if host_seconds + sim_seconds + load_seconds else 0),
        "npu_layers": sum(1 for s in cn.net.steps if s.where == NPU),
        "host_steps": sum(1 for s in cn.net.steps if s.where == HOST),
        "programs_compiled": len(cn.cache.programs),
        "memory": cn.memory.to_json() | cn.image.to_json(),
        "random_weights": cn.imported.random_weights,
        "quantized_by_tinynpu": cn.quantized_here,
        "import_notes": list(cn.imported.notes),
        "logits": {"tensor": cn.logits[0], "float_tensor": cn.logits[1]},
        "seconds": {**cn.timings, "simulate": sim_seconds, "program_load": load_seconds, "host_steps": host_seconds,
                    **times},
        "layers": layers,
    }


__all__ = ["run_network"]
