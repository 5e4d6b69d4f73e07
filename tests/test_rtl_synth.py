"""``tinynpu synth``: the gate table, the Yosys flow on a small module, caching, and (slow) the whole RTL."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from synth_support import require_yosys

from tinynpu.cli import main
from tinynpu.isa import load_config, load_isa
from tinynpu.isa.gen_verilog import generate_verilog
from tinynpu.isa.spec import DEFAULT_ISA_PATH
from tinynpu.rtl.runner import RTL_DIR
from tinynpu.rtl.synth import (
    GATES,
    SRAM_ARRAY_EFFICIENCY,
    SRAM_BITCELL_UM2,
    SynthError,
    _hierarchy_rows,
    gate_cost,
    header_inputs,
    logic_key,
    module_stat,
    synth_key,
    synthesize,
    with_tile,
    yosys_text,
)

ISA = load_isa()
CFG = load_config("default", ISA)


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TINYNPU_CACHE", str(tmp_path))
    return tmp_path


def test_gate_costs() -> None:
    assert gate_cost("$_NOT_") == (0.532, 2) and gate_cost("$_XOR_") == (1.596, 12)
    assert gate_cost("$_DFF_P_") == (4.522, 24)
    assert gate_cost("$_DFF_PN0_") == (5.320, 28)                    # asynchronous reset
    assert gate_cost("$_DFFE_PP_") == pytest.approx((4.522 + 1.862, 36))  # enable: a mux in front
    assert gate_cost("$_SDFFE_PP0P_") == pytest.approx((4.522 + 1.064 + 1.862, 42))
    with pytest.raises(SynthError, match=r"no figure for the Yosys cell '\$_FOO_'"):
        gate_cost("$_FOO_")
    assert all(area > 0 and transistors > 0 for area, transistors in GATES.values())


def test_sv_is_rewritten_for_yosys_0_23() -> None:
    assert yosys_text("if (a < int'(b[f(c)])) x = uint'(y);") == "if (a < $signed(32'(b[f(c)]))) x = uint'(y);"
    assert yosys_text("package p;\nlocalparam int A = 1;\nendpackage\nmodule m import p::*; (") == (
        "\nlocalparam int A = 1;\n\nmodule m (")
    chain = ("function automatic logic [1:0] f(input logic x);\n  if (x) return 2'd1;\n  return '0;\nendfunction")
    assert yosys_text(chain) == (
        "function automatic logic [1:0] f(input logic x);\n  f = (x) ? 2'd1 :\n    '0;\nendfunction")
    with pytest.raises(SynthError, match="function g"):
        yosys_text("function automatic int g(input int x);\n  while (x) return 1;\n  return 0;\nendfunction")


def test_a_small_module_synthesizes_and_is_cached(fresh_cache: Path) -> None:
    """The requantizer at T = 8: gates counted, area and transistors from the table, a cache hit after."""
    require_yosys()
    ran: list[str] = []
    t8 = dataclasses.replace(CFG, tile=8, tmm_interval_cycles=8)
    stat = module_stat("tinynpu_requant", t8, ran)
    assert ran == ["tinynpu_requant-T8"]
    [row], boxes = _hierarchy_rows(stat, "tinynpu_requant")
    by_type = next(iter(stat["modules"].values()))["num_cells_by_type"]
    assert row.cells == sum(by_type.values()) > 50 and not boxes
    assert row.area_um2 == pytest.approx(sum(n * gate_cost(c)[0] for c, n in by_type.items()))
    assert row.transistors == sum(n * gate_cost(c)[1] for c, n in by_type.items())
    again: list[str] = []
    assert module_stat("tinynpu_requant", t8, again) == stat and again == []
    # Another name and DRAM latency, the same hardware: the same cache entry.
    renamed = dataclasses.replace(t8, name="t8-renamed", dram_latency_cycles=t8.dram_latency_cycles + 7)
    assert module_stat("tinynpu_requant", renamed, again) == stat and again == []
    assert len(list((fresh_cache / "synth").glob("tinynpu_requant-*.json"))) == 1
    # Twice the lanes, about twice the logic.
    [row16], _ = _hierarchy_rows(module_stat("tinynpu_requant", CFG, ran), "tinynpu_requant")
    assert 1.6 < row16.cells / row.cells < 2.4


def test_cache_keys_follow_what_the_synthesis_reads(tmp_path: Path) -> None:
    """Keys change with the values a module reads and nothing else (no Yosys run needed)."""
    # The logic: not with the name or the DRAM latency (only the testbench's DRAM model reads it) ...
    assert logic_key(dataclasses.replace(CFG, name="other", dram_latency_cycles=CFG.dram_latency_cycles + 7)) == (
        logic_key(CFG))
    # ... but with the DRAM port width (the DMA units' beats) and the tile edge.
    assert logic_key(dataclasses.replace(CFG, dram_bytes_per_cycle=8)) != logic_key(CFG)
    assert logic_key(with_tile(CFG, 32)) != logic_key(CFG)
    # An ISA change (vrequant's and vrsqrt's functs swapped: every funct of opcode 6 is taken) re-keys the ALU
    # and the dispatcher's decode, not the MAC array.
    text = DEFAULT_ISA_PATH.read_text(encoding="utf-8")
    six, fifteen = (f"      - {{name: funct,  <<: *f_funct,  value: {v}}}" for v in (6, 15))
    assert text.count(six) == text.count(fifteen) == 1, "the shipped vrequant or vrsqrt funct moved; update this test"
    swapped = text.replace(six, "SIX").replace(fifteen, six).replace("SIX", fifteen)
    (tmp_path / "isa.yaml").write_text(swapped, encoding="utf-8")
    headers = [generate_verilog(isa, CFG) for isa in (ISA, load_isa(tmp_path / "isa.yaml"))]
    assert headers[0] != headers[1]
    for module, changes in (("tinynpu_mac_array", False), ("tinynpu_alu_unit", True), ("tinynpu_dispatch", True)):
        source = {module: (RTL_DIR / f"{module}.sv").read_text(encoding="utf-8")}
        assert (synth_key(source, headers[0]) != synth_key(source, headers[1])) is changes, module
    used = header_inputs(headers[0], [(RTL_DIR / "tinynpu_mac_array.sv").read_text(encoding="utf-8")])
    assert "localparam int TNPU_TILE " in used and "TNPU_VREQUANT" not in used and "digest" not in used


def small_acc_config(tmp_path: Path) -> str:
    """The default config file with a 192-row accumulator (whole 16-row tiles, not whole 128-row ones)."""
    text = CFG.source.read_text(encoding="utf-8").replace("name: default", "name: acc192")
    text = text.replace("acc:   {rows: 1024}", "acc:   {rows: 192}")
    path = tmp_path / "acc192.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_config(path, ISA).rows("acc") == 192
    return str(path)


@pytest.mark.parametrize("argv, message", [
    (["--config", "nosuch"], "nosuch"),
    (["--tile", "37"], "--tile must be a power of two from 4 to 128, not 37."),
    (["--config", "SMALL_ACC", "--tile", "128"], "--tile 128: scratchpad acc of config 'acc192' ("),
])
def test_synth_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                           message: str) -> None:
    argv = [small_acc_config(tmp_path) if a == "SMALL_ACC" else a for a in argv]
    assert main(["synth", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_with_tile_keeps_rows_and_steps_per_row() -> None:
    """``--tile`` relates to the config as t32 does to default: same rows, one T^3 step per T cycles."""
    t64 = with_tile(CFG, 64)
    assert (t64.name, t64.tile, t64.tmm_interval_cycles, t64.scope_rows) == ("default-t64", 64, 64, CFG.scope_rows)
    assert t64.scope_bytes("acc") == 4 * CFG.scope_bytes("acc")
    assert with_tile(CFG, CFG.tile) is CFG


@pytest.mark.slow
def test_synth_default_config(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole RTL: every module synthesized, scratchpads from the SRAM model, totals add up."""
    require_yosys()
    assert main(["synth", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {m["name"]: m for m in out["modules"]}
    assert rows["tinynpu_mac_array"]["how"] == "synthesized" and rows["tinynpu_dispatch"]["cells"] > 100
    assert rows["tinynpu_queue"]["instances"] == 4
    acc = rows["acc scratchpad (SRAM)"]
    assert acc["area_um2"] == pytest.approx(8 * CFG.scope_bytes("acc") * SRAM_BITCELL_UM2 / SRAM_ARRAY_EFFICIENCY)
    assert out["total"]["area_um2"] == pytest.approx(sum(m["area_um2"] for m in out["modules"]))
    assert not out["extrapolated"]
    units = out["transformer_units"]  # what the transformer instructions' units add
    assert units["modules"] and all(rows[name]["how"] == "synthesized" for name in units["modules"])
    assert units["area_mm2"] * 1e6 == pytest.approx(sum(rows[name]["area_um2"] for name in units["modules"]))
    assert units["share"] == pytest.approx(units["area_mm2"] / out["total"]["area_mm2"])


@pytest.mark.slow
def test_large_mac_array_is_extrapolated() -> None:
    """T = 64: the MAC array from the fit, the logic scaled from the generated config; both say so."""
    require_yosys()
    report = synthesize(with_tile(CFG, 64), CFG)
    mac = next(m for m in report.modules if m.name == "tinynpu_mac_array")
    assert mac.how == "extrapolated" and "64x64 extrapolated from synthesized 8x8, 16x16, 32x32" in mac.note
    assert report.extrapolated and report.tile == 64
