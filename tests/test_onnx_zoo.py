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
    assert q["top1_agree"] == 1.0 and q["max_abs_lsb"] <= 1 and q["within_1lsb_fraction"] >= 0.99
    assert r["ort_float"]["cosine"] > 0.99
    assert r["npu_layers"] >= 8 and 0 < r["util_over_ceiling"] <= 1
    mem = r["memory"]
    assert mem["liveness_lower_bound_bytes"] <= mem["activation_peak_bytes"]


#: The other CNNs of the folder: (name, config, least fraction of logits within 1 LSB of onnxruntime int8).
#: ZFNet-512 and VGG-19 need more DRAM than the default 64 MiB (87 MB and 143 MB of int8 weights).
#: Every conv and gemm equals onnxruntime's integer kernel; what differs comes from the layers both
#: compute in float between DequantizeLinear and QuantizeLinear, whose float32 arithmetic rounds
#: apart at rare ties (Inception-v1: its LRNs, 617 of 140 K outputs of the second, and a padded
#: average pool, 6 of 2,048), compounding with depth (compiler/onnx/verify/origins.py finds them).
OTHER_CNNS = [("densenet121", "default", 0.99), ("inception_v1", "default", 0.95),
              ("inception_v2", "default", 0.99), ("shufflenet", "default", 0.99),
              ("zfnet512", "dram256", 0.99), ("vgg19", "dram256", 0.99)]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "config", "within_1lsb"), OTHER_CNNS)
def test_other_zoo_cnn(name: str, config: str, within_1lsb: float) -> None:
    from tinynpu.compiler.onnx.bench import zoo_path
    from tinynpu.compiler.onnx.network import compile_onnx, run_network
    from tinynpu.isa import load_config

    r = run_network(compile_onnx(zoo_path(name), cfg=load_config(config)), extra_seeds=1)
    assert r["verified"] is True  # bit-exact with the integer reference, or run_network raises
    q = r["ort_quantized"]
    assert q["top1_agree"] == 1.0 and q["max_abs_lsb"] <= 3 and q["within_1lsb_fraction"] >= within_1lsb, q
    assert r["ort_float"]["top1_agree"] == 1.0 and r["ort_float"]["cosine"] > 0.99
    assert r["npu_layers"] >= 8
