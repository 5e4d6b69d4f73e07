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

    # (CumSum, the example until PyTorch exports needed it, runs on the host now)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="act"),
             helper.make_node("Hardmax", ["r"], ["y"], name="one_hot_max", axis=1)]
    path = save(tmp_path / "hardmax.onnx", nodes, [],
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    err = _run(capsys, str(path))
    assert "one_hot_max" in err and "Hardmax" in err and "opset 13" in err


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
    # Refused before quantizing, from the weights' element count (512 x 256 int8), naming the
    # built-in integer configs that have room and not the float one.
    assert "at least 131072 bytes" in err and "dram256" in err and "default" in err and "fp32" not in err


def test_bad_input_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = small_cnn(tmp_path / "cnn.onnx")
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 5, 5), np.float32))
    err = _run(capsys, str(path), "--input", f"x={tmp_path / 'x.npy'}")
    assert "(1, 3, 5, 5)" in err and "(1, 3, 20, 20)" in err
    err = _run(capsys, str(path), "--input", f"nosuch={tmp_path / 'x.npy'}")
    assert "nosuch" in err and "x" in err
    err = _run(capsys, str(path), "--input", "x")
    assert "NAME=FILE.npy" in err


def test_dynamic_dimension_other_than_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["y"], name="act")]
    path = save(tmp_path / "seq.onnx", nodes, [], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T"])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "T"])])
    err = _run(capsys, str(path), "--batch", "1")
    assert "'x'" in err and "dimension 1" in err and "'T'" in err and "--batch sets only dimension 0" in err


def test_qoperator_node_with_a_runtime_scale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """QLinearConv whose input scale is a graph input: no static requantization exists for it."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8), "w"),
             numpy_helper.from_array(np.array(0.02, np.float32), "ws"),
             numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(np.array(0.1, np.float32), "ys"),
             numpy_helper.from_array(np.zeros(4, np.int32), "b")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "z"], ["xq"], name="quantize_x"),
             helper.make_node("QLinearConv", ["xq", "xs", "z", "w", "ws", "z", "ys", "z", "b"], ["yq"], name="qconv"),
             helper.make_node("DequantizeLinear", ["yq", "ys", "z"], ["y"], name="dequantize_y")]
    path = save(tmp_path / "qconv.onnx", nodes, inits,
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
                 helper.make_tensor_value_info("xs", TensorProto.FLOAT, [])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])])
    err = _run(capsys, str(path))
    assert "'qconv'" in err and "'xs'" in err and "constants" in err
