"""conv2d end to end on the simulator against numpy: random shapes, halos, traffic, replayed traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conv_strategies import general_conv_shapes
from hypothesis import given, settings
from hypothesis import strategies as st

from tinynpu.compiler.conv2d import compile_conv2d
from tinynpu.compiler.conv_bounds import a_pass_bytes, b_pass_bytes
from tinynpu.compiler.conv_geometry import ConvLayout
from tinynpu.compiler.conv_shape import ConvShape, conv2d_reference
from tinynpu.compiler.run import run_compiled
from tinynpu.errors import TinyNpuError, UsageError
from tinynpu.intmath import ceil_div
from tinynpu.isa import load_config

conv_args = st.tuples(
    st.integers(1, 2), st.integers(1, 12), st.integers(1, 9), st.integers(1, 9), st.integers(1, 20),
    st.integers(1, 7), st.integers(1, 7), st.integers(1, 3), st.integers(0, 3),
).filter(lambda t: t[5] <= t[2] + 2 * t[8] and t[6] <= t[3] + 2 * t[8])


@settings(max_examples=30, deadline=None)
@given(conv_args, st.sampled_from(["int8", "fp32"]), st.sampled_from(["auto", "direct", "rowpack"]))
def test_random_convs_match_numpy(t: tuple[int, ...], dtype: str, layout: str) -> None:
    n, c, h, w, k, r, s, stride, pad = t
    comp = compile_conv2d(n, c, h, w, k, r, s, stride=stride, pad=pad, dtype=dtype, layout=layout)
    report = run_compiled(comp, seed=sum(t))  # bit-exact (int8) or rtol=1e-5 (fp32), else it raises
    assert report["verified"] is True
    assert report["dram_bytes"] == comp.model["dram_bytes"]  # the traffic model is exact


@settings(max_examples=25, deadline=None)
@given(general_conv_shapes, st.sampled_from(["auto", "direct"]))
def test_per_axis_strides_pads_dilations_match_numpy(sh: ConvShape, layout: str) -> None:
    comp = compile_conv2d(**sh.kwargs(), layout=layout)
    report = run_compiled(comp, seed=sh.n + sh.c + sh.h + sh.w + sh.k)  # bit-exact against numpy, else it raises
    assert report["verified"] is True
    assert report["dram_bytes"] == comp.model["dram_bytes"]  # the traffic model is exact
    # the compulsory input and weights are a floor of what the program reads
    assert report["dram_read_bytes"] >= comp.bounds.io_lower_bound_bytes - comp.program.tensor("Y").nbytes


def test_dilated_conv_hand_computed() -> None:
    # 3x3 kernel, dilation 2, no padding, 7x7 input: P = Q = 3, and each output pixel's taps land on
    # input rows/cols {p, p+2, p+4}: rows and cols 0..6 are all read, so the compulsory input is all of X.
    comp = compile_conv2d(1, 16, 7, 7, 16, 3, 3, dilation=2)
    assert comp.workload["p"] == 3 and comp.workload["q"] == 3 and comp.workload["dilation"] == 2
    assert comp.bounds.io_lower_bound_bytes == 7 * 7 * 16 + 16 * 9 * 16 + 9 * 16 * 4
    # Every (pixel, tap) pair is inside the input: A reads 9 pixels x 9 taps x 16 channels.
    assert a_pass_bytes(ConvLayout(ConvShape(n=1, c=16, h=7, w=7, k=16, r=3, s=3, dilation=2), "direct", 16, 1)) \
        == 9 * 9 * 16
    assert run_compiled(comp)["verified"] is True


@pytest.mark.parametrize("layout", ["direct", "rowpack"])
def test_halo_heavy_conv(layout: str) -> None:
    # 5x5 input, 7x7 kernel, pad 3: every output pixel has taps in the halo on all four sides.
    comp = compile_conv2d(1, 16, 5, 5, 16, 7, 7, stride=1, pad=3, layout=layout)
    if layout == "direct":
        assert comp.program.words and any(c.startswith("halo") for c in comp.comments.values())
    assert run_compiled(comp)["verified"] is True


def test_int8_output_requantized() -> None:
    comp = compile_conv2d(1, 8, 6, 6, 20, 3, 3, stride=1, pad=1, out_dtype="int8")
    assert comp.program.tensor("Y").dtype == "int8" and comp.workload["shift"] > 0
    assert run_compiled(comp)["verified"] is True


def test_traffic_hand_computed() -> None:
    # N=1, C=16, H=W=4, K=16, 3x3, pad 1, stride 1 (direct): P=Q=4, M=16 pixels.
    # Valid (pixel, tap) pairs: per axis the 3 taps cover 4+4+4 positions minus 2 halos = 10,
    # so 10*10 = 100 pairs, each reading 16 channels: A = 1600 bytes.  W = 16*144 = 2304 bytes.
    # One block holds all of M and N, so each is read once; Y is 16x16 int32 = 1024 bytes.
    comp = compile_conv2d(1, 16, 4, 4, 16, 3, 3, stride=1, pad=1)
    lay = ConvLayout(ConvShape(n=1, c=16, h=4, w=4, k=16, r=3, s=3, stride=1, pad=1), "direct", 16, 1)
    assert a_pass_bytes(lay) == 1600 and b_pass_bytes(lay) == 2304
    report = run_compiled(comp)
    assert report["dram_read_bytes"] == 1600 + 2304
    assert report["dram_write_bytes"] == 1024
    assert comp.bounds.io_lower_bound_bytes == 256 + 2304 + 1024  # X once, W once, Y once
    assert comp.bounds.bound_kind == "compulsory"
    assert comp.bounds.best_tiling_bytes == 1600 + 2304 + 1024
    assert comp.host_traffic_bytes == 0


def test_rowpack_host_traffic_reported() -> None:
    # C=3, 3x3, pad 1 on 5x5: X' is (1, P=5, Wp=7, R=3, C=3) = 315 bytes; X is 75; W is 4*27 = 108.
    comp = compile_conv2d(1, 3, 5, 5, 4, 3, 3, stride=1, pad=1, layout="rowpack")
    assert comp.host_traffic_bytes == 75 + 315 + 2 * 108
    report = run_compiled(comp)
    assert report["host_traffic_bytes"] == comp.host_traffic_bytes
    # A reads every packed row once (25 pixels x 27 values, one column block); W once per row block
    # of the tiling (M = 25 pixels is 2 tiles), or once if it stays resident; Y is 25 x 4 int32.
    bm, resident = comp.model["tiling"][0], comp.model["tiling"][7]
    w_reads = 1 if resident == "b" else ceil_div(2, bm)
    assert report["dram_read_bytes"] == 25 * 27 + 108 * w_reads
    assert report["dram_write_bytes"] == 25 * 4 * 4


def test_matches_direct_numpy_convolution() -> None:
    # conv2d_reference itself against a plain loop nest, on a small case.
    rng = np.random.default_rng(3)
    x = rng.integers(-5, 5, size=(1, 5, 6, 3)).astype(np.int8)
    wt = rng.integers(-5, 5, size=(2, 3, 2, 3)).astype(np.int8)
    got = conv2d_reference(x, wt, stride=2, pad=1, acc_dtype=np.dtype(np.int32))
    xp = np.pad(x.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros_like(got)
    for p in range(got.shape[1]):
        for q in range(got.shape[2]):
            for kk in range(2):
                want[0, p, q, kk] = np.sum(xp[0, 2 * p:2 * p + 3, 2 * q:2 * q + 2, :] * wt[kk])
    np.testing.assert_array_equal(got, want)


def test_saved_trace_replays_to_the_same_program(tmp_path: Path) -> None:
    comp = compile_conv2d(1, 3, 9, 9, 8, 3, 3, stride=2, pad=1)
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps({"name": "saved", "steps": list(comp.trace)}))
    again = compile_conv2d(1, 3, 9, 9, 8, 3, 3, stride=2, pad=1, schedule=str(path))
    assert again.program.words == comp.program.words
    assert again.workload["layout"] == comp.workload["layout"]


def test_naive_schedule_runs() -> None:
    comp = compile_conv2d(1, 5, 6, 6, 18, 3, 3, stride=1, pad=1, schedule="naive")
    assert comp.model["tiling"][:3] == [1, 1, 1]
    assert run_compiled(comp)["verified"] is True


@pytest.mark.parametrize(
    ("args", "kwargs", "needle"),
    [
        ((1, 1, 2, 2, 1, 5, 1), {"pad": 1}, "larger than the padded input"),
        ((0, 1, 2, 2, 1, 1, 1), {}, "n must be a positive integer, not 0"),
        ((1, 1, 2, 2, 1, 1, 1), {"stride": 0}, "stride must be a positive integer"),
        ((1, 1, 2, 2, 1, 1, 1), {"dtype": "int4"}, "dtype must be one of"),
        ((1, 1, 2, 2, 1, 1, 1), {"dtype": "fp32", "cfg": load_config("default")}, "not supported by config"),
        ((1, 1, 2, 2, 1, 1, 1), {"dtype": "fp32", "out_dtype": "int8"}, "out_dtype must be float32"),
        ((1, 1, 2, 2, 1, 1, 1), {"layout": "nchw"}, "layout must be auto or one of"),
        ((1, 3, 9, 9, 4, 3, 3), {"layout": "rowpack", "dilation": (1, 2)},
         "the rowpack layout needs a kernel width dilation of 1"),
        ((1, 1, 2, 2, 1, 1, 1), {"schedule": "/nonexistent/s.json"}, "is none of these"),
        ((1, 4096, 512, 512, 1, 1, 1), {}, "bytes of DRAM"),
    ],
)
def test_bad_input(args: tuple[int, ...], kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(UsageError, match=needle) as info:
        compile_conv2d(*args, **kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, TinyNpuError)


@pytest.mark.parametrize("layout", ["direct", "rowpack"])
def test_nchw_user_layout(layout: str) -> None:
    # N=2, C=3, H=5, W=6, K=4, 3x3, pad 1: P=5, Q=6, so Y is 2*5*6*4 int32 = 960 bytes.
    nhwc = compile_conv2d(2, 3, 5, 6, 4, 3, 3, stride=1, pad=1, layout=layout)
    nchw = compile_conv2d(2, 3, 5, 6, 4, 3, 3, stride=1, pad=1, layout=layout, input_layout="NCHW")
    assert nchw.make_inputs(0)["X"].shape == (2, 3, 5, 6) and nchw.make_inputs(0)["W"].shape == (4, 3, 3, 3)
    assert nchw.program.words == nhwc.program.words  # same device program; only the host side differs
    x_w = 2 * (2 * 3 * 5 * 6 + 4 * 3 * 3 * 3) if layout == "direct" else 0
    assert nchw.host_traffic_bytes == nhwc.host_traffic_bytes + x_w + 2 * 960
    assert run_compiled(nchw)["verified"] is True


def test_bad_input_layout() -> None:
    with pytest.raises(UsageError, match="input_layout must be NHWC or NCHW, not 'CHWN'"):
        compile_conv2d(1, 1, 2, 2, 1, 1, 1, input_layout="CHWN")


def test_compulsory_counts_only_the_input_that_is_read() -> None:
    # 1x1 kernel, stride 2 on 6x6: outputs read input rows/cols 0, 2, 4 only: 9 of 36 pixels.
    comp = compile_conv2d(1, 16, 6, 6, 16, 1, 1, stride=2, pad=0)
    assert comp.bounds.io_lower_bound_bytes == 9 * 16 + 16 * 16 + 9 * 16 * 4
    report = run_compiled(comp)
    assert report["dram_read_bytes"] >= 9 * 16 + 16 * 16  # never below the bound


def test_cli_reports_a_bad_conv_without_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    from tinynpu.cli import main

    rc = main(["run", "conv2d", "--n", "1", "--c", "3", "--h", "2", "--w", "2", "--k", "8", "--r", "5",
               "--s", "3"])
    err = capsys.readouterr().err
    assert rc != 0 and "larger than the padded input" in err and "Traceback" not in err


def test_cli_runs_a_conv_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    from tinynpu.cli import main

    rc = main(["run", "conv2d", "--n", "1", "--c", "3", "--h", "7", "--w", "6", "--k", "5", "--r", "3",
               "--s", "3", "--stride", "2", "--pad", "1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["verified"] is True and report["io_bound_kind"] == "compulsory"
    assert report["trace"][0]["op"] == "im2col"


def test_rowpack_that_does_not_fit_dram_is_refused_or_avoided() -> None:
    # C=3, 7x7, stride 1, pad 3 on 1500x1500: X is 6.75 MB, X' = 1500 x 1506 x 7 x 3 = 47.4 MB and Y
    # (K=3, int32) 27 MB: rowpack needs more than the 64 MiB of DRAM, direct needs ~34 MB.
    from tinynpu.compiler.conv_geometry import choose_layout

    sh = ConvShape(n=1, c=3, h=1500, w=1500, k=3, r=7, s=7, stride=1, pad=3)
    cfg = load_config("default")
    assert ConvLayout(sh, "rowpack", 16, 1).dram_bytes(4) > cfg.dram_bytes
    assert ConvLayout(sh, "direct", 16, 1).dram_bytes(4) < cfg.dram_bytes
    assert choose_layout(sh, cfg).kind == "direct"
    with pytest.raises(UsageError, match="bytes of DRAM"):
        compile_conv2d(**sh.kwargs(), layout="rowpack")


@pytest.mark.parametrize("kwargs", [{"layout": "direct"}, {"layout": "rowpack"}, {"out_dtype": "int8"}])
def test_listing_reassembles_to_the_same_binary(kwargs: dict[str, str]) -> None:
    # The listing (halo comments included) is valid assembly for the assembler CLI.
    from tinynpu.assembler import assemble
    from tinynpu.isa import load_isa

    comp = compile_conv2d(1, 5, 7, 7, 9, 3, 3, stride=1, pad=1, **kwargs)  # type: ignore[arg-type]
    cfg = load_config("default")
    again = assemble(comp.asm(cfg), filename="conv.s", isa=load_isa(), cfg=cfg)
    assert again.words == comp.program.words and again.tensors == comp.program.tensors
