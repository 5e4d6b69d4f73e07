"""External data: read only from the model's own folder, whatever the working directory, and kept through
quantization; torch's default exports (``MODEL.onnx`` + ``MODEL.onnx.data``) load as written."""

from __future__ import annotations

import builtins
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from fuzz_onnx import externalize, mlp, qdq  # noqa: E402

from tinynpu.cli import main  # noqa: E402

MODELS = Path(__file__).resolve().parent / "models"


def _save_external(folder: Path, model: object, location: str = "m.onnx.data") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    ext, data = externalize(model, location)
    (folder / "m.onnx").write_bytes(ext.SerializeToString())  # type: ignore[attr-defined]
    (folder / location).write_bytes(data)
    return folder / "m.onnx"


def _run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    code = main(["run", "onnx", *argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)  # type: ignore[no-any-return]


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("tinynpu: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_data_is_read_from_the_models_folder_not_the_working_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    model = _save_external(tmp_path / "model", mlp())
    inline = tmp_path / "inline.onnx"
    inline.write_bytes(mlp().SerializeToString())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    decoy = elsewhere / "m.onnx.data"
    decoy.write_bytes(np.full(4096, 7, np.uint8).tobytes())  # a data file of the same name, other weights
    monkeypatch.chdir(elsewhere)
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(file, (str, bytes, os.PathLike)):
            opened.append(os.path.abspath(os.fsdecode(file)))
        return real_open(file, *args, **kwargs)

    def spy_os_open(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(os.path.abspath(os.fsdecode(path)))
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    got = _run_json(capsys, str(model))
    monkeypatch.undo()
    assert str(decoy) not in opened and str(tmp_path / "model" / "m.onnx.data") in opened
    want = _run_json(capsys, str(inline))
    # The same weights as the inline model: the same cycles, the same agreement with onnxruntime.
    assert got["cycles"] == want["cycles"] and got["ort_quantized"] == want["ort_quantized"]
    assert got["ort_float"] == want["ort_float"]


def test_relative_model_path_from_a_subfolder(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _save_external(tmp_path / "a" / "model", mlp())
    (tmp_path / "a" / "run").mkdir()
    monkeypatch.chdir(tmp_path / "a" / "run")
    assert _run_json(capsys, "../model/m.onnx")["verified"] is True


def test_quantized_model_with_external_data_runs_the_onnxruntime_comparison(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    model = _save_external(tmp_path / "model", qdq())
    monkeypatch.chdir(tmp_path)
    report = _run_json(capsys, str(model), "--compare", "2")
    assert report["quantized_by_tinynpu"] is False and report["inputs_compared"] == 3


def test_compiled_int8_model_keeps_its_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import onnx

    model = _save_external(tmp_path / "model", mlp())
    monkeypatch.chdir(tmp_path)
    assert main(["compile", "onnx", str(model), "-o", "out"]) == 0
    capsys.readouterr()
    q = onnx.load_model_from_string((tmp_path / "out" / "model.int8.onnx").read_bytes())
    assert q.graph.initializer and all(t.data_location == onnx.TensorProto.DEFAULT for t in q.graph.initializer)
    onnx.checker.check_model(q)


@pytest.mark.parametrize("location", ["/etc/hostname", "../m.onnx.data", "sub/../../m.onnx.data"])
def test_a_location_outside_the_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  location: str) -> None:
    folder = tmp_path / "model"
    model = _save_external(folder, mlp())
    (tmp_path / "m.onnx.data").write_bytes((folder / "m.onnx.data").read_bytes())  # a valid file, outside
    import onnx

    m = onnx.load_model_from_string(model.read_bytes())
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = location
    model.write_bytes(m.SerializeToString())
    err = _error(capsys, "run", "onnx", str(model))
    assert "inside the model's folder" in err and "w1" in err


def test_a_symlink_out_of_the_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "model"
    model = _save_external(folder, mlp(), "link.data")
    (tmp_path / "real.data").write_bytes((folder / "link.data").read_bytes())
    (folder / "link.data").unlink()
    (folder / "link.data").symlink_to(tmp_path / "real.data")
    err = _error(capsys, "run", "onnx", str(model))
    assert "outside the model's folder" in err and "symlink" in err


@pytest.mark.parametrize("cut", ["short", "empty", "missing"])
def test_a_short_or_missing_data_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], cut: str) -> None:
    model = _save_external(tmp_path, mlp())
    data = tmp_path / "m.onnx.data"
    if cut == "missing":
        data.unlink()
    else:
        data.write_bytes(data.read_bytes()[: 100 if cut == "short" else 0])
    err = _error(capsys, "compile", "onnx", str(model), "-o", str(tmp_path / "out"))
    assert "m.onnx.data" in err and ("runs past the end" in err or "cannot be read" in err)
    assert not (tmp_path / "out").exists()


def test_torch_default_export_loads_from_another_directory(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bert_sdpa.onnx keeps its weights in bert_sdpa.onnx.data: it loads (no checker or data-file error)
    and ends in a run or in the refusal that names every operator tinynpu lacks, with counts."""
    monkeypatch.chdir(tmp_path)
    code = main(["run", "onnx", str(MODELS / "bert_sdpa.onnx"), "--json"])
    err = capsys.readouterr().err
    if code != 0:
        assert "no accelerator lowering" in err and " x" in err and "external" not in err, err
        assert "checker" not in err and err.count("\n") == 1


def test_torch_default_export_runs_from_another_directory(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _run_json(capsys, str(MODELS / "mobilenet_v3_small.onnx"))["verified"] is True


def test_split_with_num_outputs_at_opset_17_is_one_paragraph(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "run", "onnx", str(MODELS / "gpt2_sdpa.op17.onnx"))
    assert "num_outputs" in err and "Split" in err


def test_every_unsupported_operator_is_named_with_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from onnx import helper

    model = mlp()
    model.graph.node[-1].output[0] = "pre"
    model.graph.node.extend([helper.make_node("Hardmax", ["pre"], ["c1"], name="max1"),
                             helper.make_node("Hardmax", ["c1"], ["c2"], name="max2"),
                             helper.make_node("Sin", ["c2"], ["y"], name="sine")])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    err = _error(capsys, "run", "onnx", str(path))
    assert "3 nodes of 2 operator types" in err and "Hardmax x2" in err and "'max1'" in err and "Sin x1" in err
