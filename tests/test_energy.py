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
from test_isa_spec import CFG_TEXT, _edit, _line_of, _place
from test_sim_support import DEFAULT, FP32, HALT, SYNC, load, machine, scope, units

from tinynpu.cli import main
from tinynpu.errors import SpecError
from tinynpu.isa import load_config
from tinynpu.isa.config import CONFIG_DIR, EnergyTable
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


def _expected_pj(ev: dict[str, int], *, mac: float, alu: float, a: float, b: float, acc: float,
                 dram: float, static: float, cycles: int) -> dict[str, float]:
    return {
        "mac": ev["macs"] * mac,
        "alu": ev["alu_elements"] * alu,
        "a_reg": (ev["a_read"] + ev["a_write"]) * a,
        "b_reg": (ev["b_read"] + ev["b_write"]) * b,
        "acc": (ev["acc_read"] + ev["acc_write"]) * acc,
        "dram": ev["dram"] * dram,
        "static": cycles * static,
    }


@pytest.mark.usefixtures("sim_engine")
def test_mixed_program_energy_by_hand() -> None:
    m = machine(MIXED)
    stats = m.run()
    assert stats.cycles > 0
    # default.yaml: MAC 0.2 + 0.1 pJ, ALU 0.1 pJ, a/b 2.5 pJ/B, acc 3.536 pJ/B, DRAM 162.5 pJ/B, 64 pJ/cycle
    want = _expected_pj(MIXED_EVENTS, mac=0.3, alu=0.1, a=2.5, b=2.5, acc=3.536, dram=162.5, static=64.0,
                        cycles=stats.cycles)
    got = stats.to_json()
    assert list(got["energy_breakdown_pj"]) == list(COMPONENTS)
    assert got["energy_breakdown_pj"] == pytest.approx(want, rel=1e-12)
    assert got["energy_pj"] == pytest.approx(sum(want.values()), rel=1e-12)
    # 1 GHz: cycles ns = cycles * 1e-9 s
    assert got["edp"] == pytest.approx(sum(want.values()) * stats.cycles * 1e-9, rel=1e-12)
    assert got["edp_units"] == "pJ*s"


@pytest.mark.usefixtures("sim_engine")
def test_tmm_block_counts_padding_and_first_steps() -> None:
    # m=2, n=1, k=3 over zero scratchpads: 6 steps of 4096 MACs whatever the data (padding counts);
    # a, b read 6 x 256 B; acc written 6 x 1024 B and read on the 4 steps that are not an output tile's first.
    m = machine([("tmm", {"acc": 0, "a": 0, "b": 0, "m": 2, "n": 1, "k": 3, "accumulate": 0}), HALT])
    stats = m.run()
    ev = {"macs": 6 * 4096, "alu_elements": 0, "a_read": 6 * 256, "a_write": 0, "b_read": 6 * 256,
          "b_write": 0, "acc_read": 4 * 1024, "acc_write": 6 * 1024, "dram": 0}
    want = _expected_pj(ev, mac=0.3, alu=0.1, a=2.5, b=2.5, acc=3.536, dram=162.5, static=64.0,
                        cycles=stats.cycles)
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
    # fp32.yaml: MAC 3.7 + 0.9 pJ, a/b 128 KiB -> 5 pJ/B, acc 64 KiB -> 3.536 pJ/B, 160 pJ/cycle
    want = _expected_pj(ev, mac=4.6, alu=0.9, a=5.0, b=5.0, acc=3.536, dram=162.5, static=160.0,
                        cycles=stats.cycles)
    assert dict(stats.energy.breakdown_pj) == pytest.approx(want, rel=1e-12)


def test_without_timing_there_is_no_static_energy_nor_delay() -> None:
    stats = machine(MIXED).run(timing=False)
    assert stats.cycles == 0
    parts = dict(stats.energy.breakdown_pj)
    assert parts["static"] == 0 and stats.energy.edp == 0
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
    for key in ("energy_pj", "energy_breakdown_pj", "edp"):
        assert j1[key] == j2[key], key


def test_energy_of_prices_each_event_once() -> None:
    cfg = load_config("default")
    zero = {"a_reg": 0, "b_reg": 0, "acc": 0}
    one_each = {
        "mac": Events(macs=1, alu_elements=0, scratchpad_read_bytes=zero, scratchpad_write_bytes=zero,
                      dram_bytes=0, cycles=0),
        "acc": Events(macs=0, alu_elements=0, scratchpad_read_bytes=zero,
                      scratchpad_write_bytes={**zero, "acc": 1}, dram_bytes=0, cycles=0),
        "static": Events(macs=0, alu_elements=0, scratchpad_read_bytes=zero, scratchpad_write_bytes=zero,
                         dram_bytes=0, cycles=1000),
    }
    assert energy_of(cfg, one_each["mac"]).total_pj == pytest.approx(0.3)
    assert energy_of(cfg, one_each["acc"]).total_pj == pytest.approx(3.536)
    e = energy_of(cfg, one_each["static"])
    assert e.total_pj == pytest.approx(64_000) and e.seconds == pytest.approx(1e-6)
    assert e.edp == pytest.approx(64_000 * 1e-6)
    with pytest.raises(ValueError, match="scratchpad_read_bytes must give bytes >= 0 for exactly"):
        Events(macs=0, alu_elements=0, scratchpad_read_bytes={"a_reg": 1}, scratchpad_write_bytes=zero,
               dram_bytes=0, cycles=0)
    with pytest.raises(ValueError, match="cycles must be an integer >= 0, not -1"):
        Events(macs=0, alu_elements=0, scratchpad_read_bytes=zero, scratchpad_write_bytes=zero,
               dram_bytes=0, cycles=-1)


def test_energy_table_constructor_validates() -> None:
    good = load_config("default").energy
    fields = {name: getattr(good, name) for name in good.__dataclass_fields__}
    with pytest.raises(SpecError, match=r"energy dram_pj_per_byte must be a finite number >= 0, not -1"):
        EnergyTable(**{**fields, "dram_pj_per_byte": -1})
    with pytest.raises(SpecError, match=r"must price exactly the scratchpads a_reg, b_reg, acc, not a_reg"):
        EnergyTable(**{**fields, "scratchpad_read_pj_per_byte": (("a_reg", 1.0),)})


@pytest.mark.parametrize("name", sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
def test_shipped_scratchpad_energies_follow_the_documented_scaling(name: str) -> None:
    """docs/energy.md: 1.25 pJ/B at 8 KiB, times sqrt(capacity / 8 KiB); leakage 0.5 pJ/cycle per KiB."""
    cfg = load_config(name)
    total_kib = 0.0
    for key in ("a_reg", "b_reg", "acc"):
        kib = cfg.scope_bytes(key) / 1024
        total_kib += kib
        expected = round(1.25 * math.sqrt(kib / 8), 3)
        assert cfg.energy.scratchpad_read_pj(key) == expected, (name, key)
        assert cfg.energy.scratchpad_write_pj(key) == expected, (name, key)
    assert cfg.energy.static_pj_per_cycle == 0.5 * total_kib
    assert cfg.energy.dram_pj_per_byte == 1300 / 8
    assert cfg.clock_mhz > 0


def test_energy_keys_do_not_change_the_build_hash(tmp_path: Path) -> None:
    path, _ = _edit(tmp_path, "cfg.yaml", CFG_TEXT, "static_pj_per_cycle: 64", "static_pj_per_cycle: 65")
    assert load_config(path).digest == load_config("default").digest


BAD_ENERGY = [
    # (case id, old, new, line needle, words)
    ("missing-write", "acc:   {read: 3.536, write: 3.536}", "acc:   {read: 3.536}", "acc:   {read: 3.536}",
     ["energy.scratchpad_pj_per_byte.acc.write is missing", "pJ to write one byte of the acc scratchpad"]),
    ("missing-dram", "  dram_pj_per_byte: 162.5", "", "energy:",
     ["energy.dram_pj_per_byte is missing", "pJ to move one byte across the DRAM port"]),
    ("missing-table", "energy:\n", "energy_table:\n", "name: default",
     ["energy.mac_pj.multiply is missing", "pJ of one multiply at the input dtype"]),
    ("missing-clock", "clock_mhz: 1000", "", "name: default", ["clock_mhz is missing", "clock frequency in MHz"]),
    ("negative", "static_pj_per_cycle: 64", "static_pj_per_cycle: -3", "static_pj_per_cycle: -3",
     ["energy.static_pj_per_cycle must be pJ of static (leakage) energy per clock cycle", "not -3"]),
    ("not-a-number", "multiply: 0.2", "multiply: cheap", "multiply: cheap",
     ["energy.mac_pj.multiply must be pJ of one multiply", "not 'cheap'"]),
    ("zero-clock", "clock_mhz: 1000", "clock_mhz: 0", "clock_mhz: 0", ["clock_mhz must be above 0 MHz"]),
    ("unknown-key", "  dram_pj_per_byte: 162.5", "  dram_pj_per_byte: 162.5\n  sram_pj: 1", "energy:",
     ["schema violation", "'sram_pj' was unexpected"]),
]


@pytest.mark.parametrize(("old", "new", "needle", "words"), [c[1:] for c in BAD_ENERGY],
                         ids=[c[0] for c in BAD_ENERGY])
def test_bad_energy_table(tmp_path: Path, old: str, new: str, needle: str, words: list[str]) -> None:
    path, text = _edit(tmp_path, "cfg.yaml", CFG_TEXT, old, new)
    with pytest.raises(SpecError) as info:
        load_config(path)
    message = info.value.message
    file, line = _place(message)
    assert file == str(path) and line == _line_of(text, needle), message
    for word in words:
        assert word in message, message


def test_bad_energy_table_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _edit(tmp_path, "cfg.yaml", CFG_TEXT, "  dram_pj_per_byte: 162.5", "")
    rc = main(["isa", "check", "--config", str(path)])
    err = capsys.readouterr().err
    assert rc != 0 and "energy.dram_pj_per_byte is missing" in err and "Traceback" not in err


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
    assert run["energy_breakdown_pj"]["dram"] == pytest.approx(run["dram_bytes"] * 162.5)
    assert run["edp"] == pytest.approx(run["energy_pj"] * run["cycles"] * 1e-9)
