"""``Split`` of an int8 tensor whose parts keep its scale (GPT-2's fused QKV projection) is a host move of the
int8 values, not a float operator between a DequantizeLinear and three QuantizeLinear nodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tinynpu.compiler.onnx import compile_onnx, run_network  # noqa: E402

MODELS = Path(__file__).resolve().parent / "models"


def _model(path: Path, opset: int) -> Path:
    """x (1 x 8 x 16) -> MatMul (16 x 48) -> Split in three along the last axis -> a MatMul each -> summed."""
    rng = np.random.default_rng(0)
    mk = helper.make_node
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), n)
             for n, shape in (("w", (16, 48)), ("w2", (16, 16)))]
    if opset >= 18:
        split = mk("Split", ["h"], ["a", "b", "c"], name="qkv_split", axis=-1, num_outputs=3)
    else:
        inits.append(numpy_helper.from_array(np.array([16, 16, 16], dtype=np.int64), "sizes"))
        split = mk("Split", ["h", "sizes"], ["a", "b", "c"], name="qkv_split", axis=-1)
    nodes = [mk("MatMul", ["x", "w"], ["h"]), split, *(mk("MatMul", [t, "w2"], [t + "2"]) for t in "abc"),
             mk("Add", ["a2", "b2"], ["ab"]), mk("Add", ["ab", "c2"], ["y"])]
    graph = helper.make_graph(nodes, "split", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


@pytest.mark.parametrize("opset", [13, 18])
def test_split_is_a_move_of_int8_values(tmp_path: Path, opset: int) -> None:
    cn = compile_onnx(_model(tmp_path / "split.onnx", opset))
    split = next(s for s in cn.net.steps if s.op == "Split")
    assert split.kind == "move" and len(split.outputs) == 3
    # on the host in float: only the network input's quantization and the output's dequantization
    assert sorted(s.op for s in cn.net.steps if s.kind == "onnx") == ["DequantizeLinear", "QuantizeLinear"]
    r = run_network(cn)
    assert r["verified"] is True
    assert r["outputs"][0]["ort_float"]["cosine"] >= 0.99


def test_gpt2_qkv_split_is_a_move() -> None:
    cn = compile_onnx(MODELS / "gpt2_sdpa.onnx")
    splits = [s for s in cn.net.steps if s.op == "Split"]
    assert len(splits) == 2 and all(s.kind == "move" for s in splits)
