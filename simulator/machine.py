"""The public machine: load a program, write inputs, run, read outputs and stats.

Example::

    m = Machine(load_config("default"))
    m.load(program)
    m.write_tensor("A", a)
    stats = m.run()
    c = m.read_tensor("C")
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, Isa, load_isa
from tinynpu.simulator.decode import Decoded, decode_like, decode_program
from tinynpu.simulator.energy import Energy
from tinynpu.simulator.faults import SimFault, where
from tinynpu.simulator.hazards import DRAM, RaceChecker, access_functions, resource_users
from tinynpu.simulator.native import NativeUnavailable, library, native_schedule, unsupported
from tinynpu.simulator.semantics import State
from tinynpu.simulator.stats import Counts, Stats, build_stats, count_program
from tinynpu.simulator.timing import Entry, schedule
from tinynpu.simulator.trace import write_log, write_trace

ENGINES = ("auto", "native", "python")


class Machine:
    """One tinynpu instance: scratchpads, DRAM, and a loaded program.

    Args:
        cfg: the architecture config.
        isa: the ISA (the built-in one by default).
        state: scratchpads and DRAM shared with another machine of this ISA and config (a network's
            programs, each loaded once on its own front end over one image); default: new, all zero.
    """

    def __init__(self, cfg: ArchConfig, isa: Isa | None = None, state: State | None = None) -> None:
        self.cfg = cfg
        self.isa = isa or load_isa()
        if state is not None and (state.isa is not self.isa or state.cfg != cfg):
            raise UsageError(f"a machine of config {cfg.name!r} cannot share the state of a machine of config "
                             f"{state.cfg.name!r} or of another ISA: their scratchpads and DRAM differ.")
        self.state = state if state is not None else State(self.isa, cfg)
        self.program: Program | None = None
        self._decoded: Decoded | None = None
        self._counts: Counts | None = None  # the loaded program's run-independent stats, from its first run
        self._energy: Energy | None = None  # the energy of its last run (the same for as many cycles)

    # --- program and data ---------------------------------------------------------------------------
    def load(self, program: Program, *, like: Machine | Decoded | None = None) -> None:
        """Check ``program`` was built for this ISA and config, and decode it.

        ``like``: a machine with a program of the same length loaded, or such a program's decoding (for
        this machine's ISA and config), that differs from ``program`` in few words (another relocation
        of one compiled program): only the differing words are decoded and checked
        (:func:`~tinynpu.simulator.decode.decode_like`); the result and every fault are the same.

        Raises:
            AsmError: built for another ISA/config.
            SimFault: an undecodable word or a static fault.
        """
        program.check_built_for(self.isa, self.cfg)
        if isinstance(like, Machine):
            prior = like._decoded if like.isa is self.isa and like.cfg == self.cfg else None
        else:
            prior = like
        columns = program.columns  # split once per program (a relocation builds them directly)
        self._decoded = (decode_program(self.isa, self.cfg, program.words, columns) if prior is None
                         else decode_like(self.isa, self.cfg, program.words, prior, columns))
        self.program = program
        self._counts = self._energy = None

    def _program(self) -> Program:
        if self.program is None:
            raise UsageError("no program is loaded: call Machine.load(program) first.")
        return self.program

    def write_tensor(self, name: str, array: np.ndarray) -> None:
        """Write a manifest tensor into DRAM (shape must match; values must fit its dtype)."""
        t = self._program().tensor(name)
        arr = np.asarray(array)
        if tuple(arr.shape) != tuple(t.shape):
            raise UsageError(f"tensor {name}: the program expects shape {tuple(t.shape)}, "
                             f"not {tuple(arr.shape)}.")
        if arr.dtype.kind not in "biuf":
            raise UsageError(f"tensor {name}: an array of dtype {arr.dtype} cannot be a tensor's value; "
                             "tensors take bool, integer or float arrays.")
        with np.errstate(all="ignore"):  # NaN, inf or huge values: reported below, not as a numpy warning
            conv = arr.astype(t.dtype)
            # Floats round to float32 as numpy's astype does; anything else must convert exactly (compared
            # by value across dtypes: uint8 200 is not int8 -56).
            lossy_ok = arr.dtype.kind == "f" and conv.dtype.kind == "f"
            exact = bool(np.all(np.isfinite(conv) | ~np.isfinite(arr))) if lossy_ok else bool(np.all(conv == arr))
        if arr.dtype != conv.dtype and not exact:
            raise UsageError(f"tensor {name}: values of dtype {arr.dtype} do not fit the tensor's dtype "
                             f"{t.dtype} "
                             "exactly (out of range, not integral, or not finite).")
        self.write_dram(t.addr, np.ascontiguousarray(conv, dtype=np.dtype(t.dtype).newbyteorder("<")))

    def read_tensor(self, name: str) -> np.ndarray:
        """A copy of a manifest tensor as it is in DRAM now."""
        t = self._program().tensor(name)
        raw = self.read_dram(t.addr, t.nbytes)
        return np.frombuffer(raw, dtype=np.dtype(t.dtype).newbyteorder("<")).reshape(t.shape).astype(t.dtype)

    def write_dram(self, addr: int, data: bytes | np.ndarray) -> None:
        raw = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray) else \
            np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        self._check_dram(addr, len(raw))
        self.state.dram[addr:addr + len(raw)] = raw

    def read_dram(self, addr: int, nbytes: int) -> bytes:
        self._check_dram(addr, nbytes)
        return self.state.dram[addr:addr + nbytes].tobytes()

    def _check_dram(self, addr: int, nbytes: int) -> None:
        if addr < 0 or nbytes < 0 or addr + nbytes > self.cfg.dram_bytes:
            raise UsageError(f"DRAM bytes {addr}..{addr + nbytes - 1} are outside the {self.cfg.dram_bytes} "
                             f"bytes of DRAM of config {self.cfg.name!r}.")

    # --- running ------------------------------------------------------------------------------------
    def run(self, *, timing: bool = True, trace_path: Path | None = None, log: TextIO | None = None,
            max_cycles: int | None = None, check_races: bool = True, engine: str | None = None) -> Stats:
        """Execute the loaded program until ``halt``.

        Args:
            timing: compute the cycle schedule (off: functional only, cycles = 0).
            trace_path: write a Chrome/Perfetto trace-event JSON file (needs timing).
            log: write one line per instruction with dispatch/start/end cycles.
            max_cycles: cycle limit (default: the config's ``limits.max_cycles``).
            check_races: run the data-race sanitizer.
            engine: ``native`` (core.c, integer configs with timing), ``python`` (the reference), or
                ``auto``: native where it can run, else python.  Both give identical results.  Default:
                ``$TINYNPU_ENGINE``, else ``auto``.

        Raises:
            SimFault: any runtime fault (deadlock, race, token overflow, no halt, cycle limit).
            UsageError: an unknown engine, or ``native`` where it cannot run (the message says why).
        """
        program = self._program()
        dec = self._decoded
        assert dec is not None
        isa, cfg = self.isa, self.cfg
        lib = self._native_library(engine, timing)
        use_native = lib is not None
        t0 = time.perf_counter()
        races = self._race_checker(dec) if check_races else None
        limit = cfg.max_cycles if max_cycles is None else max_cycles
        if use_native:
            result = native_schedule(isa, cfg, dec, self.state, limit=limit, races=races, lib=lib)
        else:
            result = schedule(isa, cfg, dec, self.state, timing=timing, limit=limit, races=races,
                              accesses=_accesses(isa, cfg))
        wall = time.perf_counter() - t0
        if self._counts is None or self._counts.executed != result.executed:
            self._counts, self._energy = count_program(isa, cfg, program, dec, result.executed), None
        stats = build_stats(isa, cfg, program, dec, executed=result.executed, cycles=result.cycles,
                            stalls=result.stalls, timing=timing, races=check_races, wall=wall,
                            engine="native" if use_native else "python",
                            dispatch=result.dispatch, start=result.start, end=result.end, counts=self._counts,
                            energy=self._energy)
        self._energy = stats.energy
        if trace_path is not None:
            write_trace(Path(trace_path), isa, dec, stats)
        if log is not None:
            write_log(log, isa, dec, stats)
        return stats

    def _native_library(self, engine: str | None, timing: bool) -> ctypes.CDLL | None:
        """The native core to run on, or None to run on the Python core."""
        if engine is None:
            engine = os.environ.get("TINYNPU_ENGINE") or "auto"
            if engine not in ENGINES:
                raise UsageError(f"TINYNPU_ENGINE must be one of {', '.join(ENGINES)}, not {engine!r}.")
        if engine not in ENGINES:
            raise UsageError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}.")
        if engine == "python":
            return None
        reason = unsupported(self.isa, self.cfg, timing=timing)
        lib = None
        if reason is None:
            try:
                lib = library()
            except NativeUnavailable as exc:
                reason = str(exc)
        if reason is not None and engine == "native":
            raise UsageError(f"the native simulator core cannot run here: {reason}; use engine 'python' or "
                             "'auto'.")
        return lib

    def _race_checker(self, dec: Decoded) -> RaceChecker:
        isa = self.isa
        mnem = [i.mnemonic for i in isa.instructions]
        nq = len(isa.queued_units)
        users = resource_users(isa, dec)

        def describe(i: int) -> str:
            return where(i, mnem[int(dec.op[i])], isa.word_bytes)

        unit = dec.unit[:dec.n_exec]
        remaining = np.bincount(unit[unit < nq], minlength=nq).tolist()
        names = {s.id: s.name for s in isa.scopes}
        names[DRAM] = "DRAM"
        return RaceChecker(nq, users, remaining, names, describe)


def _accesses(isa: Isa, cfg: ArchConfig) -> Callable[[RaceChecker, Entry], None]:
    """The race checker's view of a scheduler entry: its opcode's access function (isa.yaml ``accesses``)."""
    table = access_functions(isa, cfg)

    def accesses(rc: RaceChecker, entry: Entry) -> None:
        table[entry.op](rc.access, entry.index, entry.unit, entry.operands)

    return accesses


__all__ = ["ENGINES", "Machine", "SimFault", "Stats"]
