"""The operators PyTorch exports put around embeddings, masks and attention, on the host, against onnxruntime.

Each case is one node on odd shapes, broadcasting, int64 and bool values.  It
is evaluated the way a host step and the constant folding evaluate it
(:func:`evaluate_node`: onnx.reference, then onnxruntime, then tinynpu's own
numpy) and, for the operators tinynpu implements itself, by that numpy alone
(:func:`run_own`); both must equal onnxruntime's result exactly (same dtype,
same shape, same values: bit for bit for integers and bools, within
:data:`MAX_ULP` units in the last place for floats, where numpy and
onnxruntime's vectorized kernels round differently: ``tanh``, or a cumulative
sum added in another order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from tinynpu.compiler.onnx.frontend.evaluate import OWN_OPS, evaluate_node, run_onnxruntime, run_own  # noqa: E402
from tinynpu.compiler.onnx.frontend.hostops import HOST_OPS  # noqa: E402

RNG = np.random.default_rng(7)
MAX_ULP = 4


def _f(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _b(*shape: int) -> np.ndarray:
    return RNG.random(shape) < 0.5


def _i(lo: int, hi: int, *shape: int) -> np.ndarray:
    return RNG.integers(lo, hi, size=shape).astype(np.int64)


def _special(*shape: int) -> np.ndarray:
    """Floats with NaN, +inf and -inf among them (torch's softmax guard sees these)."""
    x = _f(*shape)
    flat = x.reshape(-1)
    flat[::5], flat[1::7], flat[2::9] = np.nan, np.inf, -np.inf
    return x


@dataclass(frozen=True)
class Case:
    op: str
    inputs: dict[str, np.ndarray]
    attrs: dict[str, Any] = field(default_factory=dict)
    opset: int = 18
    label: str = ""


CASES = [
    Case("IsNaN", {"x": _special(3, 5, 7)}),
    Case("IsInf", {"x": _special(2, 9)}),
    Case("IsInf", {"x": _special(2, 9)}, {"detect_negative": 0}, label="positive"),
    Case("IsInf", {"x": _special(4, 3)}, {"detect_positive": 0}, label="negative"),
    Case("And", {"a": _b(3, 1, 5), "b": _b(1, 4, 5)}, label="broadcast"),
    Case("Or", {"a": _b(7), "b": _b(2, 7)}, label="broadcast"),
    Case("Xor", {"a": _b(3, 5), "b": _b(3, 5)}),
    Case("Not", {"x": _b(1, 1, 5, 3)}),
    Case("Where", {"c": _b(1, 1, 5, 5), "a": _f(2, 1, 5, 5), "b": np.array(-3.4e38, np.float32)},
         label="mask"),
    Case("Where", {"c": _b(4, 1), "a": _i(-9, 9, 1, 3), "b": _i(-9, 9, 4, 3)}, label="int64"),
    Case("Equal", {"a": _i(0, 3, 2, 5), "b": _i(0, 3, 5)}, label="int64"),
    Case("Equal", {"a": _b(3, 4), "b": _b(1, 4)}, label="bool"),
    Case("Less", {"a": _i(-4, 4, 6, 1), "b": _i(-4, 4, 1, 6)}, label="int64"),
    Case("Less", {"a": _f(3, 5), "b": _f(5)}, label="float"),
    Case("LessOrEqual", {"a": _i(0, 9, 9, 1), "b": _i(0, 9, 9)}, label="int64"),
    Case("Greater", {"a": _f(2, 3, 5), "b": _f(1, 3, 1)}, label="float"),
    Case("GreaterOrEqual", {"a": _i(-3, 3, 7, 3), "b": np.array(0, np.int64)}, label="int64"),
    Case("GatherND", {"x": _f(2, 3, 5), "i": np.array([[0, 2], [1, 0], [1, 2]], np.int64)}),
    Case("GatherND", {"x": _i(0, 99, 2, 3, 5), "i": np.array([[[1], [-1]], [[0], [2]]], np.int64)},
         {"batch_dims": 1}, label="batch_dims"),
    Case("GatherND", {"x": _b(1, 16), "i": np.array([[0]], np.int64)}, label="bool_mask"),
    Case("GatherElements", {"x": _i(0, 999, 1, 512), "i": _i(0, 512, 1, 32)}, {"axis": 1},
         label="positions"),
    Case("GatherElements", {"x": _f(3, 4, 5), "i": _i(-4, 4, 2, 4, 3)}, {"axis": 1}, label="negative"),
    Case("ScatterND", {"x": _f(4, 3, 5), "i": np.array([[2], [0]], np.int64), "u": _f(2, 3, 5)}),
    Case("ScatterND", {"x": _i(0, 9, 3, 7), "i": np.array([[0, 6], [2, 1], [0, 6]], np.int64),
                       "u": _i(0, 9, 3)}, {"reduction": "add"}, label="add"),
    Case("Trilu", {"x": _f(5, 7)}),
    Case("Trilu", {"x": _i(0, 9, 2, 6, 4), "k": np.array(1, np.int64)}, {"upper": 0}, label="lower_k"),
    Case("Trilu", {"x": np.ones((1, 1, 9, 9), bool), "k": np.array(-2, np.int64)}, label="bool"),
    Case("Range", {"s": np.array(3, np.int64), "l": np.array(17, np.int64), "d": np.array(2, np.int64)}),
    Case("Range", {"s": np.array(1.5, np.float32), "l": np.array(-2.0, np.float32),
                   "d": np.array(-0.7, np.float32)}, label="float"),
    Case("CumSum", {"x": _i(0, 2, 1, 11), "a": np.array(1, np.int64)}, label="int64"),
    Case("CumSum", {"x": _f(3, 5), "a": np.array(0, np.int64)}, {"exclusive": 1, "reverse": 1},
         label="exclusive_reverse"),
    Case("Expand", {"x": _b(1, 1, 1, 5), "s": np.array([2, 1, 3, 1], np.int64)}, label="bool"),
    Case("Expand", {"x": _i(0, 5, 3, 1), "s": np.array([2, 1, 4], np.int64)}, label="int64"),
    Case("Cast", {"x": _i(0, 2, 3, 5)}, {"to": 9}, label="int64_to_bool"),
    Case("Cast", {"x": _b(3, 5)}, {"to": 1}, label="bool_to_float"),
    Case("Shape", {"x": _f(2, 3, 5, 7)}, {"start": 1, "end": -1}),
    Case("Size", {"x": _f(2, 3, 5)}),
    Case("Slice", {"x": _i(0, 9, 1, 512), "s": np.array([0], np.int64), "e": np.array([13], np.int64),
                   "a": np.array([1], np.int64)}, label="int64"),
    Case("Pow", {"a": np.abs(_f(3, 5)), "b": np.array(0.5, np.float32)}),
    Case("Sqrt", {"x": np.abs(_f(7, 3))}),
    Case("Tanh", {"x": _f(5, 9)}),
    Case("Neg", {"x": _i(-9, 9, 4, 3)}, label="int64"),
    Case("Reciprocal", {"x": np.abs(_f(2, 7)) + 0.5}),
    Case("ReduceMax", {"x": _f(2, 3, 5), "a": np.array([-1], np.int64)}, {"keepdims": 1}),
]


def _node(case: Case) -> Any:
    return helper.make_node(case.op, list(case.inputs), ["y"], **case.attrs)


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind == "f":  # the same formula, vectorized differently: a few units in the last place
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
            np.testing.assert_array_max_ulp(np.nan_to_num(g), np.nan_to_num(w), maxulp=MAX_ULP)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.op}-{c.label}" if c.label else c.op for c in CASES])
def test_host_evaluation_matches_onnxruntime(case: Case) -> None:
    assert case.op in HOST_OPS
    want = run_onnxruntime(_node(case), case.opset, case.inputs)
    _same(evaluate_node(_node(case), case.opset, case.inputs), want)
    if case.op in OWN_OPS:  # tinynpu's own numpy, even where onnx.reference already takes the node
        _same(run_own(_node(case), case.inputs), want)


def test_every_own_operator_is_covered() -> None:
    assert set(OWN_OPS) <= {c.op for c in CASES}


def test_reference_bug_is_worked_around() -> None:
    """onnx.reference's GatherElements fails on indices smaller than the data (torch's position ids);
    the host still evaluates the node, by onnxruntime."""
    from onnx.reference import ReferenceEvaluator

    case = next(c for c in CASES if c.label == "positions")
    with pytest.raises(ValueError):
        ReferenceEvaluator(_node(case)).run(None, case.inputs)
    _same(evaluate_node(_node(case), 18, case.inputs), [np.take_along_axis(case.inputs["x"], case.inputs["i"], 1)])


def test_constant_mask_subgraph_folds(tmp_path: Any) -> None:
    """A causal mask built from a Shape, Range, Trilu and GatherElements of constants folds to an
    initializer: the float model's nodes that remain depend on the data only."""
    import onnx
    from onnx import TensorProto, numpy_helper

    from tinynpu.compiler.onnx.frontend.importer import import_model

    positions = numpy_helper.from_array(np.arange(512, dtype=np.int64).reshape(1, 512), "positions")
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], start=1, end=2),
        helper.make_node("Squeeze", ["shape"], ["n"]),
        helper.make_node("Range", ["zero", "n", "one"], ["r"]),
        helper.make_node("Unsqueeze", ["r", "ax0"], ["r2"]),
        helper.make_node("GatherElements", ["positions", "r2"], ["pos"], axis=1),
        helper.make_node("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT),
        helper.make_node("Expand", ["posf", "sq"], ["square"]),
        helper.make_node("Trilu", ["square"], ["mask"], upper=0),
        helper.make_node("IsNaN", ["mask"], ["nan"]),
        helper.make_node("Where", ["nan", "zerof", "mask"], ["clean"]),
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "clean"], ["y"]),
    ]
    inits = [positions, numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             numpy_helper.from_array(np.array([32, 32], np.int64), "sq"),
             numpy_helper.from_array(np.array(0, np.float32), "zerof"),
             numpy_helper.from_array(_f(32, 32), "w")]
    graph = helper.make_graph(nodes, "mask", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 32])], inits)
    path = tmp_path / "mask.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    model = import_model(path).model
    assert [n.op_type for n in model.graph.node] == ["MatMul", "Add"]
    mask = next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == "clean")
    np.testing.assert_array_equal(mask, np.tril(np.broadcast_to(np.arange(32, dtype=np.float32), (32, 32))))
