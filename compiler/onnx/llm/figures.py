"""Where a generation's time goes: per step cycles by kind of work, DRAM bytes against the lower bound.

A step's accelerator cycles are split by what its layers read:

- ``weights``: the weight layers (projections, MLP, LM head: each a GEMM
  streaming its int8 weights from DRAM);
- ``attention``: the matmuls between activations (scores against the cached
  keys, probabilities against the cached values: the KV reads);
- ``residual``: the residual adds on the accelerator.

Beside them, ``busy_floor_cycles``: each kind's DRAM bytes over the port's
bytes per cycle (the weight streaming and the KV reads and writes as DMA
time) and the issued MACs over the array's MACs per cycle (compute time);
the measured cycles above both floors are latency the schedule does not hide.

Host work (layer norms, softmax, GELU/ReLU, quantize and dequantize steps,
reshapes: whatever runs on the host path) has no cycles in the simulator; it
is given as the bytes the host moves and its wall seconds.  Whichever path a
node takes, it lands in one of these rows.

The lower bound of a decode step is the bytes it must read: every int8 weight
once and every cached key and value once, divided by the config's DRAM bytes
per cycle.  Energy is the simulator's, of the accelerator's programs
(docs/energy.md); the host path's is not modelled.  Batch-1 decode issues one row of the T x T array per ``tmm``: its
ceiling is ``1/T`` of the array's MACs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinynpu.compiler.onnx.ir import NPU, AddStep, GemmStep, MatmulStep, Network, NonlinearStep, ProductStep
from tinynpu.compiler.onnx.llm.compile import CompiledDecoder
from tinynpu.compiler.onnx.llm.generate import Generation, StepRecord

# SwiGLU's product of two activations (with its SiLU fused in) is the MLP's activation: nonlinear work
KINDS = (("weights", GemmStep), ("attention", MatmulStep), ("residual", AddStep),
         ("nonlinear", (NonlinearStep, ProductStep)))


def _kind(step: Any) -> str:
    return next((name for name, cls in KINDS if isinstance(step, cls)), "other")


def weight_bytes(net: Network) -> int:
    """int8 weight bytes of the network's weight layers (each read at least once per step)."""
    return sum(int(s.weight.size) for s in net.steps if isinstance(s, GemmStep))


def step_figures(cd: CompiledDecoder, record: StepRecord) -> dict[str, Any]:
    """One step's cycles, bytes and bounds."""
    step = cd.steps[record.index]
    cfg = cd.cfg
    cycles = dict.fromkeys([k for k, _ in KINDS], 0)
    dram = dict.fromkeys([k for k, _ in KINDS], 0)
    macs = issued = host_bytes = 0
    host_seconds = energy = 0.0
    for s in step.net.steps:
        run = record.execution.runs[s.name]
        if s.where == NPU:
            cycles[_kind(s)] += run.cycles
            dram[_kind(s)] += run.dram_bytes
            macs += run.macs
            issued += run.issued_macs
            energy += run.energy_pj
        host_bytes += run.host_bytes
        host_seconds += record.execution.host_seconds[s.name]
    total = sum(cycles.values())
    # the two floors under the accelerator's cycles: the DMA port busy with each kind's bytes, the array busy
    # with the MACs it issues (padding included); the measured cycles against them show the latency not hidden
    floors = {f"{kind}_dma": dram[kind] / cfg.dram_bytes_per_cycle for kind in dram} | {
        "mac_array": issued / cfg.macs_per_cycle}
    kv_read = cd.batch * cd.itf.cache_bytes(record.past + record.new)
    bound_bytes = weight_bytes(step.net) + kv_read
    bound_cycles = bound_bytes / cfg.dram_bytes_per_cycle
    return {
        "step": record.index, "new_tokens": record.new, "past_tokens": record.past, "tokens": record.tokens,
        "cycles": total, "seconds": total / (cfg.clock_mhz * 1e6), "cycles_by_kind": cycles,
        "dram_bytes_by_kind": dram, "busy_floor_cycles": floors, "dram_bytes": sum(dram.values()),
        "lower_bound_bytes": bound_bytes, "lower_bound_cycles": bound_cycles,
        "over_lower_bound": total / bound_cycles if bound_cycles else 0.0,
        "kv_cache_bytes_written": record.cache_bytes_written, "kv_cache_bytes_read": record.cache_bytes_read,
        "macs": macs, "utilization": macs / (total * cfg.macs_per_cycle) if total else 0.0,
        "padding_ceiling": macs / issued if issued else 0.0,
        "host_bytes": host_bytes, "host_seconds": host_seconds,
        "programs_compiled": len(step.compiled), "energy_pj": energy,
        "build_seconds": step.build_seconds, "compile_seconds": step.compile_seconds,
    }


def summary(cd: CompiledDecoder, gen: Generation) -> dict[str, Any]:
    """The run's figures: time to first token, per output token, tokens per second, bounds, ceilings.

    A decode step gives each of the batch's sequences one token: the time per output token is a step's
    (each sequence's latency), tokens per second count every sequence's, and the bytes per token are a
    step's divided by the batch.
    """
    steps = [step_figures(cd, r) for r in gen.steps]
    decode = steps[1:]
    clock = cd.cfg.clock_mhz * 1e6
    per_token = float(np.mean([s["cycles"] for s in decode])) if decode else 0.0
    bound = float(np.mean([s["lower_bound_cycles"] for s in decode])) if decode else 0.0
    return {
        "time_to_first_token_s": steps[0]["cycles"] / clock,
        "time_per_output_token_s": per_token / clock,
        "tokens_per_second": cd.batch * clock / per_token if per_token else 0.0,
        "batch": cd.batch,
        "decode_cycles_per_token": per_token,
        "decode_lower_bound_cycles_per_token": bound,
        "decode_over_lower_bound": per_token / bound if bound else 0.0,
        "decode_dram_bytes_per_token": float(np.mean([s["dram_bytes"] for s in decode])) / cd.batch if decode
        else 0.0,
        "decode_lower_bound_bytes_per_token": float(np.mean([s["lower_bound_bytes"] for s in decode])) / cd.batch
        if decode else 0.0,
        "decode_utilization": (sum(s["macs"] for s in decode) / (sum(s["cycles"] for s in decode)
                               * cd.cfg.macs_per_cycle)) if decode and per_token else 0.0,
        "batch1_row_ceiling": 1.0 / cd.cfg.tile,
        "decode_energy_per_token_pj": float(np.mean([s["energy_pj"] for s in decode])) / cd.batch if decode
        else 0.0,
        "prefill_energy_pj": steps[0]["energy_pj"],
        "prefill_utilization": steps[0]["utilization"],
        "steps": steps,
    }


__all__ = ["step_figures", "summary", "weight_bytes"]
