"""Small leading rows of the residual stream carried apart (compiler/onnx/frontend/rowgroups.py): which rows
are split off, the rewritten graph computing the same float function, the class part getting a scale of its
own in the int8 model, and a ViT-shaped network's class-token output tracking float on the accelerator only
with the split."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tinynpu.compiler.onnx.frontend import rowgroups  # noqa: E402
from tinynpu.compiler.onnx.frontend.rowgroups import leading_small_rows, split_small_rows  # noqa: E402

PATCHES, WIDTH, CLASSES = 8, 16, 4


@pytest.mark.parametrize(("ranges", "rows"), [
    ([0.05, 1.0, 0.9, 1.1], 1),  # a class token
    ([0.01, 0.02, 1.0, 1.0, 1.0, 1.0], 2),  # class and distillation tokens
    ([1.0, 1.0, 1.0, 1.0], 0),  # every row alike: a language model's stream
    ([0.3, 1.0, 1.0, 1.0], 0),  # above a quarter: less than two bits to win
    ([0.01, 1.0, 0.01, 1.0], 1),  # only leading rows
    ([0.01, 0.01, 0.01, 0.01, 1.0, 1.0], 3),  # never more than half the rows
])
def test_leading_small_rows(ranges: list[float], rows: int) -> None:
    k, ratio = leading_small_rows(np.array(ranges))
    assert k == rows
    assert ratio == (1.0 if rows == 0 else max(ranges[:rows]) / max(ranges[rows:]))


def _init(name: str, value: np.ndarray) -> Any:
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def _vit_like(cls_size: float, *, seed: int = 0) -> Any:
    """patches -> embedding MatMul -> Concat(class token) + positions -> LayerNormalization -> MatMul + bias ->
    residual Add -> a LayerNorm written out in primitives -> the class row -> head: the residual stream of a
    ViT at its init, the class row ``cls_size`` against patch rows of about 1."""
    rng = np.random.default_rng(seed)
    inits = [
        _init("w_embed", rng.normal(0, 1 / np.sqrt(WIDTH), (WIDTH, WIDTH))),
        _init("cls", rng.normal(0, cls_size, (1, 1, WIDTH))),
        _init("pos", rng.normal(0, cls_size / 2, (1, PATCHES + 1, WIDTH))),
        _init("gamma", 1 + rng.normal(0, 0.1, WIDTH)), _init("beta", rng.normal(0, 0.1, WIDTH)),
        _init("w_f", rng.normal(0, 0.3 / np.sqrt(WIDTH), (WIDTH, WIDTH))), _init("b_f", rng.normal(0, 0.02, WIDTH)),
        _init("w_head", rng.normal(0, 1 / np.sqrt(WIDTH), (WIDTH, CLASSES))),
        _init("two", np.array(2.0)), _init("eps", np.array(1e-5)),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes"),
        numpy_helper.from_array(np.array(0, dtype=np.int64), "row0"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w_embed"], ["patches"]),
        helper.make_node("Concat", ["cls", "patches"], ["tokens"], axis=1),
        helper.make_node("Add", ["tokens", "pos"], ["stream0"]),
        helper.make_node("LayerNormalization", ["stream0", "gamma", "beta"], ["norm0"], axis=-1),
        helper.make_node("MatMul", ["norm0", "w_f"], ["f_mm"]),
        helper.make_node("Add", ["f_mm", "b_f"], ["f"]),
        helper.make_node("Add", ["stream0", "f"], ["stream1"]),
        helper.make_node("ReduceMean", ["stream1", "axes"], ["mean"]),
        helper.make_node("Sub", ["stream1", "mean"], ["centred"]),
        helper.make_node("Pow", ["centred", "two"], ["square"]),
        helper.make_node("ReduceMean", ["square", "axes"], ["var"]),
        helper.make_node("Add", ["var", "eps"], ["var_eps"]),
        helper.make_node("Sqrt", ["var_eps"], ["std"]),
        helper.make_node("Div", ["centred", "std"], ["normed"]),
        helper.make_node("Mul", ["normed", "gamma"], ["scaled"]),
        helper.make_node("Add", ["scaled", "beta"], ["norm1"]),
        helper.make_node("Gather", ["norm1", "row0"], ["cls_row"], axis=1),
        helper.make_node("MatMul", ["cls_row", "w_head"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "vit_like",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, PATCHES, WIDTH])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model


def _samples(count: int = 4) -> list[dict[str, np.ndarray]]:
    return [{"x": np.random.default_rng(100 + i).normal(size=(1, PATCHES, WIDTH)).astype(np.float32)}
            for i in range(count)]


def _run(model: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return np.asarray(ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
                      .run(None, feeds)[0])


def test_small_class_row_is_split_and_the_float_function_kept() -> None:
    model = _vit_like(0.02)
    rewritten, split = split_small_rows(model, _samples(), 18)
    assert split is not None and split.rows == 1 and split.streams == ("stream0", "stream1")
    assert split.ratio < rowgroups.SMALL_ROW_RATIO
    ops = [n.op_type for n in rewritten.graph.node]
    # the first norm's class part is the class token plus its position: a constant, folded with its norm
    assert ops.count("LayerNormalization") == 1 and "stream0_rows_lead" not in {o for n in rewritten.graph.node
                                                                                for o in n.output}
    assert ops.count("ReduceMean") == 4  # the written-out norm, once per part
    assert ops.count("Split") == 1  # the branch output f, split between the two residual adds
    assert ops.count("Concat") == 2  # each norm's parts joined (the class token's Concat is gone)
    for feeds in _samples(3):
        np.testing.assert_allclose(_run(rewritten, feeds), _run(model, feeds), rtol=1e-5, atol=1e-6)


def test_the_class_part_gets_a_scale_of_its_own() -> None:
    """In the int8 model the class part of each stream tensor is quantized at a scale far finer than the
    patch rows': the resolution per-tensor int8 took from it."""
    from tinynpu.compiler.onnx.frontend.quantize import quantize

    q = quantize(_vit_like(0.02), _samples(8))
    consts = {i.name: numpy_helper.to_array(i) for i in q.graph.initializer}
    scale = {n.input[0]: float(consts[n.input[1]]) for n in q.graph.node if n.op_type == "QuantizeLinear"}
    lead, rest = scale["stream1_rows_lead"], scale["stream1_rows_rest"]
    assert lead < rest * rowgroups.SMALL_ROW_RATIO, (lead, rest)


def test_rows_of_one_size_are_left_alone() -> None:
    model = _vit_like(1.0)
    rewritten, split = split_small_rows(model, _samples(), 18)
    assert split is None and rewritten is model


def test_a_stream_without_prepended_rows_is_not_even_measured() -> None:
    """A language model's stream has no class token (no row Concat before it): nothing runs for it."""
    model = _vit_like(0.02)
    concat = next(n for n in model.graph.node if n.op_type == "Concat")
    model.graph.node.remove(concat)
    model.graph.node.insert(0, helper.make_node("Pad", ["patches", "pads"], ["tokens"]))
    model.graph.initializer.append(numpy_helper.from_array(np.array([0, 1, 0, 0, 0, 0], dtype=np.int64), "pads"))
    with mock.patch.object(rowgroups, "_session", side_effect=AssertionError("measured")):
        rewritten, split = split_small_rows(model, _samples(), 18)
    assert split is None and rewritten is model


def test_a_rewrite_that_changes_the_function_is_dropped() -> None:
    """The rewritten graph is checked against the original on a sample; a wrong one is never used."""
    model = _vit_like(0.02)
    real = rowgroups._rewrite

    def wrong(m: Any, k: int, streams: list[str], opset: int) -> Any:
        out = real(m, k, streams, opset)
        beta = next(i for i in out.graph.initializer if i.name == "beta")
        beta.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(beta) + 1, "beta"))
        return out

    with mock.patch.object(rowgroups, "_rewrite", wrong):
        rewritten, split = split_small_rows(model, _samples(), 18)
    assert split is None and rewritten is model


def test_the_class_row_tracks_float_on_the_accelerator(tmp_path: Path) -> None:
    """The ViT-shaped network end to end with the defaults: bit-exact against the integer reference, and its
    class-row logits near float only with the split (without it the class row has a few int8 codes)."""
    from tinynpu.compiler.onnx import compile_onnx, run_network

    path = tmp_path / "vit_like.onnx"
    onnx.save(_vit_like(0.02), str(path))

    def cosine() -> float:
        r = run_network(compile_onnx(path), feeds=_samples(1)[0])
        assert r["verified"] is True
        return float(r["outputs"][0]["ort_float"]["cosine"])

    with mock.patch.object(rowgroups, "split_small_rows", lambda m, s, o: (m, None)):
        without = cosine()
    with_split = cosine()
    print(f"class-row logits' cosine against float: {without:.4f} without the split, {with_split:.4f} with it")
    assert with_split >= 0.999 > without, (with_split, without)
