"""tinynpu against onnxruntime int8, tensor by tensor, on the tiny decoders; a teacher-forced miss explained."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import tiny_decoder  # noqa: E402

from tinynpu.compiler.onnx.ir import Network  # noqa: E402
from tinynpu.compiler.onnx.llm.agreement import (  # noqa: E402
    explain_misses,
    float_logits,
    format_misses,
    sequence_logits,
    step_differences,
    step_inputs,
)
from tinynpu.compiler.onnx.llm.compile import CompiledDecoder, compile_llm  # noqa: E402
from tinynpu.compiler.onnx.llm.decoder import TINY_LLAMA, build_decoder  # noqa: E402
from tinynpu.compiler.onnx.llm.generate import Generation, generate  # noqa: E402
from tinynpu.compiler.onnx.llm.run import teacher_forced, teacher_forced_logits  # noqa: E402
from tinynpu.compiler.onnx.verify.origins import Carrier  # noqa: E402
from tinynpu.compiler.onnx.verify.tensors import OrtTensors, tensor_differences  # noqa: E402

PROMPT, GENERATE = 6, 4


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[CompiledDecoder, Generation]:
    import onnx

    path = tmp_path_factory.mktemp("agree") / f"{request.param}.onnx"
    if request.param == "gpt2":
        tiny_decoder(path)
    else:
        onnx.save(build_decoder(TINY_LLAMA), str(path))
    cd = compile_llm(path, prompt_tokens=PROMPT, generate=GENERATE)
    return cd, generate(cd)


@pytest.fixture(scope="module")
def ort(run: tuple[CompiledDecoder, Generation]) -> OrtTensors:
    return OrtTensors(run[0].qmodel)


def _by_design(kind: str, kernel: str) -> int:
    """The largest own difference from onnxruntime a step may have by design, in LSBs: where tinynpu rounds
    once what the QDQ model rounds at several nodes."""
    if kind == "gemm" and kernel == "QLinearAdd":  # the bias Add folded into the matmul's epilogue
        return 1
    if kind == "norm" and kernel != "LayerNormalization":  # RMSNorm's primitives, each rounded by onnxruntime
        return 2
    if kind == "product":  # SwiGLU's SiLU fused into the product, where onnxruntime rounds it to int8
        return 1
    return 0


def test_each_operator_computes_as_onnxruntime_but_where_it_rounds_less(run: tuple[CompiledDecoder, Generation],
                                                                        ort: OrtTensors) -> None:
    """On onnxruntime's own inputs every step's int8 output equals onnxruntime's, layer norms, softmaxes
    and tables included, except where tinynpu fuses what the QDQ model rounds at several nodes: a matmul
    with its bias Add folded into the epilogue (onnxruntime: QLinearMatMul then QLinearAdd), RMSNorm,
    SwiGLU's product."""
    cd, gen = run
    fused = 0
    for index in (0, 2):
        diffs = step_differences(cd, gen, index, ort)
        kinds = {d.kind for d in diffs if d.kernel is not None}
        assert {"gemm", "norm", "softmax", "matmul"} <= kinds
        for d in diffs:
            assert d.own_max_abs_lsb <= _by_design(d.kind, d.kernel or ""), d
            fused += d.own_differing if _by_design(d.kind, d.kernel or "") else 0
    assert fused > 0  # the fused roundings do show


def test_a_tensor_onnxruntime_holds_at_another_scale_is_not_compared(run: tuple[CompiledDecoder, Generation],
                                                                      ort: OrtTensors) -> None:
    """A tensor onnxruntime's graph rewrites requantized holds other integers for the same values."""
    cd, gen = run
    net = cd.steps[0].net
    carried = ort.carried(net)
    norm = next(o for s in net.steps if s.kind == "norm" for o in s.outputs if o in carried)

    class Rescaled(OrtTensors):
        def carried(self, net: Network) -> dict[str, Carrier]:
            out = dict(carried)
            out[norm] = dataclasses.replace(out[norm], scale=2 * net.qparams[norm].s)
            return out

    other = copy.copy(ort)
    other.__class__ = Rescaled
    diffs = {d.tensor: d for d in tensor_differences(net, other, step_inputs(cd, gen, 0))}
    assert diffs[norm].kernel is None and diffs[norm].own_differing == 0
    assert any(d.kernel is not None for d in diffs.values())


def test_a_constructed_disagreement_is_explained(run: tuple[CompiledDecoder, Generation]) -> None:
    """tinynpu's first layer norm output changed at one step, and that step made a miss: the report names
    that norm as the first tensor differing by more than 1 LSB, by how much, and both runs' margins."""
    cd, gen = run
    index = 2
    net = cd.steps[index].net
    norm = next(s for s in net.steps if s.kind == "norm")
    bent = copy.copy(gen)
    bent.steps = list(gen.steps)
    record = copy.copy(gen.steps[index])
    record.execution = copy.copy(record.execution)
    record.execution.values = dict(record.execution.values)
    value = record.execution.values[norm.outputs[0]]
    record.execution.values[norm.outputs[0]] = np.where(value > 0, value.astype(np.int64) - 60,
                                                        value.astype(np.int64) + 60).astype(value.dtype)
    bent.steps[index] = record
    logits = teacher_forced_logits(cd, gen)
    forced = teacher_forced(cd, gen, logits)
    forced["steps"] = [s | {"argmax_equal": s["step"] != index} for s in forced["steps"]]
    report = explain_misses(cd, bent, forced, logits)
    assert report["seconds"] > 0 and len(report["misses"]) == cd.batch
    miss = report["misses"][0]
    first = miss["first_difference_over_1_lsb"]
    assert (first["step"], first["kind"], first["layer"]) == (norm.name, "norm", 0)
    assert first["max_abs_lsb"] >= 50 and first["own_max_abs_lsb"] <= _by_design("norm", first["onnxruntime_op"])
    row = cd.prompt.shape[1] - 1 + index
    assert miss["float_token"] == int(np.argmax(float_logits(cd, gen)[0, row]))
    assert miss["token"] == gen.tokens[0][index] and miss["our_margin_lsb"] >= 0 <= miss["onnxruntime_margin_lsb"]
    line = format_misses(report["misses"])[0]
    assert f"miss at step {index}" in line and f"layer 0 {norm.name} (norm" in line


def test_no_miss_no_analysis(run: tuple[CompiledDecoder, Generation]) -> None:
    cd, gen = run
    logits = teacher_forced_logits(cd, gen)
    forced = teacher_forced(cd, gen, logits)
    forced["steps"] = [s | {"argmax_equal": True} for s in forced["steps"]]
    assert explain_misses(cd, gen, forced, logits)["misses"] == []


def test_run_llm_reports_the_misses_and_their_seconds(tmp_path: Path) -> None:
    from tinynpu.compiler.onnx.llm.run import format_run, run_llm

    r = run_llm(tiny_decoder(tmp_path / "tiny.onnx"), prompt_tokens=4, generate_tokens=3)
    forced = r["onnxruntime_int8_teacher_forced"]
    assert isinstance(forced["misses"], list) and len(forced["misses"]) == sum(
        not s["argmax_equal"] for s in forced["steps"])
    assert r["seconds"]["teacher_forced_misses_explained"] >= 0 and r["seconds"]["onnxruntime_int8_teacher_forced"] > 0
    assert "teacher-forced" in format_run(r)


@pytest.mark.slow
def test_the_unfolded_bias_adds_agree_with_onnxruntime_bit_for_bit(capsys: pytest.CaptureFixture[str]) -> None:
    """The experiment of ``bench_agreement``: with the bias Adds as their own steps (the QDQ model's two
    roundings) every compared value of the tiny decoder equals onnxruntime's, along the run too."""
    from tinynpu.compiler.onnx.llm.bench_agreement import main

    assert main(["--layers", "2", "--hidden", "64", "--heads", "2", "--vocab", "100", "--ffn", "256", "--positions",
                 "64", "--prompt", "6", "--generate", "4", "--config", "default", "--compare-steps", "2"]) == 0
    out = capsys.readouterr().out
    folded, unfolded = out.split("bias Adds unfolded")
    assert "gemm on QLinearAdd" in folded and "gemm on QLinearAdd" not in unfolded
    assert all(" 0 differ" in line and "along the run max 0 LSB" in line
               for line in unfolded.splitlines()[1:] if " values;" in line)


def test_the_float_logits_come_from_the_model_file_as_from_memory(run: tuple[CompiledDecoder, Generation]) -> None:
    """The float pass opens the model's file where it still is (no second serialization): the same logits."""
    cd, gen = run
    assert Path(cd.itf.source).is_file()
    np.testing.assert_array_equal(float_logits(cd, gen), sequence_logits(cd, gen, cd.float_model))
