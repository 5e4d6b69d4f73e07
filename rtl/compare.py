"""Differential co-simulation: the same binary on the RTL (Verilator or Icarus) and on the simulator.

Every DRAM tensor of the program's manifest is compared bit for bit after the
run, the total cycle counts are compared, and the instruction trace of the
RTL (dispatch, start, end per instruction) is compared with the simulator's
``stats.timeline`` instruction for instruction.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.errors import TinyNpuError
from tinynpu.isa import ArchConfig, Isa
from tinynpu.rtl.cosim import RtlJob, RtlResult, run_rtl


@dataclass(frozen=True)
class CosimCase:
    """A program and the arrays to write into its manifest tensors before the run."""

    name: str
    program: Program
    inputs: Mapping[str, np.ndarray] = field(default_factory=dict)
    max_cycles: int = 5_000_000


@dataclass(frozen=True)
class TraceMismatch:
    """One instruction whose (dispatch, start, end) differs."""

    index: int
    mnemonic: str
    model: tuple[int, int, int]
    rtl: tuple[int, int, int]


@dataclass(frozen=True)
class CosimReport:
    """Outcome of one case."""

    name: str
    rtl_cycles: int
    model_cycles: int
    outputs_match: bool
    output_mismatches: tuple[str, ...]
    instructions_compared: int
    trace_mismatches: tuple[TraceMismatch, ...]
    rtl_error: str | None
    model_error: str | None
    rtl_seconds: float
    model_seconds: float
    simulator: str = "icarus"
    outputs: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def cycle_diff(self) -> int:
        return self.rtl_cycles - self.model_cycles

    @property
    def agree(self) -> bool:
        """Same outputs, same cycles, same trace, and neither side faulted."""
        return (self.rtl_error is None and self.model_error is None and self.outputs_match
                and self.cycle_diff == 0 and not self.trace_mismatches)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rtl_cycles": self.rtl_cycles,
            "model_cycles": self.model_cycles,
            "cycle_diff": self.cycle_diff,
            "outputs_match": self.outputs_match,
            "output_mismatches": list(self.output_mismatches),
            "instructions_compared": self.instructions_compared,
            "trace_mismatches": len(self.trace_mismatches),
            "first_trace_mismatches": [
                {"index": m.index, "mnemonic": m.mnemonic, "model": list(m.model), "rtl": list(m.rtl)}
                for m in self.trace_mismatches[:5]
            ],
            "rtl_error": self.rtl_error,
            "model_error": self.model_error,
            "rtl_seconds": self.rtl_seconds,
            "model_seconds": self.model_seconds,
            "simulator": self.simulator,
        }


@dataclass(frozen=True)
class _ModelRun:
    dram: tuple[tuple[int, bytes], ...]
    outputs: dict[str, bytes]
    cycles: int
    timeline: list[tuple[int, str, str, int, int, int]]
    error: str | None
    seconds: float


def _run_model(isa: Isa, cfg: ArchConfig, case: CosimCase) -> _ModelRun:
    from tinynpu.simulator import Machine

    t0 = time.perf_counter()
    machine = Machine(cfg, isa)
    machine.load(case.program)
    for name, array in case.inputs.items():
        machine.write_tensor(name, array)
    # The DRAM image the RTL starts from: every manifest tensor as the model holds it.
    dram = tuple((t.addr, machine.read_dram(t.addr, t.nbytes)) for t in case.program.tensors)
    try:
        stats = machine.run(max_cycles=case.max_cycles)
    except TinyNpuError as exc:
        return _ModelRun(dram, {}, 0, [], exc.message, time.perf_counter() - t0)
    outputs = {t.name: machine.read_dram(t.addr, t.nbytes) for t in case.program.tensors}
    return _ModelRun(dram, outputs, stats.cycles, stats.timeline, None, time.perf_counter() - t0)


def _compare(isa: Isa, case: CosimCase, model: _ModelRun, rtl: RtlResult) -> CosimReport:
    from tinynpu.rtl.cosim import ERROR_CAUSES

    tensors = case.program.tensors
    rtl_out = dict(zip([t.name for t in tensors], rtl.regions, strict=True))
    rtl_error = None
    if rtl.error:
        rtl_error = f"{ERROR_CAUSES.get(rtl.cause, rtl.cause)} at instruction {rtl.error_pc}"
    elif rtl.timed_out:
        rtl_error = f"no halt within {case.max_cycles} cycles"
    elif rtl.late_responses:
        rtl_error = f"the bench's DRAM model answered {rtl.late_responses} requests late (a bench timing fault)"
    elif rtl.bad_requests:
        rtl_error = (f"the RTL sent {rtl.bad_requests} DRAM requests outside DRAM or beyond the bench's "
                     "in-flight limit (the RTL's own range check should have stopped them)")
    mismatched = tuple(name for name, raw in model.outputs.items() if rtl_out.get(name) != raw)
    trace: list[TraceMismatch] = []
    for index, _unit, mnemonic, d, s, e in model.timeline:
        if index >= len(rtl.trace):
            break
        rd, rs, re_ = rtl.trace[index]
        # sync and halt are executed by the dispatcher: only their dispatch cycle exists in the RTL.
        same = rd == d if mnemonic in ("sync", "halt") else (rd, rs, re_) == (d, s, e)
        if not same:
            trace.append(TraceMismatch(index, mnemonic, (d, s, e), (rd, rs, re_)))
    arrays = {t.name: np.frombuffer(rtl_out[t.name], dtype=np.dtype(t.dtype).newbyteorder("<"))
              .reshape(t.shape).astype(t.dtype) for t in tensors}
    return CosimReport(
        name=case.name, rtl_cycles=rtl.cycles, model_cycles=model.cycles,
        outputs_match=not mismatched and model.error is None and rtl_error is None,
        output_mismatches=mismatched, instructions_compared=len(model.timeline),
        trace_mismatches=tuple(trace), rtl_error=rtl_error, model_error=model.error,
        rtl_seconds=rtl.sim_seconds, model_seconds=model.seconds, simulator=rtl.simulator, outputs=arrays,
    )


def cosimulate(isa: Isa, cfg: ArchConfig, cases: Sequence[CosimCase], *,
               waves: Path | None = None, simulator: str | None = None) -> list[CosimReport]:
    """Run every case on the simulator and (in one simulator process) on the RTL, and compare.

    Args:
        simulator: ``verilator``, ``icarus``, or ``auto``/None (Verilator where it builds, else Icarus);
            each report's ``simulator`` says which ran.
    """
    models = [_run_model(isa, cfg, case) for case in cases]
    # The RTL stops a little after the model's cycle count, so a program the
    # model rejects (deadlock, race) costs little simulation time.
    jobs = [RtlJob(words=case.program.words, dram=m.dram,
                   read=tuple((t.addr, t.nbytes) for t in case.program.tensors),
                   max_cycles=min(case.max_cycles, 2 * m.cycles + 10_000))
            for case, m in zip(cases, models, strict=True)]
    results = run_rtl(isa, cfg, jobs, waves=waves, simulator=simulator)
    return [_compare(isa, c, m, r) for c, m, r in zip(cases, models, results, strict=True)]
