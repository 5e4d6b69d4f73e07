"""End to end: the report commands write every file they list, and each figure shows the stats it claims."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tinynpu.cli import main
from tinynpu.isa import load_config


def _run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1, "--json must print exactly one JSON object"
    return json.loads(lines[0])


def _check_files(summary: dict[str, Any], out: Path) -> None:
    files = [Path(f) for f in summary["files"]]
    assert files and all(f.is_file() and f.stat().st_size > 0 for f in files)
    index = (out / "index.md").read_text()
    pngs = [f for f in files if f.suffix == ".png"]
    assert pngs
    for png in pngs:
        assert png.read_bytes()[:4] == b"\x89PNG"
        assert f"]({png.relative_to(out).as_posix()})" in index, f"{png.name} not linked from index.md"
    # Every image link in the index points at a file the command listed.
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", index)
    assert sorted(linked) == sorted(p.relative_to(out).as_posix() for p in pngs)
    assert json.loads((out / "report.json").read_text())["workloads"] == json.loads(
        json.dumps(summary["workloads"], default=str)
    )
    for row in summary["workloads"]:
        assert row["command"] in index


def _check_figures_match_stats(summary: dict[str, Any]) -> None:
    reports = {row["workload"]: row["report"] for row in summary["workloads"]}
    figs = summary["figures"]
    for p in figs["roofline"]["data"]["points"]:
        rep = reports[p["label"]]
        assert p["cycles"] == rep["cycles"] and p["macs"] == rep["macs"]
        assert p["dram_bytes"] == rep["dram_read_bytes"] + rep["dram_write_bytes"]
        # run_compiled reports useful MACs as `macs`; the tmm steps issued `issued_macs` (padding included).
        assert p["useful_macs"] == rep["macs"] == pytest.approx(rep["issued_macs"] * rep["padding_ceiling"])
        assert p["achieved_mac_per_cycle"] == pytest.approx(rep["macs"] / rep["cycles"])
    for row in figs["traffic"]["data"]["rows"]:
        rep = reports[row["label"]]
        assert row["dram_bytes"] == rep["dram_read_bytes"] + rep["dram_write_bytes"]
        assert row["io_lower_bound_bytes"] == rep["io_lower_bound_bytes"]
        assert row["best_tiling_bytes"] == rep["best_tiling_bytes"]
    units = [f for name, f in figs.items() if name.startswith("units_")]
    assert units
    for fig in units:
        data = fig["data"]
        rep = next(r for r in reports.values() if r["cycles"] == data["cycles"])
        for row in data["units"]:
            assert row["busy"] == rep["busy_cycles"][row["unit"]]
            assert row["stall"] == {c: n for c, n in rep["stall_cycles"].get(row["unit"], {}).items() if n > 0}


def test_matmul_report_files_and_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tinynpu.compiler import compile_matmul
    from tinynpu.report.suite import simulate_timeline

    out = tmp_path / "r"
    summary = _run_json(["report", "matmul", "--m", "100", "--n", "72", "--k", "90", "-o", str(out)], capsys)
    _check_files(summary, out)
    _check_figures_match_stats(summary)
    assert summary["all_verified"] is True
    (row,) = summary["workloads"]
    assert row["command"] == "tinynpu run matmul --m 100 --n 72 --k 90 --schedule auto --json"
    figs = summary["figures"]
    assert {"roofline", "traffic", "landscape", "sim_speed"} <= set(figs)
    # The Gantt bars are rows of the simulator's own timeline of the same program.
    cfg = load_config("default")
    timeline = {tuple(r) for r in simulate_timeline(compile_matmul(100, 72, 90, cfg=cfg), cfg)}
    gantt = next(f for name, f in figs.items() if name.startswith("gantt_"))
    bars = gantt["data"]["bars"]
    assert bars
    for b in bars:
        assert (b["index"], b["unit"], b["mnemonic"], b["dispatch"], b["start"], b["end"]) in timeline
    assert max(b["end"] for b in bars) <= row["cycles"]


def test_mlp_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m"
    summary = _run_json(["report", "mlp", "--batch", "1", "-o", str(out)], capsys)
    _check_files(summary, out)
    _check_figures_match_stats(summary)


def test_report_reruns_into_its_own_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    argv = ["report", "matmul", "--m", "32", "--n", "32", "--k", "32", "-o", str(out)]
    _run_json(argv, capsys)
    _check_files(_run_json(argv, capsys), out)


def test_demo_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    summary = _run_json(["demo", "--size", "64", "-o", str(out)], capsys)
    _check_files(summary, out)
    _check_figures_match_stats(summary)
    quantities = {r["quantity"]: r for r in summary["comparison"]}
    naive, tuned = (next(w for w in summary["workloads"] if w["workload"].endswith(s)) for s in ("(naive)", "64"))
    assert quantities["cycles"]["naive"] == f"{naive['cycles']:,}"
    assert quantities["cycles"]["tuned"] == f"{tuned['cycles']:,}"
    assert quantities["verified vs numpy"]["naive"] == "yes" == quantities["verified vs numpy"]["tuned"]


def test_quick_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    summary = _run_json(["report", "--quick", "-o", str(out)], capsys)
    _check_files(summary, out)
    _check_figures_match_stats(summary)
    kinds = {row["command"].split()[2] for row in summary["workloads"]}
    assert kinds == {"matmul", "conv2d", "mlp"}
    assert [r["network"] for r in summary["network"]["runs"]] == ["squeezenet"]  # the network section
    assert "## Networks (ONNX)" in (out / "index.md").read_text()


def test_cosim_file_is_tabulated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {
            "name": "p",
            "rtl_cycles": 120,
            "model_cycles": 117,
            "outputs_match": True,
            "instructions_compared": 9,
            "trace_mismatches": 2,
        }
    ]
    src = tmp_path / "cosim.json"
    src.write_text(json.dumps(rows))
    out = tmp_path / "r"
    summary = _run_json(
        ["report", "matmul", "--m", "32", "--n", "32", "--k", "32", "--cosim", str(src), "-o", str(out)], capsys
    )
    index = (out / "index.md").read_text()
    assert "| p | 120 | 117 | 3 | 9 | 2 | yes |" in index and "**They differ.**" in index
    assert summary["cosim"]["rows"] == rows


@pytest.mark.rtl
def test_run_cosim_rows_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tinynpu.report.cosim import unavailable_reason

    reason = unavailable_reason(load_config("default"))
    if reason:
        pytest.skip(reason)
    out = tmp_path / "r"
    summary = _run_json(["report", "mlp", "--batch", "1", "--run-cosim", "-o", str(out)], capsys)
    rows = summary["cosim"]["rows"]
    assert {r["workload"] for r in rows} >= {"matmul 128x128x128", "mlp batch 1"}
    for r in rows:
        assert r["rtl_cycles"] == r["model_cycles"] and r["outputs_match"] and r["trace_mismatches"] == 0, r
    assert "They agree on every program." in (out / "index.md").read_text()


@pytest.mark.slow
def test_demo_1024(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    summary = _run_json(["demo", "-o", str(out)], capsys)
    _check_files(summary, out)
    _check_figures_match_stats(summary)
    cycles = {w["workload"]: w["cycles"] for w in summary["workloads"]}
    assert cycles["matmul 1024x1024x1024 (naive)"] > 5 * cycles["matmul 1024x1024x1024"]
