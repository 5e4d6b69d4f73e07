"""Every operator of the ONNX front end on a small onnx.helper graph, against onnxruntime.

Each graph is quantized by tinynpu (QDQ, int8) and run with the checks a
network run makes: the simulator's outputs bit-exact against the integer
reference (check a); against onnxruntime's run of the same quantized graph
(check b: largest difference in LSBs, fraction of elements within one LSB,
top-1); against onnxruntime's run of the float graph (check c: cosine).  The
op under test (the node named ``op``) sits after a convolution or a matmul,
so that its input is a quantized tensor as in a real network.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import _init, save  # noqa: E402

from tinynpu.compiler.onnx import compile_onnx, run_network  # noqa: E402
from tinynpu.intmath import round_up  # noqa: E402

Tail = Callable[[str, int], tuple[list[Any], list[Any]]]  # (input name, channels) -> (nodes, initializers)


@dataclass(frozen=True)
class OpCase:
    """A small graph around one operator and what its run must show.

    Attributes:
        tail: The nodes (the one under test named ``op``, the graph output named ``y``) and their
            initializers, after the stem's output.
        where: Where the step of the node ``op`` must run (``npu`` or ``host``).
        stem: ``conv`` (3 -> ``channels``, 3x3, relu; NCHW ``hw``) or ``matmul`` (``hw[0]`` x 24 tokens
            -> ``channels`` features, for the transformer ops).
        channels: The stem's output channels (features).
        hw: The stem's spatial size (or the token count first).
        head: Follow the op by a 1x1 conv (a matmul after the matmul stem): onnxruntime's quantizer
            leaves the output of Sum, LRN, Div, ... in float, and the runs compare int8 outputs.
        opset: The graph's opset (LayerNormalization needs 17, Gelu 20).
        max_lsb: Largest difference against onnxruntime's quantized run, in LSBs (0: every output
            equal, as every integer kernel and every float operator here is).
        min_cosine: Smallest cosine against the float graph's output.
    """

    tail: Tail
    where: str
    stem: str = "conv"
    channels: int = 8
    hw: tuple[int, int] = (9, 11)
    head: bool = False
    opset: int = 13
    max_lsb: int = 0
    min_cosine: float = 0.99


def _node(op: str, ins: list[str], outs: list[str], name: str, **attrs: Any) -> Any:
    from onnx import helper

    return helper.make_node(op, ins, outs, name=name, **attrs)


def _weights(name: str, shape: tuple[int, ...], fan_in: int, seed: int) -> Any:
    return _init(name, np.random.default_rng(seed).normal(size=shape) * np.sqrt(2.0 / fan_in))


def _bias(name: str, n: int, seed: int) -> Any:
    return _init(name, np.random.default_rng(seed).normal(size=n) * 0.1)


def _const(name: str, value: Any) -> Any:
    return _init(name, np.asarray(value))


def _int64(name: str, values: list[int]) -> Any:
    from onnx import TensorProto, helper

    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def build(case: OpCase, path: Path) -> Path:
    """The stem, then the case's tail; the output's shape comes from onnx shape inference."""
    import onnx
    from onnx import TensorProto, helper

    c = case.channels
    if case.stem == "conv":
        x_shape = [1, 3, *case.hw]
        nodes = [_node("Conv", ["x", "w0", "b0"], ["s0"], "stem", pads=[1, 1, 1, 1]),
                 _node("Relu", ["s0"], ["s"], "stem_relu")]
        inits = [_weights("w0", (c, 3, 3, 3), 27, 0), _bias("b0", c, 0)]
    else:
        x_shape = [1, case.hw[0], 24]
        nodes = [_node("MatMul", ["x", "w0"], ["s0"], "stem"), _node("Add", ["s0", "b0"], ["s"], "stem_bias")]
        inits = [_weights("w0", (24, c), 48, 0), _bias("b0", c, 0)]
    tail_nodes, tail_inits = case.tail("s", c)
    if case.head:
        for node in tail_nodes:
            node.output[:] = ["t" if o == "y" else o for o in node.output]
        head = "Conv" if case.stem == "conv" else "MatMul"
        tail_nodes.append(_node(head, ["t", "wh"], ["y"], "head"))
        tail_inits.append(_weights("wh", (c, c, 1, 1) if head == "Conv" else (c, c), c, 9))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
    probe = helper.make_model(helper.make_graph(nodes + tail_nodes, "probe", [x],
                                                [helper.make_empty_tensor_value_info("y")], inits + tail_inits),
                              opset_imports=[helper.make_opsetid("", case.opset)])
    out = onnx.shape_inference.infer_shapes(probe, strict_mode=True).graph.output[0]
    dims = [int(d.dim_value) for d in out.type.tensor_type.shape.dim]
    return save(path, nodes + tail_nodes, inits + tail_inits, [x],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)], opset=case.opset)


# -- the tails -----------------------------------------------------------------------------------------------


def conv(k: int, kernel: tuple[int, int], *, group: int = 1, strides: tuple[int, int] = (1, 1),
         pads: tuple[int, int, int, int] = (0, 0, 0, 0), dilations: tuple[int, int] = (1, 1),
         relu: bool = True) -> Tail:
    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        fan_in = c // group * kernel[0] * kernel[1]
        nodes = [_node("Conv", [x, "w1", "b1"], ["c1" if relu else "y"], "op", group=group, strides=list(strides),
                       pads=list(pads), dilations=list(dilations), kernel_shape=list(kernel))]
        if relu:
            nodes.append(_node("Relu", ["c1"], ["y"], "op_relu"))
        return nodes, [_weights("w1", (k, c // group, *kernel), fan_in, 1), _bias("b1", k, 1)]

    return tail


def gemm(n: int, *, trans_a: int = 0, trans_b: int = 0, alpha: float = 1.0, beta: float = 1.0,
         bias: bool = True) -> Tail:
    """Flatten (or Flatten + Transpose for transA), then Gemm to ``n`` outputs (plus a bias C unless ``bias=False``)."""

    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        nodes = [_node("GlobalAveragePool", [x], ["g"], "gap"), _node("Flatten", ["g"], ["f"], "flatten")]
        a = "f"
        if trans_a:
            nodes.append(_node("Transpose", ["f"], ["ft"], "a_t", perm=[1, 0]))
            a = "ft"
        w_shape = (n, c) if trans_b else (c, n)
        nodes.append(_node("Gemm", [a, "w1", *(["b1"] if bias else [])], ["y"], "op", transA=trans_a,
                           transB=trans_b, alpha=alpha, beta=beta))
        return nodes, [_weights("w1", w_shape, c, 1), *([_bias("b1", n, 1)] if bias else [])]

    return tail


def matmul_weight(n: int) -> Tail:
    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        return [_node("MatMul", [x, "w1"], ["y"], "op")], [_weights("w1", (c, n), c, 1)]

    return tail


def attention(heads: int) -> Tail:
    """Q·Kᵀ and scores·V batched over heads: two activation x activation MatMuls (the first is ``op``)."""

    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        dh = c // heads
        nodes, inits = [], [_int64("split", [1, -1, heads, dh])]
        for p in ("q", "k", "v"):
            nodes += [_node("MatMul", [x, f"w{p}"], [f"{p}0"], f"proj_{p}"),
                      _node("Reshape", [f"{p}0", "split"], [f"{p}1"], f"heads_{p}")]
            inits.append(_weights(f"w{p}", (c, c), c, ord(p)))
        nodes += [_node("Transpose", ["q1"], ["qh"], "q_t", perm=[0, 2, 1, 3]),
                  _node("Transpose", ["k1"], ["kt"], "k_t", perm=[0, 2, 3, 1]),
                  _node("Transpose", ["v1"], ["vh"], "v_t", perm=[0, 2, 1, 3]),
                  _node("MatMul", ["qh", "kt"], ["scores"], "op"),
                  _node("Softmax", ["scores"], ["p"], "softmax", axis=-1),
                  _node("MatMul", ["p", "vh"], ["y"], "scores_v")]
        return nodes, inits

    return tail


def unary(op: str, inits: list[Any] | None = None, extra_inputs: tuple[str, ...] = (), **attrs: Any) -> Tail:
    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        return [_node(op, [x, *extra_inputs], ["y"], "op", **attrs)], list(inits or [])

    return tail


def clip(lo: float, hi: float) -> Tail:
    """Conv then Clip(lo, hi) (fused into the conv's store)."""

    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        nodes = [_node("Conv", [x, "w1", "b1"], ["c1"], "op", pads=[1, 1, 1, 1]),
                 _node("Clip", ["c1", "lo", "hi"], ["y"], "op_clip")]
        return nodes, [_weights("w1", (c, c, 3, 3), 9 * c, 1), _bias("b1", c, 1), _const("lo", np.float32(lo)),
                       _const("hi", np.float32(hi))]

    return tail


def residual(op: str, terms: int, *, relu: bool) -> Tail:
    """``terms`` branches (1x1 convs of the stem) joined by Add/Sum, then an optional Relu."""

    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        nodes, inits, names = [], [], [x]
        for i in range(terms - 1):
            nodes.append(_node("Conv", [x, f"wb{i}", f"bb{i}"], [f"br{i}"], f"branch{i}"))
            inits += [_weights(f"wb{i}", (c, c, 1, 1), c, 10 + i), _bias(f"bb{i}", c, 10 + i)]
            names.append(f"br{i}")
        nodes.append(_node(op, names, ["a" if relu else "y"], "op"))
        if relu:
            nodes.append(_node("Relu", ["a"], ["y"], "op_relu"))
        return nodes, inits

    return tail


def concat(*, with_stem: bool) -> Tail:
    """Two convs of the stem concatenated along channels (an inception module's join), and the stem's
    own output too if ``with_stem`` (read by the convs as well, it keeps its own scale)."""

    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        nodes = [_node("Conv", [x, "wa", "ba"], ["ca"], "branch_a"), _node("Relu", ["ca"], ["ra"], "relu_a"),
                 _node("Conv", [x, "wb", "bb"], ["cb"], "branch_b", pads=[1, 1, 1, 1]),
                 _node("Relu", ["cb"], ["rb"], "relu_b"),
                 _node("Concat", ["ra", "rb", x] if with_stem else ["ra", "rb"], ["y"], "op", axis=1)]
        return nodes, [_weights("wa", (5, c, 1, 1), c, 2), _bias("ba", 5, 2),
                       _weights("wb", (7, c, 3, 3), 9 * c, 3), _bias("bb", 7, 3)]

    return tail


def concat_conv_and_pool() -> Tail:
    """A 3x3 average-pool branch and a wider conv branch of the stem joined (the pool a host step, the
    conv larger than the stem's output, so storing it in its slice keeps the activation peak as low)."""

    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        nodes = [_node("AveragePool", [x], ["pb"], "branch_b", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                 _node("Conv", [x, "wa", "ba"], ["ca"], "branch_a", pads=[1, 1, 1, 1]),
                 _node("Relu", ["ca"], ["ra"], "relu_a"),
                 _node("Concat", ["pb", "ra"], ["y"], "op", axis=1)]
        return nodes, [_weights("wa", (2 * c, c, 3, 3), 9 * c, 2), _bias("ba", 2 * c, 2)]

    return tail


def layout(op: str, **attrs: Any) -> Tail:
    """Reshape / Flatten / Transpose, then a Gemm reading the moved tensor (so the op sits between two layers)."""

    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        inits: list[Any] = []
        if op == "Reshape":
            node = _node("Reshape", [x, "shape"], ["m"], "op")
            inits.append(_int64("shape", [1, -1]))
        else:
            node = _node(op, [x], ["m"], "op", **attrs)
        nodes = [node, _node("Flatten", ["m"], ["f"], "flatten"),
                 _node("Gemm", ["f", "w1", "b1"], ["y"], "fc", transB=1)]
        return nodes, inits + [_weights("w1", (10, c * 9 * 11), c * 99, 1), _bias("b1", 10, 1)]

    return tail


def scale_by(op: str, value: float) -> Tail:
    return unary(op, [_const("k", np.float32(value))], ("k",))


def layernorm() -> Tail:
    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        rng = np.random.default_rng(5)
        return ([_node("LayerNormalization", [x, "g", "b"], ["y"], "op", axis=-1)],
                [_init("g", 1 + 0.1 * rng.normal(size=c)), _init("b", 0.1 * rng.normal(size=c))])

    return tail


def gelu_erf() -> Tail:
    """Gelu as opset-13 exporters write it: x * 0.5 * (1 + erf(x / sqrt 2))."""

    def tail(x: str, c: int) -> tuple[list[Any], list[Any]]:
        nodes = [_node("Div", [x, "sqrt2"], ["d"], "gelu_div"), _node("Erf", ["d"], ["e"], "op"),
                 _node("Add", ["e", "one"], ["e1"], "gelu_add"), _node("Mul", [x, "e1"], ["m"], "gelu_mul"),
                 _node("Mul", ["m", "half"], ["y"], "gelu_half")]
        return nodes, [_const("sqrt2", np.float32(np.sqrt(2))), _const("one", np.float32(1)),
                       _const("half", np.float32(0.5))]

    return tail


CASES: dict[str, OpCase] = {
    # Conv: odd sizes, strides, pads (asymmetric too), dilations, groups, depthwise
    "conv_odd_shapes": OpCase(conv(7, (3, 3), pads=(1, 1, 1, 1)), "npu", channels=5, hw=(9, 11)),
    "conv_5x5_stride2_pad2": OpCase(conv(12, (5, 5), strides=(2, 2), pads=(2, 2, 2, 2)), "npu", hw=(13, 15)),
    "conv_1x1_stride2": OpCase(conv(16, (1, 1), strides=(2, 2)), "npu", channels=24),
    "conv_rect_kernel": OpCase(conv(8, (1, 3)), "npu"),
    "conv_pads_per_axis": OpCase(conv(8, (1, 3), pads=(0, 1, 0, 1)), "npu"),
    "conv_asymmetric_pads": OpCase(conv(8, (3, 3), pads=(0, 1, 2, 1)), "npu"),
    "conv_strides_2x1": OpCase(conv(8, (3, 3), strides=(2, 1), pads=(1, 1, 1, 1)), "npu"),
    "conv_dilation2": OpCase(conv(8, (3, 3), dilations=(2, 2), pads=(2, 2, 2, 2)), "npu"),
    "conv_dilation_2x3_pads": OpCase(conv(8, (3, 2), dilations=(2, 3), pads=(1, 0, 2, 3)), "npu", hw=(11, 13)),
    "conv_stride_1x3_dilation_1x2": OpCase(conv(12, (2, 3), strides=(1, 3), dilations=(1, 2), pads=(1, 2, 0, 1)),
                                           "npu", channels=3, hw=(10, 14)),
    "conv_groups2": OpCase(conv(16, (3, 3), group=2, pads=(1, 1, 1, 1)), "npu", channels=16),
    "conv_groups4_small": OpCase(conv(8, (3, 3), group=4, pads=(1, 1, 1, 1)), "npu"),
    "conv_depthwise": OpCase(conv(8, (3, 3), group=8, pads=(1, 1, 1, 1)), "npu"),
    "conv_depthwise_stride2": OpCase(conv(16, (3, 3), group=16, strides=(2, 2), pads=(1, 1, 1, 1)), "npu",
                                     channels=16),
    "conv_depthwise_40ch_pads": OpCase(conv(40, (3, 3), group=40, pads=(0, 1, 2, 1)), "npu", channels=40),
    "conv_depthwise_48ch_stride2": OpCase(conv(48, (3, 3), group=48, strides=(2, 2), pads=(1, 1, 1, 1)), "npu",
                                          channels=48),
    "conv_depthwise_multiplier2": OpCase(conv(24, (3, 3), group=12, pads=(1, 1, 1, 1)), "npu", channels=12),
    "conv_groups3_5ch_dilated": OpCase(conv(9, (3, 3), group=3, dilations=(2, 2), pads=(2, 2, 2, 2)), "npu",
                                       channels=15),
    "conv_no_relu": OpCase(conv(8, (3, 3), pads=(1, 1, 1, 1), relu=False), "npu"),
    "clip_relu6": OpCase(clip(0.0, 0.6), "npu"),
    # Gemm / MatMul
    "gemm_transB": OpCase(gemm(10, trans_b=1), "npu", channels=12),
    "gemm_plain": OpCase(gemm(10), "npu", channels=12),
    "gemm_transA": OpCase(gemm(10, trans_a=1), "npu", channels=12),
    "gemm_alpha_beta": OpCase(gemm(10, trans_b=1, alpha=0.5, beta=2.0), "npu", channels=12),
    "gemm_transA_alpha_beta": OpCase(gemm(13, trans_a=1, trans_b=1, alpha=1.7, beta=0.3), "npu", channels=12),
    "gemm_alpha_no_bias": OpCase(gemm(9, alpha=2.5, bias=False), "npu", channels=12),
    "matmul_weight": OpCase(matmul_weight(20), "npu", stem="matmul", channels=16, hw=(6, 0)),
    "matmul_heads": OpCase(attention(2), "npu", stem="matmul", channels=16, hw=(10, 0)),
    # activations, residuals
    "relu": OpCase(unary("Relu"), "host", stem="matmul", channels=16, hw=(6, 0)),
    "add_relu": OpCase(residual("Add", 2, relu=True), "npu"),
    "add": OpCase(residual("Add", 2, relu=False), "npu"),
    "sum3": OpCase(residual("Sum", 3, relu=False), "npu", head=True),
    # pooling
    "maxpool_3x3_s2": OpCase(unary("MaxPool", kernel_shape=[3, 3], strides=[2, 2]), "host"),
    "maxpool_pads_ceil": OpCase(unary("MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                      ceil_mode=1), "host"),
    # an average of 4 (or 6) int8 values often ends in exactly .5: the host rounds the exact
    # average half to even, onnxruntime's QLinearAveragePool the float32 one, whose rounding
    # error decides such ties either way
    "avgpool_2x2": OpCase(unary("AveragePool", kernel_shape=[2, 2], strides=[2, 2]), "host", max_lsb=1),
    "avgpool_pads_exclude": OpCase(unary("AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                                   "host", max_lsb=1),
    "avgpool_pads_include": OpCase(unary("AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                         count_include_pad=1), "host"),
    "avgpool_ceil": OpCase(unary("AveragePool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), "host"),
    "global_avgpool": OpCase(unary("GlobalAveragePool"), "host"),
    # data movement
    "concat": OpCase(concat(with_stem=True), "host"),
    "concat_branches": OpCase(concat(with_stem=False), "host"),
    "concat_conv_and_pool": OpCase(concat_conv_and_pool(), "host", max_lsb=1),  # the pool's ties (above)
    "reshape": OpCase(layout("Reshape"), "host"),
    "flatten": OpCase(layout("Flatten", axis=1), "host"),
    "transpose": OpCase(layout("Transpose", perm=[0, 2, 3, 1]), "host"),
    # float operators on the host
    "lrn": OpCase(unary("LRN", size=5, alpha=1e-4, beta=0.75, bias=1.0), "host", head=True),
    "softmax": OpCase(unary("Softmax", axis=-1), "host", stem="matmul", channels=16, hw=(6, 0)),
    "layernorm": OpCase(layernorm(), "host", stem="matmul", channels=16, hw=(6, 0), head=True, opset=17),
    "gelu_erf_form": OpCase(gelu_erf(), "host", stem="matmul", channels=16, hw=(6, 0)),
    "gelu": OpCase(unary("Gelu"), "host", stem="matmul", channels=16, hw=(6, 0), head=True, opset=20),
    "div_const": OpCase(scale_by("Div", 4.0), "host", stem="matmul", channels=16, hw=(6, 0), head=True),
    "mul_const": OpCase(scale_by("Mul", 0.3), "host", stem="matmul", channels=16, hw=(6, 0), head=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_against_onnxruntime(name: str, tmp_path: Path) -> None:
    """With the nonlinear operators on the host (``nonlinear="host"``): onnxruntime's arithmetic."""
    case = CASES[name]
    cn = compile_onnx(build(case, tmp_path / f"{name}.onnx"), nonlinear="host")
    steps = {s.name: s for s in cn.net.steps}
    assert "op" in steps, f"the node under test was fused away or not found: {sorted(steps)}"
    assert steps["op"].where == case.where, steps["op"].reason
    r = run_network(cn, extra_seeds=2)  # raises NetworkVerificationError unless bit-exact (check a)
    assert r["verified"] is True and r["inputs_compared"] == 3
    q, f = r["ort_quantized"], r["ort_float"]
    assert q["max_abs_lsb"] <= case.max_lsb, q
    assert q["within_1lsb_fraction"] >= 0.99, q
    assert f["cosine"] >= case.min_cosine, f


#: The cases a nonlinear lowering takes (``nonlinear="npu"``): the op's step kind, or None where it folds into
#: the matmul before it.
LOWERED = {"relu": "lut", "softmax": "softmax", "layernorm": "norm", "gelu": "lut", "gelu_erf_form": None,
           "div_const": None, "mul_const": None}


@pytest.mark.parametrize("name", sorted(LOWERED))
def test_op_lowered_to_the_accelerator(name: str, tmp_path: Path) -> None:
    """With the nonlinear lowerings (the default): the op on the accelerator, bit-exact against its integer
    reference (check a), within a few LSB of onnxruntime (whose float operators and two roundings around a
    folded bias differ from the integer programs) and as close to the float model."""
    case = CASES[name]
    cn = compile_onnx(build(case, tmp_path / f"{name}.onnx"))
    steps = {s.name: s for s in cn.net.steps}
    if LOWERED[name] is None:
        assert "op" not in steps and all(s.where == "npu" for s in cn.net.steps if s.op not in
                                         ("QuantizeLinear", "DequantizeLinear"))
    else:
        assert steps["op"].kind == LOWERED[name] and steps["op"].where == "npu", steps["op"].reason
    r = run_network(cn, extra_seeds=2)
    assert r["verified"] is True
    q, f = r["ort_quantized"], r["ort_float"]
    assert q["max_abs_lsb"] <= 3 and q["within_1lsb_fraction"] >= 0.95, q
    assert f["cosine"] >= case.min_cosine, f


def test_groups_per_program_packs_whole_groups_into_one_reduction_tile() -> None:
    from tinynpu.compiler.onnx.lower.programs import groups_per_program

    assert groups_per_program(240, 1, 16) == 16  # depthwise: 16 channels, one per lane
    assert groups_per_program(40, 1, 16) == 10  # the largest divisor of the group count that fits
    assert groups_per_program(4, 6, 16) == 2
    assert groups_per_program(3, 60, 16) == 1  # one group already fills the tile
    assert groups_per_program(7, 3, 16) == 1  # 7 is prime and 7 groups of 3 do not fit


def test_block_diagonal_kernel_is_the_grouped_conv() -> None:
    from tinynpu.compiler.onnx.intops import conv_int32_general
    from tinynpu.compiler.onnx.lower.programs import block_diagonal

    rng = np.random.default_rng(3)
    groups, c_per, k_per = 6, 2, 3
    x = rng.integers(-128, 128, size=(1, 5, 6, groups * c_per), dtype=np.int8)
    w = rng.integers(-128, 128, size=(groups * k_per, 3, 3, c_per), dtype=np.int8)
    args = ((1, 1, 1, 1), (1, 1), (1, 1))
    want = np.concatenate([conv_int32_general(x[..., g * c_per:(g + 1) * c_per], w[g * k_per:(g + 1) * k_per], *args)
                           for g in range(groups)], axis=3)
    for i in range(2):  # 2 programs of 3 groups each
        packed = block_diagonal(w, groups, 3, i)
        assert packed.shape == (9, 3, 3, 6) and np.count_nonzero(packed[:3, :, :, 2:]) == 0
        got = conv_int32_general(x[..., i * 6:(i + 1) * 6], packed, *args)
        np.testing.assert_array_equal(got, want[..., i * 9:(i + 1) * 9])


def test_depthwise_utilization_is_reported_against_its_real_macs(tmp_path: Path) -> None:
    # 40 channels, depthwise 3x3 on 9x11 (pads 0,1,2,1: P = 9, Q = 11): 10 groups per program, 4 programs.
    cn = compile_onnx(build(CASES["conv_depthwise_40ch_pads"], tmp_path / "dw.onnx"))
    r = run_network(cn)
    layer = next(e for e in r["layers"] if e["name"] == "op")
    assert layer["where"] == "npu" and layer["programs"] == 4
    assert layer["macs"] == 9 * 11 * 40 * 9  # the layer's own MACs, not the zeros of the packed kernel
    # 10 channels in a program: the rowpack layout lays 9 taps x 10 channels = 90 lanes into 6 tiles (96), where
    # direct would zero-fill 6 of 16 lanes at each of 9 taps (144); output channels pad 10 -> 16
    issued = 4 * round_up(99, 16) * 16 * round_up(9 * 10, 16)
    assert layer["padding_ceiling"] == pytest.approx(layer["macs"] / issued, rel=1e-12)
    assert "10 groups per program" in layer["note"]


@pytest.mark.parametrize("name", sorted(n for n in CASES if "avgpool" in n))
def test_every_average_pool_is_an_integer_step(name: str, tmp_path: Path) -> None:
    """Padded, ceil-mode and include-pad averages too: window sums over per-window counts, exact and
    fast, not the float ONNX operator (onnx.reference's pooling is a Python loop)."""
    cn = compile_onnx(build(CASES[name], tmp_path / f"{name}.onnx"))
    assert next(s for s in cn.net.steps if s.name == "op").kind == "avgpool"


@pytest.mark.parametrize(("name", "kind"), [("concat_branches", "concat"), ("concat", "onnx")])
def test_a_concat_of_inputs_at_its_scale_copies_int8(name: str, kind: str, tmp_path: Path) -> None:
    """The quantizer gives each input read only by the Concat the Concat's scale (TFLite's rule for a
    concatenation): the join copies int8 values; an input at another scale is requantized (float op)."""
    cn = compile_onnx(build(CASES[name], tmp_path / f"{name}.onnx"))
    step = next(s for s in cn.net.steps if s.name == "op")
    assert step.kind == kind
    if kind == "concat":  # every input is a branch's int8 output, at the concat output's scale
        producer = {o: n for n in cn.qmodel.graph.node for o in n.output}
        out_scale = cn.net.qparams[step.outputs[0]].s
        assert all(producer[i].op_type == "QuantizeLinear" and cn.net.qparams[i].s == out_scale
                   for i in step.inputs)


@pytest.mark.parametrize(("name", "in_place"), [("concat_branches", ["ra", "rb"]),
                                                 ("concat_conv_and_pool", ["ra"]), ("concat", [])])
def test_conv_branches_store_into_their_slice_of_the_join(name: str, in_place: list[str], tmp_path: Path) -> None:
    """A conv the concatenation alone reads stores each pixel's channels at their offset in the joined
    buffer (its `store` stride the joined pixel); the join copies only the other inputs."""
    cn = compile_onnx(build(CASES[name], tmp_path / f"{name}.onnx"))
    producer = {o: s.name for s in cn.net.steps for o in s.outputs}
    assert sorted(producer[sl.name].replace("branch_", "r") for sl in cn.memory.slices) == in_place
    r = run_network(cn)  # bit-exact: every slice read back from where its program stored it
    if in_place:  # the join's traffic: the inputs it copied in, read and written
        join = next(e for e in r["layers"] if e["name"] == "op")
        inputs = next(s for s in cn.net.steps if s.name == "op").inputs
        copied = [i for i in inputs if cn.image.slice_of(i) is None]
        assert join["host_bytes"] == sum(2 * int(np.prod(cn.net.shapes[i])) for i in copied)
        assert join["note"].startswith(f"joined in place: {len(in_place)} of its {len(inputs)} inputs")


def test_a_slice_stored_without_its_pitch_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Relocated without the pitch, a branch's program writes its channels back to back over the other
    branch's: the run's bit-exact check names the layer."""
    from tinynpu.compiler.onnx.runtime.image import DramImage
    from tinynpu.compiler.onnx.verify.checks import NetworkVerificationError

    real = DramImage.program

    def unpitched(self, key, program, bases, pitches=None):  # type: ignore[no-untyped-def]
        return real(self, key, program, bases, None)

    cn = compile_onnx(build(CASES["concat_branches"], tmp_path / "join.onnx"))
    monkeypatch.setattr(DramImage, "program", unpitched)
    with pytest.raises(NetworkVerificationError, match="branch_"):
        run_network(cn)


@pytest.mark.parametrize("name", ["reshape", "flatten", "transpose"])
def test_data_movement_at_one_scale_moves_int8(name: str, tmp_path: Path) -> None:
    """Between a DequantizeLinear and a QuantizeLinear of one scale, a reshape or transpose runs on the
    int8 values themselves: one host step, no float copy."""
    cn = compile_onnx(build(CASES[name], tmp_path / f"{name}.onnx"))
    step = next(s for s in cn.net.steps if s.name == "op")
    assert step.kind == "move" and step.inputs[0] in cn.net.qparams
    assert run_network(cn)["ort_quantized"]["equal_fraction"] == 1.0

