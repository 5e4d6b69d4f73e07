"""compile -> simulate -> verify against numpy -> report, for every workload.

The report's fields are documented in docs/architecture.md.  ``utilization`` counts the
workload's *useful* MACs: ``useful_macs / (cycles * MACs per cycle)``; the
simulator's own figure (every MAC the tmm steps issue, padding included) is
``array_utilization``; so ``utilization / padding_ceiling == array_utilization``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.compiled import Compiled
from tinynpu.errors import TinyNpuError
from tinynpu.isa import ArchConfig, load_config, load_isa

if TYPE_CHECKING:
    from tinynpu.simulator import Stats


class VerificationError(TinyNpuError):
    """The accelerator's output differs from numpy's (a compiler or simulator bug)."""


def _config_for(compiled: Compiled, cfg: ArchConfig | None) -> ArchConfig:
    if cfg is not None:
        return cfg
    # A config loaded from a YAML file is found again by its path, a built-in one by its name.
    return load_config(compiled.workload.get("config_path") or compiled.workload.get("config", "default"))


def run_compiled(compiled: Compiled, *, cfg: ArchConfig | None = None, seed: int = 0,
                 check_races: bool = True, verify: bool = True) -> dict[str, Any]:
    """Simulate ``compiled`` on inputs from ``seed``, verify every output, and report.

    The report of :func:`run_compiled_with_stats`, without the simulator's ``Stats``.
    """
    return run_compiled_with_stats(compiled, cfg=cfg, seed=seed, check_races=check_races, verify=verify)[0]


def run_compiled_with_stats(compiled: Compiled, *, cfg: ArchConfig | None = None, seed: int = 0,
                            check_races: bool = True, verify: bool = True) -> tuple[dict[str, Any], Stats]:
    """Simulate ``compiled`` on inputs from ``seed``, verify every output, and report.

    Args:
        compiled: The compiled workload.
        cfg: The config it was compiled for (default: the one named in its workload).
        seed: Seed of :meth:`Compiled.make_inputs`.
        check_races: Run the simulator's data-race sanitizer (slower).
        verify: Compare against the numpy reference (bit-exact for integers, rtol=1e-5 for fp32).

    Returns:
        The JSON-ready report, and the simulator's stats (with the per-instruction timeline).

    Raises:
        VerificationError: an output differs from numpy, naming the tensor and first differing index.
        SimFault: the program faulted in the simulator.
    """
    from tinynpu.simulator import Machine

    cfg = _config_for(compiled, cfg)
    isa = load_isa()
    inputs = compiled.make_inputs(seed)
    machine = Machine(cfg, isa)
    machine.load(compiled.program)
    for name, arr in compiled.to_device(inputs).items():
        machine.write_tensor(name, arr)
    t0 = time.perf_counter()
    stats = machine.run(check_races=check_races)
    sim_wall = time.perf_counter() - t0
    verified: bool | None = None
    if verify:
        expected = compiled.reference(inputs)
        for name in compiled.outputs:
            got, want = machine.read_tensor(name), expected[name]
            _compare(name, got, want, exact=compiled.exact)
        verified = True
    s = stats.to_json()
    b = compiled.bounds
    cycles = int(s["cycles"])
    peak = cfg.macs_per_cycle
    traffic = int(s["dram_read_bytes"]) + int(s["dram_write_bytes"])
    report: dict[str, Any] = {
        "workload": compiled.workload,
        "schedule": compiled.schedule_name,
        "cycles": cycles,
        "utilization": b.useful_macs / (cycles * peak) if cycles else 0.0,
        "array_utilization": float(s["utilization"]),
        "padding_ceiling": b.padding_ceiling,
        "roofline_cycles": b.roofline_cycles,
        "dram_read_bytes": int(s["dram_read_bytes"]),
        "dram_write_bytes": int(s["dram_write_bytes"]),
        "dram_bytes": traffic,
        "io_lower_bound_bytes": b.io_lower_bound_bytes,
        "io_bound_kind": b.bound_kind,
        "best_tiling_bytes": b.best_tiling_bytes,
        "traffic_over_best_tiling": traffic / b.best_tiling_bytes,
        "traffic_over_io_lower_bound": traffic / b.io_lower_bound_bytes,
        "busy_cycles": s["busy_cycles"],
        "stall_cycles": s["stall_cycles"],
        "instructions": s["instructions"],
        "macs": b.useful_macs,
        "issued_macs": int(s["macs"]),
        "verified": verified,
        "races_checked": check_races,
        "trace": list(compiled.trace),
        "host_traffic_bytes": compiled.host_traffic_bytes,
        "model": compiled.model,
        "compile_seconds": compiled.compile_seconds,
        "simulator_wall_seconds": sim_wall,
        "config": cfg.name,
        **{key: s[key] for key in ("energy_pj", "energy_breakdown_pj", "edp", "edp_units", "energy_figures")},
    }
    return report, stats


def _compare(name: str, got: np.ndarray, want: np.ndarray, *, exact: bool) -> None:
    if got.shape != want.shape:
        raise VerificationError(f"output {name}: shape {got.shape} differs from numpy's {want.shape}.")
    bad = np.argwhere(got != want) if exact else np.argwhere(~np.isclose(got, want, rtol=1e-5, atol=0.0))
    if len(bad):
        idx = tuple(int(i) for i in bad[0])
        raise VerificationError(
            f"output {name} differs from the numpy reference at {len(bad)} of {want.size} elements; "
            f"first at index {idx}: accelerator {got[idx]!r}, numpy {want[idx]!r}"
            + (" (bit-exact comparison)." if exact else " (rtol=1e-5).")
        )


__all__ = ["VerificationError", "run_compiled"]
