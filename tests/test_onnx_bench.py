"""`tinynpu bench onnx`: target lines and a bad model name."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

from tinynpu.cli import main  # noqa: E402
from tinynpu.compiler.onnx.bench import target_lines  # noqa: E402


def _row(**over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "model": "resnet50", "verified": True, "inputs": 8, "util_over_ceiling": 0.95,
        "end_to_end_seconds": 31.0, "end_to_end_cpu_seconds": 12.0, "ort_quantized_seconds": 0.1,
        "ort_quantized_int8_kept_seconds": 0.2,
        "ort_float_seconds": 0.1,
        "ort_quantized": {"top1_agree": 1.0, "within_1lsb_fraction": 0.985, "equal_fraction": 0.5, "max_abs_lsb": 2},
    }
    row.update(over)
    return row


def test_target_lines_say_met_or_not_met_with_the_figure() -> None:
    lines = target_lines([_row()])
    assert len(lines) == 5 and all(line.startswith("target: resnet50: ") for line in lines)
    assert lines[0].endswith("yes: met") and lines[1].endswith("100%: met")
    assert "98.50%" in lines[2] and lines[2].endswith("not met")
    assert lines[3].endswith("95.00%: met")
    assert "31.0 s wall" in lines[4] and lines[4].endswith("not met")
    assert len(target_lines([_row(model="squeezenet")])) == 4  # the time target is ResNet-50's


def test_unknown_model_is_one_paragraph(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "onnx", "--models", "lenet9000"]) == 2
    err = capsys.readouterr().err
    assert "lenet9000" in err and "resnet50" in err and "Traceback" not in err
