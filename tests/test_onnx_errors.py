"""Bad input to `tinynpu run onnx`: each a one-paragraph error naming the place, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import _init, save, small_cnn  # noqa: E402

from tinynpu.cli import main  # noqa: E402


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["run", "onnx", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tinynpu: error: ") and "Traceback" not in err and err.count("\n") == 1
    return err


def test_not_an_onnx_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "notes.onnx"
    bad.write_text("this is a text file, not a model\n")
    err = _run(capsys, str(bad))
    assert "notes.onnx" in err and "ONNX" in err


def test_truncated_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    full = small_cnn(tmp_path / "full.onnx").read_bytes()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(full[: len(full) * 2 // 3])
    err = _run(capsys, str(cut))
    assert "cut.onnx" in err and ("truncated" in err or "not a readable" in err)


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _run(capsys, str(tmp_path / "nowhere.onnx"))
    assert "nowhere.onnx" in err


def test_unsupported_op_names_node_op_and_opset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="act"),
             helper.make_node("CumSum", ["r", "axis"], ["y"], name="running_total")]
    axis = helper.make_tensor("axis", TensorProto.INT64, [], [1])
    path = save(tmp_path / "cumsum.onnx", nodes, [axis],
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    err = _run(capsys, str(path))
    assert "running_total" in err and "CumSum" in err and "opset 13" in err


def test_dynamic_batch_needs_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = small_cnn(tmp_path / "dyn.onnx", batch="N")
    err = _run(capsys, str(path))
    assert "'x'" in err and "--batch" in err
    assert main(["run", "onnx", str(path), "--batch", "2", "--json"]) == 0
    assert '"verified": true' in capsys.readouterr().out


def test_model_too_big_for_dram(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from tinynpu.isa import load_config

    cfg = yaml.safe_load(Path(load_config("default").source).read_text())
    cfg["name"] = "tiny-dram"
    cfg["dram"]["bytes"] = 1 << 16
    cfg_path = tmp_path / "tiny.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1)]
    path = save(tmp_path / "big.onnx", nodes, [_init("w", rng.normal(size=(512, 256))), _init("b", np.zeros(512))],
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 512])])
    err = _run(capsys, str(path), "--config", str(cfg_path))
    assert "big.onnx" in err and "65536 bytes" in err and "tiny-dram" in err


def test_bad_input_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = small_cnn(tmp_path / "cnn.onnx")
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 5, 5), np.float32))
    err = _run(capsys, str(path), "--input", f"x={tmp_path / 'x.npy'}")
    assert "(1, 3, 5, 5)" in err and "(1, 3, 20, 20)" in err
    err = _run(capsys, str(path), "--input", f"nosuch={tmp_path / 'x.npy'}")
    assert "nosuch" in err and "x" in err
    err = _run(capsys, str(path), "--input", "x")
    assert "NAME=FILE.npy" in err
