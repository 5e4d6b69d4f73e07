"""Differential tests: the native core (core.c) against the Python reference core.

Both cores must give identical results on every program: the same fault (message and
instruction index), or the same statistics (stall dicts in the same key order), the same
per-instruction timeline, and the same DRAM and scratchpad contents.  The programs come from
hypothesis (arbitrary, racy, deadlocking and unterminated ones included), from hand-written
fault cases, from ``rtl.randprog`` and from the matmul compiler.  The random programs run on the
t8, default and t32 configs (their sizes follow the config's tile edge T); T = 8 and 32 take a few
programs in the default suite and the full count with the slow tests.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_support import (
    DEFAULT,
    FP32,
    HALT,
    ISA,
    SYNC,
    TILE_CONFIGS,
    load,
    machine,
    native_reason,
    over_tiles,
    program,
    scope,
    units,
)

from tinynpu.assembler.image import Program
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, load_config
from tinynpu.simulator import Machine, SimFault, native
from tinynpu.simulator.native import NativeUnavailable

Instrs = Sequence[tuple[str, dict[str, Any]]]

T = DEFAULT.tile
WINDOW = 8192  # DRAM bytes random programs touch (and compare)
SP_WINDOW = {"a": 96, "b": 96, "acc": 96}  # rows random programs mostly touch, so they collide often
TILE_WINDOW = 6  # tiles (of each scope) random tmm blocks start in
QUEUED = [u.name for u in ISA.queued_units]
UNIT = {i.mnemonic: i.unit for i in ISA.instructions}
ACC_EB = DEFAULT.elem_bytes("acc")
SLOW = os.environ.get("TINYNPU_SLOW") == "1"


NATIVE_REASON = native_reason()
REQUIRED = os.environ.get("TINYNPU_REQUIRE_NATIVE") == "1"  # CI: never skip for want of the core
needs_native = pytest.mark.skipif(NATIVE_REASON is not None and not REQUIRED,
                                  reason=f"the native core is unavailable: {NATIVE_REASON}")


# --- running one program on both cores ---------------------------------------------------------------
def _outcome(prog: Program, engine: str, dram: np.ndarray | None, sp: dict[int, np.ndarray] | None,
             tensors: dict[str, np.ndarray] | None = None, window: int = WINDOW,
             cfg: ArchConfig = DEFAULT, **run: Any) -> tuple:
    """Run ``prog`` on one engine from the given initial state; everything observable, as a tuple."""
    m = Machine(cfg, ISA)
    m.load(prog)
    if dram is not None:
        m.write_dram(0, dram)
    if sp is not None:
        for sid, init in sp.items():
            m.state.sp[sid][...] = init  # in place: the native core must read what is there at run()
    for name, value in (tensors or {}).items():
        m.write_tensor(name, value)
    try:
        stats = m.run(engine=engine, **run)
    except SimFault as exc:
        # Both cores check for a fault before the instruction's effects (a signal's overflow: after),
        # in the same order, so even the state a fault leaves behind is the same.
        return ("fault", exc.message, exc.index, m.read_dram(0, window),
                {sid: a.tobytes() for sid, a in m.state.sp.items()})
    assert stats.engine == engine, f"asked for the {engine} core, {stats.engine} ran"
    figures = stats.to_json()
    del figures["wall_seconds"], figures["engine"]
    # json.dumps keeps key order, so the stall dicts must list their causes in the same order
    return ("ok", json.dumps(figures), stats.timeline, m.read_dram(0, window),
            {sid: a.tobytes() for sid, a in m.state.sp.items()})


def _both(prog: Program, **kw: Any) -> tuple:
    """The outcome on the Python core, after checking the native core gives the same one."""
    py = _outcome(prog, "python", **kw)
    nat = _outcome(prog, "native", **kw)
    if py[0] != nat[0] or py[0] == "fault":
        assert nat[:3] == py[:3]
        assert nat[3:] == py[3:], "the state after the fault differs"
    else:  # compare piece by piece, so a failure says what differs
        assert json.loads(nat[1]) == json.loads(py[1])
        assert nat[1] == py[1], "same figures, but the key order differs"
        assert nat[2] == py[2], "timelines differ"
        assert nat[3] == py[3], "DRAM differs"
        for sid in py[4]:
            assert nat[4][sid] == py[4][sid], f"scratchpad {sid} differs"
    return py


def _initial(seed: int, cfg: ArchConfig = DEFAULT) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    rng = np.random.default_rng(seed)
    dram = rng.integers(0, 256, WINDOW, dtype=np.uint8)
    sp = {}
    for s in ISA.scopes:
        dt = np.dtype(cfg.dtype(s.config_key))
        info = np.iinfo(dt)
        shape = (cfg.rows(s.config_key), cfg.tile)
        sp[s.id] = rng.integers(info.min, int(info.max) + 1, shape, dtype=dt)
    return dram, sp


def _fault(instrs: Instrs, **run: Any) -> str:
    """The fault message, identical on both cores."""
    out = _both(program(instrs), dram=None, sp=None, **run)
    assert out[0] == "fault", f"expected a fault, the program completed: {out[1]}"
    return out[1]


# --- arbitrary random programs -----------------------------------------------------------------------
class Pick:
    """Random choices, from hypothesis (shrinkable) or from a seeded generator (long programs)."""

    def __init__(self, draw: st.DrawFn | None = None, rng: random.Random | None = None) -> None:
        self.draw, self.rng = draw, rng

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi)) if self.draw is not None else self.rng.randint(lo, hi)

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.int(0, len(seq) - 1)]

    def subset(self, seq: Sequence[Any]) -> list[Any]:
        return [x for x in seq if self.int(0, 1)]


def _rows_at(p: Pick, sc: str, cfg: ArchConfig) -> tuple[int, int]:
    """(first row, rows): mostly small blocks in a small window, sometimes a large one."""
    total, T = cfg.rows(ISA.scope_by_name[sc].config_key), cfg.tile
    if p.int(0, 9) == 0:
        rows = p.int(1, 3 * T)
        return p.int(0, total - rows), rows
    rows = p.int(1, T)
    return p.int(0, SP_WINDOW[sc] - rows), rows


def _dram_span(p: Pick, rows: int, row_bytes: int, align: int) -> tuple[int, int]:
    """(addr, stride) of a footprint inside the window; the stride may be below the row's bytes."""
    if rows == 1:
        stride = p.int(0, 64) * align
    else:
        stride = p.choice([0, align, row_bytes // 2 // align * align, row_bytes, 2 * row_bytes,
                                       p.int(0, 96) * align])
    if rows > 1:  # keep a tall footprint inside the window
        stride = min(stride, (WINDOW - row_bytes) // (rows - 1) // align * align)
    span = (rows - 1) * stride + row_bytes
    addr = p.int(0, (WINDOW - span) // align) * align
    return addr, stride


def _instruction(p: Pick, cfg: ArchConfig) -> tuple[str, dict[str, Any]]:
    T = cfg.tile
    kind = p.choice(["load", "load", "zero", "store", "store", "tmm", "tmm", "vadd", "vaddrow",
                                 "vmax", "vmin", "vmul", "vshr", "sync"])
    if kind == "sync":
        return "sync", {}
    if kind in ("load", "zero"):
        sc = p.choice(["a", "b", "acc"])
        row, rows = _rows_at(p, sc, cfg)
        if kind == "zero":
            return "zero", {"scope": scope(sc), "sp_row": row, "rows": rows}
        cols = p.choice([1, T, p.int(1, T)])
        eb = cfg.elem_bytes(ISA.scope_by_name[sc].config_key)
        addr, stride = _dram_span(p, rows, cols * eb, eb)
        return "load", {"scope": scope(sc), "sp_row": row, "dram": addr, "stride": stride, "rows": rows,
                        "cols": cols}
    if kind == "store":
        row, rows = _rows_at(p, "acc", cfg)
        cols = p.choice([1, T, p.int(1, T)])
        narrow = p.int(0, 1)
        out = 1 if narrow else cfg.elem_bytes("acc")
        addr, stride = _dram_span(p, rows, cols * out, out)
        return "store", {"sp_row": row, "dram": addr, "stride": stride, "rows": rows, "cols": cols,
                         "narrow": narrow, "relu": p.int(0, 1),
                         "shift": p.choice([0, 1, 31, p.int(0, 31)]) if narrow else 0}
    if kind == "tmm":
        m, n, k = (p.int(1, 3) for _ in range(3))
        return "tmm", {"acc": p.int(0, TILE_WINDOW), "a": p.int(0, TILE_WINDOW),
                       "b": p.int(0, TILE_WINDOW), "m": m, "n": n, "k": k,
                       "accumulate": p.int(0, 1)}
    dst, rows = _rows_at(p, "acc", cfg)
    acc_rows = cfg.rows("acc")
    if kind == "vadd":
        if p.int(0, 1) == 1:
            src = dst
        else:  # disjoint: before or after the destination
            before = list(range(0, max(0, dst - rows + 1)))
            after = list(range(dst + rows, acc_rows - rows + 1))
            src = p.choice(before + after)
        return "vadd", {"dst": dst, "src": src, "rows": rows}
    if kind == "vaddrow":
        outside = [r for r in range(min(acc_rows, SP_WINDOW["acc"] + 3 * T)) if not dst <= r < dst + rows]
        return "vaddrow", {"dst": dst, "src": p.choice(outside), "rows": rows}
    if kind == "vshr":
        return "vshr", {"dst": dst, "shift": p.choice([0, 1, 31, p.int(0, 31)]),
                        "rows": rows}
    extreme = [0, 1, -1, 127, -128, 2**31 - 1, -(2**31), 2**30, -(2**30) - 1]
    imm = p.choice(extreme) if p.int(0, 1) else p.int(-(2**31), 2**31 - 1)
    return kind, {"dst": dst, "imm": imm, "rows": rows}


def _program(p: Pick, length: int, wild: bool = True, cfg: ArchConfig = DEFAULT) -> list[tuple[str, dict[str, Any]]]:
    """Any statically valid program: unordered (racy), deadlocking, unterminated ones included.

    Each instruction may signal any other queued units.  It mostly waits only on channels an earlier
    instruction signalled (so many programs complete, with or without races), sometimes on any
    channels at all (which may deadlock), sometimes on none.
    """
    body = [_instruction(p, cfg) for _ in range(length)]
    pending = {(v, u): 0 for v in QUEUED for u in QUEUED if u != v}  # tokens signalled, not yet awaited
    out: list[tuple[str, dict[str, Any]]] = []
    for mnem, fields in body:
        if mnem != "sync":
            own = UNIT[mnem]
            others = [v for v in QUEUED if v != own]
            how = p.int(0, 9)
            if how < 6:  # only channels holding a token
                full = [v for v in others if pending[v, own]]
                waits = p.subset(full)
            elif how < 7 and wild:  # anything
                waits = p.subset(others)
            else:
                waits = []
            signals = p.subset(others) if p.int(0, 2) == 0 else []
            for v in waits:
                pending[v, own] = max(0, pending[v, own] - 1)
            for w in signals:
                pending[own, w] += 1
            fields = {**fields, "wait": units(*waits), "signal": units(*signals)}
        out.append((mnem, fields))
    end = p.int(0, 9)  # hypothesis favours 0: the usual case
    if end < 9:  # usually a halt at the end; sometimes one in the middle (the rest never runs)
        out.insert(p.int(0, len(out)) if end in (7, 8) else len(out), HALT)
    return out


@st.composite
def programs(draw: st.DrawFn, cfg: ArchConfig = DEFAULT) -> list[tuple[str, dict[str, Any]]]:
    return _program(Pick(draw), draw(st.integers(2, 40)), cfg=cfg)


@needs_native
@over_tiles()
@settings(max_examples=2000 if SLOW else 300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1), races=st.booleans())
def test_random_programs_agree(cfg: ArchConfig, data: st.DataObject, seed: int, races: bool) -> None:
    prog = data.draw(programs(cfg), label="program")
    dram, sp = _initial(seed, cfg)
    _both(program(prog, cfg), dram=dram, sp=sp, check_races=races, cfg=cfg)


def _ordered(p: Pick, length: int, cfg: ArchConfig = DEFAULT) -> list[tuple[str, dict[str, Any]]]:
    """A race-free program: each instruction is ordered after the previous one, so it completes."""
    body = [_instruction(p, cfg) for _ in range(length)]
    out: list[tuple[str, dict[str, Any]]] = []
    for mnem, fields in body:
        if out and mnem != "sync" and out[-1][0] != "sync" and UNIT[out[-1][0]] != UNIT[mnem]:
            prev_m, prev_f = out[-1]
            prev_f["signal"] = prev_f.get("signal", 0) | units(UNIT[mnem])
            fields = {**fields, "wait": units(UNIT[prev_m])}
        out.append((mnem, fields))
    out.append(HALT)
    return out


@st.composite
def ordered_programs(draw: st.DrawFn, cfg: ArchConfig = DEFAULT) -> list[tuple[str, dict[str, Any]]]:
    return _ordered(Pick(draw), draw(st.integers(1, 24)), cfg)


@needs_native
@over_tiles()
@settings(max_examples=1000 if SLOW else 150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1), races=st.booleans())
def test_ordered_programs_agree(cfg: ArchConfig, data: st.DataObject, seed: int, races: bool) -> None:
    prog = data.draw(ordered_programs(cfg), label="program")
    dram, sp = _initial(seed, cfg)
    _both(program(prog, cfg), dram=dram, sp=sp, check_races=races, cfg=cfg)


@needs_native
@over_tiles()
@settings(max_examples=1000 if SLOW else 150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1), limit=st.one_of(st.integers(0, 1500), st.just(1 << 40)),
       races=st.booleans())
def test_cycle_limit_faults_agree(cfg: ArchConfig, data: st.DataObject, seed: int, limit: int, races: bool) -> None:
    prog = data.draw(st.one_of(programs(cfg), ordered_programs(cfg)), label="program")
    dram, sp = _initial(seed, cfg)
    _both(program(prog, cfg), dram=dram, sp=sp, check_races=races, max_cycles=limit, cfg=cfg)


def _seeds_over_tiles(ci_default: int, ci_other: int, slow: int) -> list[Any]:
    """(cfg, seed) for every config of :data:`TILE_CONFIGS`: ``ci_default`` seeds on the default
    config and ``ci_other`` on T = 8 and 32 in the default suite, ``slow`` on each with the slow tests."""
    return [pytest.param(cfg, seed, id=f"{cfg.name}-{seed}") for cfg in TILE_CONFIGS
            for seed in range(slow if SLOW else ci_default if cfg is DEFAULT else ci_other)]


@needs_native
@pytest.mark.parametrize(("cfg", "seed"), _seeds_over_tiles(8, 2, 24))
def test_long_random_programs_agree(cfg: ArchConfig, seed: int) -> None:
    """Hundreds of instructions: full queues, long race logs (pruned), long token ledgers (trimmed)."""
    p = Pick(rng=random.Random(seed))
    length = 300 + 300 * (seed % 4)
    # odd seeds: race-free; even seeds: racy (waits only on signalled channels, so no deadlock)
    instrs = _ordered(p, length, cfg) if seed % 2 else _program(p, length, wild=False, cfg=cfg)
    if HALT not in instrs:  # this test wants runs that complete without the sanitizer
        instrs.append(HALT)
    prog = program(instrs, cfg)
    dram, sp = _initial(seed, cfg)
    checked = _both(prog, dram=dram, sp=sp, check_races=True, cfg=cfg)
    unchecked = _both(prog, dram=dram, sp=sp, check_races=False, cfg=cfg)
    assert unchecked[0] == "ok", unchecked[1]
    if seed % 2:
        assert checked[0] == "ok", checked[1]
        assert checked[2:] == unchecked[2:]
    else:
        assert checked[0] == "fault" and "data race" in checked[1]


# --- each fault class, by hand ------------------------------------------------------------------------


@needs_native
def test_deadlock_head_waits_on_empty_channel() -> None:
    msg = _fault([("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load")})])
    assert "deadlock: instruction 0 (pc 0x0, tmm) on unit tensor waits on token channel load->tensor" in msg
    assert "every instruction is dispatched" in msg


@needs_native
def test_deadlock_dispatcher_stuck() -> None:
    msg = _fault([("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load")}), SYNC, HALT])
    assert "the dispatcher is stuck before instruction 1 (pc 0x10, sync)" in msg
    # a full queue: depth + 1 waiting tensor instructions behind the blocked one
    blocked = [("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("alu")})] * (DEFAULT.queue_depth + 1)
    msg = _fault([*blocked, HALT])
    assert f"stuck before instruction {DEFAULT.queue_depth} (pc " in msg
    assert f"queue depth {DEFAULT.queue_depth}" in msg


def _zero(signal: str, **kw: int) -> tuple[str, dict[str, Any]]:
    # a row no tmm of these tests reads: only the tokens matter
    return "zero", {"scope": scope("a"), "sp_row": DEFAULT.rows("a_reg") - 1, "rows": 1, "signal": units(signal),
                    **kw}


@needs_native
def test_token_overflow_on_signal() -> None:
    # The consumer of token 0 starts (in the schedulers' event order) before the producer of token
    # max_count, but at a later cycle than that token completes: the signal finds the channel full.
    mx = DEFAULT.token_max_count
    long = ("tmm", {"acc": 0, "a": 0, "b": 0, "m": 4, "n": 4, "k": 4})
    consumer = ("tmm", {"acc": 16, "a": 0, "b": 0, "wait": units("load")})
    kick = ("vmax", {"dst": 512, "imm": 0, "rows": 1, "signal": units("load")})
    last = _zero("tensor", wait=units("alu"))
    prog = [_zero("tensor")] * mx + [long, consumer, kick, last, HALT]
    msg = _fault(prog)
    assert f"token channel load->tensor overflows: instruction {mx + 3} (pc 0x{(mx + 3) * 16:x}, zero)" in msg
    assert f"token #{mx} " in msg and f"max_count = {mx}" in msg


@needs_native
def test_token_overflow_on_consume() -> None:
    mx = DEFAULT.token_max_count
    prog = [_zero("tensor")] * (mx + 2) + [("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load")}), HALT]
    msg = _fault(prog)
    assert f"overflows: instruction {mx} (pc 0x{mx * 16:x}, zero) signals its token #{mx} " in msg


@needs_native
def test_token_overflow_left_at_the_end() -> None:
    mx = DEFAULT.token_max_count
    msg = _fault([_zero("tensor")] * (mx + 1) + [HALT])
    assert f"overflows: instruction {mx} (pc 0x{mx * 16:x}, zero) signals its token #{mx} " in msg
    # exactly max_count left over is allowed, on both cores
    out = _both(program([_zero("tensor")] * mx + [HALT]), dram=None, sp=None)
    assert out[0] == "ok"


def _cycles(instrs: Instrs) -> int:
    out = _both(program(instrs), dram=None, sp=None)
    assert out[0] == "ok"
    return int(json.loads(out[1])["cycles"])


@needs_native
def test_cycle_limit_on_completion() -> None:
    msg = _fault([load("a", 0, 0), HALT], max_cycles=50)
    assert "cycle limit of 50 cycles: instruction 0 (pc 0x0, load) would complete at cycle" in msg


@needs_native
def test_cycle_limit_at_halt() -> None:
    prog = [load("a", 0, 0), HALT]
    cycles = _cycles(prog)  # = d(halt) + 1, and the load completes at d(halt)
    msg = _fault(prog, max_cycles=cycles - 1)
    assert f"cycle limit of {cycles - 1} cycles (instruction 1 (pc 0x10, halt) at cycle {cycles - 1})" in msg
    assert _both(program(prog), dram=None, sp=None, max_cycles=cycles)[0] == "ok"


@needs_native
def test_cycle_limit_at_dispatch() -> None:
    prog = [load("a", 0, 0), SYNC, load("b", 0, 0), HALT]
    first_done = _cycles([load("a", 0, 0), HALT]) - 1  # the load's completion = d(sync)
    msg = _fault(prog, max_cycles=first_done)
    assert (f"cycle limit of {first_done} cycles (dispatching instruction 2 (pc 0x20, load) at cycle "
            f"{first_done + 1})") in msg


@needs_native
def test_never_halts() -> None:
    msg = _fault([load("a", 0, 0), load("b", 0, 0)])
    assert "never halts: it ran past its last instruction (instruction 1 (pc 0x10, load))" in msg


@needs_native
def test_scratchpad_race() -> None:
    msg = _fault([load("a", 0, 0), ("tmm", {"acc": 0, "a": 0, "b": 0}), HALT])
    # the tensor unit (no DRAM port) runs first in both schedulers' event order; the load then finds it
    assert ("data race: instruction 0 (pc 0x0, load) writes a row 0, which instruction 1 (pc 0x10, tmm) "
            "read") in msg
    # the same program without the sanitizer completes, identically on both cores
    assert _both(program([load("a", 0, 0), ("tmm", {"acc": 0, "a": 0, "b": 0}), HALT]), dram=None, sp=None,
                 check_races=False)[0] == "ok"


@needs_native
def test_dram_race_names_a_byte() -> None:
    store = ("store", {"sp_row": 0, "dram": 0x100, "stride": 64, "rows": 2, "cols": T, "narrow": 1})
    msg = _fault([store, load("a", 0, 0x148, rows=1), HALT])
    assert "data race: " in msg and "DRAM byte 0x148" in msg
    assert "instruction 0 (pc 0x0, store)" in msg and "instruction 1 (pc 0x10, load)" in msg


@needs_native
def test_strided_footprints_that_interleave_do_not_race() -> None:
    # The load reads bytes 32r .. 32r+15, the store writes 32r+16 .. 32r+31: their bounding ranges
    # overlap, their bytes do not.
    rows = 8
    ld = load("a", 0, 0, rows=rows, cols=T, stride=2 * T)
    st_ = ("store", {"sp_row": 0, "dram": T, "stride": 2 * T, "rows": rows, "cols": T, "narrow": 1})
    dram, sp = _initial(7)
    out = _both(program([ld, st_, HALT]), dram=dram, sp=sp)
    assert out[0] == "ok"
    # one more byte per store row and they do share bytes: a race on both cores
    st2 = ("store", {"sp_row": 0, "dram": T - 1, "stride": 2 * T, "rows": rows, "cols": T, "narrow": 1})
    msg = _both(program([ld, st2, HALT]), dram=dram, sp=sp)[1]
    assert "data race" in msg and "DRAM byte 0xf," in msg


@needs_native
def test_long_token_streams_agree() -> None:
    outcomes = [_token_stream(seed) for seed in range(8)]
    assert "ok" in outcomes and any("overflows" in o for o in outcomes), outcomes


def _token_stream(seed: int) -> str:
    """Thousands of tokens on one channel (the overflow ledgers trim), consumed early or late.

    Runs of fast producers (zero, 1 cycle) and slow consumers (tmm blocks) in random lengths: the
    channel's count wanders, up to an overflow on some seeds, after the ledgers have been trimmed.
    """
    rng = random.Random(seed)
    mx = DEFAULT.token_max_count
    produce = _zero("tensor")
    consume = ("tmm", {"acc": 0, "a": 0, "b": 0, "m": rng.randint(1, 2), "n": 1, "k": 1, "wait": units("load")})
    prog: list[tuple[str, dict[str, Any]]] = []
    balance = 0
    while len(prog) < 6 * mx:
        run = rng.randint(1, mx // 2 if seed % 2 else 8)
        prog += [produce] * run
        balance += run
        take = rng.randint(0, balance)
        prog += [consume] * take
        balance -= take
    prog.append(HALT)
    checked, unchecked = (_both(program(prog), dram=None, sp=None, check_races=races) for races in (True, False))
    # race-free: the sanitizer changes nothing but the races_checked figure
    assert checked[0] == unchecked[0]
    assert checked[1:3] == unchecked[1:3] if checked[0] == "fault" else checked[2:] == unchecked[2:]
    return "ok" if checked[0] == "ok" else checked[1]


@needs_native
def test_extreme_tmm_and_wide_timeline() -> None:
    """k = 127 steps of (-128) x (-128) into an accumulator near the int32 limit (it wraps); a cycle
    limit of 2^40 makes both cores keep 8-byte timeline columns."""
    k = 127
    tmm = ("tmm", {"acc": 0, "a": 0, "b": 0, "m": 1, "n": 1, "k": k, "accumulate": 1})
    _, sp = _initial(3)
    sp[scope("a")][:] = -128
    sp[scope("b")][:] = -128
    sp[scope("acc")][:T] = np.iinfo(np.int32).max - 5
    store = ("store", {"sp_row": 0, "dram": 0, "stride": T * ACC_EB, "rows": T, "cols": T, "wait": units("tensor")})
    prog = program([("tmm", {**tmm[1], "signal": units("store")}), store, HALT])
    for limit in (None, 1 << 40):
        out = _both(prog, dram=np.zeros(WINDOW, np.uint8), sp=sp, max_cycles=limit)
        assert out[0] == "ok"
        acc = np.frombuffer(out[4][scope("acc")], np.int32)[:T * T]
        expect = (np.int64(np.iinfo(np.int32).max - 5) + k * T * 128 * 128 + 2**31) % 2**32 - 2**31
        assert (acc == expect).all()


# --- the tmm kernels: the CPU's and the portable one -----------------------------------------------------
@pytest.fixture(params=["native", "portable"])
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Build the core for this CPU, or force the portable tmm kernel (what a CPU without AVX-512 VNNI or AVX2 runs)."""
    if request.param == "portable":
        monkeypatch.setenv("TINYNPU_NATIVE_PORTABLE", "1")
        assert native.tmm_kernel() == "portable"
    else:
        monkeypatch.delenv("TINYNPU_NATIVE_PORTABLE", raising=False)
    return native.tmm_kernel()


@needs_native
@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 1), (2, 5, 3), (3, 9, 1), (1, 4, 7)])
def test_tmm_blocks_agree(kernel: str, m: int, n: int, k: int) -> None:
    """Blocks as wide as the VNNI kernel's 64-column register blocks and their remainders, from random and
    extreme (-128, 127) operands, overwritten and accumulated, on the Python core and either kernel."""
    dram, sp = _initial(m * 100 + n * 10 + k)
    rng = np.random.default_rng(k)
    for name in ("a", "b"):
        sp[scope(name)][rng.random(sp[scope(name)].shape) < 0.3] = -128
        sp[scope(name)][rng.random(sp[scope(name)].shape) < 0.1] = 127
    prog = program([("tmm", {"acc": 0, "a": 1, "b": 2, "m": m, "n": n, "k": k, "accumulate": 0}),
                    ("tmm", {"acc": 0, "a": 3, "b": 0, "m": m, "n": n, "k": k, "accumulate": 1}),
                    ("tmm", {"acc": 1, "a": 0, "b": 5, "m": m, "n": n, "k": k, "accumulate": 1}), HALT])
    assert _both(prog, dram=dram, sp=sp)[0] == "ok"


@needs_native
@pytest.mark.parametrize("seed", range(4))
def test_ordered_programs_agree_on_either_kernel(kernel: str, seed: int) -> None:
    p = Pick(rng=random.Random(1000 + seed))
    instrs = _ordered(p, 300)
    dram, sp = _initial(seed)
    assert _both(program(instrs + [HALT]), dram=dram, sp=sp)[0] == "ok"


@needs_native
@pytest.mark.parametrize("config", ["default", "t32", "t8"])
def test_tmm_zero_rows_agree(kernel: str, config: str) -> None:
    """Rows of A that are zero in every tile of a tmm's depth (a batch-1 product's padding rows, whose
    products the portable kernel skips) beside rows zero in only some tiles of the depth or nonzero in one
    byte, a tile row of A all zeros, overwritten and accumulated onto random accumulators, as one tmm and
    as a run of one-tile tmms (a decode step's k-loop), on the Python core and either kernel."""
    cfg = load_config(config)
    t, k = cfg.tile, 3
    dram, sp = _initial(11, cfg)
    a = sp[scope("a")]
    a[:2 * k * t] = 0  # tile rows 0 and 1 of a (k tiles each)
    rng = np.random.default_rng(5)
    for kk in range(k):
        a[kk * t] = rng.integers(-128, 128, t)  # row 0: the vector of a matrix-vector product
    a[1 * t + 2, t - 1] = -128  # row 2: one byte, in the second tile of the depth only
    a[0 * t + 5] = 127  # row 5: the first tile only
    tmm = {"m": 2, "n": 2, "k": k}
    prog = program([("tmm", {"acc": 0, "a": 0, "b": 1, **tmm, "accumulate": 0}),
                    ("tmm", {"acc": 4, "a": 0, "b": 1, **tmm, "accumulate": 1}),
                    *[("tmm", {"acc": 8, "a": kk, "b": kk, "m": 1, "n": 1, "k": 1, "accumulate": int(kk > 0)})
                      for kk in range(k)], HALT], cfg)
    out = _both(prog, dram=dram, sp=sp, cfg=cfg, check_races=False)
    assert out[0] == "ok", out[1]
    acc = np.frombuffer(out[4][scope("acc")], np.int32).reshape(-1, t)
    assert not acc[2 * t:4 * t].any()  # tile row 1 of a is zero: so are its output tiles (acc tiles 2 and 3)
    assert acc[8 * t:9 * t][[0, 2, 5]].any() and not acc[8 * t + 1].any()


# --- runs of tmms into the same acc tiles (the native core computes each run as one product) -----------
def _tmm_runs(rng: random.Random, cfg: ArchConfig) -> list[tuple[str, dict[str, Any]]]:
    """Runs of tmms into the same acc tiles (some longer than the native core's 64-tmm runs, some with
    more depth than its packed-B buffer holds), and between their tmms loads, zeros, stores and ALU
    instructions on rows the run reads or writes, ordered between two of its tmms by tokens or not
    ordered at all (the race sanitizer is off: both cores must still agree)."""
    t = cfg.tile
    tensor = units("tensor")
    out: list[tuple[str, dict[str, Any]]] = []
    waits = 0  # the units the next tmm waits for
    for _ in range(rng.randint(3, 5)):
        acc, m, n = rng.randint(0, 3), rng.randint(1, 2), rng.randint(1, 2)
        for step in range(rng.choice([1, 6, 70, 130])):
            k = rng.randint(1, 3)
            out.append(("tmm", {"acc": acc, "a": rng.randint(0, 6), "b": rng.randint(0, 6), "m": m, "n": n, "k": k,
                                "accumulate": int(step > 0 or rng.random() < 0.5), "wait": waits}))
            waits = 0
            if rng.random() > 0.15:
                continue
            what = rng.choice(["load", "load", "zero", "store", "vmax"])
            sc = rng.choice(["a", "b"])
            row, rows = rng.randint(0, 8 * t), rng.randint(1, t)
            if what == "load":
                addr = rng.randint(0, (WINDOW - rows * t) // t) * t
                instr = ("load", {"scope": scope(sc), "sp_row": row, "dram": addr, "stride": t, "rows": rows,
                                  "cols": rng.choice([t, rng.randint(1, t)])})
            elif what == "zero":
                instr = ("zero", {"scope": scope(sc), "sp_row": row, "rows": rows})
            elif what == "store":
                instr = ("store", {"sp_row": rng.randint(0, 4 * t), "dram": 0, "stride": t * ACC_EB, "rows": t,
                                   "cols": t, "narrow": 0, "relu": 0, "shift": 0})
            else:
                instr = ("vmax", {"dst": rng.randint(0, 4 * t), "imm": rng.randint(-1000, 1000), "rows": rows})
            if rng.random() < 0.5:  # after this tmm and before the next: executed inside the run
                out[-1][1]["signal"] = units(UNIT[instr[0]])
                instr[1].update(wait=tensor, signal=tensor)
                waits = units(UNIT[instr[0]])
            out.append(instr)
    return [*out, HALT]


@needs_native
@pytest.mark.parametrize("config", ["default", "t32", "t8"])
@pytest.mark.parametrize("seed", range(3))
def test_tmm_runs_agree(kernel: str, config: str, seed: int) -> None:
    """Both kernels, tile edges 16, 32 (the VNNI kernel's packing of wider tiles) and 8 (the portable one
    only), and a cycle limit that faults in the middle of the program, with a run pending."""
    cfg = load_config(config)
    prog = program(_tmm_runs(random.Random(seed), cfg), cfg)
    dram, sp = _initial(seed, cfg)
    out = _both(prog, dram=dram, sp=sp, cfg=cfg, check_races=False)
    assert out[0] == "ok", out[1]
    cycles = json.loads(out[1])["cycles"]
    assert _both(prog, dram=dram, sp=sp, cfg=cfg, check_races=False, max_cycles=cycles // 2)[0] == "fault"


# --- long, well-synchronized random programs ----------------------------------------------------------
@needs_native
@pytest.mark.parametrize(("cfg", "seed"), _seeds_over_tiles(12, 3, 40))
def test_randprog_programs_agree(cfg: ArchConfig, seed: int) -> None:
    from tinynpu.rtl.randprog import random_program

    prog, inputs = random_program(ISA, cfg, seed, length=120 if seed % 3 else 400)
    out = _both(prog, dram=None, sp=None, tensors=inputs, window=len(inputs["mem"]), cfg=cfg)
    assert out[0] == "ok", out[1]


# --- the compiled 128^3 int8 matmul -------------------------------------------------------------------
@needs_native
def test_compiled_matmul_agrees_and_is_correct() -> None:
    from tinynpu.compiler.matmul import compile_matmul

    compiled = compile_matmul(128, 128, 128, dtype="int8", schedule="auto", cfg=DEFAULT)
    inputs = compiled.make_inputs(0)
    results = {}
    for engine in ("python", "native"):
        m = Machine(DEFAULT, ISA)
        m.load(compiled.program)
        for name, value in compiled.to_device(inputs).items():
            m.write_tensor(name, value)
        stats = m.run(engine=engine)
        assert stats.engine == engine
        figures = stats.to_json()
        del figures["wall_seconds"], figures["engine"]
        results[engine] = (json.dumps(figures), stats.timeline, m.read_tensor("C"))
    py, nat = results["python"], results["native"]
    assert nat[0] == py[0]
    assert nat[1] == py[1]
    np.testing.assert_array_equal(nat[2], py[2])
    np.testing.assert_array_equal(nat[2], compiled.reference(inputs)["C"])
    assert json.loads(py[0])["macs"] == 128**3


# --- engine selection ---------------------------------------------------------------------------------
def test_unknown_engine_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    m = machine([HALT])
    with pytest.raises(UsageError, match="engine must be one of auto, native, python, not 'bogus'"):
        m.run(engine="bogus")
    monkeypatch.setenv("TINYNPU_ENGINE", "bogus")
    with pytest.raises(UsageError, match="TINYNPU_ENGINE must be one of auto, native, python, not 'bogus'"):
        m.run()


def test_native_refuses_fp32_and_functional_runs() -> None:
    with pytest.raises(UsageError, match=r"native simulator core cannot run here: config 'fp32' is float32"):
        machine([HALT], FP32).run(engine="native")
    with pytest.raises(UsageError, match=r"cannot run here: the native core always computes timing"):
        machine([HALT]).run(engine="native", timing=False)
    assert machine([HALT], FP32).run(engine="auto").engine == "python"
    assert machine([HALT]).run(engine="auto", timing=False).engine == "python"


@needs_native
def test_auto_and_default_pick_native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINYNPU_ENGINE", raising=False)
    assert machine([HALT]).run().engine == "native"
    assert machine([HALT]).run(engine="auto").engine == "native"
    monkeypatch.setenv("TINYNPU_ENGINE", "python")
    assert machine([HALT]).run().engine == "python"


def test_native_off_makes_auto_run_python(monkeypatch: pytest.MonkeyPatch) -> None:
    # library() remembers each outcome per setting (TINYNPU_NATIVE, CC, TINYNPU_CACHE), so no cache to clear
    monkeypatch.setenv("TINYNPU_NATIVE", "0")
    with pytest.raises(NativeUnavailable, match="TINYNPU_NATIVE=0"):
        native.library()
    assert machine([HALT]).run(engine="auto").engine == "python"
    with pytest.raises(UsageError, match="TINYNPU_NATIVE=0 turns the native core off"):
        machine([HALT]).run(engine="native")


def test_failing_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TINYNPU_NATIVE", raising=False)
    monkeypatch.setenv("CC", "false")
    monkeypatch.setenv("TINYNPU_CACHE", str(tmp_path))  # a fresh cache: nothing built earlier is reused
    with pytest.raises(NativeUnavailable, match=r"^false could not build \S*core\.c \(exit 1\)"):
        native.library()
    assert not list(tmp_path.glob("*.so")), "a failed build must leave nothing to reuse"
    with pytest.raises(UsageError, match=r"cannot run here: false could not build \S*core\.c"):
        machine([HALT]).run(engine="native")
    assert machine([HALT]).run(engine="auto").engine == "python"


def test_missing_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TINYNPU_NATIVE", raising=False)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(NativeUnavailable, match=r"^cannot find the C compiler \S*no-such-cc: "):
        native.library()
    assert machine([HALT]).run(engine="auto").engine == "python"


def test_native_is_available_when_required() -> None:
    if REQUIRED:
        native.library()  # raises NativeUnavailable (a failure, not a skip) if the core cannot be built
        assert machine([HALT]).run(engine="native").engine == "native"
    elif NATIVE_REASON is not None:
        pytest.skip(f"the native core is unavailable ({NATIVE_REASON}); TINYNPU_REQUIRE_NATIVE=1 makes "
                    "this a failure")
    else:
        assert machine([HALT]).run(engine="native").engine == "native"
