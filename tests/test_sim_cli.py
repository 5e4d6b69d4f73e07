"""`tinynpu sim` and `tinynpu bench sim` end to end: JSON, trace, outputs, faults as exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_sim_support import HALT, load, native_reason, program, scope, units

from tinynpu.assembler.image import Tensor
from tinynpu.cli import main
from tinynpu.isa import load_config


def _write_program(tmp: Path, instrs) -> Path:
    tensors = [Tensor("X", 0, (16, 16), "int8", "input"), Tensor("Y", 0x1000, (16, 16), "int32", "output")]
    path = tmp / "p.bin"
    program(instrs, tensors=tensors).save(path)
    return path


COPY = [load("acc", 0, 0, rows=16, cols=4, stride=16, signal=units("store")),
        ("store", {"sp_row": 0, "dram": 0x1000, "rows": 16, "stride": 64, "wait": units("load")}), HALT]
# acc loads read int32, so load 4 int32 = 16 bytes of X per row: Y row r = X bytes reinterpreted, zero-filled


def _x() -> np.ndarray:
    return (np.arange(256, dtype=np.int64) % 200 - 100).astype(np.int8).reshape(16, 16)


def test_sim_json_trace_and_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _write_program(tmp_path, COPY)
    np.save(tmp_path / "x.npy", _x())
    rc = main(["sim", str(prog), "--input", f"X={tmp_path / 'x.npy'}", "--output", f"Y={tmp_path / 'y.npy'}",
               "--json", "--trace", str(tmp_path / "t.json")])
    assert rc == 0
    stats = json.loads(capsys.readouterr().out)
    for key in ("cycles", "instructions", "busy_cycles", "stall_cycles", "dram_read_bytes",
                "dram_write_bytes", "tensor_traffic", "scratchpad", "macs", "utilization", "config",
                "wall_seconds"):
        assert key in stats
    assert stats["tensor_traffic"]["Y"]["write"] == 16 * 16 * 4
    assert stats["tensor_traffic"]["X"]["read"] == 16 * 16
    y = np.load(tmp_path / "y.npy")
    expect = np.zeros((16, 16), np.int32)
    expect[:, :4] = _x().view(np.int32)
    assert np.array_equal(y, expect)
    trace = json.loads((tmp_path / "t.json").read_text())
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in slices] == ["load", "store", "halt"]
    assert slices[0]["args"]["index"] == 0 and slices[1]["args"]["pc"] == "0x10"
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    tracks = {e["args"]["name"] for e in meta}
    assert tracks >= {"load", "store", "tensor", "alu"}


def test_sim_log_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _write_program(tmp_path, COPY)
    assert main(["sim", str(prog), "--log", "--no-race-check"]) == 0
    out = capsys.readouterr().out
    assert "dispatch" in out and "store" in out and "cycles" in out


def test_sim_names_the_inputs_it_zero_filled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _write_program(tmp_path, COPY)
    assert main(["sim", str(prog), "--no-race-check"]) == 0
    err = capsys.readouterr().err
    assert "no --input for X (16x16 int8): zero-filled" in err and "np.save" in err
    np.save(tmp_path / "x.npy", _x())
    assert main(["sim", str(prog), "--no-race-check", "--input", f"X={tmp_path / 'x.npy'}"]) == 0
    assert "zero-filled" not in capsys.readouterr().err


def test_sim_refuses_to_overwrite_foreign_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _write_program(tmp_path, COPY)
    victim = tmp_path / "notes.npy"
    victim.write_text("my notes")
    assert main(["sim", str(prog), "--output", f"Y={victim}"]) != 0
    assert victim.read_text() == "my notes"
    assert "--force" in capsys.readouterr().err
    assert main(["sim", str(prog), "--output", f"Y={victim}", "--force"]) == 0
    assert np.load(victim).shape == (16, 16)


def test_sim_fault_is_an_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _write_program(tmp_path, [("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load")}), HALT])
    assert main(["sim", str(prog)]) == 3
    err = capsys.readouterr().err
    assert "deadlock" in err and "Traceback" not in err


def test_sim_max_cycles_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _write_program(tmp_path, [("zero", {"scope": scope("a"), "sp_row": 0, "rows": 16}), HALT])
    assert main(["sim", str(prog), "--max-cycles", "5"]) == 3
    assert "cycle limit of 5" in capsys.readouterr().err
    assert main(["sim", str(prog), "--input", "X=/nonexistent.npy"]) == 2
    assert main(["sim", str(prog), "--input", "Q"]) == 2
    np.save(tmp_path / "bad.npy", np.zeros((3, 3), np.int8))
    assert main(["sim", str(prog), "--input", f"X={tmp_path / 'bad.npy'}"]) == 2
    assert "shape" in capsys.readouterr().err


def test_bench_sim_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "sim", "--json", "--size", "32"]) == 0
    out = json.loads(capsys.readouterr().out)
    default = "native" if native_reason() is None else "python"
    assert sorted((r["schedule"], r["engine"], r["races_checked"]) for r in out["runs"]) == sorted(
        (schedule, engine, races) for schedule in ("naive", "auto", "loads", "gemv")
        for engine, races in ((default, True), (default, False), ("python", False)))
    for r in out["runs"]:
        baseline = next(p for p in out["runs"] if p["schedule"] == r["schedule"] and p["engine"] == "python"
                        and not p["races_checked"])
        assert r["speedup_over_python_core"] == baseline["wall_seconds"] / r["wall_seconds"]
        assert r["cycles"] == baseline["cycles"]  # the cores agree on every figure but wall time
        assert r["verified"] and r["numpy_float32_seconds"] > 0 and r["peak_rss_bytes"] > 0 and r["load_seconds"] > 0
        assert r["ratio_to_numpy"] == r["wall_seconds"] / r["numpy_float32_seconds"]
        assert r["peak_rss_over_image"] == r["peak_rss_bytes"] / r["image_bytes"]
    gemv = next(r for r in out["runs"] if r["schedule"] == "gemv")  # 1 x 32 x 32: fewer instructions than 32^3
    assert gemv["instructions"] < next(r for r in out["runs"] if r["schedule"] == "auto")["instructions"]
    loads = next(r for r in out["runs"] if r["schedule"] == "loads")
    assert loads["instructions"] == 3 * (32 // load_config("default").tile) ** 3 + 1  # the loads and the halt
    assert [line.split(":")[0] for line in out["summary"]] == [
        "target tuned <= 2x numpy (races off)", "target naive >= 5,000,000 instr/s (races on)",
        "target loads >= 1,000,000 instr/s (races on)", "target races on <= 1.5x races off (CPU time)",
        "target peak RSS <= 2x DRAM+program, worst workload"]
    assert set(out["load_average"]) == {"start", "end"} and min(out["load_average"].values()) >= 0


def test_sim_engines_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _write_program(tmp_path, COPY)
    np.save(tmp_path / "x.npy", _x())
    outputs = {}
    for engine in ("python", "auto"):
        y = tmp_path / f"y_{engine}.npy"
        assert main(["sim", str(prog), "--input", f"X={tmp_path / 'x.npy'}", "--output", f"Y={y}", "--json",
                     "--engine", engine]) == 0
        stats = json.loads(capsys.readouterr().out)
        assert stats.pop("engine") == ("native" if engine == "auto" and native_reason() is None else "python")
        stats.pop("wall_seconds")
        assert stats.pop("files_written") == [str(y)]  # each engine writes its own file
        outputs[engine] = (stats, np.load(y))
    assert outputs["python"][0] == outputs["auto"][0]
    assert np.array_equal(outputs["python"][1], outputs["auto"][1])


def test_sim_engine_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _write_program(tmp_path, COPY)
    assert main(["sim", str(prog), "--engine", "native", "--no-timing"]) == 2
    err = capsys.readouterr().err
    assert "native simulator core cannot run here" in err and "timing" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exc:
        main(["sim", str(prog), "--engine", "fast"])
    assert exc.value.code == 2


def test_sim_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _write_program(tmp_path, COPY)
    assert main(["sim", str(prog), "--trace", str(tmp_path / "t.json"), "--no-timing"]) == 2
    assert "--trace needs timing" in capsys.readouterr().err
    assert main(["sim", str(prog), "--output", f"Z={tmp_path / 'z.npy'}"]) == 2
    assert "no tensor 'Z'" in capsys.readouterr().err
    assert main(["sim", str(prog), "--config", "fp32"]) == 2
    assert "built for config" in capsys.readouterr().err
    victim = tmp_path / "trace.json"
    victim.write_text("not a trace")
    assert main(["sim", str(prog), "--trace", str(victim)]) == 2
    assert victim.read_text() == "not a trace"
    with pytest.raises(SystemExit) as exc:  # argparse rejects it before the handler runs
        main(["sim", str(prog), "--max-cycles", "0"])
    assert exc.value.code == 2
    assert "positive integer" in capsys.readouterr().err
