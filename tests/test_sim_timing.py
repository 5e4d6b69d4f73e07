"""Cycle counts of small hand-analysed programs; every expected value is derived from the config here."""

from __future__ import annotations

import math

import pytest
from test_sim_support import DEFAULT, HALT, SYNC, load, machine, scope, units

pytestmark = pytest.mark.usefixtures("sim_engine")  # each test runs on both simulator cores

C = DEFAULT
T = C.tile
LOAD_BEATS = T * math.ceil(T * C.elem_bytes("a_reg") / C.dram_bytes_per_cycle)  # one int8 tile
LOAD_LAT = LOAD_BEATS + C.dram_latency_cycles
TMM1 = C.tmm_interval_cycles  # occupancy of one tmm16 step
TMM1_LAT = TMM1 + C.tmm_latency_cycles


def _timeline(m):
    return {i: (d, s, e) for i, _, _, d, s, e in m.run().timeline}


def test_single_load_latency_and_bandwidth() -> None:
    m = machine([load("a", 0, 0), HALT])
    stats = m.run()
    d, s, e = stats.timeline[0][3:]
    assert (d, s, e) == (0, 1, 1 + LOAD_LAT)
    assert stats.cycles == 1 + LOAD_LAT + 1  # halt dispatches when the load completes; cycles = d(halt) + 1
    assert stats.busy_cycles["load"] == LOAD_BEATS


def test_dependency_stall_on_token() -> None:
    m = machine([load("a", 0, 0), load("b", 0, 0x100, signal=units("tensor")),
                 ("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load")}), HALT])
    stats = m.run()
    tl = {i: (d, s, e) for i, _, _, d, s, e in stats.timeline}
    e0 = 1 + LOAD_LAT
    s1 = 1 + LOAD_BEATS  # the second load waits for the DRAM port only, then pipelines
    e1 = s1 + LOAD_LAT
    assert tl[1] == (1, s1, e1)
    assert tl[2] == (2, e1, e1 + TMM1_LAT)  # tmm starts when the token's producer completes
    assert e0 < e1
    assert stats.cycles == e1 + TMM1_LAT + 1
    assert stats.stall_cycles["tensor"]["token"] == e1 - (2 + 1)
    assert "dram_port" not in stats.stall_cycles["load"]  # waiting for its own unit is not a stall


def test_dma_overlaps_tmm_with_tokens() -> None:
    # tile 2's loads (other buffers) run while tmm 1 computes; 4-step tmm so compute is long
    big = {"m": 2, "n": 2, "k": 1}
    prog = [load("a", 0, 0, rows=2 * T), load("b", 0, 0x1000, rows=2 * T, signal=units("tensor")),
            ("tmm", {"acc": 0, "a": 0, "b": 0, **big, "wait": units("load")}),
            load("a", 2 * T, 0, rows=2 * T), load("b", 2 * T, 0x1000, rows=2 * T, signal=units("tensor")),
            ("tmm", {"acc": 4, "a": 2, "b": 2, **big, "wait": units("load")}), HALT]
    tl = _timeline(machine(prog))
    beats2 = 2 * LOAD_BEATS
    s1 = 1 + beats2
    e1 = s1 + beats2 + C.dram_latency_cycles
    tmm_occ = 4 * TMM1
    assert tl[2][1:] == (e1, e1 + tmm_occ + C.tmm_latency_cycles)
    s3 = s1 + beats2  # port free right after load 1: does not wait for the tmm
    assert tl[3][1] == s3 and s3 < e1 + tmm_occ  # overlap with compute
    s4 = s3 + beats2
    e4 = s4 + beats2 + C.dram_latency_cycles
    s5 = max(e4, e1 + tmm_occ)  # the tensor unit is free again after occupancy
    assert tl[5][1:] == (s5, s5 + tmm_occ + C.tmm_latency_cycles)


def test_queue_full_stalls_dispatch() -> None:
    n = 20
    zero = ("zero", {"scope": scope("a"), "sp_row": 0, "rows": T})
    stats = machine([zero] * n + [HALT]).run()
    tl = {i: (d, s, e) for i, _, _, d, s, e in stats.timeline}
    depth = C.queue_depth
    s = [1 + T * i for i in range(n)]  # zero: one row per cycle, after the previous completes
    d = []
    for i in range(n):
        d.append(max(d[-1] + 1 if d else 0, s[i - depth] + 1 if i >= depth else 0))
    for i in range(n):
        assert tl[i] == (d[i], s[i], s[i] + T)
    assert stats.stall_cycles["control"]["queue_full"] == sum(d[i] - d[i - 1] - 1 for i in range(1, n))
    assert stats.cycles == s[-1] + T + 1


def test_dram_port_tie_goes_to_load() -> None:
    store_beats = T * math.ceil(T * C.elem_bytes("acc") / C.dram_bytes_per_cycle)
    prog = [("zero", {"scope": scope("acc"), "sp_row": 0, "rows": T, "signal": units("store")}),
            ("store", {"sp_row": 0, "dram": 0x8000, "rows": T, "stride": 64, "wait": units("load")}),
            load("a", 0, 0), HALT]
    tl = _timeline(machine(prog))
    ready = 1 + T  # both the store (token from zero) and the load (load unit free) are ready here
    assert tl[2][1] == ready
    assert tl[1][1:] == (ready + LOAD_BEATS, ready + LOAD_BEATS + store_beats + C.dram_latency_cycles)


def test_port_goes_to_whoever_was_ready_first() -> None:
    prog = [("store", {"sp_row": 0, "dram": 0x8000, "rows": T, "stride": 64}), load("a", 0, 0), HALT]
    tl = _timeline(machine(prog))
    store_beats = T * math.ceil(T * C.elem_bytes("acc") / C.dram_bytes_per_cycle)
    assert tl[0][1] == 1
    assert tl[1][1] == 1 + store_beats


def test_sync_waits_for_completion() -> None:
    stats = machine([load("a", 0, 0), SYNC, load("a", 0, 0), HALT]).run()
    tl = {i: (d, s, e) for i, _, _, d, s, e in stats.timeline}
    e0 = 1 + LOAD_LAT
    assert tl[1][0] == e0
    assert tl[2] == (e0 + 1, e0 + 2, e0 + 2 + LOAD_LAT)
    # sync waits from cycle 1 to e0; halt from d(load 2) + 1 to that load's completion
    assert stats.stall_cycles["control"]["barrier"] == (e0 - 1) + LOAD_LAT


def test_zero_waits_for_loads_in_flight_and_alu_timing() -> None:
    alu = math.ceil(T / C.alu_rows_per_cycle) + C.alu_latency_cycles
    stats = machine([load("a", 0, 0), ("zero", {"scope": scope("b"), "sp_row": 0, "rows": T}),
                     ("vmax", {"dst": 0, "imm": 0, "rows": T}), HALT]).run()
    tl = {i: (d, s, e) for i, _, _, d, s, e in stats.timeline}
    e0 = 1 + LOAD_LAT
    assert tl[1] == (1, e0, e0 + T)
    assert tl[2] == (2, 3, 3 + alu)
    assert stats.stall_cycles["load"]["in_flight_loads"] == e0 - (1 + LOAD_BEATS)


def test_utilization_definition() -> None:
    stats = machine([("tmm", {"acc": 0, "a": 0, "b": 0, "m": 4, "n": 4, "k": 4}), HALT]).run()
    steps = 64
    assert stats.macs == steps * T**3
    assert stats.cycles == 1 + steps * C.tmm_interval_cycles + C.tmm_latency_cycles + 1
    assert stats.to_json()["utilization"] == stats.macs / (stats.cycles * C.macs_per_cycle)


def test_token_from_a_later_instruction_in_program_order() -> None:
    prog = [("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load")}), load("a", 0, 0, signal=units("tensor")),
            HALT]
    for timing in (True, False):
        stats = machine(prog).run(timing=timing)
        assert stats.instructions_total == 3
    tl = _timeline(machine(prog))
    e1 = 2 + LOAD_LAT
    assert tl[1] == (1, 2, e1)
    assert tl[0] == (0, e1, e1 + TMM1_LAT)


def test_store_later_in_program_order_takes_the_port_first() -> None:
    steps = 64
    prog = [("zero", {"scope": scope("acc"), "sp_row": 0, "rows": T, "signal": units("store")}),
            ("tmm", {"acc": 8, "a": 0, "b": 0, "m": 4, "n": 4, "k": 4, "signal": units("load")}),
            load("a", 0, 0, wait=units("tensor")),
            ("store", {"sp_row": 0, "dram": 0x8000, "rows": T, "stride": 64, "wait": units("load")}), HALT]
    tl = _timeline(machine(prog))
    e_tmm = 2 + steps * C.tmm_interval_cycles + C.tmm_latency_cycles
    assert tl[1][2] == e_tmm
    assert tl[3][1] == 1 + T  # the store is ready when the zero completes, long before the load
    assert tl[2][1] == e_tmm
