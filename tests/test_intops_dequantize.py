"""The integer reference's DequantizeLinear equals ONNX's definition, ``float32(x - zp) * scale``, whichever route
it takes (16-bit and narrower: float32 throughout)."""

from __future__ import annotations

import numpy as np
import pytest

from tinynpu.compiler.onnx.intops import dequantize


def _spec(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """ONNX's (and onnxruntime's) definition, one element at a time in Python integers and float32 scalars:
    the difference as an exact integer, made float32, times the float32 scale."""
    out = [np.float32(int(v) - int(z)) * np.float32(s)
           for v, s, z in zip(x.ravel().tolist(), np.broadcast_to(scale, x.shape).ravel().tolist(),
                              np.broadcast_to(zero_point, x.shape).ravel().tolist(), strict=True)]
    return np.array(out, np.float32).reshape(x.shape)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_dequantize_rounds_once(dtype: type, axis: int | None) -> None:
    """Every integer type (16-bit and narrower take the float32 route, int32 the int64 one), per tensor and
    per axis, with the type's extremes, odd scales and zero points at both ends: equal to the definition,
    sign of zero included."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    x = rng.integers(info.min, info.max, size=(6, 5), endpoint=True).astype(dtype)
    x[0, :2], x[1, :2] = info.min, info.max
    channels = 1 if axis is None else x.shape[axis]
    scale = (rng.random(channels) * 10.0 ** rng.integers(-6, 3, channels)).astype(np.float32)
    scale[0] = np.float32(np.nextafter(np.float32(1.0), np.float32(2.0)))  # a scale whose products round
    zp = rng.integers(info.min, info.max, size=channels, endpoint=True).astype(dtype)
    zp[-1] = info.max
    if axis is None:
        s, z = scale[0], zp[0]
        want = _spec(x, np.float32(s), np.asarray(z))
    else:
        shape = [1, 1]
        shape[axis] = -1
        s, z = scale, zp
        want = _spec(x, scale.reshape(shape), zp.reshape(shape))
    got = dequantize(x, s, z, axis)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))
