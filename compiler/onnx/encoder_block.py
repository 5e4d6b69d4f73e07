"""A BERT-style encoder block built with onnx.helper: the transformer the nonlinear lowerings are measured on.

Self-attention (``heads`` heads, scores scaled by ``1/sqrt(d_head)``, softmax), output
projection, residual, LayerNorm, FFN (``ffn`` wide, GELU), residual, LayerNorm; every
projection a MatMul by a constant followed by a bias Add, as PyTorch exports them.  The
BERT-style block of the benchmark is :data:`BERT_BLOCK` (sequence 128, hidden 256, 4 heads, FFN 1024).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: GELU's forms: the Erf expansion, the ``Gelu`` operator (opset 20), the tanh approximation.
GELU_FORMS = ("erf", "op", "tanh")


@dataclass(frozen=True)
class BlockShape:
    """The block's sizes."""

    seq: int
    hidden: int
    heads: int
    ffn: int


BERT_BLOCK = BlockShape(seq=128, hidden=256, heads=4, ffn=1024)
SMALL_BLOCK = BlockShape(seq=16, hidden=32, heads=2, ffn=128)


def _init(name: str, arr: Any) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name)


def _gelu(mk: Any, form: str) -> list[Any]:
    """``f1 -> f2`` in the given form."""
    if form == "op":
        return [mk("Gelu", ["f1"], ["f2"], name="gelu")]
    if form == "tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        return [mk("Pow", ["f1", "three"], ["t0"], name="gelu_cube"), mk("Mul", ["t0", "c044"], ["t1"], name="gelu_c"),
                mk("Add", ["f1", "t1"], ["t2"], name="gelu_inner"), mk("Mul", ["t2", "sqrt2pi"], ["t3"], name="gelu_k"),
                mk("Tanh", ["t3"], ["t4"], name="gelu_tanh"), mk("Add", ["t4", "one"], ["t5"], name="gelu_add"),
                mk("Mul", ["f1", "t5"], ["t6"], name="gelu_mul"), mk("Mul", ["t6", "half"], ["f2"], name="gelu_half")]
    return [mk("Div", ["f1", "sqrt2"], ["e0"], name="gelu_div"), mk("Erf", ["e0"], ["e1"], name="gelu_erf"),
            mk("Add", ["e1", "one"], ["e2"], name="gelu_add"), mk("Mul", ["f1", "e2"], ["e3"], name="gelu_mul"),
            mk("Mul", ["e3", "half"], ["f2"], name="gelu_half")]


def encoder_block(path: Path, *, shape: BlockShape = SMALL_BLOCK, gelu: str = "erf", seed: int = 0) -> Path:
    """Write the block to ``path`` (see the module docstring) and return ``path``."""
    import onnx
    from onnx import TensorProto, helper

    s, h, nh, f = shape.seq, shape.hidden, shape.heads, shape.ffn
    rng = np.random.default_rng(seed)
    dh = h // nh
    mk = helper.make_node
    inits = [_init(n, rng.normal(size=(h, h)) / np.sqrt(h)) for n in ("wq", "wk", "wv", "wo")]
    inits += [_init(n, rng.normal(size=h) * 0.1) for n in ("bq", "bk", "bv", "bo")]
    inits += [_init("w1", rng.normal(size=(h, f)) / np.sqrt(h)), _init("b1", rng.normal(size=f) * 0.1),
              _init("w2", rng.normal(size=(f, h)) / np.sqrt(f)), _init("b2", rng.normal(size=h) * 0.1),
              _init("g1", 1 + 0.1 * rng.normal(size=h)), _init("be1", 0.1 * rng.normal(size=h)),
              _init("g2", 1 + 0.1 * rng.normal(size=h)), _init("be2", 0.1 * rng.normal(size=h)),
              _init("sqrt_dh", np.array(np.sqrt(dh))), _init("half", np.array(0.5)), _init("one", np.array(1.0)),
              _init("sqrt2", np.array(np.sqrt(2.0)))]
    if gelu == "tanh":
        inits += [_init("three", np.array(3.0)), _init("c044", np.array(0.044715)),
                  _init("sqrt2pi", np.array(np.sqrt(2 / np.pi)))]
    inits.append(helper.make_tensor("heads_shape", TensorProto.INT64, [4], [1, s, nh, dh]))
    inits.append(helper.make_tensor("seq_shape", TensorProto.INT64, [3], [1, s, h]))
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
        *_gelu(mk, gelu),
        mk("MatMul", ["f2", "w2"], ["g0"], name="ffn_out"),
        mk("Add", ["g0", "b2"], ["g1o"], name="ffn_bias_out"),
        mk("Add", ["g1o", "ln1"], ["res2"], name="residual2"),
        mk("LayerNormalization", ["res2", "g2", "be2"], ["y"], name="ln2", axis=-1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, h])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, h])
    graph = helper.make_graph(nodes, "encoder_block", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20 if gelu == "op" else 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


__all__ = ["GELU_FORMS", "BERT_BLOCK", "SMALL_BLOCK", "BlockShape", "encoder_block"]
