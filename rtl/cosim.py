"""Co-simulation driver: build the RTL once, run programs on Icarus through cocotb.

The RTL runs the same :class:`~tinynpu.assembler.image.Program` binary as the
Python simulator.  :func:`run_rtl` takes plain jobs (words, DRAM contents,
regions to read back) and returns per-program results with the instruction
trace; :func:`cosimulate` runs a program on both and compares outputs bit for
bit and cycles instruction for instruction.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import pickle
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tinynpu.errors import TinyNpuError, UsageError
from tinynpu.isa import ArchConfig, Isa

RTL_DIR = Path(__file__).resolve().parent
TB_DIR = RTL_DIR / "tb"
INCLUDE_DIR = RTL_DIR / "generated"
TOPLEVEL = "tinynpu_tb"
TEST_MODULE = "tinynpu_cocotb"
IMEM_AW = 14  # instruction memory of the build: 2**14 words

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


class RtlError(TinyNpuError):
    """The RTL co-simulation could not run (no simulator, build failure, bench failure)."""


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
    trace: tuple[tuple[int, int, int], ...]  # per instruction: (dispatch, start, end)
    regions: tuple[bytes, ...]
    late_responses: int
    sim_seconds: float
    wall_seconds: float
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def cause_text(self) -> str:
        return ERROR_CAUSES.get(self.cause, f"cause {self.cause}")


def sources() -> list[Path]:
    """Every Verilog file of the build: RTL modules then the bench wrapper."""
    return sorted(RTL_DIR.glob("*.sv")) + sorted(TB_DIR.glob("*.sv"))


def icarus_missing_reason() -> str | None:
    """Why the RTL cannot be simulated here, or None if it can."""
    for tool in ("iverilog", "vvp"):
        if shutil.which(tool) is None:
            return (f"Icarus Verilog is not installed ({tool} not on PATH); "
                    "install it with apt-get install iverilog")
    try:
        import cocotb  # noqa: F401
        import cocotb_tools.runner  # noqa: F401
    except ImportError:
        return "cocotb is not installed; pip install cocotb==2.1.0"
    return None


def check_config(cfg: ArchConfig) -> None:
    """The RTL implements the default int8 micro-architecture only."""
    problems = []
    if not cfg.is_integer:
        problems.append(f"dtypes {cfg.input_dtype}->{cfg.acc_dtype} (the RTL is integer only)")
    if cfg.tmm_interval_cycles != cfg.tile:
        problems.append(f"tensor.tmm_interval_cycles {cfg.tmm_interval_cycles} "
                        "(the MAC array does one row per cycle)")
    if cfg.alu_rows_per_cycle != 1:
        problems.append(f"alu.rows_per_cycle {cfg.alu_rows_per_cycle} (the ALU has one row of lanes)")
    if cfg.tmm_latency_cycles < 1 or cfg.alu_latency_cycles < 1 or cfg.dram_latency_cycles < 3:
        problems.append("latencies below 1 (tensor, alu) or 3 (dram)")
    if problems:
        raise UsageError(f"config {cfg.name!r} ({cfg.source}) cannot run on the RTL: "
                         + "; ".join(problems) + ".")


def _build_key(isa: Isa, cfg: ArchConfig) -> str:
    h = hashlib.sha256()
    for path in sources() + [INCLUDE_DIR / "tinynpu_isa.vh"]:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(f"{isa.digest}{cfg.digest}{IMEM_AW}".encode())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _runner(isa: Isa, cfg: ArchConfig, toplevel: str = TOPLEVEL) -> tuple[object, Path]:
    """An Icarus runner with the RTL built (once per source version) and its build directory.

    The build lives in the system temp directory, keyed by a hash of the sources,
    so every test session and command reuses it.
    """
    check_config(cfg)
    reason = icarus_missing_reason()
    if reason:
        raise RtlError(reason)
    from cocotb_tools.runner import get_runner

    build_dir = Path(tempfile.gettempdir()) / f"tinynpu-rtl-{toplevel}-{_build_key(isa, cfg)}"
    runner = get_runner("icarus")
    # The runner warns "Skipping compilation" on every reuse of the build: that is the point here.
    logging.getLogger(runner.log.name).setLevel(logging.ERROR)
    with _locked(build_dir.with_suffix(".lock")):
        log = build_dir.with_suffix(".log")
        try:
            # Built with the runner's wave-dump module; dumping happens only in runs asking for it.
            runner.build(
                sources=sources(), includes=[INCLUDE_DIR], hdl_toplevel=toplevel, build_dir=build_dir,
                parameters={"IMEM_AW": IMEM_AW} if toplevel == TOPLEVEL else {}, timescale=("1ns", "1ps"),
                waves=True, log_file=log,
            )
        except (SystemExit, Exception) as exc:  # the runner exits on compiler errors
            raise RtlError(f"building the RTL with Icarus failed ({exc}); see {log}.") from None
    return runner, build_dir


def run_rtl(
    isa: Isa, cfg: ArchConfig, jobs: Sequence[RtlJob], *, waves: Path | None = None
) -> list[RtlResult]:
    """Run each job on the RTL (one simulator process for all of them)."""
    for n, job in enumerate(jobs):
        if len(job.words) > 1 << IMEM_AW:
            raise UsageError(f"program {n} has {len(job.words)} instructions; the RTL instruction memory "
                             f"holds {1 << IMEM_AW}.")
    runner, build_dir = _runner(isa, cfg)

    with tempfile.TemporaryDirectory(prefix="tinynpu-cosim-") as tmp:
        job_path, result_path = Path(tmp) / "job.pkl", Path(tmp) / "result.pkl"
        payload = {
            "dram_bytes": cfg.dram_bytes,
            "latency": cfg.dram_latency_cycles,
            "bytes_per_cycle": cfg.dram_bytes_per_cycle,
            "programs": [{"words": list(j.words), "dram": list(j.dram), "read": list(j.read),
                          "max_cycles": j.max_cycles} for j in jobs],
        }
        job_path.write_bytes(pickle.dumps(payload))
        env = {
            "TINYNPU_COSIM_JOB": str(job_path),
            "TINYNPU_COSIM_RESULT": str(result_path),
            "COCOTB_LOG_LEVEL": "WARNING",
        }
        # The runner passes sys.path as the simulator's PYTHONPATH; the bench module lives in rtl/tb.
        if str(TB_DIR) not in sys.path:
            sys.path.append(str(TB_DIR))
        plusargs = [f"+dumpfile_path={Path(waves).resolve()}"] if waves else []
        log = Path(tmp) / "sim.log"
        start = time.perf_counter()
        try:
            runner.test(  # type: ignore[attr-defined]
                test_module=TEST_MODULE, hdl_toplevel=TOPLEVEL, build_dir=build_dir, test_dir=tmp,
                extra_env=env, plusargs=plusargs, waves=waves is not None, log_file=log,
                results_xml=str(Path(tmp) / "results.xml"),
            )
        except (SystemExit, Exception) as exc:
            raise RtlError(f"the cocotb bench failed ({exc}):\n{_tail(log)}") from None
        if not result_path.exists():
            raise RtlError(f"the cocotb bench produced no results:\n{_tail(log)}")
        raw = pickle.loads(result_path.read_bytes())
        wall = time.perf_counter() - start
    return [RtlResult(cycles=r["cycles"], done=r["done"], error=r["error"], cause=r["cause"],
                      error_pc=r["error_pc"], timed_out=r["timed_out"], trace=tuple(map(tuple, r["trace"])),
                      regions=tuple(r["regions"]), late_responses=r["late_responses"],
                      sim_seconds=r["sim_seconds"], wall_seconds=r["wall_seconds"],
                      extra={"process_seconds": wall}) for r in raw]


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


UNITS_TOPLEVEL = "tinynpu_units_tb"
UNITS_TEST_MODULE = "tinynpu_units_cocotb"


def run_unit_benches(isa: Isa, cfg: ArchConfig) -> tuple[int, int, str]:
    """Run the module-level cocotb benches (MAC array, requantizer) against numpy.

    Returns:
        (tests run, tests failed, the tail of the simulator log).
    """
    from cocotb_tools.check_results import get_results

    runner, build_dir = _runner(isa, cfg, UNITS_TOPLEVEL)
    if str(TB_DIR) not in sys.path:
        sys.path.append(str(TB_DIR))
    with tempfile.TemporaryDirectory(prefix="tinynpu-units-") as tmp:
        log, xml = Path(tmp) / "sim.log", Path(tmp) / "results.xml"
        try:
            runner.test(  # type: ignore[attr-defined]
                test_module=UNITS_TEST_MODULE, hdl_toplevel=UNITS_TOPLEVEL, build_dir=build_dir, test_dir=tmp,
                extra_env={"COCOTB_LOG_LEVEL": "WARNING"}, log_file=log, results_xml=str(xml),
            )
        except (SystemExit, Exception) as exc:
            raise RtlError(f"the unit benches did not run ({exc}):\n{_tail(log)}") from None
        total, failed = get_results(xml)
        return total, failed, _tail(log, 60)
