"""A per-run attention mask applied inside the masked softmax's program (compiler/onnx/lower/runtime_mask.py):
the program bit-exact against its reference on the simulator at T = 8, 16 and 32 with races checked, the
reference equal to the host select followed by the masked softmax, and the exports' ``attention_mask`` run
with padded positions on the accelerator, bit for bit what the host select gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinynpu.compiler.onnx.lower import runtime_mask, softmax
from tinynpu.compiler.onnx.lower.rowwise import RowShape, row_compiled
from tinynpu.compiler.onnx.lower.runtime_mask import RuntimeMask
from tinynpu.compiler.run import run_compiled
from tinynpu.errors import OnnxError
from tinynpu.isa import load_config

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

MODELS = Path(__file__).resolve().parent / "models"


def _params(rm: RuntimeMask, zero_point: int = 0) -> softmax.SoftmaxParams:
    from dataclasses import replace

    return replace(softmax.softmax_params(0.07, 1 / 127, zero_point, what="test", masked=True), runtime=rm)


@pytest.mark.parametrize(("config", "scores", "codes"), [
    ("t8", (1, 2, 16, 16), (1, 1, 1, 16)),    # BERT's padding mask: one row for every query row and head
    ("t8", (1, 3, 5, 21), (1, 1, 5, 21)),     # a row per query row: tile-rows cross heads (the offsets wrap)
    ("default", (2, 2, 3, 17), (2, 1, 1, 17)),  # a row per batch entry
    ("default", (1, 4, 1, 9), (1, 1, 1, 9)),  # a decoder's step: one query row per head
    ("t32", (1, 2, 24, 40), (1, 2, 24, 40)),  # no broadcast at all
    ("t32", (1, 1, 70, 33), (1, 1, 1, 33)),
])
def test_program_with_a_per_run_mask_is_its_reference(config: str, scores: tuple[int, ...],
                                                      codes: tuple[int, ...]) -> None:
    """Random scores and random codes (-128 or 0) through the program on the simulator, races checked
    (run_compiled raises on a difference from the reference)."""
    cfg = load_config(config)
    rm = RuntimeMask(scores, codes)
    p = _params(rm, zero_point=-3)
    shape = RowShape(int(np.prod(scores[:-1])), scores[-1], cfg.tile)
    ident = np.concatenate([np.eye(cfg.tile, dtype=np.int8), runtime_mask.code_tile(cfg.tile)])
    comp = row_compiled(cfg, shape, softmax.softmax_rows(p, cfg.tile), 2, softmax.softmax_body(p, cfg.tile),
                        lambda x, m: softmax.softmax_reference(x, p, m), kind="test", what="test", b_rows=ident,
                        codes=(rm.rows, codes[-1]))
    assert run_compiled(comp, cfg=cfg, seed=7, check_races=True)["cycles"] > 0


@settings(max_examples=100, deadline=None)
@given(data=st.data(), heads=st.integers(1, 3), rows=st.integers(1, 6), width=st.integers(1, 30),
       per_row=st.booleans())
def test_the_program_s_select_is_the_host_select(data: st.DataObject, heads: int, rows: int, width: int,
                                                 per_row: bool) -> None:
    """Exact integers: the softmax of scores the host selected (its float mask broadcast to the scores) equals
    the softmax adding the codes itself."""
    from tinynpu.compiler.onnx.ir import MaskStep
    from tinynpu.compiler.onnx.runtime.host import mask_select

    scores = (1, heads, rows, width)
    codes_shape = (1, 1, rows if per_row else 1, width)
    masked = np.array(data.draw(st.lists(st.booleans(), min_size=int(np.prod(codes_shape)),
                                         max_size=int(np.prod(codes_shape))))).reshape(codes_shape)
    x = np.array(data.draw(st.lists(st.integers(-128, 127), min_size=int(np.prod(scores)),
                                    max_size=int(np.prod(scores)))), dtype=np.int8).reshape(scores)
    step = MaskStep(name="m", op="Add", where="host", inputs=("x", "mask"), outputs=("s",), floor=-1e4)
    selected = mask_select(step, {"x": x, "mask": np.where(masked, np.float32(-np.inf), np.float32(0))})
    codes = np.where(masked, runtime_mask.MASKED_BYTE, 0).astype(np.int8).reshape(-1, width)
    plain = softmax.softmax_params(0.07, 1 / 127, 0, what="test", masked=True)
    np.testing.assert_array_equal(softmax.softmax_reference(x, _params(RuntimeMask(scores, codes_shape)), codes),
                                  softmax.softmax_reference(selected, plain))


def test_runs_are_strided_loads() -> None:
    assert runtime_mask.runs(np.array([0, 0, 0])) == [(0, 3, 0, 0)]
    assert runtime_mask.runs(np.array([0, 16, 32, 0, 16])) == [(0, 3, 0, 16), (3, 2, 0, 16)]
    assert runtime_mask.runs(np.array([5])) == [(0, 1, 5, 0)]
    assert RuntimeMask((1, 2, 3, 4), (1, 1, 3, 4)).row_offsets().tolist() == [0, 4, 8, 0, 4, 8]


def _padded(name: str, keep: int) -> dict[str, np.ndarray]:
    from tinynpu.compiler.onnx.bench_masks import padded_feeds

    return padded_feeds(name, keep)


@pytest.mark.parametrize(("name", "config"), [("bert_sdpa", "t8"), ("bert_eager", "default"),
                                              ("bert_sdpa.legacy", "default"), ("gpt2_past", "t32"),
                                              ("llama_past", "default")])
def test_an_export_s_attention_mask_runs_in_the_softmax_program(name: str, config: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Padded positions masked: no host select and no float mask left (one codes step reads the mask's
    condition), bit-exact against the integer reference with races checked, and every output equal to the run
    with the host select (the fusion switched off) bit for bit."""
    from tinynpu.compiler.onnx import compile_onnx
    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps
    from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource
    from tinynpu.compiler.onnx.lower import mask_fusion as rmod
    from tinynpu.compiler.onnx.runtime.execute import execute
    from tinynpu.compiler.onnx.verify.run import run_network

    feeds = _padded(name, 5)
    source = CalibrationSource((feeds,), "padded")
    cfg = load_config(config)
    fused = compile_onnx(MODELS / f"{name}.onnx", calibration=source, cfg=cfg)
    kinds = [s.kind for s in fused.net.steps]
    assert "mask" not in kinds and kinds.count("mask_codes") == 1
    assert not any(s.op == "Where" for s in fused.net.steps)
    codes = next(s for s in fused.net.steps if s.kind == "mask_codes")
    assert codes.shape[:-1] == (1, 1, 1)  # one byte per key position
    assert codes.inputs == ("attention_mask",) and codes.chain  # the input's conversion, its nodes taken over
    assert codes.name not in host_compute_steps(fused.net)
    assert not any(s.op in ("Cast", "GatherND", "And") for s in fused.net.steps)
    assert run_network(fused, feeds=feeds)["verified"] is True
    a = execute(fused.net, feeds, cache=fused.cache, image=fused.image, check_races=True)
    reference = execute(fused.net, feeds, cache=None)
    monkeypatch.setattr(rmod, "fuse_runtime_masks", lambda net, cfg: None)
    apart = compile_onnx(MODELS / f"{name}.onnx", calibration=source, cfg=cfg)
    assert "mask" in [s.kind for s in apart.net.steps]
    b = execute(apart.net, feeds, cache=apart.cache, image=apart.image)
    for out in fused.net.outputs:
        np.testing.assert_array_equal(a.values[out], reference.values[out])
        np.testing.assert_array_equal(a.values[out], b.values[out])
    probs = [s.outputs[0] for s in fused.net.steps if s.kind == "softmax"]
    assert all((a.values[p].reshape(-1, a.values[p].shape[-1])[:, 5:] == fused.net.qparams[p].z).all()
               for p in probs)  # the padded keys weigh nothing: probability 0, the output's zero point


def test_with_nonlinear_host_the_select_stays_on_the_host() -> None:
    from tinynpu.compiler.onnx import compile_onnx
    from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource

    feeds = _padded("bert_sdpa", 5)
    cn = compile_onnx(MODELS / "bert_sdpa.onnx", calibration=CalibrationSource((feeds,), "padded"), nonlinear="host")
    assert "mask_codes" not in [s.kind for s in cn.net.steps]


def test_a_mask_that_does_not_broadcast_to_the_scores_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mask whose shape (as the model declares it) cannot be read one row per score row: a paragraph naming
    the Add, the Softmax, the mask and both shapes."""
    from tinynpu.compiler.onnx import compile_onnx
    from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource
    from tinynpu.compiler.onnx.ir import MaskStep
    from tinynpu.compiler.onnx.lower import mask_fusion as rmod

    feeds = _padded("bert_sdpa", 5)
    monkeypatch.setattr(rmod, "fuse_runtime_masks", lambda net, cfg: None)
    cn = compile_onnx(MODELS / "bert_sdpa.onnx", calibration=CalibrationSource((feeds,), "padded"))
    select = next(s for s in cn.net.steps if isinstance(s, MaskStep))
    cn.net.shapes[select.inputs[1]] = (1, 1, 3, 16)
    monkeypatch.undo()
    with pytest.raises(OnnxError) as err:
        rmod.fuse_runtime_masks(cn.net, cn.cfg)
    text = str(err.value)
    assert f"Add {select.name!r}" in text and "Softmax" in text and select.inputs[1] in text
    assert "(1, 1, 3, 16)" in text and "(1, 2, 16, 16)" in text and "\n" not in text


def test_a_program_that_does_not_fit_keeps_the_host_select(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinynpu.compiler.onnx import compile_onnx
    from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource
    from tinynpu.compiler.onnx.lower import nonlinear

    monkeypatch.setattr(nonlinear, "check_fits", lambda step, shape, cfg: "too large" if step.kind == "softmax"
                        and step.params.runtime is not None else "")
    feeds = _padded("bert_sdpa", 5)
    cn = compile_onnx(MODELS / "bert_sdpa.onnx", calibration=CalibrationSource((feeds,), "padded"))
    selects = [s for s in cn.net.steps if s.kind == "mask"]
    assert len(selects) == 2 and all("too large" in s.reason for s in selects)
    assert "mask_codes" not in [s.kind for s in cn.net.steps]


def _padded_attention(path: Path, seq: int, *, cond_is_an_output: bool = False) -> Path:
    """One attention head (sequence ``seq``, width 8) whose scores get ``Where(attention_mask, 0, -inf)``, the
    mask a network input broadcast over the query rows; with ``cond_is_an_output`` its bool form is also a
    graph output (so its conversion is a host tensor the user reads, not the codes' alone)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    consts = [numpy_helper.from_array(rng.normal(0, 0.4, (8, 8)).astype(np.float32), n) for n in ("wq", "wk", "wv")]
    consts += [numpy_helper.from_array(np.array(0, np.float32), "zero"),
               numpy_helper.from_array(np.array(-np.inf, np.float32), "minus_inf"),
               numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "wq"], ["q"]), mk("MatMul", ["x", "wk"], ["k"]), mk("MatMul", ["x", "wv"], ["v"]),
             mk("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), mk("MatMul", ["q", "kt"], ["scores"]),
             mk("Cast", ["attention_mask"], ["cond"], to=TensorProto.BOOL),
             mk("Unsqueeze", ["cond", "axis1"], ["cond3"]), mk("Where", ["cond3", "zero", "minus_inf"], ["mask"]),
             mk("Add", ["scores", "mask"], ["masked"], name="mask_add"),
             mk("Softmax", ["masked"], ["p"], name="softmax", axis=-1), mk("MatMul", ["p", "v"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, 8])]
    if cond_is_an_output:
        outputs.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, [1, seq]))
    graph = helper.make_graph(nodes, "padded_attention",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, 8]),
                               helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, seq])],
                              outputs, consts)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize(("config", "seq"), [("t8", 20), ("default", 20), ("t32", 40)])
def test_a_padded_attention_runs_its_mask_on_the_accelerator(tmp_path: Path, config: str, seq: int) -> None:
    """End to end on the simulator with races checked: the last positions padded get probability 0, the run is
    the integer reference's bit for bit, and no host compute step is left."""
    from tinynpu.compiler.onnx import compile_onnx
    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps
    from tinynpu.compiler.onnx.runtime.execute import execute

    cn = compile_onnx(_padded_attention(tmp_path / "att.onnx", seq), cfg=load_config(config))
    assert host_compute_steps(cn.net) == [] and "mask" not in [s.kind for s in cn.net.steps]
    feeds = cn.make_inputs(3)
    feeds["attention_mask"] = (np.arange(seq) < seq - 6).astype(np.int64)[None]
    a = execute(cn.net, feeds, cache=cn.cache, image=cn.image, check_races=True)
    ref = execute(cn.net, feeds, cache=None)
    np.testing.assert_array_equal(a.values["y"], ref.values["y"])
    sm = next(s for s in cn.net.steps if s.kind == "softmax")
    probs = a.values[sm.outputs[0]]
    assert (probs[..., seq - 6:] == cn.net.qparams[sm.outputs[0]].z).all()
    assert (probs[..., :seq - 6] != cn.net.qparams[sm.outputs[0]].z).any()


def test_a_mask_whose_conversion_the_user_reads_keeps_it_on_the_host(tmp_path: Path) -> None:
    """The mask's bool form is a graph output: the host computes it anyway, so the codes read the mask as it is
    (then a host compute step: they are made from a computed tensor, not the input alone), and the run is still
    bit-exact."""
    from tinynpu.compiler.onnx import compile_onnx
    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps
    from tinynpu.compiler.onnx.verify.run import run_network

    cn = compile_onnx(_padded_attention(tmp_path / "att.onnx", 16, cond_is_an_output=True))
    codes = next(s for s in cn.net.steps if s.kind == "mask_codes")
    assert not codes.chain and codes.inputs != ("attention_mask",) and codes.name in host_compute_steps(cn.net)
    feeds = cn.make_inputs(1)
    feeds["attention_mask"] = (np.arange(16) % 3 > 0).astype(np.int64)[None]
    assert run_network(cn, feeds=feeds)["verified"] is True


def test_the_mask_benchmark_compares_both_paths(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m tinynpu.compiler.onnx.bench_masks``: both paths on the padded inputs in one run, the ratios."""
    from tinynpu.compiler.onnx.bench_masks import compare, main

    r = compare("bert_eager", 5)
    assert r["outputs_equal"] and r["in_program"]["bit_exact"] and r["host_select"]["bit_exact"]
    assert r["in_program"]["host_compute_steps"] < r["host_select"]["host_compute_steps"]
    assert r["in_program"]["host_bytes"] < r["host_select"]["host_bytes"]
    assert main(["--keep", "9", "gpt2_past"]) == 0
    out = capsys.readouterr().out
    assert "first 9 key positions" in out and "outputs equal bit for bit: True" in out and "ratio" in out
