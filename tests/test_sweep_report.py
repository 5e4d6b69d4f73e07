"""index.md of a sweep: sensitivity of each objective to each parameter, the figures, the --json summary."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

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
    assert "| cycles | dram.bytes_per_cycle | 8: 2000, 16: 1000 | 2 |" in index
    assert "| cycles | dram.latency_cycles | 50: 1500, 100: 1500, 150: 1500 | 1 |" in index
    out = summary(spec, _rows())
    assert (out["configs"], out["ranked"]) == (6, 6)
    assert out["best"]["energy_pj"]["overrides"]["dram.latency_cycles"] == "50"
    assert out["best"]["cycles"]["value"] == 1000
    energy_by_latency = next(s for s in out["sensitivity"]
                             if (s["objective"], s["parameter"]) == ("energy_pj", "dram.latency_cycles"))
    assert energy_by_latency["median"] == [500.0, 1000.0, 1500.0]
    assert energy_by_latency["spread"] == pytest.approx(3.0)
