"""Raw RTL runs: programs and DRAM images in, cycles, trace and DRAM regions out.

:func:`run_rtl` takes plain jobs (words, DRAM contents, regions to read back)
and runs them all in one simulator process on Verilator or Icarus
(:mod:`tinynpu.rtl.runner` picks and builds).  Each job travels as files:
the bench (``rtl/tb/tinynpu_tb.sv``) loads the program and the DRAM image
with ``$readmemh``, runs the DRAM model and collects the per-instruction trace
in SystemVerilog, and dumps trace, regions and status with ``$writememh``;
the cocotb side only starts each job and waits for it, so no Python runs per
cycle or per DRAM request.  :func:`tinynpu.rtl.compare.cosimulate` compares the
results with the simulator.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, Isa
from tinynpu.isa.gen_verilog import rtl_unsupported
from tinynpu.rtl.runner import (
    INCLUDE_DIR,
    RTL_DIR,
    SIMULATORS,
    TB_DIR,
    Build,
    RtlError,
    build,
    missing_reason,
    run_test,
)

__all__ = ["ERROR_CAUSES", "INCLUDE_DIR", "RTL_DIR", "TB_DIR", "RtlError", "RtlJob", "RtlResult",
           "check_config", "choose_simulator", "run_rtl", "run_unit_benches"]

TOPLEVEL = "tinynpu_tb"
TEST_MODULE = "tinynpu_cocotb"
MIN_IMEM_AW = 16  # instruction memory of the smallest build: 2**16 words (the tuned 1024^3 has 41,473)
MAX_REGIONS = 256  # regions read back per job (tinynpu_tb.sv: MaxRegions)

#: error_cause values of rtl/tinynpu_dispatch.sv.
ERROR_CAUSES = {
    1: "undecodable instruction word",
    2: "field out of range",
    3: "scratchpad access out of range",
    4: "DRAM access out of range or misaligned",
    5: "instruction waits on or signals its own unit",
    6: "token channel overflow",
    7: "ran past the last instruction without a halt",
    8: "DRAM back-pressure (ready low)",
}


@dataclass(frozen=True)
class RtlJob:
    """One program for the RTL: words, DRAM contents and regions to read back."""

    words: tuple[int, ...]
    dram: tuple[tuple[int, bytes], ...] = ()
    read: tuple[tuple[int, int], ...] = ()
    max_cycles: int = 2_000_000


@dataclass(frozen=True)
class RtlResult:
    """What one RTL run produced."""

    cycles: int
    done: bool
    error: bool
    cause: int
    error_pc: int
    timed_out: bool
    trace: tuple[tuple[int, int, int], ...]  # per instruction: (dispatch, start, end); -1 where never recorded
    regions: tuple[bytes, ...]
    late_responses: int
    sim_seconds: float
    wall_seconds: float
    bad_requests: int = 0
    simulator: str = "icarus"
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def cause_text(self) -> str:
        return ERROR_CAUSES.get(self.cause, f"cause {self.cause}")


def word_bytes(cfg: ArchConfig) -> int:
    """The bench's DRAM word: one full DMA row of ``cfg`` (TNPU_ROW_BYTES_MAX, T x 4 bytes for int8)."""
    return cfg.tile * max(cfg.elem_bytes(key) for key, _ in cfg.scope_rows)


def check_config(cfg: ArchConfig) -> None:
    """Refuse, naming each key and the supported range, a config the RTL cannot implement."""
    problems = rtl_unsupported(cfg)
    if problems:
        raise UsageError(f"config {cfg.name!r} ({cfg.source}) cannot run on the RTL: " + "; ".join(problems) + ".")


def _imem_aw(jobs: Sequence[RtlJob]) -> int:
    longest = max((len(j.words) for j in jobs), default=0)
    return max(MIN_IMEM_AW, (longest - 1).bit_length())


def _build_for(simulator: str | None, isa: Isa, cfg: ArchConfig, imem_aw: int, waves: bool) -> Build:
    """The build to run on: the named simulator, or Verilator where it builds, else Icarus."""
    check_config(cfg)
    params = {"IMEM_AW": imem_aw, "IDX_W": max(16, imem_aw)}
    if simulator is not None and simulator != "auto":
        if simulator not in SIMULATORS:
            raise UsageError(f"--simulator must be auto, {' or '.join(SIMULATORS)}, not {simulator!r}.")
        return build(simulator, isa, cfg, TOPLEVEL, parameters=params, waves=waves)
    if missing_reason("verilator") is None:
        try:
            return build("verilator", isa, cfg, TOPLEVEL, parameters=params, waves=waves)
        except RtlError:
            pass  # the default falls back to Icarus; the result says which simulator ran
    return build("icarus", isa, cfg, TOPLEVEL, parameters=params, waves=waves)


def choose_simulator(simulator: str | None) -> str:
    """The simulator ``auto`` stands for here, without building (Verilator if installed, else Icarus)."""
    if simulator not in (None, "auto"):
        return str(simulator)
    return "verilator" if missing_reason("verilator") is None else "icarus"


# ---- job files (the bench's side of them is documented in rtl/tb/tinynpu_tb.sv) ---------------------

def _word_runs(chunks: Iterable[tuple[int, bytes]], word: int) -> list[tuple[int, int]]:
    """Merged, sorted [lo, hi] DRAM word ranges (of ``word`` bytes) covering every chunk."""
    spans = sorted((a // word, (a + len(d) - 1) // word) for a, d in chunks if d)
    runs: list[tuple[int, int]] = []
    for lo, hi in spans:
        if runs and lo <= runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], max(runs[-1][1], hi))
        else:
            runs.append((lo, hi))
    return runs


def _hex_words(raw: np.ndarray, word: int) -> str:
    """Little-endian ``word``-byte words as $readmemh lines (most significant byte first)."""
    text = raw.reshape(-1, word)[:, ::-1].tobytes().hex()
    width = 2 * word
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


def _write_image(path: Path, chunks: Sequence[tuple[int, bytes]], word: int) -> tuple[int, int]:
    """The DRAM image as $readmemh text; returns its [lo, hi] word span (lo > hi when empty)."""
    runs = _word_runs(chunks, word)
    parts = []
    for lo, hi in runs:
        buf = np.zeros((hi - lo + 1) * word, dtype=np.uint8)
        base = lo * word
        for addr, data in chunks:
            end = addr + len(data)
            if data and addr >= base and end <= base + buf.size:
                buf[addr - base:end - base] = np.frombuffer(data, dtype=np.uint8)
        parts.append(f"@{lo:x}\n{_hex_words(buf, word)}")
    path.write_text("\n".join(parts) + "\n")
    return (runs[0][0], runs[-1][1]) if runs else (1, 0)


def _read_hex(path: Path) -> str:
    """The hex digits of a $writememh file (comment and address lines dropped)."""
    return "".join(line.strip() for line in path.read_text().splitlines()
                   if line.strip() and not line.startswith(("//", "@")))


def _write_job(tmp: Path, n: int, job: RtlJob, dram_bytes: int, word: int) -> list[tuple[int, int]]:
    if len(job.read) > MAX_REGIONS:
        raise UsageError(f"program {n} reads back {len(job.read)} DRAM regions; the bench reads at most {MAX_REGIONS}.")
    for addr, data in job.dram:
        if addr < 0 or addr + len(data) > dram_bytes:
            raise UsageError(f"program {n}: DRAM contents at {addr:#x} (+{len(data)} bytes) lie outside the "
                             f"{dram_bytes}-byte DRAM.")
    lo, hi = _write_image(tmp / f"p{n}.dram.hex", job.dram, word)
    (tmp / f"p{n}.imem.hex").write_text("".join(f"{w:032x}\n" for w in job.words))
    regions = [(a // word, (a + max(size, 1) - 1) // word) for a, size in job.read]
    header = f"{len(job.words)} {job.max_cycles} {lo} {hi} {len(regions)}\n"
    (tmp / f"p{n}.job").write_text(header + "".join(f"{a} {b}\n" for a, b in regions))
    return regions


def _read_result(tmp: Path, n: int, job: RtlJob, regions: list[tuple[int, int]], timing: dict[str, float],
                 simulator: str, word: int) -> RtlResult:
    try:
        fields = [int(x) for x in (tmp / f"p{n}.result").read_text().split()]
        cycles, done, error, cause, error_pc, timed_out, late, bad = fields
    except (OSError, ValueError) as exc:
        raise RtlError(f"the bench wrote no usable result for program {n} ({exc}).") from None
    raw = np.frombuffer(bytes.fromhex(_read_hex(tmp / f"p{n}.trace.hex")), dtype=">u4").astype(np.int64)
    raw[raw == 0xFFFFFFFF] = -1
    trace = tuple(map(tuple, raw.reshape(-1, 3)[:len(job.words)].tolist()))
    out = []
    for r, ((addr, size), (lo, _)) in enumerate(zip(job.read, regions, strict=True)):
        words = np.frombuffer(bytes.fromhex(_read_hex(tmp / f"p{n}.r{r}.hex")), dtype=np.uint8)
        data = words.reshape(-1, word)[:, ::-1].tobytes()
        start = addr - lo * word
        out.append(data[start:start + size])
    return RtlResult(cycles=cycles, done=bool(done), error=bool(error), cause=cause, error_pc=error_pc,
                     timed_out=bool(timed_out), trace=trace, regions=tuple(out), late_responses=late,
                     bad_requests=bad, sim_seconds=timing["sim_seconds"], wall_seconds=timing["wall_seconds"],
                     simulator=simulator)


def run_rtl(isa: Isa, cfg: ArchConfig, jobs: Sequence[RtlJob], *, waves: Path | None = None,
            simulator: str | None = None) -> list[RtlResult]:
    """Run each job on the RTL, all in one simulator process.

    Args:
        simulator: ``verilator``, ``icarus``, or ``auto``/None (Verilator where it builds, else Icarus).
        waves: write every signal to this FST file.
    """
    if not jobs:
        return []
    bld = _build_for(simulator, isa, cfg, _imem_aw(jobs), waves is not None)
    with tempfile.TemporaryDirectory(prefix="tinynpu-cosim-") as tmp_name:
        tmp = Path(tmp_name)
        regions = [_write_job(tmp, n, job, cfg.dram_bytes, word_bytes(cfg)) for n, job in enumerate(jobs)]
        timings = tmp / "timings.json"
        log = tmp / "sim.log"
        start = time.perf_counter()
        try:
            run_test(bld, TEST_MODULE, test_dir=tmp,
                     extra_env={"TINYNPU_COSIM_JOBS": str(len(jobs)), "TINYNPU_COSIM_TIMINGS": str(timings),
                                "COCOTB_LOG_LEVEL": "WARNING"},
                     plusargs=[f"+tinynpu_job_dir={tmp}"], waves=waves.resolve() if waves else None, log=log,
                     results_xml=tmp / "results.xml")
        except (SystemExit, Exception) as exc:
            raise RtlError(f"the cocotb bench failed on {bld.simulator} ({exc}):\n{_tail(log)}") from None
        if not timings.exists():
            raise RtlError(f"the cocotb bench on {bld.simulator} produced no results:\n{_tail(log)}")
        per_job = json.loads(timings.read_text())
        wall = time.perf_counter() - start
        results = [_read_result(tmp, n, job, regions[n], per_job[n], bld.simulator, word_bytes(cfg))
                   for n, job in enumerate(jobs)]
    for r in results:
        r.extra["process_seconds"] = wall
    return results


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


UNITS_TOPLEVEL = "tinynpu_units_tb"
UNITS_TEST_MODULE = "tinynpu_units_cocotb"


def run_unit_benches(isa: Isa, cfg: ArchConfig, simulator: str = "icarus") -> tuple[int, int, str]:
    """Run the module-level cocotb benches (MAC array, requantizer) against numpy.

    Returns:
        (tests run, tests failed, the tail of the simulator log).
    """
    from tinynpu.rtl.module_bench import run_module_bench

    result = run_module_bench(isa, cfg, UNITS_TOPLEVEL, UNITS_TEST_MODULE, simulator=simulator)
    return result.total, result.failed, result.log
