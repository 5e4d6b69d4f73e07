"""A unary segment that ends in a float graph output (BERT's pooler ``Tanh``): a table on the accelerator into
int8 codes of a scale that spans its 256 values, then the output's dequantization on the host."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tinynpu.compiler.onnx import compile_onnx, run_network  # noqa: E402
from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps  # noqa: E402
from tinynpu.compiler.onnx.bench_transformers import NONLINEAR_OPS  # noqa: E402


def _pooler(path: Path, op: str = "Tanh") -> Path:
    """``h = x @ w``, ``z = h @ w2`` and ``y = op(h)``, ``z`` and ``y`` graph outputs (BERT's hidden states and
    pooler, in small)."""
    rng = np.random.default_rng(0)
    w, w2 = (rng.normal(size=(32, 16)).astype(np.float32) / 4, rng.normal(size=(16, 8)).astype(np.float32) / 4)
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "w"], ["h"], name="dense"), mk("MatMul", ["h", "w2"], ["z"], name="head"),
             mk(op, ["h"], ["y"], name="act")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 32])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 8]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_float_output_tanh_is_a_table_and_a_host_dequantization(tmp_path: Path) -> None:
    cn = compile_onnx(_pooler(tmp_path / "pooler.onnx"))
    steps = {s.name: s for s in cn.net.steps}
    lut, dq = steps["act"], steps["act_dequantize"]
    assert lut.kind == "lut" and lut.where == "npu" and lut.outputs == ("y__int8",)
    assert dq.op == "DequantizeLinear" and dq.where == "host" and dq.outputs == ("y",)
    assert not [n for n in host_compute_steps(cn.net) if steps[n].op in NONLINEAR_OPS]
    # the scale spans the 256 values: the largest magnitude is code 127 (or -127), nothing saturates
    table = np.asarray(lut.table)
    assert int(np.abs(table).max()) == 127 and table.min() >= -127
    scale = float(cn.net.constants["y__int8_scale"])
    dq_in = cn.net.qparams[lut.inputs[0]]
    want = np.tanh(((np.arange(-128, 128) - int(dq_in.z)) * np.float32(dq_in.s)).astype(np.float32))
    assert np.abs(table * scale - want).max() <= scale / 2 + 1e-6
    r = run_network(cn)
    assert r["verified"] is True  # (a): the simulator's table run equals the integer reference
    out = r["outputs"][1]
    assert out["name"] == "y"
    assert out["ort_quantized"]["on"] == "float"  # onnxruntime's tanh in float: within half a step of ours
    assert out["ort_quantized"]["max_abs_difference"] <= scale / 2 + 1e-5
    assert out["ort_float"]["cosine"] >= 0.999


def test_a_float_output_the_table_cannot_hold_stays_on_the_host(tmp_path: Path) -> None:
    """``Log`` of a matmul's output is not finite on every input code: no table, the host computes it."""
    cn = compile_onnx(_pooler(tmp_path / "log.onnx", "Log"))
    steps = {s.name: s for s in cn.net.steps}
    assert "act_dequantize" not in steps and steps["act"].where == "host"


def test_a_table_whose_input_the_user_reads_as_an_output_stays_on_the_host(tmp_path: Path) -> None:
    """``h`` itself a graph output: its DequantizeLinear is the user's output, so ``Tanh(h)`` stays a host step
    (the table's chain would absorb that conversion)."""
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="dense"),
             helper.make_node("Tanh", ["h"], ["y"], name="act")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 32])],
                              [helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 4, 16]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16])],
                              [numpy_helper.from_array(rng.normal(size=(32, 16)).astype(np.float32) / 4, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "both.onnx"))
    cn = compile_onnx(tmp_path / "both.onnx")
    steps = {s.name: s for s in cn.net.steps}
    assert steps["act"].where == "host" and "act_dequantize" not in steps
    assert run_network(cn)["verified"] is True
