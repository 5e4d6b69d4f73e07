"""The int8 requantization reference (compiler/quant.py) against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from tinynpu.compiler.quant import (
    calibrate_shift,
    linear_int32,
    matmul_nt_int32,
    mlp_int8_reference,
    requantize,
    round_shift,
)
from tinynpu.errors import UsageError


def test_round_shift_ties_toward_plus_infinity() -> None:
    x = np.array([5, 6, 7, -5, -6, -7, 4, -4], dtype=np.int32)
    # x / 4 = 1.25 1.5 1.75 -1.25 -1.5 -1.75 1 -1 -> nearest, ties up: 1 2 2 -1 -1 -2 1 -1
    np.testing.assert_array_equal(round_shift(x, 2), [1, 2, 2, -1, -1, -2, 1, -1])
    np.testing.assert_array_equal(round_shift(x, 0), x)


def test_round_shift_does_not_overflow_int32() -> None:
    big = np.array([2**31 - 1, -(2**31)], dtype=np.int32)
    np.testing.assert_array_equal(round_shift(big, 1), [2**30, -(2**30)])


def test_requantize_relu_and_saturation() -> None:
    acc = np.array([1000, -1000, 300, 255, 254, -3], dtype=np.int32)
    np.testing.assert_array_equal(requantize(acc, 1, relu=False), [127, -128, 127, 127, 127, -1])
    np.testing.assert_array_equal(requantize(acc, 1, relu=True), [127, 0, 127, 127, 127, 0])
    assert requantize(acc, 3, relu=False).dtype == np.int8


def test_calibrated_shift_is_the_smallest_without_saturation() -> None:
    acc = np.array([[1016, -5000], [3, 0]], dtype=np.int32)
    # relu: only 1016 matters: 1016/8 = 127 fits, 1016/4 = 254 does not.
    assert calibrate_shift(acc, relu=True) == 3
    # without relu -5000 matters: -5000/64 = -78.1 fits, -5000/32 = -156.25 does not.
    assert calibrate_shift(acc, relu=False) == 6
    assert calibrate_shift(np.zeros(4, np.int32), relu=False) == 0


def test_matmul_wraps_in_int32() -> None:
    a = np.full((1, 2**18 + 1), 127, dtype=np.int8)
    b = np.full((1, 2**18 + 1), 127, dtype=np.int8)
    exact = 127 * 127 * (2**18 + 1)
    assert exact > 2**31
    assert int(matmul_nt_int32(a, b)[0, 0]) == exact - 2**32


def test_linear_and_mlp_reference_hand_case() -> None:
    x = np.array([[1, 2, 3]], dtype=np.int8)
    w1 = np.array([[1, 0, 0], [0, 1, 0], [-1, -1, -1]], dtype=np.int8)
    b1 = np.array([10, -20, 0], dtype=np.int32)
    np.testing.assert_array_equal(linear_int32(x, w1, b1), [[11, -18, -6]])
    w2 = np.array([[1, 1, 1], [2, 0, -1]], dtype=np.int8)
    b2 = np.array([0, 100], dtype=np.int32)
    hidden, logits = mlp_int8_reference(x, w1, b1, w2, b2, shift=1)
    np.testing.assert_array_equal(hidden, [[6, 0, 0]])  # 11/2 = 5.5 -> 6; relu kills the rest
    np.testing.assert_array_equal(logits, [[6, 112]])


def test_bad_shift() -> None:
    with pytest.raises(UsageError, match="0..31, not 32"):
        round_shift(np.zeros(1, np.int32), 32)
