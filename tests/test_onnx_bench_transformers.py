"""`tinynpu bench onnx`'s transformer section: per-output figures, target lines, bad names."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tinynpu.cli import main  # noqa: E402
from tinynpu.compiler.onnx.bench_transformers import target_lines  # noqa: E402


def _output(name: str = "logits", cosine: float = 0.995, exact: bool = True) -> dict[str, Any]:
    return {"name": name, "shape": [1, 4, 8], "bit_exact": exact, "cosine_vs_float": cosine,
            "ort_int8_cosine_vs_float": 0.99, "closer_to_float": "tinynpu",
            "ort_int8": {"on": "int8", "equal_fraction": 0.9, "within_1lsb_fraction": 1.0, "max_abs_lsb": 1}}


def _row(**over: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"model": "gpt2_eager", "verified": True, "outputs": [_output()],
                           "nonlinear_host_steps": [], "host_compute_steps": [], "host_share_of_wall_time": 0.1}
    row.update(over)
    return row


def test_target_lines_per_output_and_per_network() -> None:
    lines = target_lines([_row(outputs=[_output(), _output("present.0.key", 0.985)])])
    assert lines[0] == "target: gpt2_eager: bit-exact against the integer reference on every output: yes: met"
    assert lines[1] == "target: gpt2_eager: logits: cosine against the float model >= 0.99: 0.9950: met"
    assert lines[2] == "target: gpt2_eager: present.0.key: cosine against the float model >= 0.99: 0.9850: not met"
    assert lines[3] == "target: gpt2_eager: no nonlinear layer on the host: 0 host step(s): met"
    assert len(lines) == 4  # the host-share and host-compute targets are the encoder block's


def test_target_lines_name_what_fails() -> None:
    tanh = {"name": "node_tanh", "op": "Tanh"}
    lines = target_lines([_row(outputs=[_output(exact=False)], nonlinear_host_steps=[tanh])])
    assert lines[0].endswith(": no: not met")
    assert lines[2] == "target: gpt2_eager: no nonlinear layer on the host: 1 host step(s) (node_tanh Tanh): not met"
    block = target_lines([_row(model="block", host_share_of_wall_time=0.4, host_compute_steps=[tanh])])
    assert "target: block: host share of the run's wall time, loading the programs counted as the host's, <= 15%: " \
           "40.0%: not met" in block
    assert block[-1] == "target: block: zero host compute steps: 1: not met"


def test_unknown_transformer_is_one_paragraph(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "onnx", "--models", "", "--transformers", "bert_huge"]) == 2
    err = capsys.readouterr().err
    assert "'bert_huge'" in err and "gpt2_eager" in err and "Traceback" not in err


def test_section_json_carries_every_figure(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "onnx", "--models", "", "--transformers", "block_small,bert_sdpa.op17", "--inputs", "1",
                 "--json"]) == 0
    out, err = capfd.readouterr()
    assert err == ""  # the libraries' warnings and logs are captured, as in a run
    r = json.loads(out)
    assert r["models"] == [] and [t["model"] for t in r["transformers"]] == ["block_small", "bert_sdpa.op17"]
    block, bert = r["transformers"]
    assert block["host_compute_steps"] == [] and block["cycles"] > 0
    assert block["host_move_steps"] == 0  # its head split and merge are folded into the attention matmuls
    # SDPA's scaled Q and K too: their scaling tables run before the head split (frontend/movechains.py), which
    # then folds into the attention matmuls; the host still stages operands (bytes)
    assert bert["host_move_steps"] == 0 and bert["host_bytes"] > 0
    assert {op["op"] for op in block["operators"]} >= {"Softmax", "LayerNormalization"}
    assert block["loading"]["programs"] > block["loading"]["compiled_programs"] > 0
    assert [o["name"] for o in bert["outputs"]] == ["last_hidden_state", "pooler_output"]
    for o in bert["outputs"]:
        assert o["bit_exact"] is True and o["cosine_vs_float"] > 0.99
        assert o["closer_to_float"] in ("tinynpu", "onnxruntime", "equal")
    assert bert["ort_quantized_seconds"] > 0 and 0 < bert["host_share_of_wall_time"] < 1
    assert any(line.startswith("target: bert_sdpa.op17: pooler_output: cosine") for line in r["targets"])
