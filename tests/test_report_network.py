"""The report's network section: SqueezeNet run end to end, its totals, per-layer table and plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tinynpu.isa import load_config  # noqa: E402
from tinynpu.report.network import LAYER_FIELDS, network_sections, run_networks  # noqa: E402


@pytest.fixture(scope="module")
def squeezenet() -> dict:  # type: ignore[type-arg]
    return run_networks(["squeezenet"], load_config("default"), quiet=True)


def test_section_tables_and_plot_follow_the_run(squeezenet: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    (run,) = squeezenet["runs"]
    assert run["verified"] is True and run["network"] == "squeezenet"
    sections, figures = network_sections(squeezenet, tmp_path / "figures")
    totals, layers = sections
    assert totals.title == "Networks (ONNX)" and "| squeezenet | yes |" in totals.body
    assert any("light_squeezenet.onnx" in c and "--json" in c for c in totals.commands)
    assert f"{run['cycles']:,}" in totals.body
    # one table row per step, the npu rows with the run's own cycles
    rows = [line for line in layers.body.splitlines() if line.startswith("| ") and " | npu | " in line]
    npu = [e for e in run["layers"] if e["where"] == "npu"]
    assert len(rows) == len(npu) == run["npu_layers"]
    assert all(f"| {e['name']} | {e['op']} | npu | {e['cycles']:,} |" in layers.body for e in npu)
    (fig,) = figures
    assert fig.path.is_file() and fig.path.read_bytes()[:4] == b"\x89PNG"
    assert fig.data["layers"] == [{k: e[k] for k in LAYER_FIELDS} for e in npu]
    json.dumps(fig.data)

