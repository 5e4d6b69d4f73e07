"""`tinynpu synth`'s summary of the transformer units: their total area and share of the design."""

from __future__ import annotations

import json

import pytest

from tinynpu.cli import main
from tinynpu.rtl import synth
from tinynpu.rtl.synth import ModuleArea, SynthReport
from tinynpu.rtl.transformer_area import TRANSFORMER_UNITS, transformer_share

# A made-up design: 1.0 mm^2 in all, 0.25 of it the three units (areas in um^2).
ROWS = (
    ModuleArea("tinynpu_alu_unit", 1, 100, 800, 200_000.0, "synthesized"),
    ModuleArea("tinynpu_lut", 1, 50, 400, 150_000.0, "synthesized"),
    ModuleArea("tinynpu_alu_reduce", 1, 20, 160, 75_000.0, "synthesized"),
    ModuleArea("tinynpu_recip_rsqrt", 1, 5, 40, 25_000.0, "synthesized"),
    ModuleArea("acc scratchpad (SRAM)", 1, 0, 6_000, 550_000.0, "SRAM model"),
)


def test_the_share_is_the_three_units_over_every_row() -> None:
    share = transformer_share(ROWS)
    assert sorted(share.modules) == sorted(TRANSFORMER_UNITS)
    assert share.area_um2 == 250_000.0 and share.design_um2 == 1_000_000.0 and share.share == 0.25
    assert share.to_json() == {"modules": ["tinynpu_lut", "tinynpu_alu_reduce", "tinynpu_recip_rsqrt"],
                               "area_mm2": 0.25, "share": 0.25}
    assert "0.2500 mm^2, 25.0% of the design's 1.0000 mm^2" in share.line()


def test_a_design_without_the_units_says_so() -> None:
    share = transformer_share(ROWS[:1] + ROWS[4:])
    assert share.modules == () and share.share == 0.0 and share.line() == "transformer units: none in this design"


def test_synth_prints_the_line_and_the_json_field(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    report = SynthReport("default", 16, ROWS, 0.0, ())
    monkeypatch.setattr(synth, "synthesize", lambda cfg, base: report)
    assert main(["synth"]) == 0
    assert "transformer units (tinynpu_lut, tinynpu_alu_reduce, tinynpu_recip_rsqrt): 0.2500 mm^2, 25.0%" in (
        capsys.readouterr().out)
    assert main(["synth", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["transformer_units"]["share"] == 0.25
