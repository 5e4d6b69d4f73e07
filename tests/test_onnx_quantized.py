"""Models that arrive quantized, taken as they are: QDQ, QOperator, and MatMulInteger/ConvInteger graphs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import save, small_cnn  # noqa: E402

from tinynpu.compiler.onnx import compile_onnx, run_network  # noqa: E402


def _quantize_static(src: Path, dst: Path, fmt: str) -> Path:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            rng = np.random.default_rng(7)
            self._it = iter([{"x": rng.standard_normal((1, 3, 20, 20)).astype(np.float32)} for _ in range(4)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

    quantize_static(str(src), str(dst), Reader(), quant_format=getattr(QuantFormat, fmt), per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
    return dst


@pytest.mark.parametrize("fmt", ["QOperator", "QDQ"])
def test_statically_quantized_model_is_taken_as_it_is(fmt: str, tmp_path: Path) -> None:
    import onnx

    path = _quantize_static(small_cnn(tmp_path / "cnn.onnx"), tmp_path / f"cnn.{fmt}.onnx", fmt)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert ("QLinearConv" in ops) == (fmt == "QOperator")
    cn = compile_onnx(path)
    assert not cn.quantized_here
    assert any("QOperator" in note for note in cn.imported.notes) == (fmt == "QOperator")
    convs = [s for s in cn.net.steps if s.op == "Conv"]
    assert len(convs) == 3 and all(s.where == "npu" for s in convs)
    assert any(s.op == "Gemm" and s.where == "npu" for s in cn.net.steps)
    r = run_network(cn, extra_seeds=2)  # bit-exact with the integer reference, or it raises
    q = r["ort_quantized"]
    # onnxruntime runs the file itself (QLinearConv kernels for QOperator): within one LSB everywhere
    assert r["verified"] and q["max_abs_lsb"] <= 1 and q["top1_agree"] == 1.0, q


def _integer_graph(path: Path, op: str) -> Path:
    """x -> QuantizeLinear -> MatMulInteger/ConvInteger (int8 weights) -> Cast -> Mul(scales) -> Q -> DQ."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    if op == "MatMulInteger":
        x_shape, w = [6, 24], rng.integers(-127, 128, size=(24, 10)).astype(np.int8)
        x_dtype, zp = np.int8, np.int8(0)
        out_shape = [6, 10]
    else:  # onnxruntime's ConvInteger takes uint8
        x_shape, w = [1, 4, 7, 9], rng.integers(0, 256, size=(6, 4, 3, 3)).astype(np.uint8)
        x_dtype, zp = np.uint8, np.uint8(128)
        out_shape = [1, 6, 5, 7]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(zp, x_dtype), "xz"),
             numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
             numpy_helper.from_array(np.array(zp, x_dtype), "wz"),
             numpy_helper.from_array(np.array(0.05 * 0.01, np.float32), "acc_scale"),
             numpy_helper.from_array(np.array(0.1, np.float32), "ys"),
             numpy_helper.from_array(np.array(0, np.int8), "yz")]
    mk = helper.make_node
    nodes = [mk("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="quantize_x"),
             mk(op, ["xq", "w", "xz", "wz"], ["acc"], name="op"),
             mk("Cast", ["acc"], ["accf"], name="to_float", to=TensorProto.FLOAT),
             mk("Mul", ["accf", "acc_scale"], ["yf"], name="rescale"),
             mk("QuantizeLinear", ["yf", "ys", "yz"], ["yq"], name="quantize_y"),
             mk("DequantizeLinear", ["yq", "ys", "yz"], ["y"], name="dequantize_y")]
    return save(path, nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])


@pytest.mark.parametrize("op", ["MatMulInteger", "ConvInteger"])
def test_integer_operators_are_taken_as_they_are(op: str, tmp_path: Path) -> None:
    cn = compile_onnx(_integer_graph(tmp_path / f"{op}.onnx", op))
    assert not cn.quantized_here
    assert any("QOperator" in note for note in cn.imported.notes)
    r = run_network(cn, extra_seeds=2)
    q: dict[str, Any] = r["ort_quantized"]
    assert r["verified"] and q["max_abs_lsb"] == 0, q
