"""Rotary position embeddings on the accelerator (compiler/onnx/frontend/rotary.py, lower/rotary.py): the
program bit-exact against its reference on the simulator at T = 8, 16 and 32, the reference against exact
integers and within half an LSB (plus the tables' rounding) of float rotary, the pattern found in graphs
written with Slice or Split, and the forms it must leave alone."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinynpu.compiler.onnx.lower import rotary
from tinynpu.compiler.onnx.lower.rowwise import RowShape, row_compiled
from tinynpu.compiler.run import run_compiled
from tinynpu.errors import OnnxError
from tinynpu.isa import load_config

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def rotate_half(d: int) -> np.ndarray:
    """``x @ M = cat(-x[d/2:], x[:d/2])``."""
    h = d // 2
    m = np.zeros((d, d), dtype=np.int8)
    m[h + np.arange(h), np.arange(h)] = -1
    m[np.arange(h), h + np.arange(h)] = 1
    return m


def tables(positions: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Llama's cos and sin (positions x d)."""
    half = d // 2
    freq = 1.0 / 10000.0 ** (np.arange(half) / half)
    angles = np.outer(np.arange(positions), freq)
    angles = np.concatenate([angles, angles], axis=1)
    return np.cos(angles), np.sin(angles)


def _params(positions: int, d: int, s_in: float = 0.05, s_out: float = 0.06) -> rotary.RotaryParams:
    cos, sin = tables(positions, d)
    return rotary.rotary_params(rotate_half(d), cos, sin, s_in, s_out, what="test")


@pytest.mark.parametrize(("config", "rows", "d", "positions"),
                         [("t8", 40, 8, 10), ("t8", 24, 32, 12), ("default", 64, 8, 16), ("default", 18, 24, 9),
                          ("default", 32, 64, 16), ("default", 130, 64, 65), ("t32", 70, 16, 35),
                          ("t32", 32, 64, 8)])
def test_program_is_its_reference(config: str, rows: int, d: int, positions: int) -> None:
    """Random int8 rows through the program on the simulator with races checked (run_compiled raises on a
    difference): one segment, several with the halves a whole number of tiles (one rotation tile each),
    d/2 not a multiple of T (two source tiles summed into an output segment), and tables too large to hold
    (65 positions at T = 16, 35 at T = 32: each tile-row loads its own blocks)."""
    cfg = load_config(config)
    p = _params(positions, d)
    shape = RowShape(rows, d, cfg.tile)
    tiles, where = rotary.rotation_tiles(p, shape)
    comp = row_compiled(cfg, shape, rotary.rotary_rows(p, shape), rotary.body_blocks(p, shape, cfg),
                        rotary.rotary_body(p, shape, cfg), lambda x: rotary.rotary_reference(x, p), kind="test",
                        what="test", b_rows=tiles, resident=rotary.resident_rows(p, shape, cfg))
    assert run_compiled(comp, cfg=cfg, seed=7, check_races=True)["cycles"] > 0
    assert len(where) >= shape.segments
    assert rotary.streamed(p, shape, cfg) == (positions in (65, 35))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), half=st.integers(1, 12), positions=st.integers(1, 6), repeats=st.integers(1, 3),
       ratio=st.floats(0.3, 3.0))
def test_reference_is_exact_integer_arithmetic_within_half_an_lsb(data: st.DataObject, half: int, positions: int,
                                                                  repeats: int, ratio: float) -> None:
    """Python integers and Fractions: the reference is ``round(acc * M / 2^(31+S))`` (ties up), saturated, of
    ``acc = x C + (x @ M) S``; and against float rotary on the same input it is off by at most half an LSB
    plus the tables' rounding (``|x| (|dC| + |dS|)``, each below ``2^-(F+1)``)."""
    d = 2 * half
    s_in = 0.05
    p = _params(positions, d, s_in, s_in * ratio)
    x = np.array(data.draw(st.lists(st.integers(-128, 127), min_size=positions * repeats * d,
                                    max_size=positions * repeats * d)), dtype=np.int8).reshape(-1, d)
    got = rotary.rotary_reference(x, p)
    cos, sin = tables(positions, d)
    for r in range(x.shape[0]):
        row = [int(v) for v in x[r]]
        rot = [-row[j + half] if j < half else row[j - half] for j in range(d)]
        for j in range(d):
            acc = row[j] * int(p.cos[r % positions, j]) + rot[j] * int(p.sin[r % positions, j])
            want = (acc * p.multiplier + (1 << (30 + p.shift))) >> (31 + p.shift)
            assert int(got[r, j]) == max(-128, min(127, want))
            exact = (Fraction(row[j]) * Fraction(float(cos[r % positions, j]))
                     + Fraction(rot[j]) * Fraction(float(sin[r % positions, j]))) * Fraction(s_in) / Fraction(
                         float(np.float64(s_in * ratio)))
            if abs(exact) < 127:
                bound = Fraction(1, 2) + Fraction(256, 2 ** (p.frac_bits + 1)) + Fraction(1, 10**6)
                assert abs(got[r, j] - exact) <= bound


def test_the_period_is_the_positions() -> None:
    p = _params(12, 8)
    from tinynpu.compiler.onnx.lower import select

    assert p.period == 12 and select.period(np.tile(p.cos, (3, 1))) == 12


def test_a_scale_the_requantization_cannot_hold_is_refused_with_the_node() -> None:
    cos, sin = tables(4, 8)
    with pytest.raises(OnnxError, match=r"rotary embedding 'q_rot'.*cannot be lowered"):
        rotary.rotary_params(rotate_half(8), cos, sin, 1.0, 1e-6, what="rotary embedding 'q_rot'")


# -- graphs ----------------------------------------------------------------------------------------------


def _graph(path: Path, *, heads: int = 2, seq: int = 16, d: int = 8, split: bool = False,
           swap_rows: bool = False) -> Path:
    """``x (1 x heads x seq x d) -> x cos + rotate_half(x) sin -> MatMul`` as an exporter writes it (``Slice``,
    or ``Split`` as tinynpu's own Llama writes it), a matmul on each side so the rotary sits between int8
    tensors; ``swap_rows``: a rotation that reads the neighbouring row (no rotary embedding)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    cos, sin = tables(seq, d)
    h = d // 2
    inits = [numpy_helper.from_array((rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32), "w_in"),
             numpy_helper.from_array((rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32), "w_out"),
             numpy_helper.from_array(cos[None, None].astype(np.float32), "cos"),
             numpy_helper.from_array(sin[None, None].astype(np.float32), "sin"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([h], np.int64), "half"),
             numpy_helper.from_array(np.array([d], np.int64), "end"),
             numpy_helper.from_array(np.array([3], np.int64), "axis"),
             numpy_helper.from_array(np.array([2], np.int64), "row_axis"),
             numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([seq], np.int64), "seq_end"),
             numpy_helper.from_array(np.array([h, h], np.int64), "halves")]
    nodes = [helper.make_node("MatMul", ["x", "w_in"], ["q"], name="proj")]
    if split:
        nodes.append(helper.make_node("Split", ["q", "halves"], ["first", "second"], name="split", axis=3))
    else:
        nodes += [helper.make_node("Slice", ["q", "zero", "half", "axis"], ["first"], name="slice_1"),
                  helper.make_node("Slice", ["q", "half", "end", "axis"], ["second"], name="slice_2")]
    second = "second"
    if swap_rows:  # the second half from the next position: a move across rows
        nodes += [helper.make_node("Slice", ["second", "one", "seq_end", "row_axis"], ["tail"], name="rows_1"),
                  helper.make_node("Slice", ["second", "zero", "one", "row_axis"], ["head"], name="rows_2"),
                  helper.make_node("Concat", ["tail", "head"], ["second_rolled"], name="roll", axis=2)]
        second = "second_rolled"
    nodes += [helper.make_node("Neg", [second], ["neg"], name="neg"),
              helper.make_node("Concat", ["neg", "first"], ["rot"], name="cat", axis=3),
              helper.make_node("Mul", ["q", "cos"], ["qc"], name="mul_cos"),
              helper.make_node("Mul", ["rot", "sin"], ["rs"], name="mul_sin"),
              helper.make_node("Add", ["qc", "rs"], ["qr"], name="rope"),
              helper.make_node("MatMul", ["qr", "w_out"], ["y"], name="out")]
    shape = [1, heads, seq, d]
    g = helper.make_graph(nodes, "rope", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("split", [False, True], ids=["slice", "split"])
@pytest.mark.parametrize("config", ["t8", "default", "t32"])
def test_a_graph_s_rotary_runs_on_the_accelerator(tmp_path: Path, split: bool, config: str) -> None:
    """No host compute step left, one rotary step with the rotate_half matrix, bit-exact on the simulator, and
    the output as close to the float model as the host-float path's."""
    from tinynpu.compiler.onnx import compile_onnx, run_network
    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps
    from tinynpu.isa import load_config

    path = _graph(tmp_path / "rope.onnx", split=split)
    cn = compile_onnx(path, cfg=load_config(config))
    steps = [s for s in cn.net.steps if s.kind == "rotary"]
    assert [(s.name, s.where) for s in steps] == [("rope", "npu")]
    np.testing.assert_array_equal(steps[0].params.rotation, rotate_half(8))
    assert host_compute_steps(cn.net) == []
    r = run_network(cn)
    assert r["verified"] is True
    host = run_network(compile_onnx(path, nonlinear="host"))
    assert r["outputs"][0]["ort_float"]["cosine"] >= host["outputs"][0]["ort_float"]["cosine"] - 1e-4


def test_a_rotation_that_mixes_rows_is_left_alone(tmp_path: Path) -> None:
    from tinynpu.compiler.onnx import compile_onnx, run_network

    cn = compile_onnx(_graph(tmp_path / "roll.onnx", swap_rows=True))
    assert not any(s.kind == "rotary" for s in cn.net.steps)
    assert run_network(cn)["verified"] is True


def test_a_rotary_whose_rows_do_not_fit_stays_on_the_host_with_the_reason(tmp_path: Path) -> None:
    """d = 512 at T = 8: a tile-row's 64 segments, its rotated rows and its cos and sin blocks need 2,048
    accumulator rows, more than the 1,024 there are; the step runs its ONNX nodes on the host and says why."""
    from tinynpu.compiler.onnx import compile_onnx, run_network
    from tinynpu.isa import load_config

    cn = compile_onnx(_graph(tmp_path / "wide.onnx", heads=1, seq=2, d=512), cfg=load_config("t8"))
    step = next(s for s in cn.net.steps if s.kind == "rotary")
    assert step.where == "host"
    assert "Rotary 'rope': a row of 512 elements is 64 segments of 8" in step.reason
    assert "2048 accumulator rows" in step.reason and "cannot be lowered" in step.reason
    assert run_network(cn)["verified"] is True


def test_long_tables_stream_from_dram(tmp_path: Path) -> None:
    """512 positions at T = 8: both tables' blocks (1,024 rows) would not fit beside the tile-rows, so each
    tile-row loads its own, and the run is bit-exact."""
    from tinynpu.compiler.onnx import compile_onnx, run_network
    from tinynpu.isa import load_config

    cn = compile_onnx(_graph(tmp_path / "long.onnx", heads=1, seq=512), cfg=load_config("t8"))
    step = next(s for s in cn.net.steps if s.kind == "rotary")
    assert step.where == "npu" and step.params is not None
    assert rotary.streamed(step.params, RowShape(512, 8, 8), load_config("t8"))
    assert run_network(cn)["verified"] is True


def test_more_constant_tiles_than_b_holds_are_refused_with_the_node() -> None:
    from tinynpu.compiler.onnx.lower.rowwise import check_b_tiles

    with pytest.raises(OnnxError, match=r"Rotary 'q': its 300 constant tiles of b need 2400 rows \(config 't8' has "
                                        r"2048\): too large for the accelerator, so it cannot be lowered"):
        check_b_tiles(load_config("t8"), 300, what="Rotary 'q'")
    check_b_tiles(load_config("t8"), 256, what="Rotary 'q'")
