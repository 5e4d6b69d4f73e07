"""Where differences from onnxruntime arise: each step on onnxruntime's own inputs, in the graph it runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import _init, save  # noqa: E402

from tinynpu.compiler.onnx import compile_onnx  # noqa: E402
from tinynpu.compiler.onnx.runtime.execute import execute  # noqa: E402
from tinynpu.compiler.onnx.verify.origins import ort_difference_origins  # noqa: E402

INTEGER_KERNELS = ("QLinearConv", "QGemm", "QLinearMatMul")


def _residual_block(path: Path) -> Path:
    """Two conv+relu layers reading one input, a 1x1 conv without relu added to one of them (ResNet's
    branch2c), a gemm.

    Every conv is an integer QLinearConv in the graph onnxruntime runs, and the gemm a QGemm: the
    conv+relu layers because their Q/DQ pair has the relu's scale (``quantize.py``; removed, they
    would run as float FusedConv), conv0 and conv1 because the comparison keeps int8 int8 (with
    onnxruntime's default uint8 rewrite, a conv reading a tensor two nodes read runs in float).
    """
    from onnx import TensorProto, helper

    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="conv0", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
             helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2"),
             helper.make_node("Add", ["c2", "r0"], ["s"], name="residual"),
             helper.make_node("Flatten", ["s"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="fc", transB=1)]
    inits = [_init("w0", rng.normal(size=(16, 3, 3, 3)) * 0.3), _init("b0", rng.normal(size=16) * 0.1),
             _init("w1", rng.normal(size=(16, 3, 3, 3)) * 0.3), _init("b1", rng.normal(size=16) * 0.1),
             _init("w2", rng.normal(size=(16, 16, 1, 1)) * 0.3), _init("b2", rng.normal(size=16) * 0.1),
             _init("w3", rng.normal(size=(10, 16 * 12 * 12)) * 0.05), _init("b3", rng.normal(size=10) * 0.1)]
    return save(path, nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])])


@pytest.fixture(scope="module")
def origins(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict[str, int]], int]:
    cn = compile_onnx(_residual_block(tmp_path_factory.mktemp("cnn") / "cnn.onnx"))
    feeds = cn.make_inputs(0)
    values = execute(cn.net, feeds, cache=None).values
    conv_elements = sum(values[o].size for s in cn.net.steps if s.kind == "conv" for o in s.outputs)
    return ort_difference_origins(cn, feeds), conv_elements


def test_every_conv_output_is_compared_on_the_kernel_that_computed_it(origins: tuple) -> None:
    found, conv_elements = origins
    conv = {k: v for k, v in found.items() if k.startswith("conv ")}
    assert "conv not observed" not in conv, found
    assert sum(v["elements"] for v in conv.values()) == conv_elements
    assert any(k.endswith(INTEGER_KERNELS) for k in conv), found  # the test sees an integer kernel


def test_every_conv_runs_on_onnxruntime_as_an_integer_kernel_and_agrees(origins: tuple) -> None:
    found, conv_elements = origins
    assert found.get("conv on QLinearConv", {}).get("elements") == conv_elements, found
    assert found["conv on QLinearConv"]["differing"] == 0
    assert found["gemm on QGemm"]["differing"] == 0


def test_integer_kernels_agree_bit_for_bit_float_ones_within_a_tie(origins: tuple) -> None:
    """vrequantf is onnxruntime's integer requantization; its float kernels differ at rare ties only."""
    found, _ = origins
    for group, o in found.items():
        if group.endswith(INTEGER_KERNELS):
            assert o["differing"] == 0, (group, o)
        assert o["max_abs_lsb"] <= 1 and o["differing"] <= o["elements"] // 1000, (group, o)


def test_a_step_on_a_fused_tensor_is_counted_not_compared(origins: tuple) -> None:
    found, _ = origins
    for group, o in found.items():
        if group.endswith("not observed"):
            assert o["differing"] == 0 and o["elements"] > 0
    assert all(np.isfinite(o["elements"]) for o in found.values())
