"""The per-channel requantization arithmetic (vrequant's) against exact rational rounding."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tinynpu.compiler.onnx.intops import Epilogue, rescale_sum
from tinynpu.compiler.onnx.requant import quantize_multiplier, requant_host, vrequant


def _exact(x: int, m: int, s: int) -> int:
    """round(x * m / 2^(31+s)), ties toward +infinity, clamped to int32."""
    q = Fraction(x * m, 2 ** (31 + s))
    y = (q + Fraction(1, 2)).__floor__()
    return max(-(2**31), min(2**31 - 1, y))


@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(0, 31))
def test_vrequant_is_exact_rounding(x: int, m: int, s: int) -> None:
    got = int(vrequant(np.array([x], np.int32), np.array([m], np.int32), np.array([s], np.int32))[0])
    assert got == _exact(x, m, s)


def test_vrequant_ties_round_up_and_shift_uses_low_five_bits() -> None:
    m = np.array([2**30], np.int32)  # 0.5 at S = 0
    x = np.array([-3, -1, 1, 3], np.int32)
    assert vrequant(x, m, np.array([0], np.int32)).tolist() == [-1, 0, 1, 2]
    assert vrequant(x, m, np.array([32], np.int32)).tolist() == [-1, 0, 1, 2]


@given(st.floats(min_value=1e-9, max_value=1000.0))
def test_quantize_multiplier_is_within_half_a_unit(real: float) -> None:
    m, s = quantize_multiplier(np.array([real]))
    m0, s0 = int(m[0]), int(s[0])
    assert 2**30 <= m0 < 2**31
    assert abs(m0 * 2.0 ** -(31 + s0) - real) <= 2.0 ** -(31 + s0) * 0.5 + 1e-18
    if real < 1:
        assert 0 <= s0 <= 31
    x = np.array([1000], np.int32)
    assert abs(int(requant_host(x, m, s)[0]) - 1000 * real) <= 0.5 + 1000 * real * 2**-29


def test_epilogue_relu_zero_point_and_bias() -> None:
    epi = Epilogue.build(real_scale=np.array([0.5, 0.25]), bias=np.array([2, -4], np.int32), zero_point=3,
                         lo=3, hi=127)
    acc = np.array([[10, 10], [-100, 100], [1000, 1000]], np.int32)
    # (10+2)*0.5+3 = 9, (10-4)*0.25+3 = 4.5 -> 5 (tie up); negatives clamp at the zero point (relu)
    assert epi.apply(acc).tolist() == [[9, 5], [3, 27], [127, 127]]


def test_rescale_sum_rounds_once() -> None:
    a, b = np.array([3, -3, 100]), np.array([1, -1, 100])
    y = rescale_sum([(a, 0.5), (b, 0.5)], zero_point=0, lo=-128, hi=127)
    assert y.tolist() == [2, -2, 100]
