"""``tinynpu cosim`` and ``tinynpu bench cosim``: JSON contract, simulator choice, waves, and every usage error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fst_reader import read_fst
from test_rtl_cosim import alu_case, require_rtl, require_simulator

from tinynpu.cli import main
from tinynpu.rtl.cosim import choose_simulator
from tinynpu.rtl.runner import SIMULATORS

pytestmark = pytest.mark.rtl


def assert_readable_waves(path: Path, cycles: int, writer: str) -> None:
    """An FST file with the whole run: its header, the bench and RTL scopes and their signal names."""
    fst = read_fst(path)
    assert writer in fst.writer
    clock_period_s = 10e-9  # the bench's clock (rtl/tb/tinynpu_tb.sv)
    assert (fst.end_time - fst.start_time) * 10.0**fst.timescale >= cycles * clock_period_s
    assert fst.variables > 100
    assert {"tinynpu_tb", "u_top", "u_dispatch"} <= set(fst.scope_names), fst.scope_names[:20]
    names = {name.split(" ")[0] for name in fst.signal_names}  # Icarus appends the bit range
    assert {"clk", "rst_n", "rst_ni", "cycles"} <= names, sorted(names)[:40]


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict]:
    code = main(argv)
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out
    return code, json.loads(out[0])


def test_cosim_workload_json_default_simulator(capsys: pytest.CaptureFixture[str]) -> None:
    require_rtl()
    code, out = run_json(capsys, ["cosim", "matmul", "--m", "40", "--n", "24", "--k", "20", "--json"])
    assert code == 0
    assert out["rtl_cycles"] == out["model_cycles"] > 0 and out["cycle_diff"] == 0
    assert out["outputs_match"] and out["verified"] and out["instructions_compared"] > 3
    assert out["simulator"] == choose_simulator("auto")


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_cosim_says_which_simulator_ran(capsys: pytest.CaptureFixture[str], simulator: str) -> None:
    require_simulator(simulator)
    code = main(["cosim", "matmul", "--m", "16", "--n", "16", "--k", "16", "--simulator", simulator])
    out = capsys.readouterr().out
    assert code == 0
    assert f"RTL simulated on {simulator.capitalize()}" in out and "outputs match" in out


def test_cosim_program_with_inputs_and_waves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_rtl()
    case, expected = alu_case(np.random.default_rng(1))
    binary = tmp_path / "alu.bin"
    case.program.save(binary)
    np.save(tmp_path / "x.npy", case.inputs["X"])
    waves = tmp_path / "alu.fst"
    # Icarus: a Verilator build with tracing is a second build of a minute (the slow test below uses it).
    code, out = run_json(capsys, ["cosim", str(binary), "--input", f"X={tmp_path / 'x.npy'}", "--json",
                                  "--simulator", "icarus", "--waves", str(waves)])
    assert code == 0 and out["outputs_match"] and out["cycle_diff"] == 0
    assert out["waves"] == str(waves)
    assert_readable_waves(waves, out["rtl_cycles"], "Icarus")
    # The same command again replaces its own waves; a waves file changed since is not replaced without --force.
    again = ["cosim", str(binary), "--input", f"X={tmp_path / 'x.npy'}", "--simulator", "icarus", "--waves", str(waves)]
    assert main(again) == 0
    with open(waves, "ab") as fh:
        fh.write(b"\0")
    capsys.readouterr()
    assert main(again) == 2
    assert "--force" in capsys.readouterr().err
    assert expected  # the numpy side of this program is checked in test_rtl_cosim
    # fsio's output rules, checked before the run: never over an input, never over a directory
    for target, words in ((tmp_path / "x.npy", "also an input of this run"), (tmp_path, "it is a directory")):
        assert main(["cosim", str(binary), "--input", f"X={tmp_path / 'x.npy'}", "--waves", str(target),
                     "--force"]) == 2
        assert words in capsys.readouterr().err
    # --force replaces the waves only once the run is complete, and leaves no temporary file
    before = waves.stat().st_mtime_ns
    code, out = run_json(capsys, ["cosim", str(binary), "--input", f"X={tmp_path / 'x.npy'}", "--json",
                                  "--simulator", "icarus", "--waves", str(waves), "--force"])
    assert code == 0 and waves.stat().st_mtime_ns > before and waves.stat().st_size > 1000
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tinynpu-")]


@pytest.mark.parametrize("argv, message", [
    (["cosim", "PROG", "--input", "X"], "NAME=FILE.npy"),
    (["cosim", "PROG", "--input", "nosuch=x.npy"], "no tensor 'nosuch'"),
    (["cosim", "PROG", "--input", "X=missing.npy"], "cannot read a .npy"),
    (["cosim", "missing.bin"], "cannot read the binary"),
    (["cosim", "matmul", "--m", "8"], "required"),
    (["cosim", "PROG", "--bogus"], "unrecognized arguments"),
    (["cosim", "matmul", "--m", "16", "--n", "16", "--k", "16", "--dtype", "fp32"], "cannot run on the RTL"),
    (["cosim", "PROG", "--simulator", "modelsim"], "invalid choice: 'modelsim'"),
    (["cosim", "matmul", "--m", "16", "--n", "16", "--k", "16", "--simulator", "xcelium"], "invalid choice"),
])
def test_cosim_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                            message: str) -> None:
    case, _ = alu_case(np.random.default_rng(1))
    binary = tmp_path / "p.bin"
    case.program.save(binary)
    argv = [str(binary) if a == "PROG" else a for a in argv]
    argv = [a.replace("missing.npy", str(tmp_path / "missing.npy")) for a in argv]
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0
    assert message in err and "Traceback" not in err


def test_bench_cosim_json(capsys: pytest.CaptureFixture[str]) -> None:
    for simulator in SIMULATORS:
        require_simulator(simulator)
    code, out = run_json(capsys, ["bench", "cosim", "--json", "--size", "32", "--seed-size", "0"])
    assert code == 0
    for simulator in SIMULATORS:
        row = out[simulator]
        assert row["simulator"] == simulator
        assert row["rtl_cycles"] == row["model_cycles"] and row["agree"] and row["verified"]
        assert row["rtl_cycles_per_second"] > 0 and row["cosim_wall_seconds"] >= row["rtl_sim_seconds"]
    ratio = out["verilator"]["rtl_cycles_per_second"] / out["icarus"]["rtl_cycles_per_second"]
    assert out["verilator_over_icarus"] == pytest.approx(ratio)
    assert out["seed"] is None and out["resnet50"] is None
    [line] = out["target_lines"]
    assert line.startswith("target: Verilator / Icarus cycles per second on the matmul 32x32x32 int8 >= 100x: ")


@pytest.mark.slow
def test_verilator_waves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_simulator("verilator")
    case, _ = alu_case(np.random.default_rng(1))
    binary = tmp_path / "alu.bin"
    case.program.save(binary)
    np.save(tmp_path / "x.npy", case.inputs["X"])
    waves = tmp_path / "alu.fst"
    code, out = run_json(capsys, ["cosim", str(binary), "--input", f"X={tmp_path / 'x.npy'}", "--json",
                                  "--simulator", "verilator", "--waves", str(waves)])
    assert code == 0 and out["outputs_match"] and out["simulator"] == "verilator"
    assert_readable_waves(waves, out["rtl_cycles"], "VerilatedFst")
