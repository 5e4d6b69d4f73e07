"""Additive attention masks that survive int8 (compiler/onnx/frontend/masks.py): the mask is left out of the
scores' calibration, applied as a select on the int8 scores, and the softmax behind it skips the masked
entries on the accelerator.  The masked program bit-exact against its reference on the simulator, its
reference against the exact masked softmax, and the exports with causal and padded masks against float."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinynpu.compiler.onnx.frontend.masks import MASK_FLOOR, is_additive_mask
from tinynpu.compiler.onnx.lower import softmax
from tinynpu.compiler.onnx.lower.rowwise import RowShape, row_compiled
from tinynpu.compiler.run import run_compiled
from tinynpu.isa import load_config

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

MODELS = Path(__file__).resolve().parent / "models"


@pytest.mark.parametrize(("config", "rows", "width"), [("t8", 13, 21), ("default", 40, 37), ("t32", 33, 70)])
@pytest.mark.parametrize("zero_point", [0, -7])
def test_masked_softmax_program_is_its_reference(config: str, rows: int, width: int, zero_point: int) -> None:
    """Random int8 rows (the code -128, masked, among them) through the program on the simulator, races checked."""
    p = softmax.softmax_params(0.07, 1 / 127, zero_point, what="test", masked=True)
    cfg = load_config(config)
    comp = row_compiled(cfg, RowShape(rows, width, cfg.tile), softmax.softmax_rows(p, cfg.tile), 2,
                        softmax.softmax_body(p, cfg.tile), lambda x: softmax.softmax_reference(x, p), kind="test",
                        what="test")
    assert run_compiled(comp, cfg=cfg, seed=3, check_races=True)["cycles"] > 0  # raises on a difference


masked_rows = st.integers(1, 200).flatmap(lambda n: st.lists(
    st.lists(st.integers(-128, 127), min_size=n, max_size=n), min_size=1, max_size=4))


@settings(max_examples=150, deadline=None)
@given(rows=masked_rows, s_in=st.floats(1e-3, 3.0), s_out=st.sampled_from([1 / 127, 1 / 255, 1e-3]))
def test_masked_reference_rounds_the_exact_masked_softmax(rows: list[list[int]], s_in: float, s_out: float) -> None:
    """Masked entries (-128) exactly 0; kept ones within 0.52 LSB of the softmax over the kept entries alone;
    a row with every entry masked uniform."""
    x = np.array(rows, dtype=np.int8)
    y = softmax.softmax_reference(x, softmax.softmax_params(s_in, s_out, 0, what="test", masked=True))
    keep = x != -128
    xi = np.where(keep, x.astype(np.float64), -np.inf)
    top = np.where(keep.any(-1, keepdims=True), xi.max(-1, keepdims=True), 0.0)
    f = np.where(keep, np.exp((xi - top) * s_in), 0.0)
    none = ~keep.any(-1)
    f[none] = 1.0  # every entry masked: uniform
    f /= f.sum(-1, keepdims=True)
    assert np.all(y[~keep & ~none[:, None]] == 0)
    assert np.abs(y - np.clip(f / s_out, -128, 127)).max() <= 0.52


def test_additive_masks_recognised() -> None:
    lowest = np.finfo(np.float32).min
    assert is_additive_mask(np.array([[0.0, -np.inf], [0.0, 0.0]], dtype=np.float32))
    assert is_additive_mask(np.array([0.0, lowest, -1e4], dtype=np.float32))
    assert is_additive_mask(np.array([MASK_FLOOR]))
    assert not is_additive_mask(np.array([0.0, -5.0]))  # a bias (ALiBi, relative positions): not a mask
    assert not is_additive_mask(np.array([0.0, 1.0]))
    assert not is_additive_mask(np.zeros((0,)))


def _attention(path: Path, mask: np.ndarray) -> Path:
    """One attention head (sequence ``mask.shape[-1]``, 16 in most tests; width 8) with ``mask`` added to its
    scores before the softmax."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = {n: numpy_helper.from_array(rng.normal(0, 0.4, (8, 8)).astype(np.float32), n) for n in ("wq", "wk", "wv")}
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "wq"], ["q"]), mk("MatMul", ["x", "wk"], ["k"]), mk("MatMul", ["x", "wv"], ["v"]),
             mk("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), mk("MatMul", ["q", "kt"], ["scores"]),
             mk("Add", ["scores", "mask"], ["masked"], name="mask_add"),
             mk("Softmax", ["masked"], ["p"], name="softmax", axis=-1), mk("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "masked_attention",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, mask.shape[-1], 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, mask.shape[-1], 8])],
                              [*w.values(), numpy_helper.from_array(mask.astype(np.float32), "mask")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def _causal(fill: float, seq: int = 16) -> np.ndarray:
    return np.triu(np.full((1, seq, seq), fill, dtype=np.float32), 1)


@pytest.mark.parametrize("fill", [-np.inf, float(np.finfo(np.float32).min), -1e4])
def test_causal_mask_is_a_select_and_a_masked_softmax(tmp_path: Path, fill: float) -> None:
    """The mask sets no scale: the scores' scale is the matmul's, the masked softmax applies the constant mask
    in its program (tests/test_onnx_mask_select.py), the run is bit-exact and the output tracks float (a mask
    in the scale would make every row uniform)."""
    from tinynpu.compiler.onnx import compile_onnx, run_network

    cn = compile_onnx(_attention(tmp_path / "att.onnx", _causal(fill)))
    kinds = {s.name: (s.kind, s.where) for s in cn.net.steps}
    assert "mask_add" not in kinds and kinds["softmax"] == ("softmax", "npu")
    sm = next(s for s in cn.net.steps if s.kind == "softmax")
    assert sm.params.mask is not None and cn.net.qparams[sm.inputs[0]].s < 1.0  # the scores' own scale
    r = run_network(cn)
    assert r["verified"] is True
    assert r["outputs"][0]["ort_float"]["cosine"] >= 0.99


def test_host_path_adds_the_mask_in_float(tmp_path: Path) -> None:
    """``--nonlinear host``: the mask Add and the softmax are float host operators on the dequantized scores,
    exactly what onnxruntime's int8 run of the same model computes."""
    from tinynpu.compiler.onnx import compile_onnx, run_network

    cn = compile_onnx(_attention(tmp_path / "att.onnx", _causal(-np.inf)), nonlinear="host")
    assert {s.name: s.kind for s in cn.net.steps}["mask_add"] == "onnx"
    r = run_network(cn)
    assert r["verified"] is True and r["outputs"][0]["ort_quantized"]["equal_fraction"] == 1.0
    assert r["outputs"][0]["ort_float"]["cosine"] >= 0.99


def test_a_bias_added_to_the_scores_is_no_mask(tmp_path: Path) -> None:
    """A small additive term (a relative-position bias) is calibrated with the scores as before."""
    from tinynpu.compiler.onnx import compile_onnx

    bias = np.random.default_rng(1).normal(0, 0.5, (1, 16, 16))
    cn = compile_onnx(_attention(tmp_path / "att.onnx", bias))
    assert not any(s.kind == "mask" for s in cn.net.steps)


def _probabilities(name: str, feeds: dict[str, np.ndarray]) -> list[float]:
    """Cosine of each softmax's int8 output (dequantized) against the float model's, on ``feeds``."""
    from tinynpu.compiler.onnx import compile_onnx
    from tinynpu.compiler.onnx.ir import SoftmaxStep
    from tinynpu.compiler.onnx.runtime.execute import execute
    from tinynpu.compiler.onnx.verify.checks import session

    cn = compile_onnx(MODELS / f"{name}.onnx")
    steps = [s for s in cn.net.steps if isinstance(s, SoftmaxStep)]
    assert steps and all(s.where == "npu" for s in steps)
    ours = execute(cn.net, feeds, cache=cn.cache, image=cn.image).values
    assert all(np.array_equal(ours[s.outputs[0]], v) for s in steps
               for v in [execute(cn.net, feeds, cache=None).values[s.outputs[0]]])
    names = [s.chain[-1].inputs[0] for s in steps]  # the float tensor each final QuantizeLinear reads
    theirs = session(cn.imported.model, names).run(names, feeds)
    out = []
    for s, f in zip(steps, theirs, strict=True):
        qp = cn.net.qparams[s.outputs[0]]
        a = ((ours[s.outputs[0]].astype(np.float64) - qp.z) * qp.s).ravel()
        b = np.nan_to_num(np.asarray(f, dtype=np.float64)).ravel()
        out.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
    return out


def _inputs(name: str) -> dict[str, np.ndarray]:
    with np.load(MODELS / f"{name.split('.')[0]}.inputs.npz") as data:
        return {k: data[k] for k in data.files}


def test_padded_attention_mask_on_bert() -> None:
    """BERT with the last 5 of 16 positions padded (attention_mask 0): the attention probabilities track
    float (0.83 when the mask set the scale: the padded keys were attended)."""
    feeds = _inputs("bert_sdpa")
    feeds["attention_mask"] = feeds["attention_mask"].copy()
    feeds["attention_mask"][..., -5:] = 0
    assert min(_probabilities("bert_sdpa", feeds)) >= 0.99


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2_sdpa", "gpt2_sdpa.legacy", "gpt2_eager", "gpt2_eager.legacy"])
def test_causal_attention_of_gpt2(name: str) -> None:
    """GPT-2's causal mask (a constant; -inf in the TorchScript export): probabilities track float."""
    assert min(_probabilities(name, _inputs(name))) >= 0.99
