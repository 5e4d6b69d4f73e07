"""A BERT-style encoder block built with onnx.helper, end to end with ``nonlinear="host"``: attention's matmuls on
the accelerator, softmax, LayerNorm and GELU in float on the host (``tests/test_onnx_nonlinear.py``: on the
accelerator)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tinynpu.compiler.onnx import compile_onnx, run_network  # noqa: E402


def encoder_block(path: Path, *, gelu_op: bool, seed: int = 0) -> Path:
    """Self-attention (2 heads) + residual + LayerNorm + FFN (4x, Gelu) + residual + LayerNorm
    (:mod:`tinynpu.compiler.onnx.encoder_block`, its small shape)."""
    from tinynpu.compiler.onnx.encoder_block import encoder_block as build

    return build(path, gelu="op" if gelu_op else "erf", seed=seed)


@pytest.mark.parametrize("gelu_op", [False, True], ids=["erf-form", "gelu-op"])
def test_encoder_block_end_to_end(tmp_path: Path, gelu_op: bool) -> None:
    cn = compile_onnx(encoder_block(tmp_path / "enc.onnx", gelu_op=gelu_op), nonlinear="host")
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

    cn = compile_onnx(encoder_block(tmp_path / "enc.onnx", gelu_op=False), nonlinear="host")
    found = ort_difference_origins(cn, cn.make_inputs(0))
    assert "matmul on QLinearMatMul" in found and "gemm on QLinearMatMul" in found, found
    assert all(o["differing"] == 0 for o in found.values()), found
