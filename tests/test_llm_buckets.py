"""One decode network per bucket of cache lengths: a specialized network is the network built at its length."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tinynpu.compiler.onnx.intops import Epilogue  # noqa: E402
from tinynpu.compiler.onnx.llm import buckets  # noqa: E402
from tinynpu.compiler.onnx.llm.compile import align_cache_scales, compile_llm, ort_greedy, seeded_prompt  # noqa: E402
from tinynpu.compiler.onnx.llm.decoder import TINY, TINY_GQA, TINY_LLAMA, DecoderShape, build_decoder  # noqa: E402
from tinynpu.compiler.onnx.llm.generate import generate  # noqa: E402
from tinynpu.compiler.onnx.llm.interface import DecoderInterface, read_interface  # noqa: E402
from tinynpu.compiler.onnx.llm.steps import StepShape, Weights, build_step, split_weights  # noqa: E402
from tinynpu.compiler.onnx.lower.programs import ProgramCache  # noqa: E402
from tinynpu.isa import load_config  # noqa: E402


def _same(a: Any, b: Any) -> bool:
    """Equal values, arrays by their dtype, shape and elements, dataclasses field by field."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _quantized(shape: DecoderShape, tmp_path: Path) -> tuple[DecoderInterface, Weights]:
    import onnx

    from tinynpu.compiler.onnx.frontend.calibration import MinMaxRanges, calibrated_tensors
    from tinynpu.compiler.onnx.frontend.importer import load_model
    from tinynpu.compiler.onnx.frontend.quantize import quantize

    path = tmp_path / "decoder.onnx"
    onnx.save(build_decoder(shape), path)
    model = load_model(path)
    itf = read_interface(model, str(path))
    ranges = MinMaxRanges(calibrated_tensors(model))
    _, trajectory = ort_greedy(model, itf, seeded_prompt(itf, 6, 0), 5, ranges)
    qmodel = quantize(model, trajectory, ranges.ranges())
    align_cache_scales(qmodel, itf)
    return itf, split_weights(qmodel)


@pytest.mark.parametrize("shape", [TINY, TINY_GQA, TINY_LLAMA], ids=["mha", "gqa", "llama"])
def test_a_specialized_network_is_the_network_built_at_its_length(shape: DecoderShape, tmp_path: Path) -> None:
    itf, weights = _quantized(shape, tmp_path)
    cfg = load_config("default")
    cache = ProgramCache(cfg, matmul_bucket=cfg.tile)
    built = build_step(weights, itf, StepShape(1, 9), cache)
    bucket = buckets.make_bucket(weights, itf, built, StepShape(1, 8), 1)
    assert bucket.names and bucket.slopes  # the position and the mask; the tensors along the cache
    for past in (5, 7):
        ours = buckets.specialize(bucket, itf, StepShape(1, past), cache)
        theirs = build_step(weights, itf, StepShape(1, past), cache).step
        assert ours.specialized_from == 9 and theirs.specialized_from is None
        assert [s.name for s in ours.net.steps] == [s.name for s in theirs.net.steps]
        for a, b in zip(ours.net.steps, theirs.net.steps, strict=True):
            assert _same(a, b), a.name
        assert ours.net.shapes == theirs.net.shapes
        assert ours.net.constants.keys() == theirs.net.constants.keys()
        assert all(_same(ours.net.constants[k], theirs.net.constants[k]) for k in ours.net.constants)
        assert ours.programs == theirs.programs and ours.logits == theirs.logits and ours.present == theirs.present
        # the bucket's plan holds the shorter step's every tensor
        planned = {b.name: b.nbytes for b in ours.memory.buffers}
        assert all(n <= planned[b.name] for b in theirs.memory.buffers for n in [b.nbytes])


def test_generation_across_buckets_is_bit_exact(tmp_path: Path) -> None:
    """Cache lengths 14..18 are two buckets at T = 16 (14..16, 17..18): each built once, at its longest."""
    import onnx

    path = tmp_path / "decoder.onnx"
    onnx.save(build_decoder(TINY), path)
    cd = compile_llm(path, prompt_tokens=13, generate=6)
    assert [s.specialized_from for s in cd.steps] == [None, 15, 15, None, 17, None]
    gen = generate(cd)
    assert gen.tokens == gen.reference_tokens


def test_a_network_that_cannot_be_specialized_is_built(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def refuse(*_: object) -> None:
        raise buckets.NotSpecializable("refused")

    import onnx

    path = tmp_path / "decoder.onnx"
    onnx.save(build_decoder(TINY), path)
    monkeypatch.setattr(buckets, "make_bucket", refuse)
    cd = compile_llm(path, prompt_tokens=6, generate=4)
    assert [s.specialized_from for s in cd.steps] == [None] * 4
    gen = generate(cd)
    assert gen.tokens == gen.reference_tokens


def test_an_epilogue_that_differs_per_key_is_not_broadcast() -> None:
    one = Epilogue(bias=None, scale=np.full(9, 0.5, np.float32), zero_point=0, lo=-128, hi=127)
    assert buckets._broadcast(one, 9, 7, "scores").scale.tolist() == [0.5] * 7
    per_key = dataclasses.replace(one, scale=np.arange(9, dtype=np.float32))
    with pytest.raises(buckets.NotSpecializable, match="differs per key"):
        buckets._broadcast(per_key, 9, 7, "scores")


def test_a_constants_subgraph_that_does_not_run_is_not_specialized(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    itf, weights = _quantized(TINY, tmp_path)
    cfg = load_config("default")
    built = build_step(weights, itf, StepShape(1, 9), ProgramCache(cfg, matmul_bucket=cfg.tile))

    def broken(*_: object) -> None:
        raise RuntimeError("No implementation for operator 'Range'")

    monkeypatch.setattr(buckets, "length_constants", broken)
    with pytest.raises(buckets.NotSpecializable, match="does not run: No implementation"):
        buckets.make_bucket(weights, itf, built, StepShape(1, 8), 1)


def test_the_bench_compares_built_and_specialized(capsys: pytest.CaptureFixture[str]) -> None:
    from tinynpu.compiler.onnx.llm.bench_buckets import main

    assert main(["--layers", "1", "--hidden", "64", "--heads", "2", "--vocab", "100", "--ffn", "256",
                 "--prompt", "8", "--steps", "3"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("past ")]
    assert len(lines) == 2 and all(line.endswith("same shapes and programs: True") for line in lines)
