"""Tiling records, the one least-traffic enumeration every workload shares, and DRAM placement."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinynpu.compiler.bounds import best_tiling_bytes, least_traffic, tiling_space, tiling_traffic
from tinynpu.compiler.conv_bounds import conv_best_tiling_bytes, conv_traffic_model
from tinynpu.compiler.conv_geometry import choose_layout
from tinynpu.compiler.conv_shape import ConvShape
from tinynpu.compiler.schedule import Tiling
from tinynpu.compiler.workload import DramAllocator, check_sizes
from tinynpu.errors import UsageError
from tinynpu.isa import load_config

CFG = load_config("default")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"bm": 0}, "tiling: bm must be a positive integer, not 0."),
    ({"bn": -2}, "tiling: bn must be a positive integer, not -2."),
    ({"bk": 1.5}, "tiling: bk must be a positive integer, not 1.5."),
    ({"bk": True}, "tiling: bk must be a positive integer, not True."),
    ({"order": "km"}, "tiling: order must be one of mn, nm, not 'km'."),
    ({"init": "zero"}, "tiling: init must be one of fold, fill_zero, not 'zero'."),
    ({"resident": "c"}, "tiling: resident must be one of none, a, b, not 'c'."),
    ({"double_buffer": 1}, "tiling: double_buffer must be true or false, not 1."),
    ({"acc_buffers": 3}, "tiling: acc_buffers must be one of 1, 2, not 3."),
    ({"panel_buffers": 4, "resident": "a"}, "tiling: panel_buffers must be one of 0, 1, 2, not 4."),
    ({"stream_buffers": 5}, "tiling: stream_buffers must be one of 0, 1, 2, 3, 4, not 5."),
    ({"stream_buffers": 3, "double_buffer": False},
     "tiling: stream_buffers=3 contradicts double_buffer=False (1 buffer is single, 2 or more double buffering)."),
])
def test_tiling_refuses_bad_fields_naming_them(kwargs: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {"bm": 1, "bn": 1, "bk": 1, **kwargs}
    with pytest.raises(UsageError) as info:
        Tiling(**fields)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_tiling_is_keyword_only_and_canonical() -> None:
    with pytest.raises(TypeError):
        Tiling(1, 1, 1)  # type: ignore[misc]
    assert Tiling(bm=1, bn=1, bk=1, double_buffer=False).panel_buffers == 1
    assert Tiling(bm=1, bn=1, bk=1, resident="a", panel_buffers=1).panel_buffers == 1
    assert Tiling(bm=1, bn=1, bk=1).stream_buffers == 2
    assert Tiling(bm=1, bn=1, bk=1, double_buffer=False).stream_buffers == 1
    assert Tiling(bm=1, bn=1, bk=1, stream_buffers=2) == Tiling(bm=1, bn=1, bk=1)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 90), st.integers(1, 90), st.integers(1, 300), st.booleans())
def test_least_traffic_is_the_minimum_over_the_whole_space(m: int, n: int, k: int, bias: bool) -> None:
    exhaustive = min(tiling_traffic(m, n, k, t, CFG, in_bytes=1, out_bytes=4, bias=bias)
                     for t in tiling_space(m, n, k, CFG, bias=bias))
    assert best_tiling_bytes(m, n, k, CFG, in_bytes=1, out_bytes=4, bias=bias) == exhaustive


def test_conv_best_tiling_is_the_shared_minimum_of_its_traffic() -> None:
    shape = ConvShape(n=1, c=40, h=20, w=20, k=70, r=3, s=3, stride=1, pad=1)
    lay = choose_layout(shape, CFG)
    model = conv_traffic_model(lay, CFG, 4)
    exhaustive = min(model(t) for t in tiling_space(shape.gemm_m, shape.gemm_n, lay.padded_k, CFG))
    assert conv_best_tiling_bytes(lay, CFG, 4) == exhaustive


def test_least_traffic_refuses_when_nothing_fits() -> None:
    no_acc = dataclasses.replace(CFG, name="tiny-acc", scope_rows=(("a_reg", 64), ("b_reg", 64), ("acc", 8)))
    with pytest.raises(UsageError, match="no tiling of the 4 x 4 x 4 GEMM fits the scratchpads of config 'tiny-acc'"):
        least_traffic(4, 4, 4, no_acc, lambda t: 0)


def test_dram_allocator_aligns_and_names_the_tensor_that_does_not_fit() -> None:
    alloc = DramAllocator(CFG, "conv2d X")
    assert alloc.add("A", (3,), "int8", "input").addr == 0
    assert alloc.add("B", (5,), "int32", "input").addr == 64
    with pytest.raises(UsageError) as info:
        alloc.add("C", (CFG.dram_bytes,), "int8", "output")
    assert str(info.value).startswith(f"conv2d X does not fit DRAM: tensor C [{CFG.dram_bytes}] (int8) would end "
                                      f"at byte {128 + CFG.dram_bytes}")


def test_check_sizes_names_the_size_and_prefix() -> None:
    with pytest.raises(UsageError, match=r"^mlp: batch must be a positive integer, not 0\.$"):
        check_sizes("mlp: ", batch=0)
