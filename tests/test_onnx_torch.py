"""The PyTorch exports of tests/models run end to end, checked on every output a user reads.

Each export runs with the defaults on its committed inputs (``NAME.inputs.npz``), which then
calibrate too, as ``--input`` values do:
bit-exact against the integer reference (check a) on every graph output,
equal to onnxruntime's int8 run of the same model (check b), and within
:data:`MIN_COSINE` of the float model on every output (check c).  The
smallest run in the normal suite; every export behind TINYNPU_SLOW=1.

The default exports keep their weights in ``NAME.onnx.data``; until loading
those from any working directory lands, each test loads the export where it is
and saves it with inline weights in a temporary directory.

Then the mistakes a user can make with calibration and inputs: each one a
paragraph naming the place, a non-zero exit, no traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tinynpu.cli import main  # noqa: E402
from tinynpu.compiler.onnx import compile_onnx, run_network  # noqa: E402

MODELS = Path(__file__).resolve().parent / "models"
#: Smallest cosine against the float model, on every output of every export, on the committed inputs (the
#: issue's target).  ViT's class row, a tenth of the patch rows at init, meets it because the residual
#: stream's small leading rows get int8 scales of their own (compiler/onnx/frontend/rowgroups.py).
MIN_COSINE = 0.99
#: With the nonlinear layers on the accelerator, the largest difference from onnxruntime's int8 run on any
#: output, in LSBs of its scale (measured: 3, on llama's logits): bit-equality holds on the host path only.
NPU_LSB_BOUND = 3

FAST = ["bert_sdpa.op17"]
#: Every export tinynpu takes with the defaults; gpt2_sdpa.op17 is left out because onnxruntime itself
#: refuses it (tests/models/README.md).
EVERY = ["bert_sdpa", "bert_sdpa.legacy", "bert_sdpa.op17", "bert_eager", "gpt2_sdpa", "gpt2_sdpa.legacy",
         "gpt2_eager", "gpt2_eager.legacy", "gpt2_past", "llama", "llama_past", "vit_hf", "vit_hf.legacy",
         "vit_torchvision", "mobilenet_v3_small"]


def _inline(name: str, tmp: Path) -> Path:
    """The export with its weights inline, in ``tmp`` (see the module docstring)."""
    out = tmp / f"{name}.onnx"
    onnx.save(onnx.load(str(MODELS / f"{name}.onnx")), str(out))
    return out


def _inputs(name: str) -> dict[str, np.ndarray]:
    with np.load(MODELS / f"{name.split('.')[0]}.inputs.npz") as data:
        return {k: data[k] for k in data.files}


def _float_outputs(name: str) -> list[str]:
    return [o.name for o in onnx.load(str(MODELS / f"{name}.onnx"), load_external_data=False).graph.output]


def _check_export(name: str, tmp: Path, nonlinear: str) -> None:
    """As ``tinynpu run onnx NAME.onnx --input ... --nonlinear NONLINEAR`` with every committed input: they
    calibrate too.  Check (b) is exact where onnxruntime's int8 run computes what tinynpu does: on the host
    path (``host``: softmax, norms and activations in float on both sides); with them lowered (``npu``) a
    masked softmax's integer exp and division differ from onnxruntime's float softmax in the last bit of a
    probability, so there (b) is held to :data:`NPU_LSB_BOUND` LSBs on every output."""
    from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource

    cn = compile_onnx(_inline(name, tmp), nonlinear=nonlinear,
                      calibration=CalibrationSource((_inputs(name),), "the committed inputs"))
    r = run_network(cn, feeds=_inputs(name))
    assert r["verified"] is True
    assert [o["name"] for o in r["outputs"]] == _float_outputs(name)
    for o in r["outputs"]:
        assert o["verified"] is True, o["name"]
        q = o["ort_quantized"]
        if q["on"] == "int8":
            if nonlinear == "host":
                assert q["equal_fraction"] == 1.0, o["name"]
            else:  # the integer softmax against onnxruntime's float one: a few LSB on an output, never more
                assert q["max_abs_lsb"] <= NPU_LSB_BOUND, (o["name"], q["max_abs_lsb"])
        elif nonlinear == "host":  # a float operator last (BERT's pooler Tanh): onnxruntime's tanh rounds in
            assert q["max_abs_difference"] < 1e-5, o["name"]  # the last bits
        else:  # the pooler's Tanh as a table into codes of its own scale: within half a step of onnxruntime's
            scale = float(cn.net.constants[f"{o['name']}__int8_scale"])
            assert q["max_abs_difference"] <= scale / 2 + 1e-5, (o["name"], q["max_abs_difference"], scale)
        assert o["ort_float"]["cosine"] >= MIN_COSINE, (o["name"], o["ort_float"]["cosine"])
        assert ("top1_agree" in o["ort_float"]) == ("logits" in o["name"])


@pytest.mark.parametrize("nonlinear", ["npu", "host"])
@pytest.mark.parametrize("name", FAST)
def test_small_export_end_to_end(name: str, nonlinear: str, tmp_path: Path) -> None:
    _check_export(name, tmp_path, nonlinear)


def test_vit_class_token_meets_the_target(tmp_path: Path) -> None:
    """The export that was below the target (0.9897 with one int8 scale per residual tensor), in the normal
    suite: its logits read the class row alone."""
    _check_export("vit_hf.legacy", tmp_path, "npu")


@pytest.mark.slow  # every export: --runslow or TINYNPU_SLOW=1
@pytest.mark.parametrize("nonlinear", ["npu", "host"])
@pytest.mark.parametrize("name", sorted(set(EVERY) - set(FAST)))
def test_every_export_end_to_end(name: str, nonlinear: str, tmp_path: Path) -> None:
    _check_export(name, tmp_path, nonlinear)


def test_json_names_every_output_and_the_calibration(tmp_path: Path, capsys: Any) -> None:
    import json

    model = _inline("bert_sdpa.op17", tmp_path)
    assert main(["run", "onnx", str(model), "--json", "--calibrate", "2"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert [o["name"] for o in r["outputs"]] == ["last_hidden_state", "pooler_output"]
    assert {"ort_quantized", "ort_float", "verified"} <= set(r)  # the existing top-level fields stay
    assert r["outputs"][0]["shape"] == [1, 16, 32]
    assert "token_type_ids: ids uniform in [0, 2)" in r["calibration"]
    assert "attention_mask: ones" in r["calibration"]


def _error(argv: list[str], capsys: Any) -> str:
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_token_id_beyond_the_vocabulary(tmp_path: Path, capsys: Any) -> None:
    ids = _inputs("bert_sdpa")["input_ids"].copy()
    ids[0, 3] = 300
    np.save(tmp_path / "ids.npy", ids)
    err = _error(["run", "onnx", str(_inline("bert_sdpa.op17", tmp_path)), "--input",
                  f"input_ids={tmp_path / 'ids.npy'}"], capsys)
    assert "--input input_ids: input 'input_ids' holds id 300 at index (0, 3), outside the 256 rows of" in err
    assert "(Gather) indexes with it (ids -256..255" in err


def test_token_id_beyond_the_vocabulary_in_a_calibration_file(tmp_path: Path, capsys: Any) -> None:
    """The same check, the same message form, for a calibration sample as for --input."""
    sample = _inputs("bert_sdpa")
    sample["token_type_ids"][0, 5] = 2  # two types: 0 and 1
    np.savez(tmp_path / "cal.npz", **sample)
    err = _error(["run", "onnx", str(_inline("bert_sdpa.op17", tmp_path)), "--calibration",
                  str(tmp_path / "cal.npz")], capsys)
    assert f"--calibration {tmp_path / 'cal.npz'}: input 'token_type_ids' holds id 2 at index (0, 5), outside the " \
           "2 rows of" in err
    assert "(Gather) indexes with it (ids -2..1" in err


def test_calibration_file_with_wrong_names(tmp_path: Path, capsys: Any) -> None:
    sample = _inputs("bert_sdpa")
    np.savez(tmp_path / "cal.npz", input_ids=sample["input_ids"], token_type=sample["token_type_ids"])
    err = _error(["run", "onnx", str(_inline("bert_sdpa.op17", tmp_path)), "--calibration",
                  str(tmp_path / "cal.npz")], capsys)
    assert "cal.npz" in err and "'token_type'" in err and "input_ids, attention_mask, token_type_ids" in err


def test_calibration_file_with_wrong_shape(tmp_path: Path, capsys: Any) -> None:
    sample = _inputs("bert_sdpa")
    sample["attention_mask"] = np.ones((1, 12), np.int64)
    np.savez(tmp_path / "cal.npz", **sample)
    err = _error(["run", "onnx", str(_inline("bert_sdpa.op17", tmp_path)), "--calibration",
                  str(tmp_path / "cal.npz")], capsys)
    assert "input 'attention_mask' has shape (1, 12), the network's is (1, 16)" in err


def test_calibration_folder_is_used(tmp_path: Path, capsys: Any) -> None:
    import json

    folder = tmp_path / "cal"
    folder.mkdir()
    for i in range(2):
        np.savez(folder / f"s{i}.npz", **_inputs("bert_sdpa"))
    assert main(["run", "onnx", str(_inline("bert_sdpa.op17", tmp_path)), "--json", "--calibration",
                 str(folder)]) == 0
    assert json.loads(capsys.readouterr().out)["calibration"] == f"2 sample(s) from --calibration {folder}"


def _feed_args(name: str, tmp: Path) -> list[str]:
    args = []
    for key, value in _inputs(name).items():
        np.save(tmp / f"{key}.npy", value)
        args += ["--input", f"{key}={tmp / f'{key}.npy'}"]
    return args


def _quiet_run(name: str, tmp: Path, capfd: Any) -> None:
    """A successful run prints its report and nothing else: no raw library warning, no ANSI colour code."""
    assert main(["run", "onnx", str(MODELS / f"{name}.onnx"), *_feed_args(name, tmp)]) == 0
    out, err = capfd.readouterr()
    for stream in (out, err):
        assert "\x1b[" not in stream
        assert not [line for line in stream.splitlines() if "Warning" in line or "warnings.warn" in line
                    or line.lstrip().startswith("return ")], stream  # a warning's source line, printed under it
    assert err == ""


def test_a_run_is_quiet(tmp_path: Path, capfd: Any) -> None:
    _quiet_run("gpt2_eager", tmp_path, capfd)  # its host steps printed numpy warnings before


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(EVERY) - {"gpt2_eager"}))
def test_every_run_is_quiet(name: str, tmp_path: Path, capfd: Any) -> None:
    _quiet_run(name, tmp_path, capfd)


def test_an_lstm_is_refused_in_one_paragraph_naming_the_op(tmp_path: Path, capsys: Any) -> None:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    hidden, size = 8, 4
    weights = [numpy_helper.from_array(rng.normal(size=(1, 4 * hidden, n)).astype(np.float32), name)
               for name, n in (("W", size), ("R", hidden))]
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], name="encoder_lstm", hidden_size=hidden)
    graph = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 1, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 1, 1, hidden])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "lstm.onnx"
    onnx.save(model, str(path))
    err = _error(["run", "onnx", str(path)], capsys)
    assert err.count("\n") == 1 and err.startswith("tinynpu: error: ")
    assert "LSTM x1" in err and "'encoder_lstm'" in err and "no accelerator lowering and no host fallback" in err
