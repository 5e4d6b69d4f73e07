"""RTL-vs-model cycles for a report: small compiled workloads co-simulated on Verilator or Icarus.

Each case is compiled by the compiler, run on the Python simulator and on
the Verilog RTL (:func:`tinynpu.rtl.compare.cosimulate`, one simulator
process for all cases: Verilator where it builds, else Icarus; each row says
which ran), and tabulated with both cycle counts, whether every output tensor
matched bit for bit and how many instructions' (dispatch, start, end) differ.
The shapes are small so that the report stays quick where only Icarus runs
(thousands of cycles per second against Verilator's hundreds of thousands).
"""

from __future__ import annotations

from typing import Any

from tinynpu.isa import ArchConfig
from tinynpu.report.suite import Workload, conv2d, matmul, mlp

# Small workloads of every kind the compiler builds; each also runs alone with `tinynpu cosim`.
COSIM_WORKLOADS: tuple[Workload, ...] = (
    matmul(128, 128, 128),
    matmul(64, 64, 64, schedule="naive"),
    matmul(35, 50, 70),
    conv2d((1, 8, 10, 10, 16, 3, 3, 2, 1), group="conv2d"),
    mlp(1),
)


def unavailable_reason(cfg: ArchConfig) -> str | None:
    """Why co-simulation cannot run here (no RTL package, neither simulator, a config the RTL lacks), or None."""
    try:
        from tinynpu.rtl.cosim import check_config
        from tinynpu.rtl.runner import SIMULATORS, missing_reason
    except ImportError as exc:
        return f"the RTL co-simulation package is not importable ({exc})"
    reasons = [missing_reason(simulator) for simulator in SIMULATORS]
    if all(reasons):
        return "; ".join(str(r) for r in reasons)
    try:
        check_config(cfg)
    except Exception as exc:  # the RTL's own message says which parameter it cannot build
        return str(exc)
    return None


def cosim_command(w: Workload) -> str:
    """The single-workload co-simulation command (same workload flags as ``tinynpu run``)."""
    flags = " ".join(f"--{k} {v}" for k, v in w.params)
    sched = f" --schedule {w.schedule}" if w.kind == "matmul" and w.schedule != "auto" else ""
    return f"tinynpu cosim {w.kind} {flags}{sched} --json"


def run_cosim(cfg: ArchConfig, workloads: tuple[Workload, ...] = COSIM_WORKLOADS) -> dict[str, Any]:
    """Co-simulate ``workloads``; rows in the shape of ``tinynpu cosim --json``, plus label and command."""
    from tinynpu.isa import load_isa
    from tinynpu.rtl.compare import CosimCase, cosimulate

    cases = []
    for w in workloads:
        compiled = w.compile(cfg)
        cases.append(CosimCase(w.label, compiled.program, compiled.to_device(compiled.make_inputs(0))))
    reports = cosimulate(load_isa(), cfg, cases)
    rows = [
        dict(r.to_json(), workload=w.label, command=cosim_command(w)) for w, r in zip(workloads, reports, strict=True)
    ]
    return {"rows": rows, "command": "; ".join(cosim_command(w) for w in workloads)}
