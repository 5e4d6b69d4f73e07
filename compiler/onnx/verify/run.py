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
from tinynpu.compiler.onnx.verify.names import LayerNaming, layer_namings
from tinynpu.compiler.onnx.verify.outputs import compare_outputs
from tinynpu.compiler.onnx.verify.totals import accelerator_totals

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


def _no_mac_figures(run: LayerRun) -> dict[str, Any]:
    """An accelerator program without MACs (a residual add, a nonlinear program): its utilization is the
    vector ALU's busy share of its cycles, and the busiest unit says what bounds it (a padding ceiling,
    useful over issued MACs, is undefined without MACs: None, never 0 %)."""
    busy = {unit: cycles / run.cycles for unit, cycles in run.busy_cycles.items() if run.cycles}
    bound = max(busy, key=lambda unit: busy[unit]) if busy else ""
    return {"alu_busy": busy.get("alu", 0.0), "busiest_unit": bound, "busiest_unit_busy": busy.get(bound, 0.0),
            "busy_cycles": dict(run.busy_cycles)}


def _layer(ex: Execution, step: Any, naming: LayerNaming, peak: int) -> dict[str, Any]:
    run = ex.runs[step.name]
    npu = step.where == NPU
    util = run.macs / (run.cycles * peak) if npu and run.cycles else 0.0
    ceiling = run.macs / run.issued_macs if npu and run.issued_macs else 0.0
    entry = {
        "name": naming.label, "step": step.name, "op": step.op, "where": step.where,
        "input_shapes": [list(s) for s in naming.input_shapes],
        "output_shapes": [list(s) for s in naming.output_shapes], "cycles": run.cycles,
        "utilization": util, "padding_ceiling": ceiling, "dram_bytes": run.dram_bytes,
        "compulsory_bytes": run.compulsory_bytes, "macs": run.macs, "host_bytes": run.host_bytes,
        "programs": run.programs, "host_seconds": ex.host_seconds[step.name],
        "energy_pj": run.energy_pj, "energy_breakdown_pj": dict(run.energy_breakdown_pj),
        "epilogue": "npu" if npu else "",
        "note": run.note or (step.reason if not npu else _npu_note(run)),
    }
    if npu and not run.issued_macs:
        entry |= _no_mac_figures(run)
    return entry


def _report(cn: CompiledNetwork, ex: Execution, times: dict[str, float]) -> dict[str, Any]:
    cfg = cn.cfg
    namings = layer_namings(cn)
    layers = [_layer(ex, step, namings[step.name], cfg.macs_per_cycle) for step in cn.net.steps]
    host_seconds = sum(ex.host_seconds.values())
    sim_seconds = sum(r.sim_seconds for r in ex.runs.values())
    # loading the programs (relocated into the image, decoded by the simulator: once per program and image, on
    # the first run) is neither the host's work nor the accelerator's run: reported apart
    load_seconds = sum(r.load_seconds for r in ex.runs.values())
    totals = accelerator_totals(cfg, ex.runs.values())
    npu_cycles = totals["cycles"]
    return {
        "model": cn.imported.source,
        "config": cfg.name,
        "verified": True,
        **totals,
        "clock_mhz": cfg.clock_mhz,
        "inferences_per_second": cfg.clock_mhz * 1e6 / npu_cycles if npu_cycles else 0.0,
        "host_bytes": sum(r.host_bytes for r in ex.runs.values()),
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
