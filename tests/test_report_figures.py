"""Each figure function writes a PNG and returns exactly the numbers it drew, taken from the stats given."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinynpu.isa import load_config
from tinynpu.report import figures as F
from tinynpu.report.markdown import MARKER, Section, render, table


def _report(cycles: int, read: int, write: int) -> dict[str, object]:
    return {
        "cycles": cycles,
        "macs": 64**3,
        "padding_ceiling": 0.5,
        "dram_read_bytes": read,
        "dram_write_bytes": write,
        "io_lower_bound_bytes": 9000,
        "best_tiling_bytes": 12000,
        "busy_cycles": {"load": 300, "tensor": 1024, "alu": 0, "store": 64, "control": 0},
        "stall_cycles": {
            "load": {"token": 100, "dram_port": 7},
            "tensor": {"token": 50},
            "store": {"token": 900},
        },
    }


def _is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_roofline_points_come_from_stats(tmp_path: Path) -> None:
    cfg = load_config("default")
    rep = _report(2000, 20000, 4000)
    fig = F.roofline(
        [("a", rep)],
        macs_per_cycle=cfg.macs_per_cycle,
        bytes_per_cycle=cfg.dram_bytes_per_cycle,
        path=tmp_path / "roof.png",
    )
    assert _is_png(fig.path)
    (p,) = fig.data["points"]
    assert p["dram_bytes"] == 24000
    assert p["useful_macs"] == 64**3 * 0.5
    assert p["achieved_mac_per_cycle"] == pytest.approx(64**3 * 0.5 / 2000)
    assert p["intensity_mac_per_byte"] == pytest.approx(64**3 * 0.5 / 24000)
    assert fig.data["macs_per_cycle"] == cfg.macs_per_cycle


def test_unit_breakdown_sums_to_cycles(tmp_path: Path) -> None:
    rep = _report(2000, 1, 1)
    fig = F.unit_breakdown(rep, label="x", path=tmp_path / "u.png")
    assert _is_png(fig.path)
    rows = {r["unit"]: r for r in fig.data["units"]}
    assert "control" not in rows
    assert rows["load"] == {
        "unit": "load",
        "busy": 300,
        "stall": {"token": 100, "dram_port": 7},
        "idle": 1593,
        "overlap": 0,
    }
    for r in rows.values():
        assert r["busy"] + sum(r["stall"].values()) + r["idle"] - r["overlap"] == 2000


def test_unit_breakdown_reports_overlap_instead_of_hiding_it(tmp_path: Path) -> None:
    rep = _report(1000, 1, 1)  # store: 64 busy + 900 stall fits; tensor 1024 busy + 50 stall exceeds 1000
    rows = {r["unit"]: r for r in F.unit_breakdown_data(rep)["units"]}
    assert rows["tensor"]["idle"] == 0 and rows["tensor"]["overlap"] == 74


def _timeline() -> list[tuple[int, str, str, int, int, int]]:
    rows, t, idx = [], 0, 0
    for _loop in range(5):
        for _kk in range(2):
            rows.append((idx, "load", "load", idx, t, t + 30))
            idx += 1  # noqa: E702
            rows.append((idx, "tensor", "tmm", idx, t + 30, t + 80))
            idx += 1  # noqa: E702
            t += 50
        rows.append((idx, "store", "store", idx, t + 30, t + 60))
        idx += 1  # noqa: E702
    rows.append((idx, "control", "halt", idx, t + 60, t + 60))
    return rows


def test_steady_state_window_is_between_middle_stores() -> None:
    rows = F.timeline_rows(_timeline())
    stores = [r.index for r in rows if r.mnemonic == "store"]
    assert F.steady_state_window(rows) == (stores[1] + 1, stores[2])


def test_steady_state_window_groups_column_stores() -> None:
    # Each block: 6 tmm, then its 3 column stores interleaved with the next block's loads.
    block = ["tmm"] * 6 + ["store", "load", "store", "load", "store"]
    rows = [F.TimelineRow(i, "x", n, i, i, i + 1) for i, n in enumerate(block * 5)]
    # Block ends (last store of each block) are at 10, 21, 32, 43, 54; the middle loop is 22..32.
    assert F.steady_state_window(rows) == (22, 32)


def test_gantt_bars_are_timeline_rows(tmp_path: Path) -> None:
    tl = _timeline()
    fig = F.gantt(tl, label="t", path=tmp_path / "g.png")
    assert _is_png(fig.path)
    w = fig.data["window"]
    loop = [r for r in tl if w["first_index"] <= r[0] <= w["last_index"]]
    assert w["start_cycle"] == min(r[4] for r in loop) and w["end_cycle"] == max(r[5] for r in loop)
    drawn = {(b["index"], b["start"], b["end"]) for b in fig.data["bars"]}
    assert {(r[0], r[4], r[5]) for r in loop} <= drawn
    assert all(
        (b["index"], b["unit"], b["mnemonic"], b["dispatch"], b["start"], b["end"]) in tl for b in fig.data["bars"]
    )
    # Active time is the union of spans, never more than the window.
    assert all(0 < v <= w["end_cycle"] - w["start_cycle"] for v in fig.data["active_in_window"].values())


def test_gantt_accepts_dict_rows(tmp_path: Path) -> None:
    keys = ("index", "unit", "mnemonic", "dispatch", "start", "end")
    fig = F.gantt([dict(zip(keys, r, strict=False)) for r in _timeline()], label="t", path=tmp_path / "g.png")
    assert fig.data["bars"]


def test_traffic_ratios(tmp_path: Path) -> None:
    fig = F.traffic([("a", _report(1, 16000, 2000)), ("b", _report(1, 9000, 0))], path=tmp_path / "t.png")
    a, b = fig.data["rows"]
    assert a["dram_bytes"] == 18000 and a["traffic_over_bound"] == 2.0 and a["traffic_over_best"] == 1.5
    assert b["traffic_over_bound"] == 1.0


def test_landscape_and_speed(tmp_path: Path) -> None:
    grid = [[300.0, 200.0], [150.0, None]]
    fig = F.landscape(
        "tn",
        [16, 32],
        "tm",
        [16, 32],
        grid,
        label="x",
        source="the cost model",
        path=tmp_path / "l.png",
        marks={"chosen": (16, 32)},
    )
    assert _is_png(fig.path) and fig.data["cycles"] == grid
    fig = F.sim_speed(
        [{"label": "s", "wall_seconds": 2.0, "instructions": 10, "cycles": 100}],
        numpy_seconds=0.5,
        path=tmp_path / "s.png",
    )
    assert _is_png(fig.path) and fig.data["numpy_seconds"] == 0.5


def test_markdown_links_and_marker(tmp_path: Path) -> None:
    fig = F.traffic([("a", _report(1, 16000, 2000))], path=tmp_path / "figs" / "t.png")
    text = render(
        "T",
        "intro",
        [Section("Traffic", table(["w", "bytes"], [["a", 18000]]), ("tinynpu x",), (fig,))],
        index_dir=tmp_path,
    )
    assert text.startswith(MARKER)
    assert "](figs/t.png)" in text and "| a | 18,000 |" in text and "tinynpu x" in text
