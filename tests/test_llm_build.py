"""Building a decoder step's network: the nonlinear segment matcher's cost grows with the graph, not with its
square (a GPT-2-small decode step's graph has ~2,000 nodes and ~500 candidate segments)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from tinynpu.compiler.onnx.frontend import qdq  # noqa: E402
from tinynpu.compiler.onnx.ir import LutStep  # noqa: E402


def _chain(count: int) -> Any:
    """``count`` table segments in a row, each ``int8 -> DQ -> Mul(0.5) -> Tanh -> Q -> int8``, a Transpose of
    the int8 codes (not elementwise, so on the host) between one and the next."""
    inits = [helper.make_tensor("s", TensorProto.FLOAT, [], [0.05]), helper.make_tensor("z", TensorProto.INT8, [], [0]),
             helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q0"])]
    for i in range(count):
        nodes += [helper.make_node("Transpose", [f"q{i}"], [f"p{i}"], perm=[1, 0]),
                  helper.make_node("DequantizeLinear", [f"p{i}", "s", "z"], [f"d{i}"]),
                  helper.make_node("Mul", [f"d{i}", "half"], [f"m{i}"]),
                  helper.make_node("Tanh", [f"m{i}"], [f"t{i}"]),
                  helper.make_node("QuantizeLinear", [f"t{i}", "s", "z"], [f"q{i + 1}"])]
    nodes.append(helper.make_node("DequantizeLinear", [f"q{count}", "s", "z"], ["y"]))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class _CountingList(list):  # type: ignore[type-arg]
    """A list that counts the items every pass over it visits."""

    visited = 0

    def __iter__(self) -> Any:
        for item in super().__iter__():
            _CountingList.visited += 1
            yield item


def _nodes_visited(count: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list[LutStep]]:
    """How many graph nodes the passes over the node list visit while building ``_chain(count)``, and the
    table steps found."""
    init = qdq.QdqGraph.__init__

    def counted(self: qdq.QdqGraph, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.nodes = _CountingList(self.nodes)

    monkeypatch.setattr(qdq.QdqGraph, "__init__", counted)
    _CountingList.visited = 0
    net = qdq.build_network(_chain(count))
    return _CountingList.visited, [s for s in net.steps if isinstance(s, LutStep)]


def test_segment_matching_is_linear_in_the_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    small, small_luts = _nodes_visited(8, monkeypatch)
    large, large_luts = _nodes_visited(64, monkeypatch)
    assert len(small_luts) == 8 and len(large_luts) == 64  # every segment still one table
    # a pass over the whole graph per segment visited ~64x more nodes for 8x the graph
    assert large <= 10 * small, (small, large)


def test_chained_tables_are_the_host_path() -> None:
    """The tables the matcher builds equal the float chain rounded at each segment's own scale."""
    net = qdq.build_network(_chain(3))
    codes = np.arange(-128, 128)
    want = np.clip(np.rint(np.tanh(codes * 0.05 * 0.5) / 0.05), -128, 127)
    for step in (s for s in net.steps if isinstance(s, LutStep)):
        assert np.array_equal(step.table, want)


@pytest.mark.parametrize("generate", [1, 3])
def test_ranges_measured_in_the_float_run_are_the_calibrators(generate: int) -> None:
    """Ranges measured while the float model decodes (no calibration session), written by tinynpu's QDQ writer,
    give exactly the model onnxruntime's own calibrator and quantizer give on the same steps; the float model is
    left as it was."""
    pytest.importorskip("onnxruntime")
    from tinynpu.compiler.onnx.frontend.calibration import MinMaxRanges, calibrated_tensors
    from tinynpu.compiler.onnx.frontend.quantize import (
        align_activation_scales,
        align_concat_scales,
        prepare,
        quantize,
        quantize_static,
    )
    from tinynpu.compiler.onnx.llm.compile import ort_greedy, seeded_prompt
    from tinynpu.compiler.onnx.llm.decoder import TINY, build_decoder
    from tinynpu.compiler.onnx.llm.interface import read_interface

    model = build_decoder(TINY)
    before = model.SerializeToString()
    itf = read_interface(model, "tiny")
    ranges = MinMaxRanges(calibrated_tensors(model))
    _, trajectory = ort_greedy(model, itf, seeded_prompt(itf, 5, 0), generate, ranges)
    assert "past_key_values.0.key" in ranges.names  # the cache is calibrated, empty at the prompt's step
    own = quantize(model, trajectory, ranges.ranges())
    split, excluded = prepare(model, trajectory, None)
    theirs = quantize_static(split, excluded, calibration=trajectory)  # onnxruntime's calibrator and quantizer
    align_concat_scales(theirs)
    align_activation_scales(theirs)
    assert own.SerializeToString() == theirs.SerializeToString()
    assert model.SerializeToString() == before  # saving for the quantizer rewrote nothing of the caller's
