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


@pytest.mark.parametrize("external", [False, True])
def test_the_onnx_checker_rejection_is_one_paragraph(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     external: bool) -> None:
    """The checker reads the file's own bytes, or (external data read in) the model; either way its
    complaint is named."""
    import onnx
    from onnx import TensorProto, helper

    w = _init("w", np.ones((8, 8)))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Relu", ["m"], ["y"], name="act", alpha=1.0)]  # Relu has no attribute alpha
    path = save(tmp_path / "bad_attr.onnx", nodes, [w], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    if external:
        model = onnx.load(str(path))
        onnx.save(model, str(path), save_as_external_data=True, location="bad_attr.data", size_threshold=0)
        assert (tmp_path / "bad_attr.data").exists()
    err = _run(capsys, str(path))
    assert "bad_attr.onnx" in err and "checker rejects" in err and "alpha" in err


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


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--batch", str(2**63), "--batch must be an integer from 1 to 65536"),
    ("--batch", "abc", "--batch must be an integer from 1 to 65536, not 'abc'"),
    ("--batch", "9" * 5000, "--batch must be an integer"),
    ("--seed", "-1", "--seed must be an integer from 0 to 4294967295, not -1"),
    ("--random-weights", "-5", "--random-weights must be an integer from 0"),
    ("--calibrate", "1000000000", "--calibrate must be an integer from 1 to 1000"),
    ("--calibrate", "0", "--calibrate must be an integer from 1"),
    ("--compare", "1000000000", "--compare must be an integer from 0 to 1000"),
])
def test_numeric_options_are_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str,
                                     says: str) -> None:
    path = small_cnn(tmp_path / "cnn.onnx", batch="N")
    err = _run(capsys, str(path), option, value)
    assert says in err and "usage:" not in err


def test_a_huge_batch_is_refused_before_any_allocation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = small_cnn(tmp_path / "cnn.onnx", batch="N")
    err = _run(capsys, str(path), "--batch", "65536")  # 3.3 GB of tensors per inference, 8 inferences kept
    assert "one inference holds" in err and "host-memory bound of 8,589,934,592 bytes" in err and "--batch" in err
    err = _run(capsys, str(path), "--batch", "60000", "--calibrate", "1000")  # the inputs alone
    assert "input 'x'" in err and "1000 inferences" in err


def test_repeated_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = small_cnn(tmp_path / "cnn.onnx")
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 20, 20), np.float32))
    err = _run(capsys, str(path), "--input", f"x={tmp_path / 'x.npy'}", "--input", f"x={tmp_path / 'x.npy'}")
    assert "--input x" in err and "more than once" in err


def test_token_ids_outside_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fuzz_onnx import tokens

    path = tmp_path / "tok.onnx"
    path.write_bytes(tokens().SerializeToString())
    np.save(tmp_path / "ids.npy", np.array([[0, 1, 32, 2]], np.int64))
    err = _run(capsys, str(path), "--input", f"ids={tmp_path / 'ids.npy'}")
    assert "id 32" in err and "32 rows of 'emb'" in err and "'embed'" in err


@pytest.mark.parametrize("output", ["", "dangling", "a" * 300])
def test_bad_output_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                            output: str) -> None:
    path = small_cnn(tmp_path / "cnn.onnx")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "target")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["compile", "onnx", str(path), "-o", output]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tinynpu: error: -o") and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def _qdq_model(tmp_path: Path, **change: object) -> Path:
    from fuzz_onnx import qdq
    from onnx import numpy_helper

    model = qdq()
    for t in model.graph.initializer:
        if t.name in change:
            t.CopyFrom(numpy_helper.from_array(np.asarray(change[t.name]), t.name))
    path = tmp_path / "q.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_uint8_zero_point_on_int8_weights_is_refused_and_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _qdq_model(tmp_path, wz=np.zeros(8, np.uint8))
    assert main(["compile", "onnx", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "dqw" in err and "uint8" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("change", "says"), [
    ({"ws": np.full(5, 0.01, np.float32)}, "has shape [8] but its scale 'ws' has shape [5]"),
    ({"ws": np.full(5, 0.01, np.float32), "wz": np.zeros(5, np.int8)}, "5 values but axis 0 of 'wq' has 8"),
    ({"xs": np.array(-0.5, np.float32)}, "positive and finite"),
    ({"ys": np.array(np.nan, np.float32)}, "positive and finite"),
])
def test_bad_quantization_parameters(tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict,  # type: ignore[type-arg]
                                     says: str) -> None:
    err = _run(capsys, str(_qdq_model(tmp_path, **change)))
    assert says in err


def test_axis_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import onnx

    path = _qdq_model(tmp_path)
    model = onnx.load(str(path))
    next(n for n in model.graph.node if n.name == "dqw").attribute[0].i = 4
    onnx.save(model, str(path))
    err = _run(capsys, str(path))
    assert "axis 4 is outside its input 'wq' of rank 2" in err


def test_float16_model_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fuzz_onnx import mlp
    from onnx import TensorProto, numpy_helper

    model = mlp(dtype=TensorProto.FLOAT16)
    for t in model.graph.initializer:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    path = tmp_path / "half.onnx"
    path.write_bytes(model.SerializeToString())
    err = _run(capsys, str(path))
    assert "float16" in err and "float32" in err and "[E:" not in err


def test_graph_without_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fuzz_onnx import mlp

    model = mlp()
    del model.graph.output[:]
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    assert "no outputs" in _run(capsys, str(path))


@pytest.mark.parametrize(("how", "says"), [("short", "holds 10 bytes of raw data"),
                                           ("dims", "holds 512 bytes of raw data")])
def test_initializer_bytes_that_do_not_decode(tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str,
                                              says: str) -> None:
    from fuzz_onnx import mlp

    model = mlp()
    w1 = model.graph.initializer[0]
    if how == "short":
        w1.raw_data = w1.raw_data[:10]
    else:
        del w1.dims[:]
        w1.dims.extend([8, 17])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    err = _run(capsys, str(path))
    assert "initializer 'w1'" in err and says in err
