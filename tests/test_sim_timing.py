"""Cycle counts of small hand-analysed programs; every expected value is derived from the config here.

Every test runs on the t8, default and t32 configs (:func:`test_sim_support.over_tiles`): beats,
step intervals, latencies and tile sizes all follow the config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from test_sim_support import HALT, ISA, SYNC, load, machine, over_tiles, scope, units

from tinynpu.isa import ArchConfig

pytestmark = pytest.mark.usefixtures("sim_engine")  # each test runs on both simulator cores


@dataclass(frozen=True)
class Timing:
    """The figures the expectations are built from, for one config."""

    cfg: ArchConfig

    @property
    def t(self) -> int:
        return self.cfg.tile

    def beats(self, scope_key: str) -> int:
        """DRAM port cycles of one whole tile (T rows of T elements) of ``scope_key``."""
        return self.t * math.ceil(self.t * self.cfg.elem_bytes(scope_key) / self.cfg.dram_bytes_per_cycle)

    @property
    def load_beats(self) -> int:  # one int8 tile
        return self.beats("a_reg")

    @property
    def load_lat(self) -> int:
        return self.load_beats + self.cfg.dram_latency_cycles

    @property
    def tmm1(self) -> int:  # occupancy of one T x T x T step
        return self.cfg.tmm_interval_cycles

    @property
    def tmm1_lat(self) -> int:
        return self.tmm1 + self.cfg.tmm_latency_cycles

    @property
    def acc_row_bytes(self) -> int:
        return self.t * self.cfg.elem_bytes("acc")


def _timeline(m):
    return {i: (d, s, e) for i, _, _, d, s, e in m.run().timeline}


@over_tiles(ci=True)
def test_single_load_latency_and_bandwidth(cfg: ArchConfig) -> None:
    c = Timing(cfg)
    m = machine([load("a", 0, 0, cfg=cfg), HALT], cfg)
    stats = m.run()
    d, s, e = stats.timeline[0][3:]
    assert (d, s, e) == (0, 1, 1 + c.load_lat)
    assert stats.cycles == 1 + c.load_lat + 1  # halt dispatches when the load completes; cycles = d(halt) + 1
    assert stats.busy_cycles["load"] == c.load_beats


@over_tiles()
def test_dependency_stall_on_token(cfg: ArchConfig) -> None:
    c = Timing(cfg)
    m = machine([load("a", 0, 0, cfg=cfg), load("b", 0, 0x100, signal=units("tensor"), cfg=cfg),
                 ("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load")}), HALT], cfg)
    stats = m.run()
    tl = {i: (d, s, e) for i, _, _, d, s, e in stats.timeline}
    e0 = 1 + c.load_lat
    s1 = 1 + c.load_beats  # the second load waits for the DRAM port only, then pipelines
    e1 = s1 + c.load_lat
    assert tl[1] == (1, s1, e1)
    assert tl[2] == (2, e1, e1 + c.tmm1_lat)  # tmm starts when the token's producer completes
    assert e0 < e1
    assert stats.cycles == e1 + c.tmm1_lat + 1
    assert stats.stall_cycles["tensor"]["token"] == e1 - (2 + 1)
    assert "dram_port" not in stats.stall_cycles["load"]  # waiting for its own unit is not a stall


@over_tiles(ci=True)
def test_dma_overlaps_tmm_with_tokens(cfg: ArchConfig) -> None:
    c, T = Timing(cfg), cfg.tile
    # tile 2's loads (other buffers) run while tmm 1 computes; 4-step tmm so compute is long
    big = {"m": 2, "n": 2, "k": 1}
    prog = [load("a", 0, 0, rows=2 * T, cfg=cfg), load("b", 0, 0x1000, rows=2 * T, signal=units("tensor"), cfg=cfg),
            ("tmm", {"acc": 0, "a": 0, "b": 0, **big, "wait": units("load")}),
            load("a", 2 * T, 0, rows=2 * T, cfg=cfg),
            load("b", 2 * T, 0x1000, rows=2 * T, signal=units("tensor"), cfg=cfg),
            ("tmm", {"acc": 4, "a": 2, "b": 2, **big, "wait": units("load")}), HALT]
    tl = _timeline(machine(prog, cfg))
    beats2 = 2 * c.load_beats
    s1 = 1 + beats2
    e1 = s1 + beats2 + cfg.dram_latency_cycles
    tmm_occ = 4 * c.tmm1
    assert tl[2][1:] == (e1, e1 + tmm_occ + cfg.tmm_latency_cycles)
    s3 = s1 + beats2  # port free right after load 1: does not wait for the tmm
    assert tl[3][1] == s3 and s3 < e1 + tmm_occ  # overlap with compute
    s4 = s3 + beats2
    e4 = s4 + beats2 + cfg.dram_latency_cycles
    s5 = max(e4, e1 + tmm_occ)  # the tensor unit is free again after occupancy
    assert tl[5][1:] == (s5, s5 + tmm_occ + cfg.tmm_latency_cycles)


@over_tiles(ci=True)
def test_queue_full_stalls_dispatch(cfg: ArchConfig) -> None:
    T = cfg.tile
    n = 20
    zero = ("zero", {"scope": scope("a"), "sp_row": 0, "rows": T})
    stats = machine([zero] * n + [HALT], cfg).run()
    tl = {i: (d, s, e) for i, _, _, d, s, e in stats.timeline}
    depth = cfg.queue_depth
    s = [1 + T * i for i in range(n)]  # zero: one row per cycle, after the previous completes
    d = []
    for i in range(n):
        d.append(max(d[-1] + 1 if d else 0, s[i - depth] + 1 if i >= depth else 0))
    for i in range(n):
        assert tl[i] == (d[i], s[i], s[i] + T)
    assert stats.stall_cycles["control"]["queue_full"] == sum(d[i] - d[i - 1] - 1 for i in range(1, n))
    assert stats.cycles == s[-1] + T + 1


@over_tiles(ci=True)
def test_dram_port_tie_goes_to_load(cfg: ArchConfig) -> None:
    c, T = Timing(cfg), cfg.tile
    prog = [("zero", {"scope": scope("acc"), "sp_row": 0, "rows": T, "signal": units("store")}),
            ("store", {"sp_row": 0, "dram": 0x8000, "rows": T, "stride": c.acc_row_bytes, "wait": units("load")}),
            load("a", 0, 0, cfg=cfg), HALT]
    tl = _timeline(machine(prog, cfg))
    ready = 1 + T  # both the store (token from zero) and the load (load unit free) are ready here
    assert tl[2][1] == ready
    assert tl[1][1:] == (ready + c.load_beats, ready + c.load_beats + c.beats("acc") + cfg.dram_latency_cycles)


@over_tiles()
def test_port_goes_to_whoever_was_ready_first(cfg: ArchConfig) -> None:
    c, T = Timing(cfg), cfg.tile
    prog = [("store", {"sp_row": 0, "dram": 0x8000, "rows": T, "stride": c.acc_row_bytes}), load("a", 0, 0, cfg=cfg),
            HALT]
    tl = _timeline(machine(prog, cfg))
    assert tl[0][1] == 1
    assert tl[1][1] == 1 + c.beats("acc")


@over_tiles()
def test_sync_waits_for_completion(cfg: ArchConfig) -> None:
    c = Timing(cfg)
    stats = machine([load("a", 0, 0, cfg=cfg), SYNC, load("a", 0, 0, cfg=cfg), HALT], cfg).run()
    tl = {i: (d, s, e) for i, _, _, d, s, e in stats.timeline}
    e0 = 1 + c.load_lat
    assert tl[1][0] == e0
    assert tl[2] == (e0 + 1, e0 + 2, e0 + 2 + c.load_lat)
    # sync waits from cycle 1 to e0; halt from d(load 2) + 1 to that load's completion
    assert stats.stall_cycles["control"]["barrier"] == (e0 - 1) + c.load_lat


@over_tiles()
def test_zero_waits_for_loads_in_flight_and_alu_timing(cfg: ArchConfig) -> None:
    c, T = Timing(cfg), cfg.tile
    alu = math.ceil(T / cfg.alu_rows_per_cycle) + cfg.alu_latency_cycles
    stats = machine([load("a", 0, 0, cfg=cfg), ("zero", {"scope": scope("b"), "sp_row": 0, "rows": T}),
                     ("vmax", {"dst": 0, "imm": 0, "rows": T}), HALT], cfg).run()
    tl = {i: (d, s, e) for i, _, _, d, s, e in stats.timeline}
    e0 = 1 + c.load_lat
    assert tl[1] == (1, e0, e0 + T)
    assert tl[2] == (2, 3, 3 + alu)
    assert stats.stall_cycles["load"]["in_flight_loads"] == e0 - (1 + c.load_beats)


@over_tiles(ci=True)
def test_utilization_definition(cfg: ArchConfig) -> None:
    stats = machine([("tmm", {"acc": 0, "a": 0, "b": 0, "m": 4, "n": 4, "k": 4}), HALT], cfg).run()
    steps = 64
    assert stats.macs == steps * cfg.tile**3
    assert stats.cycles == 1 + steps * cfg.tmm_interval_cycles + cfg.tmm_latency_cycles + 1
    assert stats.to_json()["utilization"] == stats.macs / (stats.cycles * cfg.macs_per_cycle)


@over_tiles()
def test_token_from_a_later_instruction_in_program_order(cfg: ArchConfig) -> None:
    c = Timing(cfg)
    prog = [("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load")}),
            load("a", 0, 0, signal=units("tensor"), cfg=cfg), HALT]
    for timing in (True, False):
        stats = machine(prog, cfg).run(timing=timing)
        assert stats.instructions_total == 3
    tl = _timeline(machine(prog, cfg))
    e1 = 2 + c.load_lat
    assert tl[1] == (1, 2, e1)
    assert tl[0] == (0, e1, e1 + c.tmm1_lat)


@over_tiles()
def test_store_later_in_program_order_takes_the_port_first(cfg: ArchConfig) -> None:
    c, T = Timing(cfg), cfg.tile
    steps = 64
    prog = [("zero", {"scope": scope("acc"), "sp_row": 0, "rows": T, "signal": units("store")}),
            ("tmm", {"acc": 8, "a": 0, "b": 0, "m": 4, "n": 4, "k": 4, "signal": units("load")}),
            load("a", 0, 0, wait=units("tensor"), cfg=cfg),
            ("store", {"sp_row": 0, "dram": 0x8000, "rows": T, "stride": c.acc_row_bytes, "wait": units("load")}),
            HALT]
    tl = _timeline(machine(prog, cfg))
    e_tmm = 2 + steps * cfg.tmm_interval_cycles + cfg.tmm_latency_cycles
    assert tl[1][2] == e_tmm
    assert tl[3][1] == 1 + T  # the store is ready when the zero completes, long before the load
    assert tl[2][1] == e_tmm


@over_tiles(ci=True)
def test_transformer_instruction_timing(cfg: ArchConfig) -> None:
    """The new ALU timing classes: a reduction steps through rows * n source rows, a lookup through its
    table's rows first, the reciprocal units spend the YAML's cycles_per_row on every row; back to back,
    each starts when the previous one's occupancy ends."""
    T, rpc, lat = cfg.tile, cfg.alu_rows_per_cycle, cfg.alu_latency_cycles
    table_rows = math.ceil(256 / T)
    per_row = {c: ISA.timing_class[c].cycles_per_row for c in ("alu_recip", "alu_rsqrt")}
    rows = T - 3
    cases = [
        (("vredsum", {"dst": 4 * T, "src": 0, "n": 3, "rows": rows, "cols": 2, "shift": 5}),
         math.ceil(rows * 3 / rpc) + lat),
        (("vredmax", {"dst": 4 * T, "src": 0, "n": 1, "rows": 1, "cols": T}), math.ceil(1 / rpc) + lat),
        (("vlut", {"dst": table_rows, "src": 0, "rows": 5, "base": -128}), math.ceil((table_rows + 5) / rpc) + lat),
        (("vmulb", {"dst": T, "src": 0, "rows": 2 * T, "shift": 3}), math.ceil(2 * T / rpc) + lat),
        (("vsubb", {"dst": T, "src": 0, "rows": 7}), math.ceil(7 / rpc) + lat),
        (("vrecip", {"dst": 0, "src": 0, "rows": 3, "shift": 40}), 3 * per_row["alu_recip"] + lat),
        (("vrsqrt", {"dst": 8, "src": 0, "rows": 4, "shift": 20}), 4 * per_row["alu_rsqrt"] + lat),
    ]
    start = 1
    tl = _timeline(machine([ins for ins, _ in cases] + [HALT], cfg))
    for i, (ins, cycles) in enumerate(cases):
        assert tl[i][1:] == (start, start + cycles), (ins, tl[i])
        start += cycles
