"""Products of two activations on the accelerator (frontend/patterns.py's product_step, lower/eltwise.py): a SwiGLU
feed-forward block (``down(silu(gate(x)) * up(x))``, as Llama's exporters write it) with no host compute step left,
bit-exact on the simulator at T = 8, 16 and 32 with the race checker, and the forms left on the host with the
reason the report gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tinynpu.isa import load_config

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def _swiglu(path: Path, *, rows: int = 16, hidden: int = 32, ffn: int = 64, broadcast: bool = False) -> Path:
    """``y = down(silu(x @ w_gate) * (x @ w_up))``; ``broadcast``: the up branch is one column (``ffn`` 1), so
    the ``Mul`` broadcasts it over the gate's columns (no elementwise product of one shape)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    up_cols = 1 if broadcast else ffn

    def weight(name: str, k: int, n: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), name)

    inits = [weight("w_gate", hidden, ffn), weight("w_up", hidden, up_cols), weight("w_down", ffn, hidden)]
    nodes = [helper.make_node("MatMul", ["x", "w_gate"], ["gate"], name="gate_proj"),
             helper.make_node("MatMul", ["x", "w_up"], ["up"], name="up_proj"),
             helper.make_node("Sigmoid", ["gate"], ["sig"], name="sigmoid"),
             helper.make_node("Mul", ["gate", "sig"], ["silu"], name="silu"),
             helper.make_node("Mul", ["silu", "up"], ["h"], name="swiglu"),
             helper.make_node("MatMul", ["h", "w_down"], ["y"], name="down_proj")]
    g = helper.make_graph(nodes, "swiglu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows, hidden])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, rows, hidden])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize(("config", "rows"), [("t8", 16), ("default", 16), ("default", 200), ("t32", 40)])
def test_swiglu_s_product_runs_on_the_accelerator(tmp_path: Path, config: str, rows: int) -> None:
    """One product step on the accelerator, the SiLU fused in, and no host compute step; the image run with every
    program under the race checker equals the integer reference bit for bit, and the output is as close to
    float as the host-float path's (which rounds the SiLU to int8 first)."""
    from tinynpu.compiler.onnx import compile_onnx, run_network
    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps
    from tinynpu.compiler.onnx.runtime.execute import execute

    path = _swiglu(tmp_path / "swiglu.onnx", rows=rows)
    cn = compile_onnx(path, cfg=load_config(config))
    products = [s for s in cn.net.steps if s.kind == "product"]
    assert [(s.name, s.where) for s in products] == [("swiglu", "npu")]
    # the SiLU's table fused into the product (frontend/gated.py): no table step of its own
    assert products[0].gate is not None and products[0].op == "Sigmoid+Mul*Mul"
    assert products[0].inputs[0] == "gate_QuantizeLinear_Output" and not any(s.kind == "lut" for s in cn.net.steps)
    assert host_compute_steps(cn.net) == []
    feeds = cn.make_inputs(1)
    got = execute(cn.net, feeds, cache=cn.cache, image=cn.image, check_races=True)
    want = execute(cn.net, feeds, cache=None)
    for name in (products[0].outputs[0], cn.logits[0]):
        np.testing.assert_array_equal(got.values[name], want.values[name])
    r = run_network(cn)
    assert r["verified"] is True
    host = run_network(compile_onnx(path, nonlinear="host"))
    assert r["outputs"][0]["ort_float"]["cosine"] >= host["outputs"][0]["ort_float"]["cosine"] - 1e-4


def test_a_broadcast_product_stays_on_the_host_with_the_reason(tmp_path: Path) -> None:
    """A ``Mul`` whose inputs differ in shape is no elementwise product of one shape: the float operator on the
    host, and the report says why."""
    from tinynpu.compiler.onnx import compile_onnx, run_network

    cn = compile_onnx(_swiglu(tmp_path / "broadcast.onnx", broadcast=True))
    assert not any(s.kind == "product" for s in cn.net.steps)
    step = next(s for s in cn.net.steps if s.name == "swiglu")
    assert step.where == "host"
    assert "product of two activations" in step.reason and "broadcast" in step.reason
    assert run_network(cn)["verified"] is True


def test_a_gate_read_elsewhere_too_is_not_fused(tmp_path: Path) -> None:
    """The SiLU's output is a graph output as well: its table program stays, and the product reads its codes."""
    from tinynpu.compiler.onnx import compile_onnx, run_network

    path = _swiglu(tmp_path / "swiglu.onnx")
    model = onnx.load(str(path))
    model.graph.output.append(onnx.helper.make_tensor_value_info("silu", onnx.TensorProto.FLOAT, [1, 16, 64]))
    onnx.save(model, str(path))
    cn = compile_onnx(path)
    product = next(s for s in cn.net.steps if s.kind == "product")
    assert product.gate is None and any(s.kind == "lut" for s in cn.net.steps)
    assert run_network(cn)["verified"] is True
