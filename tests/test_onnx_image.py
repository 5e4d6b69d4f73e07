"""The network's one DRAM image: relocated programs, and a network run whose layers read and write it in place."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import small_cnn  # noqa: E402
from test_onnx_ops import CASES, build  # noqa: E402

from tinynpu.compiler.matmul import compile_matmul  # noqa: E402
from tinynpu.compiler.onnx import compile_onnx, run_network  # noqa: E402
from tinynpu.compiler.onnx.runtime.image import relocate  # noqa: E402
from tinynpu.isa import load_config, load_isa  # noqa: E402
from tinynpu.simulator import Machine  # noqa: E402


def test_relocated_program_reads_and_writes_the_new_places() -> None:
    cfg = load_config("default")
    comp = compile_matmul(20, 24, 40)
    inputs = comp.make_inputs(1)
    bases = {"A": 1 << 20, "B": 3 << 20, "C": 5 << 20}
    moved = relocate(comp.program, load_isa(), cfg, bases)
    assert {t.name: t.addr for t in moved.tensors} == bases and len(moved.words) == len(comp.program.words)
    machine = Machine(cfg)
    machine.load(moved)
    for name, arr in comp.to_device(inputs).items():
        machine.write_dram(bases[name], arr)
    machine.run()
    assert np.array_equal(machine.read_tensor("C"), comp.reference(inputs)["C"])
    # nothing was written at the compiled addresses
    original = {t.name: t for t in comp.program.tensors}
    assert not machine.read_dram(original["C"].addr, original["C"].nbytes).strip(b"\0")


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_cnn(tmp_path_factory.mktemp("cnn") / "cnn.onnx")


def test_network_runs_in_one_dram_image(cnn: Path) -> None:
    cn = compile_onnx(cnn)
    r = run_network(cn)
    assert r["verified"] is True
    mem = r["memory"]
    image = cn.image
    assert image is not None
    # weights written once, in the programs' layouts, inside the planned weights region
    assert 0 < mem["weights_placed_bytes"] <= mem["weight_bytes"]
    assert mem["dram_image_peak_bytes"] >= mem["liveness_lower_bound_bytes"] + mem["weights_placed_bytes"]
    # every single-group conv wrote its output, and read its input in the direct layout, at the plan's places
    relocated = {t.addr for p in image.programs.values() for t in p.tensors}
    direct = 0
    for s in cn.net.steps:
        if s.kind == "conv" and s.where == "npu" and s.group == 1:
            assert image.address(s.outputs[0], 0) in relocated
            if cn.cache.programs[cn.programs[s.name][0]].workload["layout"] == "direct":
                assert image.address(s.inputs[0], 0) in relocated
                direct += 1
    assert direct > 0
    first_weights = dict(image.weights)
    run_network(cn, seed=1)  # a second run reuses the weights and the relocated programs
    assert image.weights == first_weights


def test_an_output_stored_at_a_wrong_address_is_caught(cnn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A program relocated 64 bytes past its output's planned place: the next steps read the planned place."""
    from tinynpu.compiler.onnx.runtime.image import DramImage
    from tinynpu.compiler.onnx.verify.checks import NetworkVerificationError

    cn = compile_onnx(cnn)
    real = DramImage.program
    conv1_out = next(s.outputs[0] for s in cn.net.steps if s.name == "conv1")

    def misplaced(self, key, program, bases, pitches=None):  # type: ignore[no-untyped-def]
        if "conv1" in key and bases.get("Y") == self.address(conv1_out, 0):
            bases = {**bases, "Y": bases["Y"] + 64}
        return real(self, key, program, bases, pitches)

    monkeypatch.setattr(DramImage, "program", misplaced)
    with pytest.raises(NetworkVerificationError, match="conv1"):
        run_network(cn)


def test_host_steps_read_their_inputs_from_the_image(cnn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pooling's output corrupted in DRAM only: the host step reading it (the flatten) sees it."""
    from tinynpu.compiler.onnx.runtime.image import DramImage
    from tinynpu.compiler.onnx.verify.checks import NetworkVerificationError

    cn = compile_onnx(cnn)
    gap = next(s for s in cn.net.steps if s.name == "gap")
    reader = next(s for s in cn.net.steps if gap.outputs[0] in s.inputs)
    assert gap.where == reader.where == "host"
    real = DramImage.publish

    def corrupt(self, name, value):  # type: ignore[no-untyped-def]
        real(self, name, value)
        if name == gap.outputs[0]:
            addr = self.address(name, 0)
            self.machine.write_dram(addr, bytes([self.machine.read_dram(addr, 1)[0] ^ 0x40]))

    monkeypatch.setattr(DramImage, "publish", corrupt)
    with pytest.raises(NetworkVerificationError, match=f"step {reader.name!r}"):
        run_network(cn)


def test_network_json_lists_the_image_addresses_a_run_uses(cnn: Path, tmp_path: Path) -> None:
    """`compile onnx`'s network.json: every activation's and every layer program's tensors' place and size."""
    import json

    from tinynpu.cli import main

    out = tmp_path / "net"
    assert main(["compile", "onnx", str(cnn), "-o", str(out)]) == 0
    doc = json.loads((out / "network.json").read_text())
    image = doc["image"]
    acts = {a["name"]: a for a in image["activations"]}
    weights_region = image["regions"]["weights"]
    cn = compile_onnx(cnn)
    run_network(cn)
    # the activations: where the plan put them, inside the activation region
    for b in cn.memory.buffers:
        assert (acts[b.name]["address"], acts[b.name]["bytes"]) == (b.offset, b.nbytes)
        assert b.offset + b.nbytes <= image["regions"]["activations"]["bytes"]
    used = {}  # (step, tensor) -> address the relocated programs used in the run
    for (key, *_), program in cn.image.programs.items():
        # relocation keys end with (step, group) for a conv, (step, input, output) for a Gemm, (step,) for an add
        # and a nonlinear program (lut, softmax, norm)
        step = {"conv2d": key[-2]}.get(key[0], key[-1] if key[0] in ("add", "lut", "softmax", "norm") else key[-3])
        for t in program.tensors:
            used[(step, t.name)] = t.addr
    npu = [s for s in doc["steps"] if s["where"] == "npu"]
    assert npu and all(len(s["image"]) >= 1 for s in npu)
    checked = 0
    for s in npu:
        for prog in s["image"]:
            assert prog["instructions"] > 0 and prog["program_bytes"] > 0
            for name, place in prog["tensors"].items():
                assert place["bytes"] > 0
                if place.get("staged"):
                    continue
                assert used[(s["name"], name)] == place["address"]  # the run used exactly that address
                if name in ("W", "B", "P"):
                    assert weights_region["address"] <= place["address"] < weights_region["address"] + \
                        weights_region["bytes"]
                checked += 1
    assert checked >= 12  # 3 convs and the fc, each with input, weights, parameter rows and output in place
    # every placed weight tensor is listed once, without overlaps
    spans = sorted((w["address"], w["address"] + w["bytes"]) for w in image["weights"])
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False))


def test_grouped_programs_read_and_write_their_channels_in_place(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A depthwise conv of 48 channels runs as 3 programs of 16: each reads and writes its 16 channels of
    every pixel where the tensors are (the pitch a whole pixel), nothing staged; without the pitch the
    bit-exact check catches the programs writing over each other."""
    from tinynpu.compiler.onnx.runtime.image import DramImage
    from tinynpu.compiler.onnx.runtime.layers import conv_places
    from tinynpu.compiler.onnx.verify.checks import NetworkVerificationError

    cn = compile_onnx(build(CASES["conv_depthwise_48ch_stride2"], tmp_path / "dw48.onnx"))
    step = next(s for s in cn.net.steps if s.name == "op")
    programs = cn.programs[step.name]
    assert len(programs) == 3
    x0, y0 = cn.image.address(step.inputs[0], 0), cn.image.address(step.outputs[0], 0)
    for i, key in enumerate(programs):
        assert conv_places(cn.image, step, cn.cache.programs[key], i, 3) == ((x0 + 16 * i, 48), (y0 + 16 * i, 48))
    layer = next(e for e in run_network(cn)["layers"] if e["name"] == "op")
    assert layer["host_bytes"] == 0

    real = DramImage.program
    monkeypatch.setattr(DramImage, "program", lambda self, key, program, bases, pitches=None:
                        real(self, key, program, bases, None))
    with pytest.raises(NetworkVerificationError, match="step 'op' "):
        run_network(compile_onnx(build(CASES["conv_depthwise_48ch_stride2"], tmp_path / "dw48b.onnx")))
