"""A constant attention mask applied inside the masked softmax's program (compiler/onnx/lower/select.py): the
program bit-exact against its reference on the simulator, the reference equal to the host select followed by
the masked softmax, and a network's mask steps gone with its outputs unchanged bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinynpu.compiler.onnx.lower import select, softmax
from tinynpu.compiler.onnx.lower.rowwise import RowShape, row_compiled
from tinynpu.compiler.run import run_compiled
from tinynpu.isa import load_config

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from test_onnx_masks import _attention, _causal  # noqa: E402


def _params(mask: np.ndarray, zero_point: int = 0) -> softmax.SoftmaxParams:
    from dataclasses import replace

    return replace(softmax.softmax_params(0.07, 1 / 127, zero_point, what="test", masked=True), mask=mask)


@pytest.mark.parametrize(("config", "rows", "width", "period"),
                         [("t8", 26, 21, 13), ("default", 34, 17, 17), ("default", 64, 37, 16), ("t32", 66, 70, 16)])
def test_program_with_the_constant_mask_is_its_reference(config: str, rows: int, width: int, period: int) -> None:
    """Random scores (the code -128 among them: kept, so clamped) and a random mask repeating every ``period``
    rows, through the program on the simulator with races checked (run_compiled raises on a difference)."""
    cfg = load_config(config)
    mask = np.random.default_rng(period).random((period, width)) < 0.3
    p = _params(mask, zero_point=-5)
    shape = RowShape(rows, width, cfg.tile)
    params = np.concatenate([softmax.softmax_rows(p, cfg.tile), select.mask_rows(mask, shape)])
    comp = row_compiled(cfg, shape, params, 2, softmax.softmax_body(p, cfg.tile),
                        lambda x: softmax.softmax_reference(x, p), kind="test", what="test")
    assert run_compiled(comp, cfg=cfg, seed=5, check_races=True)["cycles"] > 0


@pytest.mark.parametrize(("config", "width"), [("t8", 100), ("default", 200), ("t32", 160)])
def test_a_causal_mask_too_long_to_hold_streams_its_rows(config: str, width: int) -> None:
    """A causal mask over ``width`` positions: its rows for every tile-row would not fit the accumulators
    (select.streamed), so each tile-row loads its own from DRAM; bit-exact on the simulator, races checked."""
    cfg = load_config(config)
    mask = np.triu(np.ones((width, width), dtype=bool), 1)
    p = _params(mask)
    shape = RowShape(width, width, cfg.tile)
    head = softmax.softmax_rows(p, cfg.tile)
    assert select.streamed(mask, shape, len(head), cfg.rows("acc"))
    params = np.concatenate([head, select.mask_rows(mask, shape)])
    comp = row_compiled(cfg, shape, params, 2 + shape.segments, softmax.softmax_body(p, cfg.tile, streamed_mask=True),
                        lambda x: softmax.softmax_reference(x, p), kind="test", what="test", resident=len(head))
    assert run_compiled(comp, cfg=cfg, seed=3, check_races=True)["cycles"] > 0


def test_a_long_causal_attention_applies_its_mask_on_the_accelerator(tmp_path: Path) -> None:
    """256 positions: before the mask's rows were streamed, the select stayed on the host (its rows did not
    fit); now no host compute step is left and the run is bit-exact."""
    from tinynpu.compiler.onnx import compile_onnx, run_network
    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps

    cn = compile_onnx(_attention(tmp_path / "att.onnx", _causal(-np.inf, 256)))
    assert not any(s.kind == "mask" for s in cn.net.steps) and host_compute_steps(cn.net) == []
    assert run_network(cn)["verified"] is True


@settings(max_examples=100, deadline=None)
@given(data=st.data(), period=st.integers(1, 9), width=st.integers(1, 40), repeats=st.integers(1, 4))
def test_the_inline_select_is_the_host_select(data: st.DataObject, period: int, width: int, repeats: int) -> None:
    """Exact integers: the softmax of scores the host selected equals the softmax applying the mask itself."""
    from tinynpu.compiler.onnx.ir import MaskStep
    from tinynpu.compiler.onnx.runtime.host import mask_select

    mask = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=width, max_size=width),
                                       min_size=period, max_size=period)))
    x = np.array(data.draw(st.lists(st.integers(-128, 127), min_size=period * repeats * width,
                                    max_size=period * repeats * width)), dtype=np.int8).reshape(-1, width)
    full = np.tile(np.where(mask, -np.inf, 0.0), (repeats, 1)).astype(np.float32)
    step = MaskStep(name="m", op="Add", where="host", inputs=("x", "mask"), outputs=("s",), floor=-1e4)
    selected = mask_select(step, {"x": x, "mask": full})
    plain = softmax.softmax_params(0.07, 1 / 127, 0, what="test", masked=True)
    np.testing.assert_array_equal(softmax.softmax_reference(x, _params(mask)),
                                  softmax.softmax_reference(selected, plain))
    assert select.period(np.tile(mask, (repeats, 1))) <= period


def test_a_network_s_constant_mask_runs_in_the_softmax_program(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The causal attention: no host select left, and every tensor of the run equal to the run with the host
    select (the fusion switched off) bit for bit, with more accelerator cycles only for vmax and vadd."""
    from tinynpu.compiler.onnx import compile_onnx, run_network
    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps
    from tinynpu.compiler.onnx.lower import plan
    from tinynpu.compiler.onnx.runtime.execute import execute

    path = _attention(tmp_path / "att.onnx", _causal(-np.inf))
    fused = compile_onnx(path)
    assert not any(s.kind == "mask" for s in fused.net.steps) and host_compute_steps(fused.net) == []
    monkeypatch.setattr(plan, "fuse_constant_masks", lambda net, cfg: None)
    apart = compile_onnx(path)
    assert [s.kind for s in apart.net.steps if s.kind == "mask"] == ["mask"]
    feeds = fused.make_inputs(4)
    a = execute(fused.net, feeds, cache=fused.cache, image=fused.image)
    b = execute(apart.net, feeds, cache=apart.cache, image=apart.image)
    for name in fused.net.outputs:
        np.testing.assert_array_equal(a.values[name], b.values[name])
    assert run_network(fused)["verified"] is True


def test_a_mask_whose_rows_do_not_fit_stays_a_host_select(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinynpu.compiler.onnx import compile_onnx
    from tinynpu.compiler.onnx.lower import nonlinear

    monkeypatch.setattr(nonlinear, "check_fits", lambda step, shape, cfg: "too large" if step.kind == "softmax"
                        and step.params.mask is not None else "")
    cn = compile_onnx(_attention(tmp_path / "att.onnx", _causal(-np.inf)))
    kinds = {s.name: (s.kind, s.where) for s in cn.net.steps}
    assert kinds["mask_add"] == ("mask", "host") and kinds["softmax"] == ("softmax", "npu")
