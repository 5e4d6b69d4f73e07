"""Energy accounting: small programs priced by hand, the config's energy table and its errors.

Every expected figure below is worked out in the comments from what each
instruction does (bytes per scratchpad row, MACs per tmm step, elements per
ALU row), independently of simulator/stats.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_sim_support import DEFAULT, FP32, HALT, SYNC, load, machine, scope, units

from tinynpu.cli import main
from tinynpu.isa import ArchConfig, load_config
from tinynpu.simulator.energy import COMPONENTS, Events, energy_of

T = DEFAULT.tile
assert T == 16, "the hand-computed figures below assume the default config's 16-element rows"

# Default: int8 a/b rows are 16 B, int32 acc rows 64 B.
MIXED = [
    load("a", 0, 0),                                       # DRAM 256 B; a writes 16 rows x 16 B = 256
    load("b", 0, 0x100, cols=8, stride=8),                 # DRAM 128 B; b writes 256 (short rows zero-filled)
    ("zero", {"scope": scope("a"), "sp_row": 16, "rows": 32}),  # a writes 32 x 16 = 512 B, no DRAM
    SYNC,
    ("tmm", {"acc": 0, "a": 0, "b": 0, "accumulate": 0}),  # 4096 MACs; a, b read 256; acc writes 1024, no read
    ("tmm", {"acc": 0, "a": 0, "b": 0, "accumulate": 1}),  # 4096 MACs; a, b read 256; acc reads and writes 1024
    SYNC,
    ("vmax", {"dst": 0, "imm": 0, "rows": 16}),            # 256 elements; acc reads 1024, writes 1024
    ("vadd", {"dst": 0, "src": 0, "rows": 16}),            # 256 elements; acc reads 2 x 1024, writes 1024
    ("vaddrow", {"dst": 16, "src": 0, "rows": 2}),         # 32 elements; acc reads 2 x 64 + 64, writes 128
    SYNC,
    ("store", {"sp_row": 0, "dram": 0x1000, "rows": 16, "cols": 16, "stride": 16, "narrow": 1,
               "shift": 2}),                               # 256 requantized; acc reads 1024; DRAM 256 B
    ("store", {"sp_row": 0, "dram": 0x2000, "rows": 4, "cols": 8, "stride": 32}),  # acc reads 128; DRAM 128 B
    HALT,
]
MIXED_EVENTS = {
    "macs": 2 * 4096,
    "alu_elements": 256 + 256 + 32 + 256,
    "a_read": 512, "a_write": 256 + 512,
    "b_read": 512, "b_write": 256,
    "acc_read": 1024 + 1024 + 2048 + 192 + 1024 + 128,
    "acc_write": 1024 + 1024 + 1024 + 1024 + 128,
    "dram": 256 + 128 + 256 + 128,
}


def _expected_pj(ev: dict[str, int], cfg: ArchConfig, *, cycles: int, busy: int) -> dict[str, float]:
    """The breakdown docs/energy.md defines, from hand-counted events and the config's per-action figures
    (tests/test_energy_table.py checks those against the documented formulas)."""
    e = cfg.energy
    return {
        "mac": ev["macs"] * e.mac_pj,
        "array_idle": (cycles - busy) * e.array_leakage_pj_per_cycle,
        "alu": ev["alu_elements"] * e.alu_pj_per_element,
        "a_reg": ev["a_read"] * e.scratchpad_read_pj("a_reg") + ev["a_write"] * e.scratchpad_write_pj("a_reg"),
        "b_reg": ev["b_read"] * e.scratchpad_read_pj("b_reg") + ev["b_write"] * e.scratchpad_write_pj("b_reg"),
        "acc": ev["acc_read"] * e.scratchpad_read_pj("acc") + ev["acc_write"] * e.scratchpad_write_pj("acc"),
        "dram": ev["dram"] * e.dram_pj_per_byte,
        "static": cycles * e.static_pj_per_cycle + busy * e.array_leakage_pj_per_cycle,
        "clock": cycles * e.clock_pj_per_cycle,  # no clock gating in the shipped configs
    }


@pytest.mark.usefixtures("sim_engine")
def test_mixed_program_energy_by_hand() -> None:
    m = machine(MIXED)
    stats = m.run()
    assert stats.cycles > 0
    busy = 2 * DEFAULT.tmm_interval_cycles  # two single-step tmm: the array computes 2 x 16 cycles
    assert stats.busy_cycles["tensor"] == busy
    want = _expected_pj(MIXED_EVENTS, DEFAULT, cycles=stats.cycles, busy=busy)
    got = stats.to_json()
    assert list(got["energy_breakdown_pj"]) == list(COMPONENTS)
    assert got["energy_breakdown_pj"] == pytest.approx(want, rel=1e-12)
    assert got["energy_pj"] == pytest.approx(sum(want.values()), rel=1e-12)
    # 1 GHz: cycles ns = cycles * 1e-9 s
    assert got["edp"] == pytest.approx(sum(want.values()) * stats.cycles * 1e-9, rel=1e-12)
    assert got["edp_units"] == "pJ*s"
    assert got["energy_figures"]["given"] == [] and got["energy_figures"]["dram_interface"] == "DDR4"


@pytest.mark.usefixtures("sim_engine")
def test_tmm_block_counts_padding_and_first_steps() -> None:
    # m=2, n=1, k=3 over zero scratchpads: 6 steps of 4096 MACs whatever the data (padding counts);
    # a, b read 6 x 256 B; acc written 6 x 1024 B and read on the 4 steps that are not an output tile's first.
    m = machine([("tmm", {"acc": 0, "a": 0, "b": 0, "m": 2, "n": 1, "k": 3, "accumulate": 0}), HALT])
    stats = m.run()
    ev = {"macs": 6 * 4096, "alu_elements": 0, "a_read": 6 * 256, "a_write": 0, "b_read": 6 * 256,
          "b_write": 0, "acc_read": 4 * 1024, "acc_write": 6 * 1024, "dram": 0}
    want = _expected_pj(ev, DEFAULT, cycles=stats.cycles, busy=6 * 16)
    assert dict(stats.energy.breakdown_pj) == pytest.approx(want, rel=1e-12)


def test_fp32_prices_float_macs_and_bigger_scratchpads() -> None:
    # fp32 rows are 64 B in every scope: load a 16 rows (1024 B), one tmm (4096 MACs; a, b read 1024;
    # acc writes 1024), store 16 x 16 floats (acc reads 1024, DRAM 1024 B; no requantization).
    prog = [load("a", 0, 0, stride=64), load("b", 0, 0, stride=64, signal=units("tensor")),
            ("tmm", {"acc": 0, "a": 0, "b": 0, "accumulate": 0, "wait": units("load"), "signal": units("store")}),
            ("store", {"sp_row": 0, "dram": 0x1000, "rows": 16, "stride": 64, "wait": units("tensor")}), HALT]
    stats = machine(prog, FP32).run()
    ev = {"macs": 4096, "alu_elements": 0, "a_read": 1024, "a_write": 1024, "b_read": 1024, "b_write": 1024,
          "acc_read": 1024, "acc_write": 1024, "dram": 1024 + 1024 + 1024}
    assert FP32.energy.mac_pj == pytest.approx(3.7 + 0.9)  # float32 multiply and add (Horowitz 2014)
    want = _expected_pj(ev, FP32, cycles=stats.cycles, busy=16)
    assert dict(stats.energy.breakdown_pj) == pytest.approx(want, rel=1e-12)


def test_without_timing_there_is_no_cycle_energy_nor_delay() -> None:
    stats = machine(MIXED).run(timing=False)
    assert stats.cycles == 0
    parts = dict(stats.energy.breakdown_pj)
    assert parts["static"] == parts["array_idle"] == parts["clock"] == 0 and stats.energy.edp == 0
    assert parts["mac"] == pytest.approx(MIXED_EVENTS["macs"] * 0.3)


def test_both_cores_give_identical_energy() -> None:
    rng = np.random.default_rng(3)
    runs = []
    for engine in ("python", "native"):
        m = machine(MIXED)
        m.write_dram(0, rng.integers(-128, 128, 512).astype(np.int8))
        stats = m.run(engine=engine)
        runs.append((stats.engine, stats.to_json()))
    (e1, j1), (e2, j2) = runs
    assert (e1, e2) == ("python", "native")
    for key in ("energy_pj", "energy_breakdown_pj", "edp", "energy_figures"):
        assert j1[key] == j2[key], key
    assert all(j1["energy_breakdown_pj"][c] > 0 for c in ("mac", "array_idle", "static", "dram")), j1


def test_energy_of_prices_each_event_once() -> None:
    cfg = load_config("default")
    zero = {"a_reg": 0, "b_reg": 0, "acc": 0}

    def events(**kw: object) -> Events:
        base: dict[str, object] = {"macs": 0, "alu_elements": {}, "scratchpad_read_bytes": zero,
                                   "scratchpad_write_bytes": zero, "dram_bytes": 0, "cycles": 0}
        return Events(**{**base, **kw})  # type: ignore[arg-type]

    e = cfg.energy
    assert energy_of(cfg, events(macs=1)).total_pj == pytest.approx(0.3)
    assert energy_of(cfg, events(scratchpad_write_bytes={**zero, "acc": 1})).total_pj == pytest.approx(
        1.25 * math.sqrt(64 / 8))
    assert energy_of(cfg, events(alu_elements={"alu": 2, "requantize": 3})).total_pj == pytest.approx(5 * 0.1)
    idle = energy_of(cfg, events(cycles=1000))
    parts = dict(idle.breakdown_pj)
    assert parts["array_idle"] == pytest.approx(1000 * e.array_leakage_pj_per_cycle)
    assert parts["static"] == pytest.approx(1000 * e.static_pj_per_cycle)
    assert idle.seconds == pytest.approx(1e-6) and idle.edp == pytest.approx(idle.total_pj * 1e-6)
    busy = dict(energy_of(cfg, events(cycles=1000, array_busy_cycles=600)).breakdown_pj)
    assert busy["array_idle"] == pytest.approx(400 * e.array_leakage_pj_per_cycle)
    assert busy["static"] == pytest.approx(1000 * e.static_pj_per_cycle + 600 * e.array_leakage_pj_per_cycle)
    # The leakage is the same whether the array waits or not: only its component changes.
    assert sum(busy.values()) == pytest.approx(sum(parts.values()))
    with pytest.raises(ValueError, match="scratchpad_read_bytes must give bytes >= 0 for exactly"):
        events(scratchpad_read_bytes={"a_reg": 1})
    with pytest.raises(ValueError, match="cycles must be an integer >= 0, not -1"):
        events(cycles=-1)
    with pytest.raises(ValueError, match="alu_elements must give elements >= 0 per pricing class"):
        events(alu_elements={"alu": -1})


def test_clock_gating_clocks_only_while_the_array_computes(tmp_path: Path) -> None:
    path = tmp_path / "gated.yaml"
    path.write_text("name: gated\nbase: default\nenergy: {clock_gating: true}\n")
    gated = load_config(path)
    assert gated.energy.clock_gating and not DEFAULT.energy.clock_gating
    zero = {"a_reg": 0, "b_reg": 0, "acc": 0}
    ev = Events(macs=0, alu_elements={}, scratchpad_read_bytes=zero, scratchpad_write_bytes=zero, dram_bytes=0,
                cycles=1000, array_busy_cycles=250)
    assert dict(energy_of(gated, ev).breakdown_pj)["clock"] == pytest.approx(250 * gated.energy.clock_pj_per_cycle)
    assert dict(energy_of(DEFAULT, ev).breakdown_pj)["clock"] == pytest.approx(1000 * DEFAULT.energy.clock_pj_per_cycle)


def _dram_bound(cfg: ArchConfig) -> list[tuple[str, dict[str, int]]]:
    """Load 8 tiles of A (the array waits on DRAM), then one tmm that waits for the last."""
    t = cfg.tile
    loads = [load("a", i * t, i * t * t, cfg=cfg) for i in range(7)]
    return [*loads, load("a", 7 * t, 7 * t * t, cfg=cfg, signal=units("tensor")),
            ("tmm", {"acc": 0, "a": 0, "b": 0, "accumulate": 0, "wait": units("load")}), HALT]


def test_an_array_waiting_on_dram_pays_for_its_pes_as_t_squared(tmp_path: Path) -> None:
    """T = 8, 16, 32 at the same DRAM bandwidth: the array waits, and each cycle of waiting costs T^2 PEs."""
    costs = {}
    for name in ("t8", "default", "t32"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"name: {name}-bw\nbase: {name}\ndram: {{bytes_per_cycle: 16}}\n")
        cfg = load_config(path)
        stats = machine(_dram_bound(cfg), cfg).run()
        busy = stats.busy_cycles["tensor"]
        idle = stats.cycles - busy
        assert idle > 2 * busy, (name, stats.cycles, busy)  # it mostly waits
        parts = dict(stats.energy.breakdown_pj)
        costs[cfg.tile] = parts["array_idle"] / idle
        assert parts["array_idle"] == pytest.approx(idle * cfg.energy.array_leakage_pj_per_cycle)
    assert costs[16] == pytest.approx(4 * costs[8]) and costs[32] == pytest.approx(4 * costs[16])


def test_sim_and_run_json_report_energy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = tmp_path / "p.bin"
    from test_sim_support import program
    program(MIXED).save(prog)
    assert main(["sim", str(prog), "--json"]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert sim["energy_pj"] == pytest.approx(sum(sim["energy_breakdown_pj"].values()))
    assert sim["edp"] == pytest.approx(sim["energy_pj"] * sim["cycles"] * 1e-9)
    assert main(["run", "matmul", "--m", "32", "--n", "32", "--k", "32", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["verified"] is True
    assert run["energy_breakdown_pj"]["mac"] == pytest.approx(run["issued_macs"] * 0.3)
    assert run["energy_breakdown_pj"]["dram"] == pytest.approx(run["dram_bytes"] * 8 * 15.0)  # DDR4: 15 pJ/bit
    assert run["energy_figures"]["figures"]["dram_pj_per_byte"]["how"] == "derived"
    assert run["edp"] == pytest.approx(run["energy_pj"] * run["cycles"] * 1e-9)
