"""Import rewrites: batch norms and per-channel Mul/Add folded into their Conv, float outputs unchanged."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import _init, save  # noqa: E402

from tinynpu.compiler.onnx import compile_onnx  # noqa: E402
from tinynpu.compiler.onnx.frontend.importer import import_model  # noqa: E402

C_IN, C_OUT, HW = 3, 8, 10


def _conv_then(path: Path, tail: list, inits: list, *, opset: int = 13) -> Path:  # type: ignore[type-arg]
    """x -> conv (3 -> 8, 3x3, pad 1) named ``conv`` writing ``c`` -> ``tail`` (ending in ``y``)."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]), *tail]
    inits = [_init("w", rng.normal(size=(C_OUT, C_IN, 3, 3)) * 0.3), _init("b", rng.normal(size=C_OUT) * 0.1),
             *inits]
    return save(path, nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C_IN, HW, HW])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C_OUT, HW, HW])], opset=opset)


def _float_outputs_agree(original: Path, imported) -> None:  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    x = {"x": np.random.default_rng(0).normal(size=(1, C_IN, HW, HW)).astype(np.float32)}
    want = ort.InferenceSession(str(original), providers=["CPUExecutionProvider"]).run(["y"], x)[0]
    got = ort.InferenceSession(imported.model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _ops(imported) -> Counter:  # type: ignore[no-untyped-def,type-arg]
    return Counter(n.op_type for n in imported.model.graph.node)


def test_batch_norm_folds_into_its_conv(tmp_path: Path) -> None:
    from onnx import helper

    rng = np.random.default_rng(4)
    tail = [helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["n"], name="bn"),
            helper.make_node("Relu", ["n"], ["y"], name="relu")]
    inits = [_init("g", rng.uniform(0.5, 1.5, C_OUT)), _init("be", rng.normal(size=C_OUT)),
             _init("mu", rng.normal(size=C_OUT)), _init("var", rng.uniform(0.5, 2.0, C_OUT))]
    path = _conv_then(tmp_path / "bn.onnx", tail, inits)
    im = import_model(path)
    assert _ops(im) == Counter({"Conv": 1, "Relu": 1})
    assert any("1 BatchNormalization" in note for note in im.notes), im.notes
    _float_outputs_agree(path, im)


def test_opset9_unsqueeze_mul_add_chain_folds_into_its_conv(tmp_path: Path) -> None:
    """DenseNet's and Inception-v2's batch-norm scale and shift: ``Unsqueeze`` (opset 9, ``axes`` an
    attribute) of a per-channel vector, ``Mul`` then ``Add``: one Conv, run on the accelerator."""
    from onnx import helper

    rng = np.random.default_rng(5)
    tail = [helper.make_node("Unsqueeze", ["scale"], ["scale3"], name="unsq_scale", axes=[1, 2]),
            helper.make_node("Mul", ["c", "scale3"], ["m"], name="mul"),
            helper.make_node("Unsqueeze", ["shift"], ["shift3"], name="unsq_shift", axes=[1, 2]),
            helper.make_node("Add", ["m", "shift3"], ["a"], name="add"),
            helper.make_node("Relu", ["a"], ["y"], name="relu")]
    inits = [_init("scale", rng.uniform(0.5, 1.5, C_OUT)), _init("shift", rng.normal(size=C_OUT) * 0.2)]
    path = _conv_then(tmp_path / "affine.onnx", tail, inits, opset=9)
    im = import_model(path)
    assert _ops(im) == Counter({"Conv": 1, "Relu": 1})
    assert any("2 Mul/Add by per-channel constants" in note for note in im.notes), im.notes
    _float_outputs_agree(path, im)
    steps = compile_onnx(path).net.steps
    assert [s.where for s in steps if s.op == "Conv"] == ["npu"]
    assert next(s for s in steps if s.op == "Conv").activation == "Relu"


@pytest.mark.parametrize("case", ["varies-along-width", "conv-read-twice"])
def test_what_is_not_one_number_per_channel_is_left(case: str, tmp_path: Path) -> None:
    from onnx import helper

    if case == "varies-along-width":  # a (1, 1, 1, W) factor: not a per-channel affine
        tail = [helper.make_node("Mul", ["c", "k"], ["y"], name="mul")]
        inits = [_init("k", np.linspace(0.5, 1.5, HW).reshape(1, 1, 1, HW))]
    else:  # the conv's output also feeds the add: folding would change that reader
        tail = [helper.make_node("Mul", ["c", "k"], ["m"], name="mul"),
                helper.make_node("Add", ["m", "c"], ["y"], name="add")]
        inits = [_init("k", np.linspace(0.5, 1.5, C_OUT).reshape(C_OUT, 1, 1))]
    path = _conv_then(tmp_path / f"{case}.onnx", tail, inits)
    im = import_model(path)
    assert _ops(im)["Mul"] == 1
    assert not any("Mul/Add" in note for note in im.notes), im.notes
    _float_outputs_agree(path, im)


def test_mul_add_after_a_batch_norm_without_a_conv_folds_into_it(tmp_path: Path) -> None:
    """DenseNet's pre-activation batch norms (after a concatenation): BN -> Mul -> Add -> Relu -> Conv
    keeps one BatchNormalization with the Mul and Add in its scale and shift."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(6)
    nodes = [helper.make_node("BatchNormalization", ["x", "g", "be", "mu", "var"], ["n"], name="bn"),
             helper.make_node("Mul", ["n", "scale"], ["m"], name="mul"),
             helper.make_node("Add", ["shift", "m"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1])]
    inits = [_init("g", rng.uniform(0.5, 1.5, C_IN)), _init("be", rng.normal(size=C_IN)),
             _init("mu", rng.normal(size=C_IN)), _init("var", rng.uniform(0.5, 2.0, C_IN)),
             _init("scale", rng.uniform(0.5, 1.5, (1, C_IN, 1, 1))), _init("shift", rng.normal(size=(C_IN, 1, 1))),
             _init("w", rng.normal(size=(C_OUT, C_IN, 3, 3)) * 0.3), _init("b", rng.normal(size=C_OUT) * 0.1)]
    path = save(tmp_path / "preact.onnx", nodes, inits,
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C_IN, HW, HW])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C_OUT, HW, HW])])
    im = import_model(path)
    assert _ops(im) == Counter({"BatchNormalization": 1, "Relu": 1, "Conv": 1})
    _float_outputs_agree(path, im)
