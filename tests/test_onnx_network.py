"""A small CNN end to end: import, quantize, run on the simulator, verified three ways; the CLI and JSON contract."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import small_cnn  # noqa: E402

from tinynpu.cli import main  # noqa: E402
from tinynpu.compiler.onnx import compile_onnx, run_network  # noqa: E402
from tinynpu.simulator.energy import COMPONENTS  # noqa: E402


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_cnn(tmp_path_factory.mktemp("cnn") / "cnn.onnx")


def test_small_cnn_end_to_end(cnn: Path) -> None:
    cn = compile_onnx(cnn)
    r = run_network(cn, extra_seeds=3)
    assert r["verified"] is True
    where = {e["name"]: e["where"] for e in r["layers"]}
    assert where["conv1"] == where["conv2"] == where["conv3"] == where["residual"] == where["fc"] == "npu"
    assert where["pool1"] == where["gap"] == "host"
    # every layer on the accelerator ran cycles and moved bytes; host steps name why they are there
    for e in r["layers"]:
        if e["where"] == "npu":
            assert e["cycles"] > 0 and e["dram_bytes"] >= e["compulsory_bytes"] > 0
            if e["op"] in ("Add", "Softmax"):  # no MACs of the network's own: the inputs pass the array through
                # an identity
                assert e["macs"] == e["utilization"] == e["padding_ceiling"] == 0
                assert e["note"].startswith(("residual add on the accelerator", "Softmax on the accelerator"))
                continue
            assert 0 < e["utilization"] <= e["padding_ceiling"] <= 1
            assert e["epilogue"] == "npu" and "epilogue on the accelerator" in e["note"]
        else:
            assert e["cycles"] == 0 and e["note"]
    q = r["ort_quantized"]
    assert r["inputs_compared"] == 4
    assert q["equal_fraction"] == 1.0 and q["top1_agree"] == 1.0  # every integer kernel equal
    assert r["ort_float"]["cosine"] > 0.98
    mem = r["memory"]
    assert mem["liveness_lower_bound_bytes"] <= mem["activation_peak_bytes"]
    assert r["cycles"] == sum(e["cycles"] for e in r["layers"])
    # energy per layer, by component, adds up to the network's; host steps cost the accelerator nothing
    assert list(r["energy_breakdown_pj"]) == list(COMPONENTS) and r["energy_pj"] > 0
    for component in COMPONENTS:
        assert r["energy_breakdown_pj"][component] == pytest.approx(
            sum(e["energy_breakdown_pj"].get(component, 0.0) for e in r["layers"]), rel=1e-12)
    assert all(e["energy_pj"] > 0 if e["where"] == "npu" else e["energy_pj"] == 0 for e in r["layers"])
    assert r["edp"] == pytest.approx(r["energy_pj"] * r["cycles"] / (r["clock_mhz"] * 1e6), rel=1e-12)


def test_accelerator_fault_is_caught_by_the_bit_exact_check(cnn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-LSB error in one accelerator layer's int8 output, as stored in DRAM, is reported, naming the layer."""
    from tinynpu.compiler.onnx.runtime import layers
    from tinynpu.compiler.onnx.verify.checks import NetworkVerificationError

    cn = compile_onnx(cnn)
    real = layers._simulate

    def off_by_one(npu, comp, *args, **kwargs):  # type: ignore[no-untyped-def]
        y = real(npu, comp, *args, **kwargs)
        if comp.workload["kind"] == "conv2d" and comp.workload["k"] == 16 and comp.workload["stride"] == 2:
            machine, addr = npu.image.machine, kwargs["bases"]["Y"]  # stored in place in the image
            machine.write_dram(addr, bytes([machine.read_dram(addr, 1)[0] ^ 1]))
        return y

    monkeypatch.setattr(layers, "_simulate", off_by_one)
    with pytest.raises(NetworkVerificationError, match="conv2"):
        run_network(cn)


def test_run_onnx_json_contract(cnn: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "onnx", str(cnn), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    for key in ("verified", "cycles", "inferences_per_second", "dram_bytes"):
        assert key in r
    assert set(r["ort_quantized"]) >= {"equal_fraction", "max_abs_lsb", "top1_agree", "top5_agree"}
    assert set(r["ort_float"]) >= {"top1_agree", "cosine"}
    for e in r["layers"]:
        assert set(e) >= {"name", "op", "where", "cycles", "utilization", "padding_ceiling", "dram_bytes"}
        assert e["where"] in ("npu", "host")


def test_run_onnx_with_input_file_and_report(cnn: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = np.random.default_rng(5).standard_normal((1, 3, 20, 20)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    rep = tmp_path / "rep"
    assert main(["run", "onnx", str(cnn), "--input", f"x={tmp_path / 'x.npy'}", "--report", str(rep)]) == 0
    out = capsys.readouterr().out
    assert "bit-exact" in out and "conv1" in out
    assert {p.name for p in rep.iterdir()} >= {"index.md", "layers.png", "report.json"}
    assert "conv1" in (rep / "index.md").read_text()


def test_compile_onnx_writes_programs(cnn: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "net"
    assert main(["compile", "onnx", str(cnn), "-o", str(out)]) == 0
    doc = json.loads((out / "network.json").read_text())
    assert doc["npu_layers"] == 6  # 3 convs, the residual add, the fc, the softmax
    for prog in doc["programs"].values():
        assert (out / prog["file"]).stat().st_size > 0
    assert main(["compile", "onnx", str(cnn), "-o", str(out)]) == 0  # our own output: replaced
    capsys.readouterr()


def test_any_scale_runs_its_epilogue_on_the_accelerator() -> None:
    """vrequantf takes any binary32 scale: a scale of 1 or more stays in the program too."""
    from tinynpu.compiler.onnx.intops import Epilogue
    from tinynpu.compiler.onnx.lower.programs import ProgramCache
    from tinynpu.compiler.onnx.runtime.layers import Accelerator, LayerRun, gemm_layer
    from tinynpu.isa import load_config

    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (8, 40), dtype=np.int8)
    w = rng.integers(-128, 128, (20, 40), dtype=np.int8)
    cache = ProgramCache(load_config("default"))
    for scale in (1e-4, 3.0):
        epi = Epilogue(scale=np.full(20, scale, np.float32), bias=None, zero_point=0, lo=-128, hi=127)
        run = LayerRun()
        got = gemm_layer(a, w, epi, npu=Accelerator(cache), run=run)
        assert np.array_equal(got, gemm_layer(a, w, epi, npu=None, run=LayerRun()))
        assert run.programs == 1 and run.host_bytes == 0
    assert sorted(key[-1] for key in cache.programs) == ["int8_binary32_clamp-128to127"]


def _pair_before(model, act_name: str):  # type: ignore[no-untyped-def]
    """The Q and DQ nodes between a conv and the activation ``act_name``, and the activation's own Q."""
    producer = {o: n for n in model.graph.node for o in n.output}
    act = next(n for n in model.graph.node if n.name == act_name)
    dq = producer[act.input[0]]
    q = producer[dq.input[0]]
    after = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == act.output[0])
    return q, dq, after


def test_relu_after_a_conv_is_fused_at_its_own_scale(cnn: Path) -> None:
    """The quantizer's Q/DQ pair between a conv and its relu gets the relu output's scale: one rounding,
    the relu a clamp in the layer's store, and onnxruntime still sees an integer conv."""
    cn = compile_onnx(cnn)
    for conv, relu in (("conv1", "relu1"), ("conv2", "relu2")):
        q, dq, after = _pair_before(cn.qmodel, relu)
        assert q.op_type == "QuantizeLinear" and dq.op_type == "DequantizeLinear"
        assert list(q.input[1:]) == list(dq.input[1:]) == list(after.input[1:])
        step = next(s for s in cn.net.steps if s.name == conv)
        assert step.where == "npu" and step.activation == "Relu"
        assert step.outputs == (after.output[0],)
    assert not any(s.op == "Relu" for s in cn.net.steps if s.name in ("relu1", "relu2"))


def test_a_pair_at_another_scale_keeps_the_relu_on_the_host(cnn: Path, tmp_path: Path) -> None:
    """A QDQ model whose pair before a relu has its own scale rounds twice, as onnxruntime does:
    the conv stores at the pair's scale and the relu runs on the host (``nonlinear="host"``), still
    bit-exact."""
    import onnx
    from onnx import numpy_helper

    model = compile_onnx(cnn).qmodel
    q, dq, after = _pair_before(model, "relu2")
    relu_scale = next(numpy_helper.to_array(i) for i in model.graph.initializer if i.name == after.input[1])
    model.graph.initializer.append(numpy_helper.from_array(np.float32(relu_scale * 1.37), "pre_relu2_scale"))
    q.input[1] = dq.input[1] = "pre_relu2_scale"
    path = tmp_path / "pair.onnx"
    onnx.save(model, str(path))
    cn = compile_onnx(path, nonlinear="host")
    conv2 = next(s for s in cn.net.steps if s.name == "conv2")
    assert conv2.where == "npu" and conv2.activation is None and conv2.outputs == (q.output[0],)
    assert any(s.name == "relu2" and s.where == "host" for s in cn.net.steps)
    # with the nonlinear lowerings the requantizing relu is one table lookup on the accelerator
    assert any(s.name == "relu2" and s.kind == "lut" and s.where == "npu" for s in compile_onnx(path).net.steps)
    r = run_network(cn, extra_seeds=1)
    assert r["verified"] is True
    assert r["ort_quantized"]["within_1lsb_fraction"] >= 0.99 and r["ort_quantized"]["top1_agree"] == 1.0
