"""conv2d implicit im2col: the operand DMAs gather exactly the im2col GEMM, halos included.

These tests execute the :class:`Dma` records with the ``load``/``zero``
semantics of isa.yaml on a numpy DRAM image and compare the filled tiles with
an explicit im2col built independently, so they check the address arithmetic
without needing the simulator.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conv_strategies import general_conv_shapes
from hypothesis import given, settings
from hypothesis import strategies as st

from tinynpu.compiler.conv_geometry import ConvLayout, Dma, choose_layout, rowpack_applies
from tinynpu.compiler.conv_shape import RESNET50_CONVS, ConvShape, conv2d_reference
from tinynpu.errors import TinyNpuError, UsageError
from tinynpu.isa import load_config

CFG = load_config("default")
T = CFG.tile


def run_dmas(dmas: list[Dma], dram: bytes, dtype: np.dtype, tile_rows: int) -> np.ndarray:
    """Apply loads/zeros to a tile of ``tile_rows`` scratchpad rows, as isa.yaml's semantics say."""
    sp = np.full((tile_rows, T), 99, dtype=dtype)  # poison: every row must be written
    written = np.zeros(tile_rows, dtype=bool)
    eb = dtype.itemsize
    for d in dmas:
        assert not written[d.row:d.row + d.rows].any(), "a scratchpad row is written twice"
        written[d.row:d.row + d.rows] = True
        for i in range(d.rows):
            row = np.zeros(T, dtype=dtype)
            if not d.zero:
                a = d.dram + i * d.stride
                assert a >= 0 and a + d.cols * eb <= len(dram), "DMA reads outside the tensor"
                row[:d.cols] = np.frombuffer(dram[a:a + d.cols * eb], dtype=dtype)
            sp[d.row + i] = row
    assert written.all(), "some tile rows were never written"
    return sp


def im2col(x: np.ndarray, sh: ConvShape) -> np.ndarray:
    """Explicit im2col, columns in (r, s, c) order: M x (R*S*C), one pixel and tap at a time."""
    (pt, pl, _, _), (s_h, s_w), (d_h, d_w) = sh.pads, sh.strides, sh.dilations
    cols = np.zeros((sh.n, sh.p, sh.q, sh.r, sh.s, sh.c), dtype=x.dtype)
    for p, q, r, s in itertools.product(range(sh.p), range(sh.q), range(sh.r), range(sh.s)):
        y, xx = p * s_h + r * d_h - pt, q * s_w + s * d_w - pl
        if 0 <= y < sh.h and 0 <= xx < sh.w:
            cols[:, p, q, r, s] = x[:, y, xx]
    return cols.reshape(sh.gemm_m, sh.gemm_k)


def padded_columns(lay: ConvLayout, mat: np.ndarray) -> np.ndarray:
    """Reorder/pad (r, s, c) columns of ``mat`` into the layout's padded reduction order."""
    sh = lay.shape
    rows = mat.shape[0]
    m = mat.reshape(rows, sh.r, sh.s, sh.c)
    if lay.kind == "direct":
        out = np.zeros((rows, sh.r, sh.s, lay.c_blocks * T), dtype=mat.dtype)
        out[..., :sh.c] = m
        return out.reshape(rows, -1)
    out = np.zeros((rows, lay.padded_k), dtype=mat.dtype)
    out[:, :sh.gemm_k] = m.transpose(0, 2, 1, 3).reshape(rows, -1)
    return out


def check_layout(sh: ConvShape, kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lay = ConvLayout(sh, kind, T, 1)
    x = rng.integers(-128, 128, size=(sh.n, sh.h, sh.w, sh.c), dtype=np.int8)
    wts = rng.integers(-128, 128, size=(sh.k, sh.r, sh.s, sh.c), dtype=np.int8)
    want_a = padded_columns(lay, im2col(x, sh))
    want_b = padded_columns(lay, wts.reshape(sh.k, -1))
    xbytes = lay.host_input(x).tobytes()
    wbytes = lay.host_weights(wts).tobytes()
    for m0 in range(0, sh.gemm_m, T):
        rows = min(T, sh.gemm_m - m0)
        for kt in range(lay.k_tiles):
            got = run_dmas(lay.a_tile(0, m0, rows, kt), xbytes, np.dtype(np.int8), rows)
            np.testing.assert_array_equal(got, want_a[m0:m0 + rows, kt * T:(kt + 1) * T])
    for k0 in range(0, sh.k, T):
        rows = min(T, sh.k - k0)
        for kt in range(lay.k_tiles):
            got = run_dmas(lay.b_tile(0, k0, rows, kt), wbytes, np.dtype(np.int8), rows)
            np.testing.assert_array_equal(got, want_b[k0:k0 + rows, kt * T:(kt + 1) * T])
    # The padded GEMM over the gathered operands is the convolution.
    got = (want_a.astype(np.int64) @ want_b.astype(np.int64).T).reshape(sh.n, sh.p, sh.q, sh.k)
    np.testing.assert_array_equal(got.astype(np.int32), conv2d_reference(x, wts, stride=sh.stride, pad=sh.pad,
                                                                          dilation=sh.dilation,
                                                                          acc_dtype=np.dtype(np.int32)))


conv_shapes = st.builds(
    lambda n, c, h, w, k, r, s, stride, pad: (n, c, h, w, k, r, s, stride, pad),
    st.integers(1, 2), st.integers(1, 20), st.integers(1, 9), st.integers(1, 9), st.integers(1, 20),
    st.integers(1, 7), st.integers(1, 7), st.integers(1, 3), st.integers(0, 3),
).filter(lambda t: t[5] <= t[2] + 2 * t[8] and t[6] <= t[3] + 2 * t[8])


@settings(max_examples=40, deadline=None)
@given(conv_shapes, st.sampled_from(["direct", "rowpack"]))
def test_operand_tiles_gather_im2col(t: tuple[int, ...], kind: str) -> None:
    n, c, h, w, k, r, s, stride, pad = t
    check_layout(ConvShape(n=n, c=c, h=h, w=w, k=k, r=r, s=s, stride=stride, pad=pad), kind, seed=sum(t))


@settings(max_examples=60, deadline=None)
@given(general_conv_shapes, st.sampled_from(["direct", "rowpack"]))
def test_operand_tiles_gather_im2col_any_strides_pads_dilations(sh: ConvShape, kind: str) -> None:
    if kind == "rowpack" and not rowpack_applies(sh):
        kind = "direct"
    check_layout(sh, kind, seed=sh.n + sh.c + sh.h + sh.w + sh.k)


def test_general_shape_normalizes_and_names_its_sizes() -> None:
    sh = ConvShape(n=1, c=2, h=9, w=7, k=3, r=3, s=3, stride=(2, 1), pad=[0, 1, 2, 1], dilation=(2, 1))
    assert (sh.strides, sh.pads, sh.dilations, sh.extent) == ((2, 1), (0, 1, 2, 1), (2, 1), (5, 3))
    assert (sh.p, sh.q) == ((9 + 0 + 2 - 5) // 2 + 1, 7)
    assert str(sh).endswith("stride=(2, 1) pad=(0, 1, 2, 1) dilation=(2, 1)")
    square = ConvShape(n=1, c=2, h=9, w=7, k=3, r=3, s=3, stride=(2, 2), pad=(1, 1, 1, 1), dilation=[1, 1])
    assert square == ConvShape(n=1, c=2, h=9, w=7, k=3, r=3, s=3, stride=2, pad=1)
    assert square.kwargs()["stride"] == 2 and str(square).endswith("stride=2 pad=1")
    assert not rowpack_applies(ConvShape(n=1, c=2, h=9, w=9, k=3, r=3, s=3, dilation=(1, 2)))
    assert choose_layout(ConvShape(n=1, c=3, h=9, w=9, k=3, r=3, s=3, dilation=(1, 2)), CFG).kind == "direct"
    assert choose_layout(ConvShape(n=1, c=3, h=9, w=9, k=3, r=3, s=3, dilation=(2, 1)), CFG).kind == "rowpack"


def test_halo_rows_are_zero_dmas() -> None:
    # 3x3, pad 1: the tap (r=0, s=0) of output pixel (0, 0) reads input (-1, -1): a zero row,
    # and pixels 1..3 of output row 0 also read input row -1: one zero DMA covers the run.
    sh = ConvShape(n=1, c=16, h=4, w=4, k=16, r=3, s=3, stride=1, pad=1)
    lay = ConvLayout(sh, "direct", T, 1)
    dmas = lay.a_tile(0, 0, 16, kt=0)
    assert dmas[0] == Dma(row=0, rows=4, zero=True)  # output row p=0 needs input row -1
    # Output row 1, tap (0, 0): q=0 is a left halo, q=1..3 read input row 0 columns 0..2.
    assert dmas[1] == Dma(row=4, rows=1, zero=True)
    assert dmas[2] == Dma(row=5, rows=3, dram=0, stride=16, cols=16)
    check_layout(sh, "direct", seed=1)


def test_layout_choice_packs_small_channels() -> None:
    first = RESNET50_CONVS[0]
    assert first.c == 3
    lay = choose_layout(first, CFG)
    assert lay.kind == "rowpack"
    assert lay.padded_k == 160  # 7*7*3 = 147 -> 10 tiles, not 7*7*16 = 784
    assert choose_layout(RESNET50_CONVS[2], CFG).kind == "direct"
    assert choose_layout(RESNET50_CONVS[2], CFG).padded_k == 576


def test_host_traffic_hand_computed() -> None:
    # N=1, C=2, H=W=3, K=4, 2x2 kernel, pad 1, stride 1: P = Q = 4, padded width 5.
    sh = ConvShape(n=1, c=2, h=3, w=3, k=4, r=2, s=2, stride=1, pad=1)
    lay = ConvLayout(sh, "rowpack", T, 1)
    assert lay.input_shape() == (1, 4, 5, 2, 2)
    # read X (18 B) + write X' (80 B) + read and write the weights (2 * 32 B).
    assert lay.host_traffic_bytes() == 18 + 80 + 64
    assert ConvLayout(sh, "direct", T, 1).host_traffic_bytes() == 0


def test_resnet_suite_shapes() -> None:
    assert len(RESNET50_CONVS) == 10
    assert [c.p for c in RESNET50_CONVS] == [112, 56, 56, 56, 28, 28, 14, 14, 7, 7]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"n": 1, "c": 1, "h": 2, "w": 2, "k": 1, "r": 5, "s": 1, "stride": 1, "pad": 1},
         "larger than the padded"),
        ({"n": 0, "c": 1, "h": 2, "w": 2, "k": 1, "r": 1, "s": 1}, "n must be a positive integer, not 0"),
        ({"n": 1, "c": 1, "h": 2, "w": 2, "k": -3, "r": 1, "s": 1}, "k must be a positive integer, not -3"),
        ({"n": 1, "c": 1, "h": 2, "w": 2, "k": 1, "r": 1, "s": 1, "stride": 0}, "stride must be"),
        ({"n": 1, "c": 1, "h": 2, "w": 2, "k": 1, "r": 1, "s": 1, "pad": -1}, "pad must be a non-negative"),
        ({"n": 1, "c": 1, "h": 2, "w": 2, "k": 1, "r": 1, "s": 1, "pad": (1, 2)},
         r"pad must be a non-negative integer or 4 of them, not \(1, 2\)"),
        ({"n": 1, "c": 1, "h": 2, "w": 2, "k": 1, "r": 1, "s": 1, "stride": (1, 0)},
         r"stride must be a positive integer or 2 of them, not \(1, 0\)"),
        ({"n": 1, "c": 1, "h": 2, "w": 2, "k": 1, "r": 1, "s": 1, "dilation": 1.5}, "dilation must be"),
        ({"n": 1, "c": 1, "h": 5, "w": 9, "k": 1, "r": 3, "s": 1, "dilation": (3, 1)},
         r"the 7x1 kernel \(r x s\) \(dilation \(3, 1\)\) is larger than the padded input 5x9"),
    ],
)
def test_bad_shapes(kwargs: dict[str, int], needle: str) -> None:
    with pytest.raises(UsageError, match=needle) as info:
        ConvShape(**kwargs)
    assert isinstance(info.value, TinyNpuError)


def test_conv_operand_emits_loads_and_zero_rows() -> None:
    from tinynpu.compiler.conv_lower import ConvOperand
    from tinynpu.compiler.emitter import Emitter
    from tinynpu.isa import load_isa

    isa = load_isa()
    sh = ConvShape(n=1, c=16, h=4, w=4, k=16, r=3, s=3, stride=1, pad=1)
    lay = ConvLayout(sh, "direct", T, 1)
    emit = Emitter(isa, CFG)
    ConvOperand(lay, 1000, "A").load(emit, scope="a", sp_row=32, row0=0, rows=16, k0=0)
    got = [(op.mnemonic, op.fields["sp_row"], op.fields["rows"]) for op in emit.ops]
    dmas = lay.a_tile(1000, 0, 16, 0)
    want = [("zero", 32 + d.row, d.rows) for d in dmas if d.zero] + [("load", 32 + d.row, d.rows)
                                                                      for d in dmas if not d.zero]
    assert got == want  # zeros first, so none waits behind a load in flight
    first_load = next(op for op in emit.ops if op.mnemonic == "load")
    assert first_load.fields["dram"] == 1000 and first_load.fields["stride"] == 16
    assert ConvOperand(lay, 0, "A").k_total == 9 * T and ConvOperand(lay, 0, "B").rows_total == 16


def test_touched_input_positions_match_brute_force() -> None:
    from tinynpu.compiler.conv_bounds import _touched

    for size, kernel, stride, pad, after, dil in itertools.product(range(1, 9), range(1, 6), range(1, 4), range(4),
                                                                    (0, 2), range(1, 4)):
        extent = (kernel - 1) * dil + 1
        if extent > size + pad + after:
            continue
        out = (size + pad + after - extent) // stride + 1
        want = len({o * stride + f * dil - pad for o in range(out) for f in range(kernel)} & set(range(size)))
        assert _touched(size, out, kernel, stride, pad, dil) == want, (size, kernel, stride, pad, after, dil)
