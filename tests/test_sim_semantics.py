"""Per-instruction semantics at edge values (int8 x int8 -> int32 wrap, rounding ties, saturation).

The tests whose result depends on the tile edge T run on the t8, default and t32 configs
(:func:`test_sim_support.over_tiles`); every expectation is computed from the config's T.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_sim_support import DEFAULT, FP32, HALT, SYNC, load, machine, over_tiles, scope, units

from tinynpu.isa import ArchConfig

pytestmark = pytest.mark.usefixtures("sim_engine")  # each test runs on both simulator cores

I32 = np.iinfo(np.int32)


def _put(m, addr: int, arr: np.ndarray) -> None:
    m.write_dram(addr, np.ascontiguousarray(arr))


def _row(values: list[int], t: int) -> np.ndarray:
    """``values`` repeated (or cut) to one row of ``t`` int32 elements."""
    return np.resize(np.array(values, dtype=np.int64), t).astype(np.int32)


def _ref_tmm(a_tiles, b_tiles, m, n, k):
    """Plain loops over tiles, int64 then wrapped: an independent reference."""
    t = a_tiles.shape[-1]
    out = np.zeros((m, n, t, t), dtype=np.int64)
    for i in range(m):
        for j in range(n):
            for kk in range(k):
                out[i, j] += a_tiles[i * k + kk].astype(np.int64) @ b_tiles[j * k + kk].astype(np.int64).T
    return out


@over_tiles(ci=True)
def test_tmm_extreme_products_and_block_layout(cfg: ArchConfig) -> None:
    T = cfg.tile
    rng = np.random.default_rng(1)
    mm, nn, kk = 2, 3, 2
    a = rng.integers(-128, 128, (mm * kk * T, T)).astype(np.int8)
    b = rng.integers(-128, 128, (nn * kk * T, T)).astype(np.int8)
    a[: kk * T] = -128
    b[: kk * T] = -128  # -128 * -128 summed over a whole tile
    m = machine([load("a", 0, 0, rows=len(a), cfg=cfg), load("b", 0, 0x10000, rows=len(b), cfg=cfg), SYNC,
                 ("tmm", {"acc": 0, "a": 0, "b": 0, "m": mm, "n": nn, "k": kk, "accumulate": 0}), HALT], cfg)
    _put(m, 0, a)
    _put(m, 0x10000, b)
    m.run()
    ref = _ref_tmm(a.reshape(-1, T, T), b.reshape(-1, T, T), mm, nn, kk)
    got = m.state.acc[: mm * nn * T].reshape(mm, nn, T, T)
    assert np.array_equal(got, ref.astype(np.int32))
    assert got[0, 0, 0, 0] == 128 * 128 * T * kk


@over_tiles()
def test_tmm_accumulate_wraps_int32(cfg: ArchConfig) -> None:
    T = cfg.tile
    a = np.full((T, T), -128, np.int8)
    acc0 = np.full((T, T), I32.max - 5, np.int32)
    m = machine([load("a", 0, 0, cfg=cfg), load("b", 0, 0, cfg=cfg), load("acc", 0, 0x1000, cfg=cfg), SYNC,
                 ("tmm", {"acc": 0, "a": 0, "b": 0, "accumulate": 1}), HALT], cfg)
    _put(m, 0, a)
    _put(m, 0x1000, acc0)
    m.run()
    expect = (int(I32.max) - 5 + 128 * 128 * T + 2**31) % 2**32 - 2**31
    assert (m.state.acc[:T] == expect).all() and expect < 0


@over_tiles(ci=True)
def test_load_zero_fills_short_rows_and_strides(cfg: ArchConfig) -> None:
    data = np.arange(256, dtype=np.uint8).astype(np.int8)
    m = machine([("zero", {"scope": scope("a"), "sp_row": 0, "rows": 4}),
                 load("a", 0, 0, rows=4, cols=5, stride=40, cfg=cfg), HALT], cfg)
    m.state.a[:4] = 7  # stale data must not survive in the short rows
    _put(m, 0, data)
    m.run()
    for r in range(4):
        assert list(m.state.a[r, :5]) == list(data[r * 40: r * 40 + 5])
        assert (m.state.a[r, 5:] == 0).all()


@over_tiles()
def test_alu_ops_wrap_and_vshr_ties_toward_plus_infinity(cfg: ArchConfig) -> None:
    # the extreme values first, so every tile edge (8 and up) has them all
    vals = _row([I32.max, I32.min, -3, 3, -1, 1 << 30, -(1 << 30), 5, -2, 0, 1, 2, -5, 7, -7, 6], cfg.tile)
    rows = np.tile(vals, (4, 1))
    prog = [load("acc", 0, 0, rows=4, cfg=cfg), SYNC,
            ("vshr", {"dst": 0, "shift": 1, "rows": 1}),
            ("vmul", {"dst": 1, "imm": 4, "rows": 1}),
            ("vadd", {"dst": 2, "src": 3, "rows": 1}),
            ("vmax", {"dst": 3, "imm": -2, "rows": 1}), HALT]
    m = machine(prog, cfg)
    _put(m, 0, rows)
    m.run()

    def shr(x: int, s: int) -> int:
        return (x + ((1 << s) >> 1)) >> s  # python ints: unbounded, so this is the exact reference

    def wrap(x: int) -> int:
        return (x + 2**31) % 2**32 - 2**31

    assert [int(v) for v in m.state.acc[0]] == [shr(int(v), 1) for v in vals]
    assert [int(v) for v in m.state.acc[1]] == [wrap(int(v) * 4) for v in vals]
    assert [int(v) for v in m.state.acc[2]] == [wrap(int(v) + int(v)) for v in vals]
    assert [int(v) for v in m.state.acc[3]] == [max(int(v), -2) for v in vals]
    assert shr(-3, 1) == -1 and shr(3, 1) == 2  # ties go toward +infinity


@over_tiles()
def test_vaddrow_vmin(cfg: ArchConfig) -> None:
    T = cfg.tile
    rows = np.arange(5 * T, dtype=np.int32).reshape(5, T) - 40
    m = machine([load("acc", 0, 0, rows=5, cfg=cfg), SYNC, ("vaddrow", {"dst": 0, "src": 4, "rows": 4}),
                 ("vmin", {"dst": 0, "imm": 10, "rows": 4}), HALT], cfg)
    _put(m, 0, rows)
    m.run()
    assert np.array_equal(m.state.acc[:4], np.minimum(rows[:4] + rows[4], 10))


def _requant_ref(x: int, mult: int, shift: int) -> int:
    """round(x * mult / 2^(31 + shift)), ties toward +infinity, saturated: exact Python integers."""
    den = 1 << (31 + (shift & 31))
    y = (2 * x * mult + den) // (2 * den)  # floor(x * mult / den + 1/2)
    return min(max(y, int(I32.min)), int(I32.max))


@over_tiles(ci=True)
def test_vrequant_rounds_per_column_and_saturates(cfg: ArchConfig) -> None:
    # columns: (x, M, S); the saturating, tie and shift-by-31 cases in the first 8 (every tile edge)
    x = _row([I32.max, I32.min, -3, -1, 5, 1 << 30, 1, 6, -2, 0, 2, 3, -5, -(1 << 30), 12345, -77], cfg.tile)
    mult = _row([I32.min, I32.min, 1 << 30, (1 << 31) - 1, 3 << 28, 1 << 30, 1 << 30, I32.max, 1 << 30, 1,
                 1 << 30, 1 << 30, 3 << 28, -(1 << 30), 1518500250, 1518500250], cfg.tile)
    shift = _row([0, 0, 0, 31, 1, 31, 0, 32 + 3, 0, 5, 0, 0, 1, 31, 7, 7], cfg.tile)  # 35: low 5 bits
    rows = np.stack([x, x * np.int32(-1) - np.int32(1), mult, shift])
    m = machine([load("acc", 0, 0, rows=4, cfg=cfg), SYNC, ("vrequant", {"dst": 0, "src": 2, "rows": 2}), HALT],
                cfg)
    _put(m, 0, rows)
    m.run()
    for r in range(2):
        assert [int(v) for v in m.state.acc[r]] == [
            _requant_ref(int(v), int(mm), int(s)) for v, mm, s in zip(rows[r], mult, shift, strict=True)]
    assert int(m.state.acc[1, 0]) == int(I32.max)  # (-2^31)^2 / 2^31 = 2^31 saturates
    assert _requant_ref(1, 1 << 30, 0) == 1 and _requant_ref(-1, 1 << 30, 0) == 0  # ties toward +infinity
    assert np.array_equal(m.state.acc[2:4], rows[2:4])  # the parameter rows are untouched


def test_requantize_is_the_instruction_arithmetic() -> None:
    from tinynpu.simulator.semantics import requantize

    T = DEFAULT.tile  # any row width: the arithmetic is per element

    rng = np.random.default_rng(5)
    x = rng.integers(I32.min, I32.max, (64, T), dtype=np.int64, endpoint=True)
    mult = rng.integers(1 << 30, 1 << 31, T, dtype=np.int64)
    shift = rng.integers(0, 32, T, dtype=np.int64)
    got = requantize(x.astype(np.int32), mult, shift)
    assert got.dtype == np.int32
    assert got.tolist() == [[_requant_ref(int(v), int(mm), int(s)) for v, mm, s in zip(row, mult, shift, strict=True)]
                            for row in x]


@over_tiles()
@pytest.mark.parametrize("shift,relu", [(0, False), (3, False), (3, True), (31, False)])
def test_store_narrow_rounds_and_saturates(cfg: ArchConfig, shift: int, relu: bool) -> None:
    T = cfg.tile
    # the saturating and the tie cases in the first 8 columns (every tile edge)
    vals = np.array([I32.max, I32.min, 127 << shift, -(129 << shift), (1 << shift) >> 1, -((1 << shift) >> 1),
                     12, -12, 1000, -1000, 4, -4, 0, 1, -1, 5], dtype=np.int64)
    vals = np.resize(np.clip(vals, I32.min, I32.max), T).astype(np.int32)
    store = {"sp_row": 0, "dram": 0x1000, "rows": 1, "cols": T, "narrow": 1, "relu": int(relu),
             "shift": shift, "wait": units("load")}
    m = machine([load("acc", 0, 0, rows=1, signal=units("store"), cfg=cfg), ("store", store), HALT], cfg)
    _put(m, 0, vals[None, :])
    m.run(check_races=True)
    got = np.frombuffer(m.read_dram(0x1000, T), np.int8)
    expect = []
    for v in vals.tolist():
        x = (v + ((1 << shift) >> 1)) >> shift
        x = max(x, 0) if relu else x
        expect.append(min(max(x, -128), 127))
    assert got.tolist() == expect


@over_tiles(ci=True)
def test_store_raw_cols_and_relu(cfg: ArchConfig) -> None:
    T = cfg.tile
    vals = (np.arange(2 * T, dtype=np.int32) - 20).reshape(2, T)
    m = machine([load("acc", 0, 0, rows=2, signal=units("store"), cfg=cfg),
                 ("store", {"sp_row": 0, "dram": 0x1000, "rows": 2, "cols": 3, "stride": 4 * T, "relu": 1,
                            "wait": units("load")}), HALT], cfg)
    _put(m, 0, vals)
    m.write_dram(0x1000, b"\xff" * (8 * T))
    m.run()
    out = np.frombuffer(m.read_dram(0x1000, 8 * T), np.int32).reshape(2, T)
    assert np.array_equal(out[:, :3], np.maximum(vals[:, :3], 0))
    assert (out[:, 3:] == -1).all()  # bytes beyond cols untouched


def test_fp32_tmm_matches_float32_steps() -> None:
    T = FP32.tile
    rng = np.random.default_rng(3)
    a = rng.random((2 * T, T), dtype=np.float32)
    b = rng.random((2 * T, T), dtype=np.float32)
    m = machine([load("a", 0, 0, rows=2 * T, stride=64), load("b", 0, 0x4000, rows=2 * T, stride=64), SYNC,
                 ("tmm", {"acc": 0, "a": 0, "b": 0, "m": 1, "n": 1, "k": 2, "accumulate": 0}), HALT],
                cfg=FP32)
    _put(m, 0, a)
    _put(m, 0x4000, b)
    m.run()
    ref = a[:T] @ b[:T].T
    ref = ref + a[T:] @ b[T:].T
    np.testing.assert_allclose(m.state.acc[:T], ref, rtol=1e-6)
