"""The nonlinear lowerings' integer references against exact math, and their refusals (the
instructions' own arithmetic is tested against exact integers in tests/test_transformer_ops.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinynpu.compiler.onnx.lower.norm import norm_params, norm_reference
from tinynpu.compiler.onnx.lower.softmax import MAX_WIDTH, check_width, softmax_params, softmax_reference
from tinynpu.errors import OnnxError

int8_rows = st.integers(1, 300).flatmap(
    lambda n: st.lists(st.lists(st.integers(-128, 127), min_size=n, max_size=n), min_size=1, max_size=4))
scales = st.floats(1e-3, 3.0)


@settings(max_examples=150, deadline=None)
@given(rows=int8_rows, s_in=scales, s_out=st.sampled_from([1 / 127, 1 / 255, 1 / 100, 1e-3]))
def test_softmax_reference_rounds_the_exact_softmax(rows: list[list[int]], s_in: float, s_out: float) -> None:
    """Within 0.52 LSB of the exact real softmax: the output's own rounding and 0.02 LSB besides."""
    x = np.array(rows, dtype=np.int8)
    y = softmax_reference(x, softmax_params(s_in, s_out, 0, what="test"))
    xi = x.astype(np.float64)
    f = np.exp((xi - xi.max(-1, keepdims=True)) * s_in)
    f /= f.sum(-1, keepdims=True)
    assert np.abs(y - np.clip(f / s_out, -128, 127)).max() <= 0.52


@settings(max_examples=150, deadline=None)
@given(rows=st.integers(2, 300).flatmap(lambda n: st.tuples(
           st.lists(st.lists(st.integers(-128, 127), min_size=n, max_size=n), min_size=1, max_size=3),
           st.lists(st.floats(-2, 2), min_size=n, max_size=n), st.lists(st.floats(-1, 1), min_size=n, max_size=n))),
       s_in=scales, s_out=st.floats(3e-3, 0.1), eps=st.floats(1e-6, 1e-2), center=st.booleans())
def test_norm_reference_rounds_the_exact_norm(rows: tuple[list[list[int]], list[float], list[float]], s_in: float,
                                              s_out: float, eps: float, center: bool) -> None:
    """Within 0.52 LSB of the exact real LayerNorm / RMSNorm where beta goes before the requantization (one
    rounding), 1.02 LSB where a gamma near 0 puts it after (two)."""
    xs, gamma, beta = rows
    x = np.array(xs, dtype=np.int8)
    g, b = np.array(gamma), np.array(beta)
    p = norm_params(x.shape[1], center=center, s_in=s_in, z_in=0, eps=eps, gamma=g, beta=b, s_out=s_out, z_out=0,
                    what="test")
    y = norm_reference(x, p)
    xf = x.astype(np.float64) * s_in
    if center:
        xf = xf - xf.mean(-1, keepdims=True)
    f = xf / np.sqrt((xf**2).mean(-1, keepdims=True) + eps) * g + b
    err = np.abs(y - np.clip(f / s_out, -128, 127))
    one_rounding = (p.bias != 0) | (p.offset == 0)
    assert err[:, one_rounding].max(initial=0) <= 0.52
    assert err.max() <= 1.02


def test_softmax_scale_not_representable() -> None:
    with pytest.raises(OnnxError, match=r"Softmax 'sm'.*output scale 1e-12.*cannot represent"):
        softmax_params(0.1, 1e-12, 0, what="Softmax 'sm'")


def test_softmax_too_wide() -> None:
    with pytest.raises(OnnxError, match=rf"Softmax 'sm'.*{MAX_WIDTH + 1} elements"):
        check_width(MAX_WIDTH + 1, what="Softmax 'sm'")


def test_norm_scale_not_representable() -> None:
    with pytest.raises(OnnxError, match=r"LayerNormalization 'ln'.*column 0.*not below 1"):
        norm_params(16, center=True, s_in=0.05, z_in=0, eps=1e-5, gamma=np.full(16, 1e9), beta=None, s_out=1e-3,
                    z_out=0, what="LayerNormalization 'ln'")
