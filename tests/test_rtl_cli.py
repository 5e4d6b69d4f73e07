"""``tinynpu cosim`` and ``tinynpu bench cosim``: JSON contract, waves, and every usage error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_rtl_cosim import alu_case, require_rtl

from tinynpu.cli import main

pytestmark = pytest.mark.rtl


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict]:
    code = main(argv)
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out
    return code, json.loads(out[0])


def test_cosim_workload_json(capsys: pytest.CaptureFixture[str]) -> None:
    require_rtl()
    code, out = run_json(capsys, ["cosim", "matmul", "--m", "40", "--n", "24", "--k", "20", "--json"])
    assert code == 0
    assert out["rtl_cycles"] == out["model_cycles"] > 0 and out["cycle_diff"] == 0
    assert out["outputs_match"] and out["verified"] and out["instructions_compared"] > 3


def test_cosim_program_with_inputs_and_waves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_rtl()
    case, expected = alu_case(np.random.default_rng(1))
    binary = tmp_path / "alu.bin"
    case.program.save(binary)
    np.save(tmp_path / "x.npy", case.inputs["X"])
    waves = tmp_path / "alu.fst"
    code, out = run_json(capsys, ["cosim", str(binary), "--input", f"X={tmp_path / 'x.npy'}", "--json",
                                  "--waves", str(waves)])
    assert code == 0 and out["outputs_match"] and out["cycle_diff"] == 0
    assert waves.stat().st_size > 1000 and out["waves"] == str(waves)
    # An existing waves file is not replaced without --force.
    assert main(["cosim", str(binary), "--input", f"X={tmp_path / 'x.npy'}", "--waves", str(waves)]) == 2
    assert "--force" in capsys.readouterr().err
    assert expected  # the numpy side of this program is checked in test_rtl_cosim


@pytest.mark.parametrize("argv, message", [
    (["cosim", "PROG", "--input", "X"], "NAME=FILE.npy"),
    (["cosim", "PROG", "--input", "nosuch=x.npy"], "no tensor 'nosuch'"),
    (["cosim", "PROG", "--input", "X=missing.npy"], "cannot read a .npy"),
    (["cosim", "missing.bin"], "cannot read the binary"),
    (["cosim", "matmul", "--m", "8"], "required"),
    (["cosim", "PROG", "--bogus"], "unrecognized arguments"),
    (["cosim", "matmul", "--m", "16", "--n", "16", "--k", "16", "--dtype", "fp32"], "cannot run on the RTL"),
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
    require_rtl()
    code, out = run_json(capsys, ["bench", "cosim", "--json", "--size", "32"])
    assert code == 0
    assert out["rtl_cycles"] == out["model_cycles"] and out["verified"]
    assert out["rtl_cycles_per_second"] > 0 and out["rtl_slowdown_vs_model"] > 0
    assert out["cosim_wall_seconds"] >= out["rtl_sim_seconds"]
