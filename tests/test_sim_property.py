"""Property: random race-free programs give the same machine state with timing on and off."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_support import DEFAULT, ISA, machine, scope, units

pytestmark = pytest.mark.usefixtures("sim_engine")  # each test runs on both simulator cores

T = DEFAULT.tile
ROWS = 64  # stay in a small window so instructions touch the same rows often
DRAM_WINDOW = 4096


@st.composite
def instruction(draw: st.DrawFn) -> tuple[str, dict[str, int]]:
    kind = draw(st.sampled_from(["load", "zero", "store", "tmm", "vadd", "vaddrow", "vmax", "vmin", "vmul",
                                 "vshr"]))
    rows = draw(st.integers(1, 16))
    row = draw(st.integers(0, ROWS - 16))
    if kind == "load":
        sc = draw(st.sampled_from(["a", "b", "acc"]))
        cols = draw(st.integers(1, T))
        stride = draw(st.integers(0, 8)) * 16
        addr = draw(st.integers(0, 64)) * 4
        return "load", {"scope": scope(sc), "sp_row": row, "dram": addr, "stride": stride, "rows": rows,
                        "cols": cols}
    if kind == "zero":
        return "zero", {"scope": scope(draw(st.sampled_from(["a", "b", "acc"]))), "sp_row": row, "rows": rows}
    if kind == "store":
        narrow = draw(st.integers(0, 1))
        return "store", {"sp_row": row, "dram": draw(st.integers(0, 64)) * 4 + 2048,
                         "stride": draw(st.integers(1, 4)) * 64, "rows": rows,
                         "cols": draw(st.integers(1, T)),
                         "narrow": narrow, "relu": draw(st.integers(0, 1)),
                         "shift": draw(st.integers(0, 31)) if narrow else 0}
    if kind == "tmm":
        m, n, k = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
        return "tmm", {"acc": draw(st.integers(0, 4 - m * n)), "a": draw(st.integers(0, 4 - m * k)),
                       "b": draw(st.integers(0, 4 - n * k)), "m": m, "n": n, "k": k,
                       "accumulate": draw(st.integers(0, 1))}
    if kind == "vadd":
        same = draw(st.booleans())
        src = row if same else (row + 16) % (ROWS - 16) if rows <= 16 else row
        if not same and abs(src - row) < rows:
            src = row
        return "vadd", {"dst": row, "src": src, "rows": rows}
    if kind == "vaddrow":
        src = draw(st.integers(0, ROWS - 1))
        if row <= src < row + rows:
            src = (row + rows) % ROWS if not (row <= (row + rows) % ROWS < row + rows) else ROWS - 1
            if row <= src < row + rows:
                src = 0 if row > 0 else ROWS - 1
        return "vaddrow", {"dst": row, "src": src, "rows": rows}
    if kind == "vshr":
        return "vshr", {"dst": row, "shift": draw(st.integers(0, 31)), "rows": rows}
    return kind, {"dst": row, "imm": draw(st.integers(-(2**31), 2**31 - 1)), "rows": rows}


UNIT = {i.mnemonic: ISA.unit_ids[i.unit] for i in ISA.instructions}


@st.composite
def programs(draw: st.DrawFn) -> list[tuple[str, dict[str, int]]]:
    """Every instruction is ordered after the previous one (same unit, a token, or a sync): race-free."""
    body = draw(st.lists(instruction(), min_size=1, max_size=25))
    out: list[tuple[str, dict[str, int]]] = []
    for mnem, fields in body:
        if out and out[-1][0] != "sync" and UNIT[out[-1][0]] != UNIT[mnem]:
            if draw(st.booleans()):
                out.append(("sync", {}))
            else:
                prev_m, prev_f = out[-1]
                prev_f["signal"] = prev_f.get("signal", 0) | units(ISA.units[UNIT[mnem]].name)
                fields = {**fields, "wait": units(ISA.units[UNIT[prev_m]].name)}
        out.append((mnem, fields))
    out.append(("halt", {}))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2**32 - 1))
def test_timing_on_and_off_agree(prog: list[tuple[str, dict[str, int]]], seed: int) -> None:
    rng = np.random.default_rng(seed)
    init = rng.integers(0, 256, DRAM_WINDOW, dtype=np.uint8)
    states = []
    for timing in (True, False):
        m = machine(prog)
        m.write_dram(0, init)
        stats = m.run(timing=timing)
        states.append((m.read_dram(0, DRAM_WINDOW), {k: v.copy() for k, v in m.state.sp.items()}))
        assert stats.instructions_total == len(prog)
    (d0, s0), (d1, s1) = states
    assert d0 == d1
    for k in s0:
        assert np.array_equal(s0[k], s1[k])
