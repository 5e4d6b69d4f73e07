"""The typed steps check their fields when built: a front-end bug is caught where the step is made."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tinynpu.compiler.onnx.intops import Epilogue
from tinynpu.compiler.onnx.ir import (
    HOST,
    NPU,
    AddStep,
    AddTerm,
    ConvStep,
    GemmStep,
    MatmulStep,
    MaxPoolStep,
    PoolWindow,
    StepError,
)
from tinynpu.compiler.onnx.lower.eltwise import term_scales

EPI = Epilogue(scale=np.ones(8, np.float32), bias=None, zero_point=0, lo=-128, hi=127)


def _conv(**over: object) -> ConvStep:
    fields: dict[str, object] = {
        "name": "c", "op": "Conv", "where": NPU, "inputs": ("x",), "outputs": ("y",), "epilogue": EPI,
        "weight": np.zeros((8, 3, 3, 4), np.int8), "weight_name": "w", "group": 2, "pads": (1, 1, 1, 1),
        "strides": (1, 1), "dilations": (1, 1)}
    return ConvStep(**(fields | over))  # type: ignore[arg-type]


def test_a_well_formed_step_is_immutable_and_knows_its_kind() -> None:
    step = _conv()
    assert (step.kind, step.where) == ("conv", NPU)
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.where = HOST  # type: ignore[misc]
    assert dataclasses.replace(step, where=HOST, reason="input shape unknown").where == HOST


@pytest.mark.parametrize(("over", "message"), [
    ({"weight": np.zeros((8, 3, 3, 4), np.float32)}, "not int8"),
    ({"group": 3}, "do not split into 3 groups"),
    ({"strides": (1, 1, 1)}, "not 2-D"),
    ({"inputs": ("x", "z")}, "not one"),
    ({"activation": "Tanh"}, "neither Relu nor Clip"),
    ({"where": "gpu"}, "cannot run on the 'gpu'"),
])
def test_a_conv_with_contradicting_fields_is_refused_naming_it(over: dict[str, object], message: str) -> None:
    with pytest.raises(StepError, match=message) as info:
        _conv(**over)
    assert "step 'c' (conv)" in str(info.value)


def test_each_kind_checks_its_own_fields() -> None:
    with pytest.raises(StepError, match="not int8 N x K"):
        GemmStep(name="g", op="Gemm", where=NPU, inputs=("x",), outputs=("y",), epilogue=EPI,
                 weight=np.zeros((2, 3, 4), np.int8), weight_name="w")
    with pytest.raises(StepError, match="not two"):
        MatmulStep(name="m", op="MatMul", where=NPU, inputs=("a",), outputs=("y",), epilogue=EPI)
    with pytest.raises(StepError, match="cannot run on the 'npu'"):
        MaxPoolStep(name="p", op="MaxPool", where=NPU, inputs=("x",), outputs=("y",),
                    window=PoolWindow((2, 2), (2, 2), (0, 0, 0, 0), False))


def test_an_add_on_the_accelerator_needs_a_scale_per_term() -> None:
    terms = (AddTerm("a", 0.5, 0), AddTerm("b", 0.7, 0))
    common: dict[str, object] = {"name": "add", "op": "Add", "inputs": ("a", "b"), "outputs": ("y",),
                                 "terms": terms, "zero_point": 0, "lo": -128, "hi": 127}
    assert AddStep(**common, where=HOST).scales is None  # type: ignore[arg-type]
    with pytest.raises(StepError, match="one fixed-point scale per term"):
        AddStep(**common, where=NPU)  # type: ignore[arg-type]
    scales = term_scales([0.5, 0.7])
    assert AddStep(**common, where=NPU, scales=scales).scales == scales  # type: ignore[arg-type]
    with pytest.raises(StepError, match="terms are not its inputs"):
        AddStep(**(common | {"inputs": ("b", "a")}), where=HOST)  # type: ignore[arg-type]


def test_a_product_reads_two_tensors_and_its_gate_is_256_entries_of_16_bits() -> None:
    from tinynpu.compiler.onnx.ir import ProductStep
    from tinynpu.compiler.onnx.lower.eltwise import product_scale

    scale = product_scale(0.01)
    assert scale is not None
    common: dict[str, object] = {"name": "mul", "op": "Mul", "where": NPU, "outputs": ("y",), "scale": scale}
    assert ProductStep(**common, inputs=("a", "b")).gate is None  # type: ignore[arg-type]
    with pytest.raises(StepError, match="reads two int8 tensors"):
        ProductStep(**common, inputs=("a",))  # type: ignore[arg-type]
    with pytest.raises(StepError, match="not 256 entries of 16 bits"):
        ProductStep(**common, inputs=("a", "b"), gate=np.full(256, 2**15, np.int32))  # type: ignore[arg-type]
    with pytest.raises(StepError, match="cannot run on the 'host'"):
        ProductStep(**(common | {"where": HOST}), inputs=("a", "b"))  # type: ignore[arg-type]
