"""LayerNorm written out in primitive operators (ReduceMean, Sub, Pow or Mul, ReduceMean, Add eps, Sqrt, Div,
Mul gamma, Add beta: torch's TorchScript exporter below opset 17) is the same accelerator norm program as
``LayerNormalization``: one NormStep, bit-exact on the simulator, tracking the float model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tinynpu.compiler.onnx import compile_onnx, run_network  # noqa: E402

WIDTH = 32


def _model(path: Path, *, square: str = "Pow", affine: bool = True, axes: int = -1) -> Path:
    """x (1 x 8 x 32) -> MatMul -> LayerNorm written out -> MatMul -> y."""
    rng = np.random.default_rng(0)
    mk = helper.make_node
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (WIDTH, WIDTH)).astype(np.float32), n) for n in ("w1", "w2")]
    consts = {"two": 2.0, "eps": 1e-5, "gamma": rng.uniform(0.5, 1.5, WIDTH), "beta": rng.normal(0, 0.2, WIDTH)}
    inits += [numpy_helper.from_array(np.array(v, dtype=np.float32), n) for n, v in consts.items()]
    inits.append(numpy_helper.from_array(np.array([axes], dtype=np.int64), "axes"))
    sq = mk("Pow", ["d", "two"], ["sq"]) if square == "Pow" else mk("Mul", ["d", "d"], ["sq"])
    nodes = [mk("MatMul", ["x", "w1"], ["h"]),
             mk("ReduceMean", ["h", "axes"], ["mean"], keepdims=1), mk("Sub", ["h", "mean"], ["d"]), sq,
             mk("ReduceMean", ["sq", "axes"], ["var"], keepdims=1), mk("Add", ["var", "eps"], ["ve"]),
             mk("Sqrt", ["ve"], ["sd"]), mk("Div", ["d", "sd"], ["n"], name="ln_div")]
    last = "n"
    if affine:
        nodes += [mk("Mul", ["n", "gamma"], ["ng"]), mk("Add", ["ng", "beta"], ["nb"])]
        last = "nb"
    nodes.append(mk("MatMul", [last, "w2"], ["y"]))
    graph = helper.make_graph(nodes, "ln_written_out",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, WIDTH])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, WIDTH])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


@pytest.mark.parametrize(("square", "affine"), [("Pow", True), ("Mul", True), ("Pow", False)])
def test_written_out_layernorm_is_one_norm_program(tmp_path: Path, square: str, affine: bool) -> None:
    cn = compile_onnx(_model(tmp_path / "ln.onnx", square=square, affine=affine))
    norms = [s for s in cn.net.steps if s.kind == "norm"]
    assert [(s.name, s.op, s.where) for s in norms] == [("ln_div", "LayerNormalization", "npu")]
    ops = {s.op for s in cn.net.steps if s.where == "host"}
    assert not ops & {"ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Mul", "Add"}, ops
    r = run_network(cn)
    assert r["verified"] is True
    assert r["outputs"][0]["ort_float"]["cosine"] >= 0.99


def test_layernorm_over_another_axis_stays_on_the_host(tmp_path: Path) -> None:
    """Normalized along axis 1 (not the last): the nodes stay host operators, the run still verified."""
    cn = compile_onnx(_model(tmp_path / "ln.onnx", axes=1))
    assert not any(s.kind == "norm" for s in cn.net.steps)
    assert run_network(cn)["verified"] is True
