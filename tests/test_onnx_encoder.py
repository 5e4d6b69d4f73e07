"""A BERT-style encoder block built with onnx.helper, end to end: attention's matmuls on the accelerator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import _init, save  # noqa: E402

from tinynpu.compiler.onnx import compile_onnx, run_network  # noqa: E402

SEQ, HIDDEN, HEADS = 16, 32, 2


def encoder_block(path: Path, *, gelu_op: bool, seed: int = 0) -> Path:
    """Self-attention (2 heads) + residual + LayerNorm + FFN (4x, Gelu) + residual + LayerNorm."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    dh = HIDDEN // HEADS
    mk = helper.make_node
    inits = [_init(n, rng.normal(size=(HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)) for n in ("wq", "wk", "wv", "wo")]
    inits += [_init(n, rng.normal(size=HIDDEN) * 0.1) for n in ("bq", "bk", "bv", "bo")]
    inits += [_init("w1", rng.normal(size=(HIDDEN, 4 * HIDDEN)) / np.sqrt(HIDDEN)),
              _init("b1", rng.normal(size=4 * HIDDEN) * 0.1),
              _init("w2", rng.normal(size=(4 * HIDDEN, HIDDEN)) / np.sqrt(4 * HIDDEN)),
              _init("b2", rng.normal(size=HIDDEN) * 0.1),
              _init("g1", 1 + 0.1 * rng.normal(size=HIDDEN)), _init("be1", 0.1 * rng.normal(size=HIDDEN)),
              _init("g2", 1 + 0.1 * rng.normal(size=HIDDEN)), _init("be2", 0.1 * rng.normal(size=HIDDEN)),
              _init("sqrt_dh", np.array(np.sqrt(dh))), _init("half", np.array(0.5)), _init("one", np.array(1.0)),
              _init("sqrt2", np.array(np.sqrt(2.0)))]
    inits.append(helper.make_tensor("heads_shape", TensorProto.INT64, [4], [1, SEQ, HEADS, dh]))
    inits.append(helper.make_tensor("seq_shape", TensorProto.INT64, [3], [1, SEQ, HIDDEN]))
    nodes = []
    for p in ("q", "k", "v"):
        nodes += [mk("MatMul", ["x", f"w{p}"], [f"{p}0"], name=f"proj_{p}"),
                  mk("Add", [f"{p}0", f"b{p}"], [f"{p}1"], name=f"bias_{p}"),
                  mk("Reshape", [f"{p}1", "heads_shape"], [f"{p}2"], name=f"split_heads_{p}")]
    nodes += [
        mk("Transpose", ["q2"], ["qh"], name="q_heads", perm=[0, 2, 1, 3]),
        mk("Transpose", ["k2"], ["kt"], name="k_heads_t", perm=[0, 2, 3, 1]),
        mk("Transpose", ["v2"], ["vh"], name="v_heads", perm=[0, 2, 1, 3]),
        mk("MatMul", ["qh", "kt"], ["scores"], name="q_kt"),
        mk("Div", ["scores", "sqrt_dh"], ["scaled"], name="scale"),
        mk("Softmax", ["scaled"], ["attn"], name="softmax", axis=-1),
        mk("MatMul", ["attn", "vh"], ["ctx"], name="attn_v"),
        mk("Transpose", ["ctx"], ["ctx_t"], name="merge_heads", perm=[0, 2, 1, 3]),
        mk("Reshape", ["ctx_t", "seq_shape"], ["ctx2"], name="merge_reshape"),
        mk("MatMul", ["ctx2", "wo"], ["o0"], name="proj_o"),
        mk("Add", ["o0", "bo"], ["o1"], name="bias_o"),
        mk("Add", ["o1", "x"], ["res1"], name="residual1"),
        mk("LayerNormalization", ["res1", "g1", "be1"], ["ln1"], name="ln1", axis=-1),
        mk("MatMul", ["ln1", "w1"], ["f0"], name="ffn_in"),
        mk("Add", ["f0", "b1"], ["f1"], name="ffn_bias_in"),
    ]
    if gelu_op:
        nodes.append(mk("Gelu", ["f1"], ["f2"], name="gelu"))
    else:  # the Erf form: x * 0.5 * (1 + erf(x / sqrt 2))
        nodes += [mk("Div", ["f1", "sqrt2"], ["e0"], name="gelu_div"), mk("Erf", ["e0"], ["e1"], name="gelu_erf"),
                  mk("Add", ["e1", "one"], ["e2"], name="gelu_add"), mk("Mul", ["f1", "e2"], ["e3"], name="gelu_mul"),
                  mk("Mul", ["e3", "half"], ["f2"], name="gelu_half")]
    nodes += [
        mk("MatMul", ["f2", "w2"], ["g0"], name="ffn_out"),
        mk("Add", ["g0", "b2"], ["g1o"], name="ffn_bias_out"),
        mk("Add", ["g1o", "ln1"], ["res2"], name="residual2"),
        mk("LayerNormalization", ["res2", "g2", "be2"], ["y"], name="ln2", axis=-1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, HIDDEN])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, SEQ, HIDDEN])
    return save(path, nodes, inits, [x], [y], opset=20 if gelu_op else 17)


@pytest.mark.parametrize("gelu_op", [False, True], ids=["erf-form", "gelu-op"])
def test_encoder_block_end_to_end(tmp_path: Path, gelu_op: bool) -> None:
    cn = compile_onnx(encoder_block(tmp_path / "enc.onnx", gelu_op=gelu_op))
    r = run_network(cn, extra_seeds=2)
    assert r["verified"] is True
    where = {e["name"]: e["where"] for e in r["layers"]}
    for name in ("proj_q", "proj_k", "proj_v", "q_kt", "attn_v", "proj_o", "ffn_in", "ffn_out"):
        assert where[name] == "npu", name
    for name in ("softmax", "ln1", "ln2"):
        assert where[name] == "host", name
    q = r["ort_quantized"]
    assert q["equal_fraction"] == 1.0, q  # onnxruntime's integer kernels and float operators alike
    assert r["ort_float"]["cosine"] > 0.95


def test_encoder_block_steps_on_onnxruntime_inputs(tmp_path: Path) -> None:
    """Each step against the tensor onnxruntime computes: the model's own 4-D transposes (Kᵀ) are
    not mistaken for onnxruntime's channels-last layout."""
    from tinynpu.compiler.onnx.verify.origins import ort_difference_origins

    cn = compile_onnx(encoder_block(tmp_path / "enc.onnx", gelu_op=False))
    found = ort_difference_origins(cn, cn.make_inputs(0))
    assert "matmul on QLinearMatMul" in found and "gemm on QLinearMatMul" in found, found
    assert all(o["differing"] == 0 for o in found.values()), found
