"""Hypothesis strategies for conv shapes with per-axis strides, (top, left, bottom, right) pads and dilations."""

from __future__ import annotations

from hypothesis import strategies as st

from tinynpu.compiler.conv_shape import ConvShape


def _fits(t: tuple[int, int, int, int, tuple[int, ...], tuple[int, ...]]) -> bool:
    """Whether the dilated kernel fits the padded input, so that at least one output pixel exists."""
    h, w, r, s, pad, dil = t
    return (r - 1) * dil[0] + 1 <= h + pad[0] + pad[2] and (s - 1) * dil[1] + 1 <= w + pad[1] + pad[3]


_geometry = st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 4), st.integers(1, 4),
                      st.tuples(*[st.integers(0, 3)] * 4),
                      st.tuples(st.integers(1, 3), st.integers(1, 3))).filter(_fits)

#: Small convs (N <= 2, C <= 12, K <= 20, 9x9 at most), every axis drawn independently.
general_conv_shapes = st.builds(
    lambda n, c, k, g, stride: ConvShape(n=n, c=c, h=g[0], w=g[1], k=k, r=g[2], s=g[3], stride=stride, pad=g[4],
                                         dilation=g[5]),
    st.integers(1, 2), st.integers(1, 12), st.integers(1, 20), _geometry,
    st.tuples(st.integers(1, 3), st.integers(1, 3)))
