"""The model-zoo networks of the onnx wheel end to end (slow): bit-exact, and agreeing with onnxruntime."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50", "squeezenet", "bvlc_alexnet"])
def test_zoo_network(name: str) -> None:
    from tinynpu.compiler.onnx.bench import bench_model

    r = bench_model(name, inputs=2)
    assert r["verified"] is True
    q = r["ort_quantized"]
    assert q["top1_agree"] == 1.0 and q["max_abs_lsb"] <= 3 and q["within_1lsb_fraction"] >= 0.95
    assert r["ort_float"]["cosine"] > 0.99
    assert r["npu_layers"] >= 8 and 0 < r["util_over_ceiling"] <= 1
    mem = r["memory"]
    assert mem["liveness_lower_bound_bytes"] <= mem["activation_peak_bytes"]
