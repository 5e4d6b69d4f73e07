"""A quantized layer's requantization: onnxruntime's integer kernels are vrequantf's arithmetic, bit for bit."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinynpu.compiler.epilogue import quantize_multiplier
from tinynpu.compiler.onnx.frontend.requant import layer_scale
from tinynpu.compiler.onnx.intops import Epilogue, rescale_sum
from tinynpu.simulator.semantics import requantize, requantize_float

N = 4096


def _near_ties(seed: int) -> tuple[np.ndarray, np.float32, np.ndarray, np.float32, np.ndarray]:
    """Accumulators and per-channel scales whose products lie within a few binary32 ulps of n + 1/2.

    Returns (acc, x_scale, w_scale, y_scale, layer scale).
    """
    rng = np.random.default_rng(seed)
    acc = rng.integers(1, 60000, N) * rng.choice([-1, 1], N)
    target = (np.rint(np.abs(acc) * rng.uniform(1e-4, 3e-3, N)) + 0.5) * np.sign(acc)
    xs, ys = np.float32(0.03), np.float32(0.11)
    ws = (target / acc * ys / xs).astype(np.float32)  # the layer scale lands next to target / acc
    return acc, xs, ws, ys, layer_scale(xs, ws, ys)


def _ort_int_kernel(op: str, acc: np.ndarray, xs: np.float32, ws: np.ndarray, ys: np.float32) -> np.ndarray:
    """onnxruntime's int8 output of a one-element QLinearConv / QGemm whose accumulator is ``acc + 0``.

    One input value 1, weights 1, the int32 bias ``acc - 1``: the kernel requantizes exactly ``acc``
    per output channel with the scale it computes from ``xs``, ``ws``, ``ys``.
    """
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    n = acc.size
    shape = [1, 1, 1, 1] if op == "QLinearConv" else [1, 1]
    weight = np.ones((n, 1, 1, 1) if op == "QLinearConv" else (1, n), np.int8)
    inits = [numpy_helper.from_array(np.array(xs), "xs"), numpy_helper.from_array(np.array(0, np.int8), "xz"),
             numpy_helper.from_array(weight, "w"), numpy_helper.from_array(ws, "ws"),
             numpy_helper.from_array(np.zeros(n, np.int8), "wz"), numpy_helper.from_array(np.array(ys), "ys"),
             numpy_helper.from_array(np.array(0, np.int8), "yz"),
             numpy_helper.from_array((acc - 1).astype(np.int32), "b")]
    names = (["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"] if op == "QLinearConv"
             else ["x", "xs", "xz", "w", "ws", "wz", "b", "ys", "yz"])
    node = helper.make_node(op, names, ["y"], domain="" if op == "QLinearConv" else "com.microsoft")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.INT8, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, None)], inits)
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": np.ones(shape, np.int8)})[0].reshape(-1).astype(np.int64)


@pytest.mark.parametrize("op", ["QLinearConv", "QGemm"])
def test_onnxruntime_int_kernels_requantize_as_vrequantf(op: str) -> None:
    """On accumulators next to a rounding tie: vrequantf's rule equals onnxruntime everywhere; Q31 does not."""
    pytest.importorskip("onnxruntime")
    acc, xs, ws, ys, scale = _near_ties(1)
    theirs = _ort_int_kernel(op, acc, xs, ws, ys)
    binary32 = np.clip(requantize_float(acc.astype(np.int32), scale), -128, 127)
    m, s = quantize_multiplier(scale.astype(np.float64))
    q31 = np.clip(requantize(acc.astype(np.int32), m, s), -128, 127)
    assert np.array_equal(binary32, theirs)
    assert np.count_nonzero(q31 != theirs) > N // 10  # these cases do tell the two rules apart


def test_layer_scale_rounds_each_operation_to_binary32() -> None:
    """(x_scale * w_scale) / y_scale, each step in binary32: other groupings give other scales."""
    rng = np.random.default_rng(2)
    xs, ys = np.float32(0.0371), np.float32(0.113)
    ws = rng.uniform(1e-3, 1e-2, 1000).astype(np.float32)
    got = layer_scale(float(xs), ws, float(ys))
    assert got.dtype == np.float32
    assert [float(g) for g in got] == [float(np.float32(np.float32(xs * w) / ys)) for w in ws]
    assert np.count_nonzero(got != xs * (ws / ys)) > 0  # the grouping matters
    assert np.count_nonzero(got != (float(xs) * ws.astype(np.float64) / float(ys)).astype(np.float32)) > 0


def _exact_q31(x: int, m: int, s: int) -> int:
    """round(x * m / 2^(31+s)), ties toward +infinity, clamped to int32."""
    q = Fraction(x * m, 2 ** (31 + s))
    y = (q + Fraction(1, 2)).__floor__()
    return max(-(2**31), min(2**31 - 1, y))


@given(st.floats(min_value=1e-9, max_value=0.999))
def test_quantize_multiplier_is_within_half_a_unit(real: float) -> None:
    m, s = quantize_multiplier(np.array([real]))
    m0, s0 = int(m[0]), int(s[0])
    assert 2**30 <= m0 < 2**31 and 0 <= s0 <= 31
    assert abs(m0 * 2.0 ** -(31 + s0) - real) <= 2.0 ** -(31 + s0) * 0.5 + 1e-18
    x = np.array([1000], np.int32)
    assert int(requantize(x, m, s)[0]) == _exact_q31(1000, m0, s0)


def test_epilogue_relu_zero_point_and_bias() -> None:
    epi = Epilogue(scale=np.array([0.5, 0.25], np.float32), bias=np.array([2, -4], np.int32), zero_point=3,
                   lo=3, hi=127)
    acc = np.array([[10, 10], [-100, 100], [1000, 1000], [1, 14]], np.int32)
    # (10+2)*0.5+3 = 9, (10-4)*0.25 = 1.5 -> 2, +3; negatives clamp at the zero point (relu);
    # (1+2)*0.5 = 1.5 -> 2 and (14-4)*0.25 = 2.5 -> 2: ties to even, +3
    assert epi.apply(acc).tolist() == [[9, 5], [3, 27], [127, 127], [5, 5]]


def test_epilogue_on_the_accelerator_is_the_binary32_requantizer() -> None:
    epi = Epilogue(scale=np.array([3.0, 1e-4], np.float32), bias=None, zero_point=0, lo=-128, hi=127)
    npu = epi.on_accelerator()  # a scale of 1 or more too: vrequantf takes any binary32 scale
    assert npu.requantizer == "binary32" and npu.requant_mnemonic == "vrequantf"
    acc = np.array([[40, 10**6], [-50, -10**6]], np.int32)
    assert npu.reference(acc).tolist() == epi.apply(acc).tolist() == [[120, 100], [-128, -100]]


def test_rescale_sum_rounds_once() -> None:
    a, b = np.array([3, -3, 100]), np.array([1, -1, 100])
    y = rescale_sum([(a, 0.5), (b, 0.5)], zero_point=0, lo=-128, hi=127)
    assert y.tolist() == [2, -2, 100]



def test_rescale_sum_rounds_ties_to_even() -> None:
    """An exact .5 goes to the even neighbour, as onnxruntime's QuantizeLinear rounds."""
    x = np.array([1, 3, 5, 7, -1, -3, 9])
    y = rescale_sum([(x, 0.5)], zero_point=0, lo=-128, hi=127)
    assert y.tolist() == [0, 2, 2, 4, 0, -2, 4]  # 0.5, 1.5, 2.5, 3.5, -0.5, -1.5, 4.5


@pytest.mark.parametrize(("pads", "ceil_mode", "include"), [
    ((0, 0, 0, 0), False, False), ((1, 1, 1, 1), False, False), ((1, 1, 1, 1), False, True),
    ((0, 1, 2, 0), True, False), ((1, 0, 0, 1), True, True)])
def test_window_sums_counts_and_maxima_are_onnx_pooling(pads: tuple[int, int, int, int], ceil_mode: bool,
                                                       include: bool) -> None:
    """sum / count over every window is the ONNX operator's average (pads, ceil mode, include-pad), and
    the maxima its MaxPool."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    from tinynpu.compiler.onnx.intops import max_pool_int, sum_pool_int

    x = np.random.default_rng(2).integers(-128, 128, (1, 3, 7, 8))
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 3], pads=list(pads),
                            ceil_mode=int(ceil_mode), count_include_pad=int(include))
    want = ReferenceEvaluator(node).run(None, {"x": x.astype(np.float64)})[0]
    sums, counts = sum_pool_int(x, (3, 2), (2, 3), pads, ceil_mode, include)
    np.testing.assert_allclose(sums / counts, want, rtol=1e-12)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 3], pads=list(pads),
                            ceil_mode=int(ceil_mode))  # the same windows
    want_max = ReferenceEvaluator(node).run(None, {"x": x.astype(np.float32)})[0]
    assert np.array_equal(max_pool_int(x.astype(np.int8), (3, 2), (2, 3), pads, ceil_mode), want_max)
