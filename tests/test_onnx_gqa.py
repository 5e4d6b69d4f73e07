"""Grouped-query attention's kv repetition as operand addressing (frontend/movechains.py, frontend/heads.py): the
``Unsqueeze -> Expand -> Reshape [-> Transpose -> Reshape]`` chains that repeat each kv head for the query heads
of its group leave no host step; each attention matmul reads kv head ``h // group`` through its view, the keys'
scaling table runs on the kv heads before their repetition, and the run is bit-exact on the simulator at
T = 8, 16 and 32 with the race checker."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tinynpu.isa import load_config

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def _gqa(path: Path, *, seq: int = 16, heads: int = 4, kv_heads: int = 2, d: int = 8) -> Path:
    """One attention block with ``kv_heads`` key/value heads shared by ``heads`` query heads, written as
    transformers' Llama export writes it (``repeat_kv`` as Unsqueeze, Expand, Reshape; the keys then transposed
    through a 3-D Reshape; both q and k scaled by ``d^-1/4`` before their product)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(4)
    hidden, group = heads * d, heads // kv_heads

    def const(name: str, value: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(value, name)

    def weight(name: str, n: int) -> onnx.TensorProto:
        return const(name, (rng.standard_normal((hidden, n)) / np.sqrt(hidden)).astype(np.float32))

    i64 = np.int64
    inits = [weight("wq", hidden), weight("wk", kv_heads * d), weight("wv", kv_heads * d), weight("wo", hidden),
             const("q_shape", np.array([1, seq, heads, d], i64)),
             const("kv_shape", np.array([1, seq, kv_heads, d], i64)),
             const("axis2", np.array([2], i64)), const("expand", np.array([1, kv_heads, group, seq, d], i64)),
             const("heads_shape", np.array([1, heads, seq, d], i64)), const("k3", np.array([heads, seq, d], i64)),
             const("kt_shape", np.array([1, heads, d, seq], i64)), const("out_shape", np.array([1, seq, hidden], i64)),
             const("scale", np.array(d ** -0.25, np.float32))]
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "wq"], ["q0"], name="q_proj"), mk("MatMul", ["x", "wk"], ["k0"], name="k_proj"),
             mk("MatMul", ["x", "wv"], ["v0"], name="v_proj"),
             mk("Reshape", ["q0", "q_shape"], ["q1"], name="q_view"),
             mk("Transpose", ["q1"], ["q"], name="q_heads", perm=[0, 2, 1, 3]),
             mk("Reshape", ["k0", "kv_shape"], ["k1"], name="k_view"),
             mk("Transpose", ["k1"], ["k"], name="k_heads", perm=[0, 2, 1, 3]),
             mk("Reshape", ["v0", "kv_shape"], ["v1"], name="v_view"),
             mk("Transpose", ["v1"], ["v"], name="v_heads", perm=[0, 2, 1, 3]),
             mk("Unsqueeze", ["k", "axis2"], ["k2"], name="k_unsqueeze"),
             mk("Expand", ["k2", "expand"], ["k3e"], name="k_expand"),
             mk("Reshape", ["k3e", "k3"], ["k4"], name="k_repeat"),
             mk("Transpose", ["k4"], ["k5"], name="k_transpose", perm=[0, 2, 1]),
             mk("Reshape", ["k5", "kt_shape"], ["kt"], name="k_back"),
             mk("Unsqueeze", ["v", "axis2"], ["v2"], name="v_unsqueeze"),
             mk("Expand", ["v2", "expand"], ["v3"], name="v_expand"),
             mk("Reshape", ["v3", "heads_shape"], ["vr"], name="v_repeat"),
             mk("Mul", ["q", "scale"], ["qs"], name="q_scale"), mk("Mul", ["kt", "scale"], ["ks"], name="k_scale"),
             mk("MatMul", ["qs", "ks"], ["scores"], name="scores"),
             mk("Softmax", ["scores"], ["probs"], name="softmax", axis=-1),
             mk("MatMul", ["probs", "vr"], ["ctx"], name="context"),
             mk("Transpose", ["ctx"], ["ctx1"], name="merge", perm=[0, 2, 1, 3]),
             mk("Reshape", ["ctx1", "out_shape"], ["ctx2"], name="merge_view"),
             mk("MatMul", ["ctx2", "wo"], ["y"], name="o_proj")]
    g = helper.make_graph(nodes, "gqa", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("config", ["t8", "default", "t32"])
def test_kv_heads_are_read_through_the_attention_matmuls_views(tmp_path: Path, config: str) -> None:
    from tinynpu.compiler.onnx import compile_onnx, run_network
    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps
    from tinynpu.compiler.onnx.runtime.execute import execute

    cn = compile_onnx(_gqa(tmp_path / "gqa.onnx"), cfg=load_config(config))
    assert host_compute_steps(cn.net) == []
    names = {s.name for s in cn.net.steps}
    assert not names & {"k_view", "k_heads", "k_unsqueeze", "k_expand", "k_repeat", "k_transpose", "k_back",
                        "v_view", "v_heads", "v_unsqueeze", "v_expand", "v_repeat"}
    scores, context = (next(s for s in cn.net.steps if s.name == n) for n in ("scores", "context"))
    assert scores.views[1] is not None and "k_expand" in scores.views[1].moves
    assert context.views[1] is not None and "v_expand" in context.views[1].moves
    # the keys' scaling table on the two kv heads' projection, before the head split and the repetition
    k_scale = next(s for s in cn.net.steps if s.kind == "lut" and s.name == "k_scale")
    assert k_scale.inputs[0] == "k0_QuantizeLinear_Output" and scores.views[1].tensor == k_scale.outputs[0]
    assert cn.net.shapes[k_scale.inputs[0]] == (1, 16, 2 * 8) and k_scale.where == "npu"
    index = scores.views[1].index  # query head h reads kv head h // 2 (B as K^T: heads x d x seq)
    for h in range(4):
        np.testing.assert_array_equal(index[0, h], index[0, h - h % 2])
    feeds = cn.make_inputs(2)
    got = execute(cn.net, feeds, cache=cn.cache, image=cn.image, check_races=True)
    want = execute(cn.net, feeds, cache=None)
    for step in cn.net.steps:
        for name in step.outputs:
            if name in want.values:
                np.testing.assert_array_equal(got.values[name], want.values[name], err_msg=name)
    r = run_network(cn)
    assert r["verified"] is True and r["outputs"][0]["ort_float"]["cosine"] >= 0.99


def test_a_chain_between_two_scales_is_left_alone() -> None:
    """Moves between a DQ and a Q of another scale are a requantization, not a move: no pair is inserted."""
    from onnx import TensorProto, helper, numpy_helper

    from tinynpu.compiler.onnx.frontend.movechains import split_move_chains

    def qdq(name: str, scale: float) -> list[onnx.TensorProto]:
        return [numpy_helper.from_array(np.array(scale, np.float32), f"{name}_s"),
                numpy_helper.from_array(np.array(0, np.int8), f"{name}_z")]

    inits = [*qdq("a", 0.1), *qdq("b", 0.2), numpy_helper.from_array(np.array([1, 2, 2, 4], np.int64), "shape"),
             numpy_helper.from_array(np.array([1, 4, 4], np.int64), "flat")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "a_s", "a_z"], ["xf"]),
             helper.make_node("Expand", ["xf", "shape"], ["e"]), helper.make_node("Reshape", ["e", "flat"], ["r"])]
    for scale, found in (("b", False), ("a", True)):
        g = helper.make_graph([*nodes, helper.make_node("QuantizeLinear", ["r", f"{scale}_s", f"{scale}_z"], ["y"])],
                              "chain", [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 2, 1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 4, 4])], inits)
        model = helper.make_model(g)
        out = split_move_chains(model)
        assert (out is not model) == found
        if found:
            assert [n.op_type for n in out.graph.node] == ["DequantizeLinear", "Expand", "QuantizeLinear",
                                                           "DequantizeLinear", "Reshape", "QuantizeLinear"]
            assert len(model.graph.node) == 4  # the caller's model is unchanged
