"""tinynpu's QDQ writer against onnxruntime's ``quantize_static``: the same model, node for node and bit for bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tinynpu.compiler.onnx.frontend.calibration import MinMaxRanges, calibrated_tensors, measure_ranges  # noqa: E402
from tinynpu.compiler.onnx.frontend.qdq_rules import RULES, WriterDeclines  # noqa: E402
from tinynpu.compiler.onnx.frontend.qdq_write import Params, quantize_weight, symmetric_scale, write_qdq  # noqa: E402
from tinynpu.compiler.onnx.frontend.quantize import prepare, quantize, quantize_static  # noqa: E402
from tinynpu.errors import OnnxError  # noqa: E402

MODELS = Path(__file__).parent / "models"


def differences(mine: Any, theirs: Any) -> list[str]:
    """Where two models differ: nodes (each serialized, in order), initializers (name, type, shape, bytes, in
    order), inputs, outputs, value infos, producer, metadata, opsets."""
    out = []
    a, b = [n.SerializeToString() for n in mine.graph.node], [n.SerializeToString() for n in theirs.graph.node]
    if a != b:
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        out.append(f"nodes ({len(a)} vs {len(b)}) from #{at}")

    def inits(m: Any) -> list[tuple[str, int, tuple[int, ...], bytes]]:
        return [(t.name, t.data_type, tuple(t.dims), numpy_helper.to_array(t).tobytes()) for t in m.graph.initializer]

    x, y = inits(mine), inits(theirs)
    if x != y:
        at = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
        out.append(f"initializers ({len(x)} vs {len(y)}) from #{at}")
    for field in ("input", "output", "value_info"):
        if [v.SerializeToString() for v in getattr(mine.graph, field)] != \
                [v.SerializeToString() for v in getattr(theirs.graph, field)]:
            out.append(field)
    for field in ("producer_name", "producer_version", "ir_version", "metadata_props", "opset_import"):
        if getattr(mine, field) != getattr(theirs, field):
            out.append(field)
    return out


def _decoder_case(shape: Any) -> tuple[Any, list[str], dict[str, tuple[np.ndarray, np.ndarray]]]:
    from tinynpu.compiler.onnx.llm.compile import ort_greedy, seeded_prompt
    from tinynpu.compiler.onnx.llm.decoder import build_decoder
    from tinynpu.compiler.onnx.llm.interface import read_interface

    model = build_decoder(shape)
    itf = read_interface(model, "decoder")
    ranges = MinMaxRanges(calibrated_tensors(model))
    _, trajectory = ort_greedy(model, itf, seeded_prompt(itf, 5, 0), 3, ranges)
    model, excluded = prepare(model, trajectory, ranges.ranges())
    return model, excluded, ranges.ranges()


@pytest.mark.parametrize("name", ["TINY", "TINY_GQA", "TINY_LLAMA"])
def test_tiny_decoders_are_written_as_onnxruntime_writes_them(name: str) -> None:
    """The LLM path: ranges from the float run, the writer's model equals quantize_static's with that cache."""
    from tinynpu.compiler.onnx.llm import decoder

    model, excluded, ranges = _decoder_case(getattr(decoder, name))
    before = model.SerializeToString()
    mine = write_qdq(model, ranges, excluded)
    assert differences(mine, quantize_static(model, excluded, ranges=ranges)) == []
    assert model.SerializeToString() == before  # the float model is left as it was


def _imported(path: Path) -> Any:
    from tinynpu.compiler.onnx.frontend.importer import import_model

    return import_model(path, batch=1).model


def _samples(model: Any, count: int = 3) -> list[dict[str, np.ndarray]]:
    from tinynpu.compiler.onnx.frontend.importer import seeded_inputs

    return [seeded_inputs(model, 1000 + i) for i in range(count)]


QUICK = ["bert_eager", "gpt2_past", "llama", "mobilenet_v3_small", "vit_hf"]
REST = ["bert_sdpa", "bert_sdpa.legacy", "bert_sdpa.op17", "gpt2_eager", "gpt2_eager.legacy", "gpt2_sdpa",
        "gpt2_sdpa.legacy", "llama_past", "vit_hf.legacy", "vit_torchvision"]


@pytest.mark.parametrize("name", QUICK + [pytest.param(n, marks=pytest.mark.slow) for n in REST])
def test_committed_exports_quantize_as_onnxruntime_does(name: str) -> None:
    """The `run onnx` path on the committed exports (the class-token split, masks and rotary left float, ranges
    measured in one float session): the model equals the one quantize_static writes with its own calibrator.
    bert_eager shares one zero bias among its LayerNorms and reads it as a weight too (bias copies, a bias
    quantized as a weight)."""
    from tinynpu.compiler.onnx.frontend.quantize import align_activation_scales, align_concat_scales

    model = _imported(MODELS / f"{name}.onnx")
    samples = _samples(model)
    mine = quantize(model, samples)
    split, excluded = prepare(model, samples, None)
    theirs = quantize_static(split, excluded, calibration=samples)
    align_concat_scales(theirs)
    align_activation_scales(theirs)
    assert differences(mine, theirs) == []


def _model(nodes: list[Any], inits: dict[str, np.ndarray], inputs: list[Any], outputs: list[Any],
           opset: int = 13) -> Any:
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(v.astype(np.float32) if v.dtype == np.float64 else v, k)
                               for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _rules_graph() -> Any:
    """One graph through the rarer rules: a Gemm with beta and a bias the int32 range forces a larger weight
    scale on, a bias two Convs share (copies), Relu/Clip range adjustments, Pad with a constant 0, Split,
    Where, Gather of a float table, MatMul with a constant left operand, a scalar constant operand, a
    LayerNormalization, Softmax as a graph output read again, an excluded node."""
    rng = np.random.default_rng(5)
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"], name="clip2"),
        helper.make_node("Pad", ["r2", "pads"], ["p2"], name="pad", mode="constant"),
        helper.make_node("Split", ["p2"], ["s1", "s2"], name="split", axis=1),
        helper.make_node("Add", ["s1", "s2"], ["a"], name="add"),
        helper.make_node("Flatten", ["a"], ["fl"], name="flatten"),
        helper.make_node("Gemm", ["fl", "wg", "bg"], ["g"], name="gemm", transB=1, beta=0.5),
        helper.make_node("Greater", ["g", "zero"], ["cond"], name="greater"),
        helper.make_node("Where", ["cond", "g", "g2"], ["wh"], name="where"),
        helper.make_node("Mul", ["g", "two"], ["g2"], name="mul_excluded"),
        helper.make_node("Gather", ["table", "ids"], ["emb"], name="gather", axis=0),
        helper.make_node("MatMul", ["wl", "emb"], ["ml"], name="matmul_left"),
        helper.make_node("Mul", ["ml", "three"], ["ml3"], name="mul_scalar"),
        helper.make_node("LayerNormalization", ["wh", "ln_s", "ln_b"], ["ln"], name="norm", axis=-1),
        helper.make_node("Softmax", ["ln"], ["prob"], name="softmax", axis=-1),
        helper.make_node("Identity", ["prob"], ["prob_again"], name="identity"),
    ]
    inits = {"w1": rng.normal(size=(4, 2, 3, 3)) * 0.2, "w2": rng.normal(size=(4, 4, 3, 3)) * 0.2,
             "b": rng.normal(size=4) * 0.1, "lo": np.array(0.0), "hi": np.array(6.0),
             "pads": np.array([0, 0, 0, 0, 0, 0, 0, 0], np.int64),
             "wg": rng.normal(size=(6, 8)) * 1e-6, "bg": np.array([1e6, -3e5, 2.0, 0.0, 7.0, 1.0]),
             "zero": np.array(0.0), "two": np.array(2.0), "three": np.array(3.0), "table": rng.normal(size=(5, 6)),
             "ids": np.array([1, 3], np.int64), "wl": rng.normal(size=(3, 2)),
             "ln_s": rng.normal(size=6), "ln_b": rng.normal(size=6)}
    x = helper.make_tensor_value_info("x", f, [1, 2, 2, 2])
    outs = [helper.make_tensor_value_info(n, f, None) for n in ("prob", "prob_again", "ml", "ml3")]
    return _model(nodes, inits, [x], outs)


def test_rarer_rules_are_written_as_onnxruntime_writes_them() -> None:
    model = _rules_graph()
    samples = [{"x": np.random.default_rng(i).standard_normal((1, 2, 2, 2)).astype(np.float32)} for i in range(3)]
    ranges = measure_ranges(model, samples)
    mine = write_qdq(model, ranges, ["mul_excluded"])
    theirs = quantize_static(model, ["mul_excluded"], calibration=samples)
    assert differences(mine, theirs) == []
    scale = {t.name: numpy_helper.to_array(t) for t in mine.graph.initializer}
    # the bias 1e6 at input scale x 1e-6/127 would overflow int32: the weight's scale was raised for it
    assert scale["wg_scale"][0] > 1e-4
    assert "b0_quantized" in scale  # the second Conv's copy of the shared bias


def test_written_model_runs_in_onnxruntime_as_quantize_statics_does() -> None:
    """onnxruntime loads and runs the writer's model (the comparison runs use it), with the outputs of
    quantize_static's."""
    import onnxruntime as ort

    from tinynpu.compiler.onnx.llm.decoder import TINY

    model, excluded, ranges = _decoder_case(TINY)
    feeds = {"input_ids": np.array([[3, 1, 4]], np.int64)}
    got = []
    for q in (write_qdq(model, ranges, excluded), quantize_static(model, excluded, ranges=ranges)):
        s = ort.InferenceSession(q.SerializeToString(), providers=["CPUExecutionProvider"])
        inputs = {i.name: feeds.get(i.name, np.zeros([d if isinstance(d, int) else 0 for d in i.shape],
                                                     np.float32 if "float" in i.type else np.int64))
                  for i in s.get_inputs()}
        if "attention_mask" in inputs:
            inputs["attention_mask"] = np.ones((1, 3), np.int64)
        got.append(s.run(None, inputs)[0])
    assert np.array_equal(got[0], got[1])


def test_scales_and_integers_are_onnxruntimes_on_edge_values() -> None:
    """The vectorized arithmetic against onnxruntime's own functions: zero and subnormal ranges, one-sided
    ranges, an empty tensor's (inf, -inf), halves that round to even, values past the range."""
    from onnxruntime.quantization.quant_utils import compute_scale_zp, quantize_nparray

    tiny = np.finfo(np.float32).tiny
    lows = np.array([0, -1e-3, 2.0, -5.0, np.inf, -tiny, -3e-38, -127.0], np.float32)
    highs = np.array([0, 1e-3, 3.0, -1.0, -np.inf, tiny, 0, 127.0], np.float32)
    mine = symmetric_scale(lows, highs)
    for lo, hi, s in zip(lows, highs, mine, strict=True):
        zp, scale = compute_scale_zp(np.array(lo), np.array(hi), np.array(-127, np.int8), np.array(127, np.int8), True)
        assert int(zp) == 0 and np.float32(scale).tobytes() == np.float32(s).tobytes(), (lo, hi)
    data = np.array([[0.5, 1.5, -2.5, 300.0], [-0.5, 2.5, 1e-9, -1e9], [0, 0, 0, 0]], np.float32)
    scales = np.array([1.0, 1.0, 1.0], np.float32)
    q = quantize_weight(data, Params(scales, 0))
    for row, s, got in zip(data, scales, q, strict=True):
        assert np.array_equal(quantize_nparray(TensorProto.INT8, row, s, np.array(0, np.int8)), got)
    assert q.tolist()[0] == [0, 2, -2, 127]


def test_operator_table_is_onnxruntimes() -> None:
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    assert set(RULES) == set(QLinearOpsRegistry) | set(QDQRegistry)


@pytest.mark.parametrize("case", ["float16", "opset12", "quantized"])
def test_writer_declines_and_quantize_falls_back_saying_so(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A float16 weight, an opset before 13, a model with Q/DQ nodes: the writer declines, naming why;
    quantize() then uses quantize_static and says so."""
    f = TensorProto.FLOAT16 if case == "float16" else TensorProto.FLOAT
    dtype = np.float16 if case == "float16" else np.float32
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    inits = {"w": np.arange(6, dtype=dtype).reshape(2, 3)}
    if case == "quantized":
        nodes = [helper.make_node("QuantizeLinear", ["x", "s"], ["xq"], name="q"),
                 helper.make_node("DequantizeLinear", ["xq", "s"], ["xd"], name="dq"),
                 helper.make_node("MatMul", ["xd", "w"], ["y"], name="mm")]
        inits["s"] = np.array(0.1, np.float32)
    model = _model(nodes, inits, [helper.make_tensor_value_info("x", f, [1, 2])],
                   [helper.make_tensor_value_info("y", f, [1, 3])], opset=12 if case == "opset12" else 13)
    samples = [{"x": np.ones((1, 2), dtype)}]
    with pytest.raises(WriterDeclines) as why:
        write_qdq(model, measure_ranges(model, samples), [])
    assert {"float16": "float16", "opset12": "opset is 12", "quantized": "quantized already"}[case] in str(why.value)
    if case == "opset12":  # (a quantized model is taken as it is; quantize() is not called on it)
        q = quantize(model, samples)
        assert any(n.op_type == "DequantizeLinear" for n in q.graph.node)
        assert "quantize_static" in capsys.readouterr().err


def test_a_tensor_without_a_range_is_refused_by_name() -> None:
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], {"w": np.ones((2, 3))},
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
    ranges = measure_ranges(model, [{"x": np.ones((1, 2), np.float32)}])
    del ranges["y"]
    with pytest.raises(OnnxError, match="tensor 'y' is to be quantized but has no calibrated range"):
        write_qdq(model, ranges, [])


def test_quantize_benchmark_reports_both_quantizers_and_equal_models() -> None:
    from tinynpu.compiler.onnx.bench_quantize import run

    result = run("tiny", 4, 1, 1)
    assert result["equal"] is True
    assert result["writer"][0]["seconds"] > 0 and result["quantize_static"][0]["seconds"] > 0
    assert result["ratio_best"] == pytest.approx(result["writer"][0]["seconds"]
                                                 / result["quantize_static"][0]["seconds"], rel=0.01)
