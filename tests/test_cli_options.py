"""Options whose values used to be taken silently: counts below one, and the int8 output's shift."""

from __future__ import annotations

import json

import pytest

from tinynpu.cli import main


@pytest.mark.parametrize(("flag", "name"), [("--trials", "--trials"), ("--simulate-best", "--simulate-best")])
def test_tune_rejects_counts_below_one(flag: str, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["tune", "matmul", "--m", "32", "--n", "32", "--k", "32", flag, "0"])
    err = capsys.readouterr().err
    assert code != 0 and name in err and "at least 1" in err and "not 0" in err


def test_run_matmul_takes_the_requantization_shift(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "matmul", "--m", "32", "--n", "32", "--k", "64", "--out-dtype", "int8", "--json", "--no-race-check"]
    assert main(argv) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["workload"]["shift"] == 11 and default["verified"]  # the documented default for K=64
    assert main([*argv, "--shift", "5"]) == 0
    chosen = json.loads(capsys.readouterr().out)
    assert chosen["workload"]["shift"] == 5 and chosen["verified"]


def test_shift_without_int8_output_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "matmul", "--m", "16", "--n", "16", "--k", "16", "--shift", "3"]) != 0
    assert "int8 output" in capsys.readouterr().err
