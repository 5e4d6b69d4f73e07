"""index.md of a sweep: the per-config totals, sensitivity and interactions, the figures, the --json summary."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tinynpu.explore import quantities
from tinynpu.explore.report import summary, write_index
from tinynpu.explore.spec import load_sweep

SPEC = """\
base: default
parameters:
  dram.bytes_per_cycle: [8, 16]
  dram.latency_cycles: [50, 100, 150]
workloads:
  gemm: [[32, 32, 32]]
objectives: [cycles, energy_pj]
"""


def _rows() -> list[dict[str, str]]:
    """Cycles that halve with twice the bandwidth and do not depend on the latency; energy the other way."""
    rows = []
    for bw in (8, 16):
        for lat in (50, 100, 150):
            cycles, energy = 1000 * 16 // bw, 10.0 * lat
            rows.append({"config": f"c{bw}-{lat}", "config_file": f"c{bw}-{lat}.yaml", "status": "ok",
                         "kind": "gemm", "run_args": "--m 32 --n 32 --k 32", "count": "1",
                         "dram.bytes_per_cycle": str(bw), "dram.latency_cycles": str(lat),
                         "cycles": str(cycles), "dram_bytes": "100", "energy_pj": str(energy),
                         "edp": str(energy * cycles * 1e-9)})
    return rows


def test_sensitivity_table_figure_and_json(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(SPEC))
    spec = load_sweep(path)
    written = write_index(spec, tmp_path, _rows())
    assert tmp_path / "sensitivity.png" in written and (tmp_path / "sensitivity.png").stat().st_size > 0
    index = (tmp_path / "index.md").read_text()
    assert "![Sensitivity](sensitivity.png)" in index
    assert "| cycles | dram.bytes_per_cycle | 8: 2,000, 16: 1,000 | 2x |" in index
    assert "| cycles | dram.latency_cycles | 50: 1,500, 100: 1,500, 150: 1,500 | 1x |" in index
    out = summary(spec, _rows())
    assert (out["configs"], out["ranked"]) == (6, 6)
    assert out["best"]["energy_pj"]["overrides"]["dram.latency_cycles"] == "50"
    assert out["best"]["cycles"]["value"] == 1000
    energy_by_latency = next(s for s in out["sensitivity"]
                             if (s["objective"], s["parameter"]) == ("energy_pj", "dram.latency_cycles"))
    assert energy_by_latency["median"] == [500.0, 1000.0, 1500.0]
    assert energy_by_latency["spread"] == pytest.approx(3.0)


def test_totals_table_names_configs_by_their_values_not_their_hash(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(SPEC))
    spec = load_sweep(path)
    write_index(spec, tmp_path, _rows())
    index = (tmp_path / "index.md").read_text()
    assert "| config | cycles | DRAM traffic | energy | EDP | ranked |" in index
    assert "| dram.bytes_per_cycle=16, dram.latency_cycles=150 | 1,000 | 100 B | 1.5 nJ | 1.5 fJ*s | yes |" in index
    assert "c16-150" not in index.split("## Best config")[0]  # the file's name only in reproducing commands
    out = summary(spec, _rows())
    row = next(t for t in out["totals"] if t["config"] == "c8-100")
    assert row["label"] == "dram.bytes_per_cycle=8, dram.latency_cycles=100"
    assert (row["cycles"], row["energy_pj"], row["ranked"]) == (2000.0, 1000.0, True)


def test_a_workload_counted_twice_weighs_twice_in_the_totals(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(SPEC))
    rows = [{**r, "count": "3"} for r in _rows()]
    out = summary(load_sweep(path), rows)
    assert next(t for t in out["totals"] if t["config"] == "c16-50")["cycles"] == 3000.0


def test_interactions_show_what_the_one_at_a_time_view_hides(tmp_path: Path) -> None:
    """Latency costs the narrow DRAM port a lot and the wide one nothing: pooled, latency matters a little."""
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(SPEC))
    rows = _rows()
    for r in rows:
        bw, lat = int(r["dram.bytes_per_cycle"]), int(r["dram.latency_cycles"])
        r["cycles"] = str(1000 + (10 * lat if bw == 8 else 0))
    spec = load_sweep(path)
    write_index(spec, tmp_path, rows)
    index = (tmp_path / "index.md").read_text()
    assert "**cycles** by dram.bytes_per_cycle (rows) and dram.latency_cycles (columns):" in index
    assert "| 8 | 1,500 | 2,000 | 2,500 | 0.6x |" in index
    assert "| 16 | 1,000 | 1,000 | 1,000 | 1x |" in index
    cycles = next(i for i in summary(spec, rows)["interactions"] if i["objective"] == "cycles")
    assert (cycles["rows"], cycles["columns"]) == ("dram.bytes_per_cycle", "dram.latency_cycles")
    assert cycles["median"] == [[1500.0, 2000.0, 2500.0], [1000.0, 1000.0, 1000.0]]
    assert cycles["first_over_last"] == [pytest.approx(0.6), 1.0]


@pytest.mark.parametrize(("name", "value", "shown"), [
    ("cycles", 13294000, "13,294,000"), ("dram_bytes", 3.5 * 2**20, "3.50 MiB"), ("dram_bytes", 100, "100 B"),
    ("energy_pj", 5.12025e9, "5.12 mJ"), ("energy_pj", 999.0, "999 pJ"), ("edp", 1896833.1, "1.9 µJ*s"),
    ("area_mm2", 1.7920139, "1.792 mm^2"), ("energy_pj", 0.0, "0 J")])
def test_objectives_are_written_in_their_units(name: str, value: float, shown: str) -> None:
    assert quantities.objective(name, value) == shown
