"""A network's accelerator totals, one definition for ``tinynpu run onnx`` and for a sweep's ONNX workload.

Both count the same work: every accelerator program the network runs (its
convolutions and GEMMs with their int8 epilogues, the residual adds, the
nonlinear programs), each as often as it runs, on the same seeded input
(cycles and traffic do not depend on the values, but a shared input removes
the question).  Both leave out the same thing and say so:
:data:`LEFT_OUT` (the host steps' time).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinynpu.compiler.onnx.runtime.layers import LayerRun
from tinynpu.simulator.energy import EDP_UNITS

if TYPE_CHECKING:
    from tinynpu.isa import ArchConfig

#: What neither the network report's totals nor a sweep's count, in the one line both print.
LEFT_OUT = ("host steps (pooling, layout moves, quantize/dequantize at the edges, float operators) are not "
            "counted: accelerator cycles and energy only")


def accelerator_totals(cfg: ArchConfig, runs: Iterable[LayerRun]) -> dict[str, Any]:
    """Cycles, DRAM bytes, energy (and its breakdown), EDP, MACs and utilization over ``runs``.

    The accelerator's layers run one after another, so cycles add up, and EDP is the total energy
    times the total delay.
    """
    runs = list(runs)
    peak = cfg.macs_per_cycle
    cycles = sum(r.cycles for r in runs)
    macs = sum(r.macs for r in runs)
    issued = sum(r.issued_macs for r in runs)
    breakdown: dict[str, float] = {}
    for run in runs:
        for component, pj in run.energy_breakdown_pj.items():
            breakdown[component] = breakdown.get(component, 0.0) + pj
    energy = sum(breakdown.values())
    clock_hz = cfg.clock_mhz * 1e6
    # utilization / ceiling of a layer = issued MACs / (cycles * peak): weighted by the layer's useful MACs
    weighted = sum(r.macs * r.issued_macs / (r.cycles * peak) for r in runs if r.cycles)
    return {
        "cycles": cycles,
        "dram_bytes": sum(r.dram_bytes for r in runs),
        "energy_pj": energy, "energy_breakdown_pj": breakdown, "edp": energy * cycles / clock_hz,
        "edp_units": EDP_UNITS,
        "macs": macs,
        "issued_macs": issued,
        "utilization": macs / (cycles * peak) if cycles else 0.0,
        "padding_ceiling": macs / issued if issued else 0.0,
        "utilization_over_ceiling_mac_weighted": weighted / macs if macs else 0.0,
        "programs_run": sum(r.programs for r in runs),
        "left_out": LEFT_OUT,
    }


def simulate_network(model: Path, cfg: ArchConfig) -> dict[str, Any]:
    """Compile ``model`` for ``cfg`` as ``tinynpu run onnx`` does by default and run it once on the
    simulator (seeded input 0, batch 1 where the batch is dynamic), without the checks: the totals of
    :func:`accelerator_totals`, which equal that command's."""
    from tinynpu.compiler.onnx.network import compile_onnx
    from tinynpu.compiler.onnx.runtime.execute import execute

    cn = compile_onnx(model, cfg=cfg, batch=1)
    ex = execute(cn.net, cn.make_inputs(0), cache=cn.cache, image=cn.image)
    return accelerator_totals(cfg, ex.runs.values())


__all__ = ["LEFT_OUT", "accelerator_totals", "simulate_network"]
