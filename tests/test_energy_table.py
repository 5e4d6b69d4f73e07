"""A config's energy table: each figure derived from its sizes by the formulas docs/energy.md writes out, an
override reported as given, and every bad figure or interface refused with its file:line:col."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from test_isa_spec import _line_of, _place

from tinynpu.cli import main
from tinynpu.errors import SpecError
from tinynpu.isa import load_config
from tinynpu.isa.config import CONFIG_DIR
from tinynpu.isa.energy_model import (
    DERIVED,
    GIVEN,
    SRAM_ARRAY_EFFICIENCY,
    SRAM_BITCELL_UM2,
    TABLES_PATH,
    EnergyTable,
    Figure,
    dram_interfaces,
    tables,
)
from tinynpu.rtl import synth

# docs/energy.md, written out again here: the cited figures and what the formulas make of them.
HOROWITZ = {"int8": (0.2, 0.03), "int32": (3.1, 0.1), "float32": (3.7, 0.9)}  # (multiply, add) pJ
PJ_PER_BIT = {"DDR3": 20.3125, "DDR4": 15.0, "GDDR5": 14.0, "HBM2": 3.9, "LPDDR4": 8.0}
# The DDR4 row's derivation (docs/energy.md, "The DDR4 figure, derived"): Micron MT40A1G8's datasheet currents
# (mA), times (ns) and supplies (V) as gem5 gives them, and what CACTI 7's DDR4 I/O model printed for a DDR4-3200
# channel (mW: dynamic + PHY + termination and bias), over the channel's 64 pins x 3.2 Gb/s.
MT40A1G8 = {"vdd": 1.2, "vpp": 2.5, "tck": 0.833, "idd0": 48.0, "idd2n": 34.0, "idd3n": 43.0, "idd4r": 135.0,
            "idd4w": 123.0, "ipp0": 3.0, "ipp3n": 3.0, "tras": 32.0, "trp": 14.16}
CACTI_DDR4_IO_MW = {"read": 630.36 + 390.448 + 856.683, "write": 805.125 + 390.448 + 874.104}
DDR4_GBIT_PER_S = 64 * 3.2
DOCS = Path(__file__).resolve().parent.parent / "docs"
LEAK_MW_PER_UM2 = 0.07786052 / 6351.338  # Aladdin's 32-bit multiplier: leakage / area
CLOCK_FJ_PER_BIT = 7.936518


def _write(tmp_path: Path, text: str, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
def test_derived_figures_follow_the_documented_formulas(name: str) -> None:
    cfg = load_config(name)
    e = cfg.energy
    assert all(f.how == DERIVED for f in e.figures), [f.name for f in e.figures if f.how != DERIVED]
    assert e.mac_multiply_pj == HOROWITZ[cfg.input_dtype][0] and e.mac_add_pj == HOROWITZ[cfg.acc_dtype][1]
    assert e.alu_pj_per_element == e.alu_pj("requantize") == HOROWITZ[cfg.acc_dtype][1]
    for key in ("a_reg", "b_reg", "acc"):
        kib = cfg.scope_bytes(key) / 1024
        assert e.scratchpad_read_pj(key) == pytest.approx(1.25 * math.sqrt(kib / 8), rel=1e-12), key
        assert e.scratchpad_write_pj(key) == e.scratchpad_read_pj(key)
    assert e.dram_pj_per_byte == 8 * PJ_PER_BIT[e.dram_interface]
    per_cycle = 1e3 / cfg.clock_mhz  # mW -> pJ per cycle
    assert e.array_leakage_pj_per_cycle == pytest.approx(cfg.tile**2 * 1086.0 * LEAK_MW_PER_UM2 * per_cycle)
    sram_bits = 8 * sum(cfg.scope_bytes(k) for k in ("a_reg", "b_reg", "acc")) + 16384 * 128
    rest_um2 = cfg.tile * 21375.0 + sram_bits * 0.346 / 0.6
    assert e.static_pj_per_cycle == pytest.approx(rest_um2 * LEAK_MW_PER_UM2 * per_cycle)
    area = tables()["area"]
    bits = cfg.tile * area["register_bits_per_lane"] + area["register_bits_fixed"]
    assert e.clock_pj_per_cycle == pytest.approx(bits * CLOCK_FJ_PER_BIT / 1000)
    assert e.dram_channels == math.ceil(cfg.dram_bytes_per_cycle * cfg.clock_mhz / 1000
                                        / tables()["dram_interfaces"][e.dram_interface]["channel_gb_per_s"])


def test_the_sram_area_model_is_synths() -> None:
    assert (SRAM_BITCELL_UM2, SRAM_ARRAY_EFFICIENCY) == (synth.SRAM_BITCELL_UM2, synth.SRAM_ARRAY_EFFICIENCY)


def test_leakage_grows_with_the_array_as_t_squared() -> None:
    t8, t16, t32 = (load_config(n).energy.array_leakage_pj_per_cycle for n in ("t8", "default", "t32"))
    assert t16 == pytest.approx(4 * t8) and t32 == pytest.approx(4 * t16)


def test_an_override_is_reported_as_given(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: mine\nbase: default\nenergy:\n  dram_pj_per_byte: 100\n"
                            "  scratchpad_pj_per_byte: {acc: {read: 4}}\n  alu_pj_per_element: 0.5\n")
    e = load_config(path).energy
    given = {f.name: f for f in e.figures if f.how == GIVEN}
    alu = sorted(f.name for f in e.figures if f.name.startswith("alu_pj_per_element."))  # one per ALU class
    assert "alu_pj_per_element.alu" in alu and "alu_pj_per_element.requantize" in alu
    assert sorted(given) == sorted([*alu, "dram_pj_per_byte", "scratchpad_pj_per_byte.acc.read"])
    assert e.dram_pj_per_byte == 100 and e.scratchpad_read_pj("acc") == 4 and e.alu_pj("requantize") == 0.5
    assert given["dram_pj_per_byte"].basis == f"energy.dram_pj_per_byte in {path}"
    assert e.scratchpad_write_pj("acc") == load_config("default").energy.scratchpad_write_pj("acc")  # derived
    assert e.to_json()["given"] == [f.name for f in e.figures if f.how == GIVEN]


def test_the_interface_prices_dram_and_changes_no_binary(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: hbm\nbase: default\ndram: {interface: HBM2, bytes_per_cycle: 128}\n")
    cfg = load_config(path)
    assert cfg.energy.dram_pj_per_byte == pytest.approx(8 * 3.9)
    assert cfg.energy.dram_channels == 4  # 128 GB/s at 1 GHz over 32 GB/s channels
    same = _write(tmp_path, "name: hbm\nbase: default\ndram: {bytes_per_cycle: 128}\n", "ddr.yaml")
    assert load_config(same).digest == cfg.digest


@pytest.mark.parametrize("interface", sorted(PJ_PER_BIT))
def test_every_interface_prices_its_cited_figure(tmp_path: Path, interface: str) -> None:
    """Each row of the table, as docs/energy.md cites it; LPDDR4 at 16 B/cycle and 1 GHz takes 3 of its
    6.4 GB/s channels."""
    assert sorted(dram_interfaces()) == sorted(PJ_PER_BIT)  # a new row is cited here and in the docs too
    path = _write(tmp_path, f"name: x\nbase: default\ndram: {{interface: {interface}, bytes_per_cycle: 16}}\n")
    e = load_config(path).energy
    assert e.dram_pj_per_byte == pytest.approx(8 * PJ_PER_BIT[interface]) and e.dram_interface == interface
    channel = {"DDR3": 12.8, "DDR4": 25.6, "GDDR5": 32.0, "HBM2": 32.0, "LPDDR4": 6.4}[interface]
    assert e.dram_channels == math.ceil(16 / channel)


def test_the_ddr4_figure_is_its_documented_derivation() -> None:
    """TN-40-07's method on the datasheet's currents (mA x ns x V = pJ per device), a page of 128 bursts of 64
    bits per activation, plus CACTI's I/O power over the channel's bandwidth (mW per Gb/s = pJ/bit); the table
    gives the mean of read and write to two significant figures, and the docs state each step."""
    d = MT40A1G8
    burst_ns, trc = 4 * d["tck"], d["tras"] + d["trp"]
    act = d["vdd"] * (d["idd0"] * trc - d["idd3n"] * d["tras"] - d["idd2n"] * d["trp"]) \
        + d["vpp"] * (d["ipp0"] - d["ipp3n"]) * trc
    burst = {"read": d["vdd"] * (d["idd4r"] - d["idd3n"]) * burst_ns,
             "write": d["vdd"] * (d["idd4w"] - d["idd3n"]) * burst_ns}
    core = {k: (pj + act / 128) / 64 for k, pj in burst.items()}
    io = {k: mw / DDR4_GBIT_PER_S for k, mw in CACTI_DDR4_IO_MW.items()}
    total = {k: core[k] + io[k] for k in core}
    mean = (total["read"] + total["write"]) / 2
    assert (round(burst["read"]), round(burst["write"]), round(act)) == (368, 320, 430)
    text = (DOCS / "energy.md").read_text(encoding="utf-8")
    for k in ("read", "write"):
        assert f"{core[k]:.2f} + {io[k]:.2f} = {total[k]:.2f}" in text, k
    assert f"{mean:.2f} for the mean" in text
    assert float(tables()["dram_interfaces"]["DDR4"]["pj_per_bit"]) == PJ_PER_BIT["DDR4"] == float(f"{mean:.2g}")


def test_no_figure_is_left_unchecked() -> None:
    for path in (TABLES_PATH, DOCS / "energy.md"):
        text = path.read_text(encoding="utf-8").lower()
        assert "unchecked" not in text and "not a checked figure" not in text, path


def test_an_old_complete_energy_table_still_loads_as_given() -> None:
    """A config written before the derivation (every figure spelled out) prices what it says."""
    cfg = load_config(Path(__file__).parent / "golden" / "config_before_derived_energy.yaml")
    e = cfg.energy
    assert e.dram_pj_per_byte == 162.5 and e.static_pj_per_cycle == 64 and e.dram_interface == ""
    assert {f.name for f in e.figures if f.how == GIVEN} >= {"dram_pj_per_byte", "static_pj_per_cycle",
                                                              "scratchpad_pj_per_byte.acc.read"}


def test_the_table_record_checks_its_figures() -> None:
    good = load_config("default").energy
    with pytest.raises(SpecError, match=r"energy dram_pj_per_byte must be a finite number >= 0, not -1"):
        EnergyTable(figures=tuple(Figure(f.name, -1, GIVEN, "") if f.name == "dram_pj_per_byte" else f
                                  for f in good.figures))
    with pytest.raises(SpecError, match=r"scratchpad_pj_per_byte.a_reg.read is missing"):
        EnergyTable(figures=tuple(f for f in good.figures if f.name != "scratchpad_pj_per_byte.a_reg.read"))


BAD = [
    # (case id, energy/dram text, line needle, words)
    ("unknown-interface", "dram: {interface: DDR9}", "dram: {interface: DDR9}",
     ["dram.interface 'DDR9' is not a DRAM interface", "it knows DDR3, DDR4, GDDR5, HBM2"]),
    ("negative", "energy: {dram_pj_per_byte: -3}", "energy: {dram_pj_per_byte: -3}",
     ["energy.dram_pj_per_byte must be pJ to move one byte", "finite number >= 0, not -3"]),
    ("not-finite", "energy: {static_pj_per_cycle: .inf}", "energy: {static_pj_per_cycle: .inf}",
     ["energy.static_pj_per_cycle must be pJ of leakage", "not inf"]),
    ("not-a-number", "energy:\n  mac_pj: {multiply: cheap}", "mac_pj: {multiply: cheap}",
     ["energy.mac_pj.multiply must be pJ of one multiply", "not 'cheap'"]),
    ("no-such-figure", "energy: {sram_pj: 1}", "energy: {sram_pj: 1}",
     ["energy.sram_pj is not a figure of the energy table", "the figures are mac_pj.multiply"]),
    ("no-such-scratchpad", "energy:\n  scratchpad_pj_per_byte: {c_reg: {read: 1}}", "c_reg",
     ["energy.scratchpad_pj_per_byte.c_reg.read is not a figure"]),
    ("no-such-alu-class", "energy:\n  alu_pj_per_element: {vfancy: 1}", "vfancy",
     ["energy.alu_pj_per_element.vfancy is not a figure", "alu_pj_per_element.alu"]),
    ("gating-not-bool", "energy: {clock_gating: maybe}", "clock_gating: maybe",
     ["energy.clock_gating must be true or false, not 'maybe'"]),
    ("zero-clock", "clock_mhz: 0", "clock_mhz: 0", ["clock_mhz must be the clock frequency in MHz", "not 0"]),
]


@pytest.mark.parametrize(("text", "needle", "words"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_energy_input(tmp_path: Path, text: str, needle: str, words: list[str]) -> None:
    full = f"name: bad\nbase: default\n{text}\n"
    path = _write(tmp_path, full)
    with pytest.raises(SpecError) as info:
        load_config(path)
    message = info.value.message
    file, line = _place(message)
    assert file == str(path) and line == _line_of(full, needle), message
    for word in words:
        assert word in message, message


def test_no_interface_and_no_dram_figure(tmp_path: Path) -> None:
    text = (CONFIG_DIR / "default.yaml").read_text(encoding="utf-8").replace("  interface: DDR4", "  # none")
    path = _write(tmp_path, text)
    with pytest.raises(SpecError, match="names no DRAM interface: set dram.interface to one of DDR3, DDR4"):
        load_config(path)


@pytest.mark.parametrize(("text", "words"), [
    ("dram: {interface: SDR}", "dram.interface 'SDR' is not a DRAM interface"),
    ("energy: {dram_pj_per_byte: -3}", "energy.dram_pj_per_byte must be pJ to move one byte"),
    ("energy: {clock_pj_per_cycle: .nan}", "energy.clock_pj_per_cycle must be pJ per cycle"),
    ("energy: {sram_pj: 1}", "energy.sram_pj is not a figure of the energy table"),
], ids=["unknown-interface", "negative", "not-finite", "no-such-figure"])
def test_a_bad_figure_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                          words: str) -> None:
    """The bad energy inputs from the command line: one paragraph naming file:line:col, exit 2, no traceback."""
    path = _write(tmp_path, f"name: bad\nbase: default\n{text}\n")
    rc = main(["run", "matmul", "--m", "16", "--n", "16", "--k", "16", "--config", str(path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and words in err and "Traceback" not in err, err
    assert f"{path}:3:" in err and "\n\n" not in err, err


def test_the_vit_base_sweep_spec_is_the_published_block() -> None:
    """examples/sweep_vit_base.yaml: one ViT-base encoder block, per-head attention, on 32, 64, 128 arrays."""
    from tinynpu.explore.spec import load_sweep

    spec = load_sweep(Path(__file__).parent.parent / "examples" / "sweep_vit_base.yaml")
    assert [load_config(b.path).tile for b in spec.bases] == [32, 64, 128]
    assert [load_config(b.path).dram_bytes_per_cycle for b in spec.bases] == [64, 128, 128]
    shapes = {tuple(size for _, size in w.sizes): w.count for w in spec.workloads}
    assert shapes == {(197, 2304, 768): 1, (197, 197, 64): 12, (197, 64, 197): 12, (197, 768, 768): 1,
                      (197, 3072, 768): 1, (197, 768, 3072): 1}


def test_a_sweep_may_sweep_a_derived_figure(tmp_path: Path) -> None:
    from tinynpu.explore.spec import design_points, load_sweep

    spec = _write(tmp_path, "base: t8\nparameters:\n  energy.dram_pj_per_byte: [60, 120]\n"
                            "  energy.clock_gating: [true]\nworkloads:\n  gemm: [[16, 16, 16]]\n"
                            "objectives: [cycles, energy_pj]\n", "sweep.yaml")
    (tmp_path / "configs").mkdir()
    points = design_points(load_sweep(spec), tmp_path / "configs")
    tables_ = [p.config.energy for p in points]
    assert [e.dram_pj_per_byte for e in tables_] == [60, 120] and all(e.clock_gating for e in tables_)
    assert all(e.to_json()["given"] == ["dram_pj_per_byte"] for e in tables_)
    bad = _write(tmp_path, "base: t8\nparameters:\n  energy.dram_pj: [60]\nworkloads:\n  gemm: [[16, 16, 16]]\n"
                           "objectives: [cycles]\n", "bad.yaml")
    with pytest.raises(SpecError, match=r"bad.yaml:3:3 \(at parameters.energy.dram_pj\): 'energy.dram_pj' is "
                                        r"not a figure of the energy table; the figures are mac_pj.multiply"):
        load_sweep(bad)
