"""The native core: ``core.c`` built with the machine's C compiler and called through ctypes.

:func:`native_schedule` is a drop-in for :func:`timing.schedule` on integer
configs with timing on; it returns the same :class:`RunResult` and raises the
same faults with the same messages (the Python core formats them, from the
numbers ``core.c`` reports).  The Python core stays the reference and the
fallback: for the fp32 config (whose tile products numpy sums through BLAS,
in an order C would not reproduce bit for bit), for ``timing=False``, and on
a machine without a C compiler.

The library is compiled once per source, compiler and CPU into
``$TINYNPU_CACHE`` (default ``~/.cache/tinynpu``) and reused; ``TINYNPU_NATIVE=0``
turns the native core off.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path

import numpy as np

from tinynpu import fsio
from tinynpu.cache import cache_root
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, Isa
from tinynpu.isa.gen_c import CORE_HEADER_PATH, generate_core_header
from tinynpu.simulator.decode import Decoded, Plan, operand_plan
from tinynpu.simulator.faults import SimFault
from tinynpu.simulator.hazards import DRAM, RaceChecker, race_fault
from tinynpu.simulator.messages import Messages
from tinynpu.simulator.semantics import State
from tinynpu.simulator.timing import CONTROL_CAUSES, UNIT_CAUSES, RunResult, timeline_columns, unit_roles

SOURCE = Path(__file__).with_name("core.c")

HEADER = CORE_HEADER_PATH  # enum Kind and the access table, generated from isa.yaml (isa/gen_c.py)
FLAGS = ("-O3", "-march=native", "-std=gnu11", "-shared", "-fPIC", "-Werror=switch")
# TINYNPU_NATIVE_PORTABLE=1: the build for any CPU of the architecture, with the portable tmm kernel
# (what a CPU without AVX-512 VNNI runs; the tests compare it with the Python core as well)
PORTABLE_FLAGS = ("-O3", "-std=gnu11", "-shared", "-fPIC", "-Werror=switch", "-DTINYNPU_PORTABLE")

# core.c's limits and enum Fault (its #defines; enum Kind is the generated header's: kind = opcode index)
_MAX_UNITS, _MAX_OPS, _MAX_OPERANDS, _MAX_RES = 8, 64, 8, 9
(_F_NONE, _F_OVERFLOW, _F_LIMIT_START, _F_LIMIT_HALT, _F_LIMIT_DISPATCH, _F_NEVER_HALTS, _F_DEADLOCK,
 _F_NO_PROGRESS, _F_RACE, _F_NO_MEMORY) = range(10)

_i32, _i64, _u32, _ptr = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint32, ctypes.c_void_p


class _Run(ctypes.Structure):
    """core.c's ``Run``, field for field."""

    _fields_ = [
        ("n", _i64), ("op", _ptr), ("unit", _ptr), ("wait", _ptr), ("signal", _ptr),
        ("occ", _ptr), ("lat", _ptr), ("beats", _ptr), ("lo", _ptr), ("hi", _ptr),
        ("waits_prev", _i32 * _MAX_OPS),
        ("field_lsb", (_i32 * _MAX_OPERANDS) * _MAX_OPS), ("field_width", (_i32 * _MAX_OPERANDS) * _MAX_OPS),
        ("field_signed", (_i32 * _MAX_OPERANDS) * _MAX_OPS),
        ("nq", _i32), ("depth", _i32), ("max_tok", _i32), ("tile", _i32), ("limit", _i64),
        ("port_units", _u32), ("free_units", _u32),
        ("dram", _ptr), ("sp", _ptr * _MAX_RES), ("sp_rows", _i64 * _MAX_RES), ("elem_bytes", _i32 * _MAX_RES),
        ("scope_a", _i32), ("scope_b", _i32), ("scope_acc", _i32), ("n_scopes", _i32),
        ("races", _i32), ("others", (_u32 * _MAX_UNITS) * _MAX_RES), ("remaining", _i64 * _MAX_UNITS),
        ("wide_times", _i32), ("dispatch", _ptr), ("start", _ptr), ("end", _ptr),
        ("stalls", (_i64 * 3) * _MAX_UNITS), ("control_stalls", _i64 * 2),
        ("cycles", _i64), ("executed", _i64), ("fault", _i32), ("fault_args", _i64 * 6),
    ]


class NativeUnavailable(Exception):
    """Why the native core cannot run (no compiler, a failed build, or a machine it does not model)."""


def _cache_dir() -> Path:
    return cache_root()


def _cpu() -> str:
    """What -march=native depends on: a library built for one CPU must not load on another."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def library() -> ctypes.CDLL:
    """The compiled core (built on first use; a failure is remembered too, until the settings change).

    Raises:
        NativeUnavailable: turned off, no C compiler, or the build failed.
    """
    env = os.environ
    result = _library_for(env.get("TINYNPU_NATIVE_PORTABLE"), env.get("TINYNPU_NATIVE", "1"), env.get("CC"),
                          env.get("TINYNPU_CACHE"), env.get("XDG_CACHE_HOME"), env.get("HOME"))
    if isinstance(result, NativeUnavailable):
        raise result
    return result


@functools.cache
def _library_for(portable: str | None, enabled: str, cc: str | None, *cache_settings: str | None
                 ) -> ctypes.CDLL | NativeUnavailable:
    """:func:`_load` for these settings (``cache_settings``: what :func:`cache_root` reads).  Every program
    run asks for the library twice; resolving the cache path each time took 0.4 ms of a run."""
    flags = PORTABLE_FLAGS if portable == "1" else FLAGS
    return _load(enabled, cc, str(_cache_dir()), flags)


@functools.cache
def _load(enabled: str, cc: str | None, cache: str, flags: tuple[str, ...]) -> ctypes.CDLL | NativeUnavailable:
    if enabled == "0":
        return NativeUnavailable("TINYNPU_NATIVE=0 turns the native core off")
    cc = cc or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        return NativeUnavailable("no C compiler found (set CC, or install gcc)")
    try:
        compiler = _identity(cc)
    except OSError as exc:
        return NativeUnavailable(f"cannot find the C compiler {cc}: {exc}")
    source = SOURCE.read_bytes() + b"\0" + HEADER.read_bytes()
    key = hashlib.sha256(b"\0".join([source, " ".join(flags).encode(), compiler.encode(), _cpu().encode()]))
    path = Path(cache) / f"core-{key.hexdigest()[:16]}.so"
    try:
        damage = _damage(path) if path.exists() else "missing"
        if damage != "missing" and damage is not None:
            print(f"tinynpu: the cached native core {path} {damage}; rebuilding it.", file=sys.stderr)
        if damage is not None:
            _build(cc, flags, path)
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        return NativeUnavailable(f"cannot build or load {path}: {exc}")
    except NativeUnavailable as exc:
        return exc
    except UsageError as exc:  # the cache directory refused the checksum
        return NativeUnavailable(exc.message)
    lib.tinynpu_run.argtypes = [ctypes.POINTER(_Run)]
    lib.tinynpu_run.restype = ctypes.c_int
    lib.tinynpu_tmm_kernel.restype = ctypes.c_char_p
    return lib


def _identity(cc: str) -> str:
    """The compiler binary's resolved path, size and modification time: another or an updated compiler
    builds afresh.  A stat, not ``cc --version``: starting the compiler took 2-10 ms of every process's
    first run.

    Raises:
        OSError: the compiler does not exist.
    """
    path = os.path.realpath(shutil.which(cc) or cc)
    st = os.stat(path)
    return f"{path} {st.st_size} {st.st_mtime_ns}"


def tmm_kernel() -> str:
    """The built core's tmm kernel: ``avx512-vnni``, ``avx2`` or ``portable`` (see core.c's tmm_flush).

    Raises:
        NativeUnavailable: the core cannot be built.
    """
    return str(library().tinynpu_tmm_kernel().decode("ascii"))


def _checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _damage(path: Path) -> str | None:
    """Why the cached library must not be loaded (truncated, replaced, unchecked), or None if it is intact.

    Checked before ``dlopen``: loading a truncated library can kill the process with SIGBUS.
    """
    try:
        recorded = _checksum_path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return "has no checksum beside it (an older or interrupted build)"
    try:
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return None if actual == recorded else "does not match its checksum (truncated or changed)"


# Run in a child process on a fresh build: a library that does not load or lacks the entry point fails here,
# never in the process that would use it.
_SELF_TEST = "import ctypes, sys; ctypes.CDLL(sys.argv[1]).tinynpu_run"


def _build(cc: str, flags: tuple[str, ...], path: Path) -> None:
    """Compile into a temporary name, load it in a child process, then rename it and record its checksum."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
    os.close(fd)
    try:
        proc = subprocess.run([cc, *flags, "-o", tmp, str(SOURCE)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            detail = proc.stderr.strip()[:2000] or "no message"
            raise NativeUnavailable(f"{cc} could not build {SOURCE} (exit {proc.returncode}): {detail}")
        test = subprocess.run([sys.executable, "-c", _SELF_TEST, tmp], capture_output=True, text=True, check=False)
        if test.returncode != 0:
            last = (test.stderr.strip().splitlines() or [f"exit {test.returncode}"])[-1]
            raise NativeUnavailable(f"{cc} built {SOURCE} into a library that does not load: {last}")
        digest = hashlib.sha256(Path(tmp).read_bytes()).hexdigest()
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    fsio.write_atomic(_checksum_path(path), digest + "\n")


def unsupported(isa: Isa, cfg: ArchConfig, *, timing: bool) -> str | None:
    """Why the native core cannot run this machine, or None if it can."""
    if not timing:
        return "the native core always computes timing (timing=False runs on the Python core)"
    # every program run asks (a decode step runs hundreds): the last pair accepted is remembered by identity
    if _SUPPORTED and _SUPPORTED[0][0] is isa and _SUPPORTED[0][1] is cfg:
        return None
    reason = _unsupported_machine(isa, cfg)
    if reason is None:
        _SUPPORTED[:] = [(isa, cfg)]
    return reason


def _unsupported_machine(isa: Isa, cfg: ArchConfig) -> str | None:
    """:func:`unsupported` with timing on, worked out."""
    if not cfg.is_integer:
        return (f"config {cfg.name!r} is {cfg.acc_dtype}: the native core implements the integer datapath "
                "(numpy's BLAS order for float tiles is not reproducible in C)")
    ids = {s.name: s.id for s in isa.scopes}
    dtypes = {name: np.dtype(cfg.dtype(isa.scope_by_name[name].config_key)) for name in ("a", "b", "acc")}
    if (dtypes["a"], dtypes["b"], dtypes["acc"]) != (np.dtype(np.int8), np.dtype(np.int8), np.dtype(np.int32)):
        return "the native core needs int8 a and b scratchpads and an int32 acc"
    if sorted(ids.values()) != list(range(len(ids))) or len(ids) + 1 > _MAX_RES:
        return "the native core needs scratchpad scope ids 0..n-1 (at most 8)"
    if len(isa.queued_units) > _MAX_UNITS or len(isa.instructions) > _MAX_OPS or isa.max_operands > _MAX_OPERANDS:
        return "the ISA has more units, opcodes or operands than core.c's limits"
    if not _header_matches(isa):
        return (f"{isa.source} declares other instructions or accesses than the ISA the native core is built "
                f"for ({HEADER}; `tinynpu isa cheader` regenerates it for the built-in ISA)")
    return None


@functools.cache
def _header_matches(isa: Isa) -> bool:
    """Whether ``isa`` generates the header the core is built with (cached: generating it takes milliseconds)."""
    return generate_core_header(isa) == HEADER.read_text(encoding="utf-8")


def _address(arr: np.ndarray) -> int:
    assert arr.flags.c_contiguous
    return arr.ctypes.data


#: Decoded's columns core.c reads, with the dtypes of its pointers
_COLUMNS = (("op", np.int16), ("unit", np.int8), ("wait", np.int8), ("signal", np.int8), ("occ", np.int32),
            ("lat", np.int32), ("beats", np.int32), ("lo", np.uint64), ("hi", np.uint64))


@functools.cache
def _template(isa: Isa, cfg: ArchConfig) -> bytes:
    """The fields of core.c's ``Run`` that no program or state changes (the ISA's opcodes and operand
    fields, the config's queues and tile), as bytes to copy: setting them field by field through ctypes took
    half a millisecond of every program run."""
    r = _Run()
    for ins in isa.instructions:
        r.waits_prev[ins.index] = ins.timing == "dma_zero"
    _set_plan(r, operand_plan(isa))
    r.nq, r.depth, r.max_tok, r.tile = len(isa.queued_units), cfg.queue_depth, cfg.token_max_count, cfg.tile
    r.scope_a, r.scope_b, r.scope_acc = (isa.scope_by_name[s].id for s in ("a", "b", "acc"))
    return bytes(r)


def _set_plan(r: _Run, plan: Plan) -> None:
    for index, fields in plan:
        for col, field in fields:
            r.field_lsb[index][col], r.field_width[index][col] = field.lsb, field.width
            r.field_signed[index][col] = field.signed


def _program_fields(isa: Isa, cfg: ArchConfig, dec: Decoded) -> bytes:
    """``Run`` with the fields fixed by the ISA, the config and the decoded program (its columns, which units
    use the DRAM port), as bytes to copy; kept in ``dec.derived``, so a program run many times (a decode
    step's layers, every step) sets them once: per run they took about a tenth of a millisecond in Python."""
    # by identity: hashing a config (a tree of dataclasses) costs as much as these fields do
    kept = dec.derived.get("native")
    if kept is not None and kept[0] is isa and kept[1] is cfg:
        return kept[2]
    r = _Run.from_buffer_copy(_template(isa, cfg))
    if dec.plan is not operand_plan(isa):  # a decoding not made by decode_program (its plan is the ISA's)
        _set_plan(r, dec.plan)
    r.n = dec.n_exec
    # decode.Decoded's column dtypes are core.c's pointer types
    for name, dtype in _COLUMNS:
        column = getattr(dec, name)
        assert column.dtype == dtype, (name, column.dtype)
        setattr(r, name, _address(column))
    port_units, free_units = unit_roles(dec, len(isa.queued_units))
    r.port_units = sum(1 << u for u in port_units)
    r.free_units = sum(1 << u for u in free_units)
    fields = bytes(r)
    dec.derived["native"] = (isa, cfg, fields)
    return fields


#: The last (ISA, config) pair :func:`unsupported` accepted, compared by identity: a run asks for every program
_SUPPORTED: list[tuple[Isa, ArchConfig]] = []


def _check_supported(isa: Isa, cfg: ArchConfig) -> None:
    """Raises NativeUnavailable if the native core cannot run ``isa`` on ``cfg``."""
    reason = unsupported(isa, cfg, timing=True)
    if reason:
        raise NativeUnavailable(reason)


def native_schedule(isa: Isa, cfg: ArchConfig, dec: Decoded, state: State, *, limit: int,
                    races: RaceChecker | None, lib: ctypes.CDLL | None = None) -> RunResult:
    """:func:`timing.schedule` with timing on, run by ``core.c``; ``lib``: :func:`library`, when the caller
    has asked for it already (a machine does, to choose the core).

    Raises:
        NativeUnavailable: the core cannot be built or does not model this machine.
        SimFault: exactly the faults (and messages) of the Python core.
    """
    _check_supported(isa, cfg)
    lib = lib or library()
    nq = len(isa.queued_units)
    n = dec.n_exec
    r = _Run.from_buffer_copy(_program_fields(isa, cfg, dec))
    r.limit = limit
    r.dram, sp, sp_rows, elem_bytes = _state_fields(state)
    r.n_scopes = n_scopes = len(sp)
    r.sp[:n_scopes], r.sp_rows[:n_scopes], r.elem_bytes[:n_scopes] = sp, sp_rows, elem_bytes
    if races is not None:
        r.races = 1
        for res, per_unit in races.others.items():
            for u, others in enumerate(per_unit):
                r.others[n_scopes if res == DRAM else res][u] = sum(1 << v for v in others)
        for u, left in enumerate(races.remaining):
            r.remaining[u] = left
    dispatch, start, end = timeline_columns(n, limit)
    r.wide_times = dispatch.itemsize == 8
    r.dispatch, r.start, r.end = (col.buffer_info()[0] for col in (dispatch, start, end))

    fault = lib.tinynpu_run(ctypes.byref(r))
    if fault != _F_NONE:
        raise _fault(isa, cfg, dec, limit, races, fault, list(r.fault_args), n_scopes)
    names, control = _unit_names(isa)
    stalls = {names[u]: {c: n for c, n in zip(UNIT_CAUSES, r.stalls[u][:len(UNIT_CAUSES)], strict=True) if n}
              for u in range(nq)}
    stalls[control] = {c: n for c, n in zip(CONTROL_CAUSES, r.control_stalls[:len(CONTROL_CAUSES)], strict=True)
                       if n}
    return RunResult(cycles=int(r.cycles), executed=int(r.executed), dispatch=dispatch, start=start, end=end,
                     stalls=stalls)


@functools.cache
def _unit_names(isa: Isa) -> tuple[dict[int, str], str]:
    """Unit names by id, and the control unit's (the one without a queue): every run's stalls name them."""
    return {u.id: u.name for u in isa.units}, next(u.name for u in isa.units if not u.queue)


#: per machine state: its arrays, and the addresses, rows and element sizes core.c reads of them (by scope id)
_STATES: weakref.WeakKeyDictionary[State, tuple[tuple[np.ndarray, ...], tuple[int, list[int], list[int], list[int]]]]
_STATES = weakref.WeakKeyDictionary()


def _state_fields(state: State) -> tuple[int, list[int], list[int], list[int]]:
    """The DRAM's address and each scratchpad's address, rows and element size (by scope id) for ``Run``: worked
    out once per state (its arrays are made with it; checked by identity), not per run of each program on it."""
    arrays = (state.dram, *state.sp.values())
    kept = _STATES.get(state)
    if kept is not None and len(kept[0]) == len(arrays) and all(a is b for a, b in zip(kept[0], arrays, strict=True)):
        return kept[1]
    ids = sorted(state.sp)
    fields = (_address(state.dram), [_address(state.sp[i]) for i in ids], [state.sp[i].shape[0] for i in ids],
              [state.sp[i].itemsize for i in ids])
    _STATES[state] = (arrays, fields)
    return fields


def _fault(isa: Isa, cfg: ArchConfig, dec: Decoded, limit: int, races: RaceChecker | None, kind: int,
           args: list[int], n_scopes: int) -> Exception:
    msg = Messages(isa, cfg, dec, limit)
    if kind == _F_OVERFLOW:
        return msg.overflow(*args[:4])
    if kind == _F_LIMIT_START:
        return msg.limit_start(*args[:2])
    if kind == _F_LIMIT_HALT:
        return msg.limit_halt(*args[:2])
    if kind == _F_LIMIT_DISPATCH:
        return msg.limit_dispatch(*args[:2])
    if kind == _F_NEVER_HALTS:
        return msg.never_halts()
    if kind == _F_DEADLOCK:
        return msg.deadlock(*args[:4])
    if kind == _F_NO_PROGRESS:
        return msg.no_progress(args[0])
    if kind == _F_RACE and races is not None:
        index, other, res, write, other_wrote, at = args
        place = races.place(DRAM if res == n_scopes else res, at)
        return race_fault(msg.describe, index, bool(write), other, bool(other_wrote), place)
    if kind == _F_NO_MEMORY:
        return SimFault("the native simulator core ran out of memory.")
    return SimFault(f"the native simulator core reported an unknown fault {kind}.")


__all__ = ["NativeUnavailable", "library", "native_schedule", "tmm_kernel", "unsupported"]
