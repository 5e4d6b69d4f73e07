"""Small ONNX graphs built with onnx.helper for the ONNX tests (seeded weights)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _init(name: str, arr: np.ndarray):  # type: ignore[no-untyped-def]
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name)


def save(path: Path, nodes: list, inits: list, inputs: list, outputs: list, *, opset: int = 13) -> Path:  # type: ignore[type-arg]
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def small_cnn(path: Path, *, seed: int = 0, batch: int | str = 1) -> Path:
    """conv(3->8, 3x3 pad 1) relu, maxpool 2, conv(8->16, 3x3 stride 2) relu, residual-free GAP, gemm 10, softmax."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], name="conv3", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c3", "r2"], ["s3"], name="residual"),
        helper.make_node("Relu", ["s3"], ["r3"], name="relu3"),
        helper.make_node("GlobalAveragePool", ["r3"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w4", "b4"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=1),
    ]
    inits = [_init("w1", rng.normal(size=(8, 3, 3, 3)) * 0.3), _init("b1", rng.normal(size=8) * 0.1),
             _init("w2", rng.normal(size=(16, 8, 3, 3)) * 0.15), _init("b2", rng.normal(size=16) * 0.1),
             _init("w3", rng.normal(size=(16, 16, 3, 3)) * 0.1), _init("b3", rng.normal(size=16) * 0.1),
             _init("w4", rng.normal(size=(10, 16)) * 0.3), _init("b4", rng.normal(size=10) * 0.1)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 20, 20])
    y = helper.make_tensor_value_info("prob", TensorProto.FLOAT, [batch, 10])
    return save(path, nodes, inits, [x], [y])


def tiny_decoder(path: Path, *, seed: int = 0) -> Path:
    """The LLM tests' decoder: 2 layers, hidden 64, 2 heads, vocabulary 100, 64 learned positions, with past
    keys and values (built by tinynpu.compiler.onnx.llm.decoder, which the benchmark uses too)."""
    import onnx

    from tinynpu.compiler.onnx.llm.decoder import TINY, build_decoder

    onnx.save(build_decoder(TINY, seed), str(path))
    return path
