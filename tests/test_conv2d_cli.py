"""``--stride``, ``--pad`` and ``--dilation`` of the conv2d command line, per axis as the ONNX front end takes them.

Each run checks itself against the numpy reference (``verified``); the tests here check that the values the
user typed are the ones in the workload the run reports, in ``compile -o``'s manifest and on the RTL, and that
every bad value is one paragraph naming the option and the value, with exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_rtl_cosim import require_rtl

from tinynpu.cli import main

# 9x8 input, 3x3 kernel: dilation 2 makes it a 5x5 window; padded 12x9, strides 2 and 1 give a 4x5 output.
CONV = ["conv2d", "--n", "1", "--c", "3", "--h", "9", "--w", "8", "--k", "5", "--r", "3", "--s", "3"]
PER_AXIS = ["--stride", "2,1", "--pad", "1,0,2,1", "--dilation", "2"]


def _run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("dtype", ["int8", "fp32"])
def test_run_verifies_per_axis_stride_pad_and_dilation(dtype: str, capsys: pytest.CaptureFixture[str]) -> None:
    report = _run_json(capsys, ["run", *CONV, *PER_AXIS, "--dtype", dtype, "--json"])
    workload = report["workload"]
    assert report["verified"] is True and workload["dtype"] == dtype
    assert (workload["stride"], workload["pad"], workload["dilation"]) == ([2, 1], [1, 0, 2, 1], 2)
    assert (workload["p"], workload["q"]) == ((9 + 1 + 2 - 5) // 2 + 1, (8 + 0 + 1 - 5) // 1 + 1)


def test_two_pads_are_height_then_width_and_reach_the_manifest(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "conv"
    assert main(["compile", *CONV, "--pad", "2,1", "--stride", "3,3", "--dilation", "1,2", "-o", str(out)]) == 0
    capsys.readouterr()
    workload = json.loads((out / "manifest.json").read_text())["workload"]
    # PH,PW pads top and bottom by PH, left and right by PW; equal values collapse to one number.
    assert (workload["pad"], workload["stride"], workload["dilation"]) == ([2, 1, 2, 1], 3, [1, 2])
    assert (workload["p"], workload["q"]) == ((9 + 4 - 3) // 3 + 1, (8 + 2 - 5) // 3 + 1)


def test_defaults_are_the_undilated_unpadded_unit_stride_conv(capsys: pytest.CaptureFixture[str]) -> None:
    workload = _run_json(capsys, ["run", *CONV, "--json", "--no-race-check"])["workload"]
    assert (workload["stride"], workload["pad"], "dilation" in workload) == (1, 0, False)
    assert (workload["p"], workload["q"]) == (7, 6)


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--pad", "1,2,3", "--pad must be 1, 2 or 4 comma-separated non-negative integers (TOP,LEFT,BOTTOM,RIGHT), "
                       "not '1,2,3'."),
    ("--pad", "-1", "--pad must be 1, 2 or 4 comma-separated non-negative integers (TOP,LEFT,BOTTOM,RIGHT), "
                    "not '-1'."),
    ("--pad", "1,0,-2,1", "not '1,0,-2,1'"),
    ("--stride", "0", "--stride must be 1 or 2 comma-separated positive integers (SH,SW), not '0'."),
    ("--stride", "-1,2", "--stride must be 1 or 2 comma-separated positive integers (SH,SW), not '-1,2'."),
    ("--stride", "1,1,1", "not '1,1,1'"),
    ("--stride", "1.5", "not '1.5'"),
    ("--dilation", "0", "--dilation must be 1 or 2 comma-separated positive integers (DH,DW), not '0'."),
    ("--dilation", "2,-1", "--dilation must be 1 or 2 comma-separated positive integers (DH,DW), not '2,-1'."),
    ("--dilation", "", "not ''"),
])
@pytest.mark.parametrize("command", ["run", "compile", "cosim"])
def test_bad_values_name_the_option_and_exit_2(command: str, option: str, value: str, message: str,
                                               tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = [command, *CONV, f"{option}={value}", *(["-o", str(out)] if command == "compile" else [])]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()  # refused before anything was written


@pytest.mark.parametrize(("extra", "window"), [(["--dilation", "4"], "9x9 kernel (r x s) (dilation 4)"),
                                               (["--dilation", "1,5", "--pad", "0,1"], "3x11 kernel"),
                                               (["--r", "11"], "11x3 kernel")])
def test_a_window_larger_than_the_padded_input_is_refused(extra: list[str], window: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *CONV, *extra]) == 2
    err = capsys.readouterr().err
    assert window in err and "larger than the padded input" in err and "no output pixel" in err
    assert "Traceback" not in err


def test_cosim_with_dilation_is_cycle_exact_and_is_the_conv_run_reports(capsys: pytest.CaptureFixture[str]) -> None:
    """The RTL runs the same per-axis conv as ``run`` (same cycles), cycle for cycle with the simulator."""
    require_rtl()
    cosim = _run_json(capsys, ["cosim", *CONV, *PER_AXIS, "--json"])
    assert cosim["verified"] and cosim["outputs_match"] and cosim["trace_mismatches"] == 0
    assert cosim["rtl_cycles"] == cosim["model_cycles"] > 0 and cosim["cycle_diff"] == 0
    run = _run_json(capsys, ["run", *CONV, *PER_AXIS, "--json", "--no-race-check"])
    undilated = _run_json(capsys, ["run", *CONV, *PER_AXIS[:4], "--json", "--no-race-check"])
    assert cosim["model_cycles"] == run["cycles"] != undilated["cycles"]
