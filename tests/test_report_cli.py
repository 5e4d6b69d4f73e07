"""`tinynpu report` / `tinynpu demo`: user errors end in one paragraph and a non-zero exit; no clobbering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinynpu.cli import main
from tinynpu.errors import UsageError
from tinynpu.report.build import prepare_dir
from tinynpu.report.cli import cosim_rows
from tinynpu.report.demo import comparison_rows
from tinynpu.report.markdown import MARKER


def test_prepare_dir_refuses_foreign_nonempty_dir(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not empty.*--force"):
        prepare_dir(tmp_path, force=False)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_report_replaces_own_report_drops_stale_figures_keeps_user_files(tmp_path: Path) -> None:
    (tmp_path / "index.md").write_text(MARKER + "\n# old\n")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "stale.png").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("mine")
    prepare_dir(tmp_path, force=False)
    assert (tmp_path / "figures" / "stale.png").exists()  # a check only: nothing changes before the run
    assert main(["report", "matmul", "--m", "16", "--n", "16", "--k", "16", "-o", str(tmp_path), "--json"]) == 0
    assert not (tmp_path / "figures" / "stale.png").exists()
    assert (tmp_path / "notes.txt").read_text() == "mine" and (tmp_path / "figures" / "roofline.png").is_file()


def test_prepare_dir_force_keeps_user_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    prepare_dir(tmp_path, force=True)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_prepare_dir_refuses_a_file(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        prepare_dir(target, force=False)


def test_cli_refuses_foreign_dir_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["demo", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "tinynpu: error:" in err and "Traceback" not in err and str(tmp_path) in err.replace("\n", " ")


def test_demo_rejects_nonpositive_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--size", "0", "-o", str(tmp_path / "d")]) == 2
    assert "--size must be a positive integer, not 0" in capsys.readouterr().err


def test_report_workload_needs_sizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "matmul", "--m", "16", "-o", str(tmp_path)]) == 2
    assert "missing --n, --k" in capsys.readouterr().err


def test_report_workload_and_suite_conflict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "mlp", "--batch", "1", "--suite", "-o", str(tmp_path)]) == 2
    assert "not both" in capsys.readouterr().err


def test_bad_cosim_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "c.json"
    bad.write_text("{\n  oops")
    assert main(["report", "--quick", "--cosim", str(bad), "-o", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2:3" in err.replace("\n", " ") and "Traceback" not in err
    assert main(["report", "--quick", "--cosim", str(tmp_path / "missing.json"), "-o", str(tmp_path / "r")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_cosim_rows_shapes() -> None:
    one = {"rtl_cycles": 10, "model_cycles": 10, "outputs_match": True}
    assert cosim_rows(one, "c", "o")["rows"] == [one]
    assert cosim_rows({"runs": [one, one]}, "c", "o")["rows"] == [one, one]
    with pytest.raises(UsageError, match="entry 0 lacks"):
        cosim_rows([{"cycles": 1}], "c", "o")
    with pytest.raises(UsageError, match="expected"):
        cosim_rows([], "c", "o")


def test_comparison_rows_are_computed_from_reports() -> None:
    def rep(cycles: int, moved: int, instr: int) -> dict[str, object]:
        return {
            "cycles": cycles,
            "roofline_cycles": 100,
            "utilization": 0.5,
            "dram_read_bytes": moved,
            "dram_write_bytes": 0,
            "io_lower_bound_bytes": moved // 4,
            "best_tiling_bytes": moved // 2,
            "verified": True,
            "simulator_wall_seconds": 1.5,
            "instructions": {"total": instr},
        }

    rows = {r[0]: r for r in comparison_rows(rep(800, 4096, 1000), rep(200, 1024, 10))}
    assert rows["cycles"][3] == "4.00x speed-up"
    assert rows["instructions"][3] == "100.0x fewer"
    assert rows["traffic / I/O bound"][1:3] == ("4.00x", "4.00x")
    assert rows["DRAM traffic"][3] == "4.0x less"
    json.dumps(rows)


def test_prepare_dir_ignores_empty_figures_of_a_failed_run(tmp_path: Path) -> None:
    (tmp_path / "figures").mkdir()
    prepare_dir(tmp_path, force=False)  # no error: nothing of the user's is there


def test_speed_from_bench_per_run_numpy() -> None:
    from tinynpu.report.reports import speed_from_bench

    run = {"schedule": "auto", "races_checked": False, "wall_seconds": 2.0, "instructions": 10, "cycles": 100}
    new = speed_from_bench({"size": 64, "runs": [dict(run, numpy_float32_seconds=0.5)]}, "c")
    old = speed_from_bench({"size": 64, "numpy_float32_seconds": 0.25, "runs": [run]}, "c")
    assert new["runs"][0]["numpy_seconds"] == 0.5 and new["numpy_seconds"] == 0.5
    assert old["runs"][0]["numpy_seconds"] == 0.25
    assert new["runs"][0]["label"] == "auto 64^3 matmul, races off"
    named = speed_from_bench({"size": 64, "runs": [dict(run, numpy_float32_seconds=0.5, engine="native")]}, "c")
    assert named["runs"][0]["label"] == "auto 64^3 matmul, native core, races off"
    stream = speed_from_bench({"size": 64, "runs": [dict(run, schedule="loads", numpy_float32_seconds=0.5)]}, "c")
    assert stream["runs"][0]["label"] == "loads stream (10 instr), races off"
    with pytest.raises(UsageError, match="lacks the field 'runs'"):
        speed_from_bench({"size": 64}, "c")
