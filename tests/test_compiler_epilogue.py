"""A layer's epilogue (bias, vrequantf or vrequant per channel, zero point, clamp) in conv2d and matmul programs."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from tinynpu.compiler.compiled import Compiled
from tinynpu.compiler.conv2d import compile_conv2d
from tinynpu.compiler.cost import estimate
from tinynpu.compiler.epilogue import Epilogue, quantize_multiplier
from tinynpu.compiler.matmul import compile_matmul
from tinynpu.compiler.run import run_compiled_with_stats
from tinynpu.compiler.schedule import Tiling, buffer_rows
from tinynpu.errors import UsageError
from tinynpu.isa import load_config


def _epilogue(n: int, seed: int, *, requantizer: str = "q31", bias: bool = True, zero_point: int = 0,
              lo: int = -128, hi: int = 127) -> Epilogue:
    """Scales that spread int8 x int8 sums of depth ~100 over the int8 range, per channel."""
    rng = np.random.default_rng(seed)
    real = rng.uniform(2e-5, 4e-4, n)
    if requantizer == "binary32":
        requant: dict[str, Any] = {"scale": real.astype(np.float32)}
    else:
        m, s = quantize_multiplier(real)
        requant = {"multiplier": m, "shift": s}
    return Epilogue(requantizer=requantizer, **requant,
                    bias=rng.integers(-20000, 20000, n, dtype=np.int32) if bias else None,
                    zero_point=zero_point, lo=lo, hi=hi)


def _run(comp: Compiled) -> tuple[np.ndarray, dict[str, Any]]:
    """Run on the simulator (races checked); the runner compares the output with the reference bit for bit."""
    report, _ = run_compiled_with_stats(comp, seed=3, check_races=True)
    return comp.reference(comp.make_inputs(3))[comp.outputs[0]], report


CASES = [
    pytest.param({}, id="bias"),
    pytest.param({"lo": 0}, id="relu"),
    pytest.param({"zero_point": 7, "lo": 7, "hi": 120}, id="zero-point-relu-clip"),
    pytest.param({"bias": False, "lo": -30, "hi": 60}, id="clip-no-bias"),
    pytest.param({"zero_point": -5}, id="zero-point"),
    pytest.param({"requantizer": "binary32"}, id="binary32-bias"),
    pytest.param({"requantizer": "binary32", "zero_point": 7, "lo": 7, "hi": 120}, id="binary32-zero-point-relu-clip"),
    pytest.param({"requantizer": "binary32", "bias": False, "lo": 0}, id="binary32-relu-no-bias"),
]


@pytest.mark.parametrize("form", CASES)
@pytest.mark.parametrize("shape", [(1, 3, 11, 9, 37, 3, 3, 2, 1), (2, 20, 6, 7, 19, 1, 1, 1, 0)],
                         ids=["3x3-s2-37ch", "1x1-19ch"])
def test_conv2d_epilogue_is_bit_exact(shape: tuple[int, ...], form: dict[str, Any]) -> None:
    n, c, h, w, k, r, s, stride, pad = shape
    epi = _epilogue(k, seed=k, **form)
    comp = compile_conv2d(n, c, h, w, k, r, s, stride=stride, pad=pad, epilogue=epi)
    y, report = _run(comp)
    assert report["verified"] is True
    assert comp.program.tensor("Y").dtype == "int8"
    assert y.min() >= epi.lo and y.max() <= epi.hi
    assert len(np.unique(y)) > 20  # the scales spread the outputs: a check that can fail
    words = comp.asm()
    assert words.count(f"{epi.requant_mnemonic} ") > 0 and ("vmax" in words) == (epi.lo not in (-128, 0))


@pytest.mark.parametrize("form", CASES)
@pytest.mark.parametrize("mnk", [(5, 37, 70), (33, 100, 129)], ids=["5x37x70", "33x100x129"])
def test_matmul_epilogue_is_bit_exact(mnk: tuple[int, int, int], form: dict[str, Any]) -> None:
    m, n, k = mnk
    epi = _epilogue(n, seed=n, **form)
    comp = compile_matmul(m, n, k, epilogue=epi)
    y, report = _run(comp)
    assert report["verified"] is True
    assert comp.program.tensor("C").dtype == "int8"
    assert y.min() >= epi.lo and y.max() <= epi.hi


def test_epilogue_reference_is_the_integer_arithmetic() -> None:
    epi = Epilogue(multiplier=np.array([2**30, 2**30]), shift=np.array([0, 1]), bias=np.array([1, -2]),
                   zero_point=3, lo=0, hi=10)
    acc = np.array([[-9, 4], [2, 40]], dtype=np.int32)
    # (acc + bias) * 0.5 * 2^-S rounded half up, + 3, clamped to 0..10
    assert epi.reference(acc).tolist() == [[0, 4], [5, 10]]
    table = epi.param_table(tile=4)
    assert table.shape == (4, 4)  # bias, M, S, zero point rows of the one column tile
    assert table[:, :2].tolist() == [[1, -2], [2**30, 2**30], [0, 1], [3, 3]] and not table[:, 2:].any()


def test_binary32_epilogue_reference_and_parameter_rows() -> None:
    epi = Epilogue(requantizer="binary32", scale=np.array([0.5, 0.25], np.float32), bias=np.array([1, -2]),
                   zero_point=3, lo=0, hi=10)
    acc = np.array([[-9, 4], [2, 40], [4, 12]], dtype=np.int32)
    # (acc + bias) * scale rounded half to even (1.5 -> 2, 2.5 -> 2), + 3, clamped to 0..10
    assert epi.reference(acc).tolist() == [[0, 3], [5, 10], [5, 5]]
    assert (epi.param_rows, epi.requant_rows, epi.requant_mnemonic) == (3, 1, "vrequantf")
    table = epi.param_table(tile=4)
    assert table.shape == (3, 4)  # bias, scale (its binary32 bits), zero point rows of the one column tile
    assert table[:, :2].tolist() == [[1, -2], np.array([0.5, 0.25], np.float32).view(np.int32).tolist(), [3, 3]]


def test_parameter_rows_take_accumulator_rows_and_alu_time() -> None:
    cfg = load_config("default")
    t = Tiling(bm=2, bn=3, bk=1)
    assert buffer_rows(t, cfg, bias=4)["acc"] - buffer_rows(t, cfg)["acc"] == 16  # 3 x 4 rows, one tile
    # A small reduction (one tile of K) makes the tensor unit's share short: the ALU's epilogue shows.
    plain = estimate(256, 256, 16, t, cfg, in_bytes=1, out_bytes=1)
    epi = estimate(256, 256, 16, t, cfg, in_bytes=1, out_bytes=1, bias=3, alu_ops=4)
    assert epi.cycles > plain.cycles and epi.dram_bytes == plain.dram_bytes + 3 * 256 * 4 * 8


def test_epilogue_adds_its_alu_instructions_per_column_tile() -> None:
    comp = compile_matmul(16, 48, 16, epilogue=_epilogue(48, seed=1, zero_point=2, lo=2, hi=100),
                          schedule="naive")
    asm = comp.asm()
    # three column tiles, each: vaddrow bias, vrequant, vaddrow zero point, vmax 2, vmin 100
    assert [asm.count(op) for op in ("vrequant ", "vaddrow", "vmax", "vmin")] == [3, 6, 3, 3]
    binary32 = compile_matmul(16, 48, 16, epilogue=_epilogue(48, seed=1, requantizer="binary32", zero_point=2),
                              schedule="naive").asm()
    assert [binary32.count(op) for op in ("vrequantf ", "vrequant ", "vaddrow")] == [3, 0, 6]
    # relu at 0 is the store's flag, no vmax
    relu = compile_matmul(16, 48, 16, epilogue=_epilogue(48, seed=1, lo=0), schedule="naive").asm()
    assert "vmax" not in relu and "relu=1" in relu


@pytest.mark.parametrize("kwargs, message", [
    ({"multiplier": [1, 2], "shift": [0, 32]}, r"shift\[1\] must be in 0..31, not 32"),
    ({"multiplier": [1, 2], "shift": [0]}, "shift has 1 channels, multiplier 2"),
    ({"multiplier": [1.5], "shift": [0]}, "multiplier must be a non-empty 1-D integer array"),
    ({"multiplier": [1], "shift": [0], "bias": [1, 2]}, "bias has 2 channels, the requantization 1"),
    ({"multiplier": [1], "shift": [0], "zero_point": 200}, "zero_point must be in -128..127, not 200"),
    ({"multiplier": [1], "shift": [0], "lo": 5, "hi": 4}, "lo <= hi"),
    ({"multiplier": [2**31], "shift": [0]}, r"multiplier\[0\] must be in"),
    ({"multiplier": [1], "shift": [0], "scale": np.ones(1, np.float32)}, "q31 requantizer takes multiplier and shift"),
    ({"requantizer": "binary32", "multiplier": [1], "shift": [0]}, "binary32 requantizer takes scale"),
    ({"requantizer": "binary32", "scale": [0.5]}, "scale must be a non-empty 1-D float32 array"),
    ({"requantizer": "binary32", "scale": np.array([0.5, -1.0], np.float32)},
     r"scale\[1\] must be a positive finite binary32 value, not -1.0"),
    ({"requantizer": "binary32", "scale": np.array([np.inf], np.float32)}, r"scale\[0\] must be a positive finite"),
    ({"requantizer": "binary32", "scale": np.ones(2, np.float32), "bias": [1]},
     "bias has 1 channels, the requantization 2"),
    ({"requantizer": "float", "scale": np.ones(1, np.float32)},
     "requantizer must be one of 'binary32', 'q31', not 'float'"),
])
def test_epilogue_rejects_bad_parameters(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Epilogue(**kwargs)


def test_epilogue_must_match_the_layer() -> None:
    with pytest.raises(UsageError, match="the epilogue has 5 channels, the conv k=6 output channels"):
        compile_conv2d(1, 4, 5, 5, 6, 3, 3, epilogue=_epilogue(5, seed=0))
    with pytest.raises(UsageError, match="the epilogue has 5 channels, the matmul n=6 output columns"):
        compile_matmul(4, 6, 8, epilogue=_epilogue(5, seed=0))
    with pytest.raises(UsageError, match="no shift and no relu"):
        compile_matmul(4, 6, 8, epilogue=_epilogue(6, seed=0), relu=True)
    with pytest.raises(UsageError, match="needs an integer config"):
        compile_conv2d(1, 4, 5, 5, 6, 3, 3, dtype="fp32", epilogue=_epilogue(6, seed=0))


@pytest.mark.parametrize("real", [1.5, 0.0, -0.25, float("inf")])
def test_quantize_multiplier_refuses_scales_the_q31_requantizer_cannot_take(real: float) -> None:
    with pytest.raises(UsageError, match=rf"a q31 requantization scale must be positive and below 1, not "
                                         rf"{re.escape(repr(real))} \(channel 1\)"):
        quantize_multiplier(np.array([0.5, real]))
