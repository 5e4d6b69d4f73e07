"""Area in sweeps: one synthesis per distinct RTL, area constraints, the cycles-against-area front."""

from __future__ import annotations

import csv
import dataclasses
import json
import textwrap
from pathlib import Path

import pytest
from synth_support import require_yosys

from tinynpu.cli import main
from tinynpu.explore.report import config_totals, front_axes, pareto_front
from tinynpu.explore.spec import load_sweep
from tinynpu.explore.task import area_identity
from tinynpu.isa import load_config

SPEC = """\
base: {base}
parameters:
  {parameter}
workloads:
  gemm: [[32, 32, 32]]
objectives: [cycles, energy_pj, area_mm2]
"""


def _write(tmp_path: Path, base: str, parameter: str, extra: str = "") -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(SPEC).format(base=base, parameter=parameter) + extra)
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(autouse=True)
def _yosys() -> None:
    require_yosys()


def test_area_identity_is_what_synthesis_depends_on() -> None:
    default = load_config("default")
    # The name, the clock and the energy table change no gate: one synthesis serves them all.
    same = [dataclasses.replace(default, name="other", digest="other"), dataclasses.replace(default, clock_mhz=500),
            dataclasses.replace(default, energy=load_config("fp32").energy)]
    assert {area_identity(c) for c in same} == {area_identity(default)}
    # The accumulator's size, the tile edge and the DRAM timing the DMA engines count do.
    others = [load_config(name) for name in ("acc2x", "t8", "t32", "dram_half")]
    assert len({area_identity(c) for c in [default, *others]}) == 5


def test_area_constraint_and_fronts(tmp_path: Path) -> None:
    spec = load_sweep(_write(tmp_path, "default", "dram.latency_cycles: [50, 100, 150]",
                             'constraints: ["area_mm2 <= 2.0"]\n'))
    assert front_axes(spec) == [("area_mm2", "cycles"), ("cycles", "energy_pj")]
    base = {"config_file": "c.yaml", "kind": "gemm", "run_args": "--m 32 --n 32 --k 32", "status": "ok",
            "dram_bytes": "100", "energy_pj": "10", "edp": "1e-5", "dram.latency_cycles": "50"}
    rows = [{**base, "config": "small-slow", "cycles": "300", "area_mm2": "1.0"},
            {**base, "config": "big-fast", "cycles": "100", "area_mm2": "3.0"},
            {**base, "config": "mid", "cycles": "200", "area_mm2": "1.5"},
            {**base, "config": "mid-worse", "cycles": "250", "area_mm2": "1.9"},
            {**base, "config": "no-area", "cycles": "50", "area_mm2": "", "area_error": "no area: ...",
             "dram.latency_cycles": "150"}]
    configs, incomplete = config_totals(spec, rows)
    assert incomplete == ["dram.latency_cycles=150"]  # an area objective needs the area; named by its values
    feasible = [c for c in configs if c.feasible]
    assert sorted(c.config for c in feasible) == ["mid", "mid-worse", "small-slow"]
    assert [c.config for c in pareto_front(feasible, "area_mm2", "cycles")] == ["small-slow", "mid"]


def test_area_of_a_config_without_rtl_is_a_failure_with_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TINYNPU_CACHE", str(tmp_path / "cache"))
    spec = _write(tmp_path, "fp32", "dram.latency_cycles: [50, 100]")
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "-o", str(out), "--workers", "2", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    # Two syntheses (the DRAM latency is in the RTL), each refused: the points ran, the configs are unranked.
    assert (summary["points"], summary["syntheses"], summary["failed"]) == (2, 2, 2)
    rows = _rows(out / "results.csv")
    assert all(r["status"] == "ok" and r["area_mm2"] == "" for r in rows)
    assert all("no area: the RTL cannot be built for config" in r["area_error"] and "integer only" in r["area_error"]
               for r in rows)
    index = (out / "index.md").read_text()
    assert "Area failed: no area: the RTL cannot be built" in index and "nothing is ranked" in index


@pytest.mark.slow
def test_one_synthesis_per_distinct_rtl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Two configs differing only in DRAM energy: one synthesis, its area on both, equal to `tinynpu synth`'s."""
    monkeypatch.setenv("TINYNPU_CACHE", str(tmp_path / "cache"))
    spec = _write(tmp_path, "t8", "energy.dram_pj_per_byte: [162.5, 100.0]", 'constraints: ["area_mm2 <= 100"]\n')
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "-o", str(out), "--workers", "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["points"], summary["syntheses"], summary["failed"]) == (2, 1, 0)
    rows = _rows(out / "results.csv")
    assert len({r["area_mm2"] for r in rows}) == 1
    assert main(["synth", "--config", rows[0]["config_file"], "--json"]) == 0
    synth = json.loads(capsys.readouterr().out)
    assert float(rows[0]["area_mm2"]) == pytest.approx(synth["total"]["area_um2"] / 1e6)
    assert "![Pareto front: cycles against area_mm2](pareto-cycles-vs-area_mm2.png)" in (out / "index.md").read_text()
    # A rerun in a new directory synthesizes nothing: the area comes from the cache.
    assert main(["sweep", str(spec), "-o", str(tmp_path / "again"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["syntheses"] == 0
