"""The transformer instructions (vredmax .. vrsqrt) against exact Python-integer references, on both simulator cores.

Every reference here is written from the specification with Python integers and a formulation of
its own (rounding as a floor division of 2v + 2^s, the reciprocal square root as a binary search),
not with the simulator's helpers.  Hypothesis draws the operands and the accumulator, mixing the
extreme values in (the int32 ends, -128, 0, 1, the values around a LUT's clamps); the hand-picked
cases name the edges the brief asks for: all-equal rows, a row of -128, saturating sums, the
smallest and largest shifts, x <= 0, and the lookup's clamp at both ends.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_support import DEFAULT, ISA, TILE_CONFIGS, machine, over_tiles

from tinynpu.isa import ArchConfig

pytestmark = pytest.mark.usefixtures("sim_engine")  # each test runs on both simulator cores

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
EDGES = [I32_MIN, I32_MIN + 1, -(1 << 30), -129, -128, -127, -1, 0, 1, 2, 127, 128, 255, 256, (1 << 30), I32_MAX]
INT32 = st.one_of(st.integers(I32_MIN, I32_MAX), st.sampled_from(EDGES), st.integers(-300, 300))
ACC_ROWS = 160  # rows of the accumulator the examples fill (the rest stays zero)
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
Acc = list[list[int]]


def _sat(v: int) -> int:
    return min(max(v, I32_MIN), I32_MAX)


def _rnd(v: int, s: int) -> int:
    """Round v / 2^s to nearest, ties toward +infinity: floor(v / 2^s + 1/2), as one floor division."""
    return (2 * v + (1 << s)) // (1 << (s + 1))


def _wrap(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def _run(cfg: ArchConfig, mnemonic: str, operands: dict[str, int], acc: Acc) -> Acc:
    """``acc`` (rows of T) in the accumulator, one instruction, and the accumulator's first rows after it."""
    m = machine([(mnemonic, operands), ("halt", {})], cfg)
    m.state.acc[:len(acc)] = np.array(acc, dtype=np.int64)
    m.run()
    return [[int(v) for v in row] for row in m.state.acc[:len(acc)]]


def _acc(draw: st.DrawFn, t: int, rows: int = ACC_ROWS) -> Acc:
    """Rows of T int32 values: hypothesis draws a seed and how often the edges and small values come up,
    numpy draws the values (element by element, hypothesis would exceed its entropy budget at T = 32)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = rng.choice(3, size=(rows, t), p=draw(st.sampled_from([(1, 0, 0), (0.4, 0.3, 0.3), (0, 0.5, 0.5)])))
    full = rng.integers(I32_MIN, I32_MAX, size=(rows, t), endpoint=True)
    edges = rng.choice(np.array(EDGES, dtype=np.int64), size=(rows, t))
    small = rng.integers(-300, 301, size=(rows, t))
    return np.choose(kind, [full, edges, small]).tolist()  # type: ignore[no-any-return]


def _expect_rows(acc: Acc, dst: int, values: list[list[int]]) -> Acc:
    out = [row[:] for row in acc]
    for i, row in enumerate(values):
        out[dst + i] = row
    return out


# ---- references ------------------------------------------------------------------------------------------

def ref_reduce(mnemonic: str, acc: Acc, src: int, rows: int, n: int, cols: int, shift: int, t: int) -> list[int]:
    """One value per logical row: segment j of row i is acc row src + i + j*T; `cols` columns of the last."""
    out = []
    for i in range(rows):
        elems = [acc[src + i + j * t][c] for j in range(n) for c in range(cols if j == n - 1 else t)]
        if mnemonic == "vredmax":
            out.append(max(elems))
        else:
            total = sum(x * x for x in elems) if mnemonic == "vredsq" else sum(elems)
            out.append(_sat(_rnd(total, shift)))
    return out


def ref_rsqrt(x: int, shift: int) -> int:
    """The largest r <= 2^31 - 1 with r*r*x <= 4^shift, by binary search; 2^31 - 1 for x <= 0."""
    if x <= 0:
        return I32_MAX
    lo, hi = 0, I32_MAX  # lo always passes (0 does)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if mid * mid * x <= 4 ** shift else (lo, mid - 1)
    return lo


def ref_recip(x: int, shift: int) -> int:
    return I32_MAX if x <= 0 else min(2 ** shift // x, I32_MAX)


def ref_lut(x: int, table: list[int], base: int) -> int:
    entry = table[min(max(x - base, 0), 255)] & 0xFFFF
    return entry - 0x10000 if entry >= 0x8000 else entry


# ---- reductions ------------------------------------------------------------------------------------------

@st.composite
def _reduction(draw: st.DrawFn, t: int) -> tuple[dict[str, int], Acc]:
    n = draw(st.integers(1, 4))
    rows = draw(st.integers(1, t))
    src = draw(st.integers(0, 8))
    dst = src + (n - 1) * t + rows + draw(st.integers(0, 4))  # after the source span: disjoint
    ops = {"dst": dst, "src": src, "n": n, "rows": rows, "cols": draw(st.integers(1, t)),
           "shift": draw(st.sampled_from([0, 1, 2, 7, 31, 32, 62, 63]) | st.integers(0, 63))}
    acc = _acc(draw, t, dst + rows + 1)
    if draw(st.booleans()):  # a constant row (ties everywhere): -128, an int32 end or anything
        value = draw(st.sampled_from([-128, I32_MIN, I32_MAX]) | INT32)
        for j in range(n):
            acc[src + j * t] = [value] * t
    return ops, acc


@pytest.mark.parametrize("mnemonic", ["vredmax", "vredsum", "vredsq"])
@over_tiles(ci=True)
def test_reductions_match_the_integer_reference(cfg: ArchConfig, mnemonic: str) -> None:
    t = cfg.tile

    @SETTINGS
    @given(_reduction(t))
    def check(case: tuple[dict[str, int], Acc]) -> None:
        ops, acc = case
        if mnemonic == "vredmax":
            ops = {k: v for k, v in ops.items() if k != "shift"}
        got = _run(cfg, mnemonic, ops, acc)
        want = ref_reduce(mnemonic, acc, ops["src"], ops["rows"], ops["n"], ops["cols"], ops.get("shift", 0), t)
        assert got == _expect_rows(acc, ops["dst"], [[v] * t for v in want]), ops

    check()


@over_tiles(ci=True)
def test_reductions_saturate_and_keep_the_exact_sum(cfg: ArchConfig) -> None:
    """Rows of 2^31 - 1 and of -2^31 over 4 segments: the sums leave int32 (and the squares int64) exactly."""
    t = cfg.tile
    top, bottom = [I32_MAX] * t, [I32_MIN] * t
    acc = [top if (r // t) % 2 == 0 else bottom for r in range(8 * t)]  # row i: segments top, bottom, top, bottom
    acc += [[0] * t for _ in range(t)]
    common = {"dst": 8 * t, "src": 0, "n": 4, "rows": t, "cols": t}
    # sum: 2t * (2^31 - 1) + 2t * -2^31 = -2t, exactly; shift 0 then 63 (the result rounds to 0)
    assert _run(cfg, "vredsum", {**common, "shift": 0}, acc)[8 * t] == [-2 * t] * t
    assert _run(cfg, "vredsum", {**common, "shift": 63}, acc)[8 * t] == [0] * t
    # only the top segments, with shift 0: 2^31 - 1 times 2t saturates
    assert _run(cfg, "vredsum", {**common, "n": 1, "shift": 0}, acc)[8 * t] == [I32_MAX] * t
    squares = 2 * t * (I32_MAX ** 2 + I32_MIN ** 2)  # about 2^(68 + log2 t): past 64 bits
    assert _run(cfg, "vredsq", {**common, "shift": 63}, acc)[8 * t] == [_sat(_rnd(squares, 63))] * t
    assert _run(cfg, "vredsq", {**common, "shift": 0}, acc)[8 * t] == [I32_MAX] * t
    # a row of -128 everywhere: max -128, sum -128 * 4t, squares 2^14 * 4t
    acc = [[-128] * t for _ in range(4 * t)] + [[0] * t for _ in range(t)]
    common = {"dst": 4 * t, "src": 0, "n": 4, "rows": t, "cols": t}
    assert _run(cfg, "vredmax", common, acc)[4 * t] == [-128] * t
    assert _run(cfg, "vredsum", {**common, "shift": 0}, acc)[4 * t] == [-128 * 4 * t] * t
    assert _run(cfg, "vredsq", {**common, "shift": 2}, acc)[4 * t] == [(1 << 14) * t] * t


# ---- block broadcast -------------------------------------------------------------------------------------

@st.composite
def _block(draw: st.DrawFn, t: int) -> tuple[dict[str, int], Acc]:
    rows = draw(st.integers(1, 3 * t))
    src = draw(st.integers(0, 4))
    dst = src + min(rows, t) + draw(st.integers(0, 3))
    shift = draw(st.sampled_from([0, 1, 31, 62, 63]) | st.integers(0, 63))
    ops = {"dst": dst, "src": src, "rows": rows, "shift": shift}
    return ops, _acc(draw, t, dst + rows)


@over_tiles(ci=True)
def test_vsubb_and_vmulb_match_the_integer_reference(cfg: ArchConfig) -> None:
    t = cfg.tile

    @SETTINGS
    @given(_block(t))
    def check(case: tuple[dict[str, int], Acc]) -> None:
        ops, acc = case
        dst, src, rows, shift = ops["dst"], ops["src"], ops["rows"], ops["shift"]
        block = [acc[src + i % t] for i in range(rows)]
        sub = [[_wrap(a - b) for a, b in zip(acc[dst + i], block[i], strict=True)] for i in range(rows)]
        mul = [[_sat(_rnd(a * b, shift)) for a, b in zip(acc[dst + i], block[i], strict=True)] for i in range(rows)]
        assert _run(cfg, "vsubb", {"dst": dst, "src": src, "rows": rows}, acc) == _expect_rows(acc, dst, sub)
        assert _run(cfg, "vmulb", ops, acc) == _expect_rows(acc, dst, mul)

    check()


def test_vmulb_of_the_int32_ends_rounds_without_overflow() -> None:
    """(-2^31)^2 = 2^62 with shift 63 rounds to 1 (a sum past 2^63 if the rounding were done naively)."""
    t = DEFAULT.tile
    acc = [[I32_MIN] * t, [I32_MIN] * t, [I32_MAX] * t]
    for shift, want in [(63, 1), (62, 1), (61, 2), (0, I32_MAX)]:
        assert _run(DEFAULT, "vmulb", {"dst": 1, "src": 0, "rows": 1, "shift": shift}, acc)[1] == [want] * t
    assert _run(DEFAULT, "vmulb", {"dst": 2, "src": 0, "rows": 1, "shift": 31}, acc)[2] == [-I32_MAX] * t


# ---- table lookup ----------------------------------------------------------------------------------------

@st.composite
def _lut(draw: st.DrawFn, t: int) -> tuple[dict[str, int], Acc]:
    table_rows = -(-256 // t)
    rows = draw(st.integers(1, 2 * t))
    src = draw(st.integers(0, 3))
    dst = src + table_rows + draw(st.integers(0, 3))
    base = draw(st.sampled_from([-128, 0, I32_MIN, I32_MAX, I32_MAX - 255]) | st.integers(I32_MIN, I32_MAX))
    acc = _acc(draw, t, dst + rows)
    coin = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    for i in range(rows):  # half the elements near the table's range, so the inside is exercised too
        acc[dst + i] = [v if coin.random() < 0.5 else _sat(base + v % 300 - 20) for v in acc[dst + i]]
    return {"dst": dst, "src": src, "rows": rows, "base": base}, acc


@over_tiles(ci=True)
def test_vlut_matches_the_integer_reference(cfg: ArchConfig) -> None:
    t = cfg.tile

    @SETTINGS
    @given(_lut(t))
    def check(case: tuple[dict[str, int], Acc]) -> None:
        ops, acc = case
        table = [acc[ops["src"] + e // t][e % t] for e in range(256)]
        want = [[ref_lut(x, table, ops["base"]) for x in acc[ops["dst"] + i]] for i in range(ops["rows"])]
        assert _run(cfg, "vlut", ops, acc) == _expect_rows(acc, ops["dst"], want), ops

    check()


@over_tiles(ci=True)
def test_vlut_clamps_both_ends_and_sign_extends(cfg: ArchConfig) -> None:
    """Entry e holds e - 128 in its low 16 bits (plus junk above); base -128 maps int8 codes to entries."""
    t = cfg.tile
    table_rows = -(-256 // t)
    low = {0: -0x8000, 255: 0x7FFF}  # the ends: the int16 extremes; the others e - 128
    entries = [(e << 16) + low.get(e, e - 128) for e in range(table_rows * t)]  # junk in the high 16 bits
    acc = [[_wrap(entries[r * t + c]) for c in range(t)] for r in range(table_rows)]
    xs = [I32_MIN, -129, -128, -127, -1, 0, 126, 127, 128, I32_MAX]
    acc.append([xs[c % len(xs)] for c in range(t)])
    got = _run(cfg, "vlut", {"dst": table_rows, "src": 0, "rows": 1, "base": -128}, acc)[table_rows]
    want = {I32_MIN: -0x8000, -129: -0x8000, -128: -0x8000, -127: -127, -1: -1, 0: 0, 126: 126,
            127: 0x7FFF, 128: 0x7FFF, I32_MAX: 0x7FFF}
    assert got == [want[xs[c % len(xs)]] for c in range(t)]
    # base at the int32 ends: x - base spans 2^32 without wrapping
    got = _run(cfg, "vlut", {"dst": table_rows, "src": 0, "rows": 1, "base": I32_MAX}, acc)[table_rows]
    assert got == [-0x8000] * t
    got = _run(cfg, "vlut", {"dst": table_rows, "src": 0, "rows": 1, "base": I32_MAX - 255}, acc)[table_rows]
    assert got == [0x7FFF if xs[c % len(xs)] == I32_MAX else -0x8000 for c in range(t)]
    got = _run(cfg, "vlut", {"dst": table_rows, "src": 0, "rows": 1, "base": I32_MIN}, acc)[table_rows]
    assert got == [-0x8000 if xs[c % len(xs)] == I32_MIN else 0x7FFF for c in range(t)]


# ---- reciprocal and reciprocal square root ---------------------------------------------------------------

X_EDGES = [I32_MIN, -1, 0, 1, 2, 3, 4, 255, 1 << 16, (1 << 30) + 1, I32_MAX]


@pytest.mark.parametrize("mnemonic", ["vrecip", "vrsqrt"])
def test_vrecip_vrsqrt_match_the_integer_reference(mnemonic: str) -> None:
    t = DEFAULT.tile
    top = ISA.by_mnemonic[mnemonic].field_map["shift"].hi
    ref = ref_recip if mnemonic == "vrecip" else ref_rsqrt

    @SETTINGS
    @given(st.lists(st.sampled_from(X_EDGES) | INT32 | st.integers(1, 1 << 20), min_size=1, max_size=20),
           st.sampled_from([0, 1, top - 1, top]) | st.integers(0, top), st.booleans())
    def check(xs: list[int], shift: int, in_place: bool) -> None:
        rows = len(xs)
        acc = [[x] + [-7] * (t - 1) for x in xs] + [[5] * t for _ in range(rows)]  # other columns are ignored
        dst = 0 if in_place else rows
        want = [[ref(x, shift)] * t for x in xs]
        assert _run(DEFAULT, mnemonic, {"dst": dst, "src": 0, "rows": rows, "shift": shift}, acc) == \
            _expect_rows(acc, dst, want)

    check()


@pytest.mark.parametrize("cfg", TILE_CONFIGS, ids=lambda c: c.name)
def test_vrecip_vrsqrt_edges(cfg: ArchConfig) -> None:
    t = cfg.tile
    acc = [[x] * t for x in X_EDGES] + [[0] * t for _ in X_EDGES]
    for mnemonic, ref in (("vrecip", ref_recip), ("vrsqrt", ref_rsqrt)):
        for shift in (0, 31, ISA.by_mnemonic[mnemonic].field_map["shift"].hi):
            got = _run(cfg, mnemonic, {"dst": len(X_EDGES), "src": 0, "rows": len(X_EDGES), "shift": shift}, acc)
            assert [row[0] for row in got[len(X_EDGES):]] == [ref(x, shift) for x in X_EDGES], (mnemonic, shift)
    assert ref_rsqrt(1, 31) == I32_MAX and ref_rsqrt(4, 31) == 1 << 30 and ref_recip(1, 62) == I32_MAX
