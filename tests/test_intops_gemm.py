"""The integer reference's GEMM is exact in whichever float it runs (float32 up to K = 1024 of int8)."""

from __future__ import annotations

import numpy as np
import pytest

from tinynpu.compiler.onnx.intops import gemm_int32


def _exact(a: np.ndarray, b_nk: np.ndarray) -> np.ndarray:
    """Python integers: no float anywhere."""
    out = [[sum(int(x) * int(y) for x, y in zip(row, col, strict=True)) for col in b_nk.tolist()]
           for row in a.tolist()]
    return (np.array(out, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


@pytest.mark.parametrize("k", [1, 1023, 1024, 1025, 3072])
def test_extreme_products_sum_exactly(k: int) -> None:
    """All -128 times -128 (the largest product) and mixed extremes: K = 1024 is the last float32 K, and one
    more step, or GPT-2's fc2 (3072), takes float64; every result equals the sum in Python integers."""
    rng = np.random.default_rng(k)
    a = np.full((4, k), -128, np.int8)
    a[1] = rng.choice(np.array([-128, 127], np.int8), k)
    a[2] = rng.integers(-128, 128, k)
    # odd positive products: partial sums pass 2**24 (K = 3072), where float32 would round odd ones
    a[3] = rng.choice(np.array([125, 127], np.int8), k)
    b = np.full((4, k), -128, np.int8)
    b[1] = 127
    b[2] = rng.choice(np.array([-128, 127], np.int8), k)
    b[3] = rng.choice(np.array([123, 127], np.int8), k)
    assert np.array_equal(gemm_int32(a, b), _exact(a, b))


def test_wider_operands_wrap_like_int32() -> None:
    """int32 operands (beyond binary32's exact range: float64) wrap to int32 as the accumulators do."""
    a = np.array([[2**20, -(2**20)]], np.int32)
    b = np.array([[2**12, 2**12 - 1]], np.int32)
    assert np.array_equal(gemm_int32(a, b), _exact(a, b))


@pytest.mark.parametrize("k", [16, 1025])
@pytest.mark.parametrize("m", [1, 3, 16])
def test_blocked_conversion_is_exact(monkeypatch: pytest.MonkeyPatch, m: int, k: int) -> None:
    """One row of ``a`` (a decode step's) converts ``b`` a block of rows at a time: blocks of 3 rows over 7
    (the last one short), float32 and float64, give the products in Python integers; so does one call on
    the whole operand at 3 and 16 rows."""
    import tinynpu.compiler.onnx.intops as intops

    itemsize = 4 if k < 1024 else 8
    monkeypatch.setattr(intops, "_BLOCK_BYTES", 3 * k * itemsize)
    rng = np.random.default_rng(m * k)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (7, k), dtype=np.int8)
    b[0] = -128
    a[0] = -128
    assert np.array_equal(gemm_int32(a, b), _exact(a, b))
    assert np.array_equal(gemm_int32(a, b.T.copy().T), _exact(a, b))  # a transposed (column-major) b
