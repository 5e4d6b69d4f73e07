"""vrequantf: binary32 requantization, against exact rational arithmetic, on both simulator cores."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_sim_support import DEFAULT, FP32, HALT, ISA, SYNC, load, machine

from tinynpu.errors import AsmError
from tinynpu.rtl.tb.requantf_cases import cases, product_ties
from tinynpu.simulator import SimFault
from tinynpu.simulator.semantics import requantize_float

T = DEFAULT.tile
I32 = np.iinfo(np.int32)


def _significand(v: Fraction) -> tuple[Fraction, int]:
    """``|v| = mag * 2^e`` with ``mag`` in [2^23, 2^24): binary32's 24 significant bits, unrounded."""
    mag, e = abs(v), 0
    while mag >= 2**24:
        mag, e = mag / 2, e + 1
    while mag < 2**23:
        mag, e = mag * 2, e - 1
    return mag, e


def _to_binary32(v: Fraction) -> Fraction:
    """``v`` rounded to 24 significant bits, ties to even (binary32 without exponent limits)."""
    if v == 0:
        return v
    mag, e = _significand(v)
    m = round(mag)  # Python rounds half to even
    return (m if v > 0 else -m) * Fraction(2) ** e


def _reference(x: int, bits: int) -> int:
    """The ISA description, exactly: rint(binary32(binary32(x) * s)), special scales by their rule."""
    sign = -1 if bits & 0x8000_0000 else 1
    exp, frac = (bits >> 23) & 0xFF, bits & 0x7F_FFFF
    if x == 0:
        return 0
    if exp == 0xFF:  # infinity or NaN: the infinity of its sign
        return int(I32.max) if sign * x > 0 else int(I32.min)
    s = sign * (Fraction(frac, 2**23) * Fraction(2) ** -126 if exp == 0
                else Fraction(2**23 + frac, 2**23) * Fraction(2) ** (exp - 127))
    p = _to_binary32(_to_binary32(Fraction(x)) * s)
    if p >= 2**128:  # binary32 overflow is infinity: saturated like any product past 2^31
        return int(I32.max)
    if p <= -(2**128):
        return int(I32.min)
    return min(max(round(p), int(I32.min)), int(I32.max))


def test_requantize_float_is_the_exact_rule() -> None:
    xs, scales = cases(np.random.default_rng(11), n_random=3000)
    got = requantize_float(xs, scales)
    want = [_reference(x, s & 0xFFFF_FFFF) for x, s in zip(xs.tolist(), scales.tolist(), strict=True)]
    assert got.dtype == np.int32
    bad = [(x, hex(s & 0xFFFF_FFFF), g, w) for x, s, g, w in zip(xs.tolist(), scales.tolist(), got.tolist(), want,
                                                                 strict=True) if g != w]
    assert not bad, bad[:10]


def test_cases_hold_real_ties() -> None:
    """The tie generator's products lie exactly half-way between two binary32 values (so ties are tested)."""
    xs, scales = product_ties(np.random.default_rng(4), 50)
    for x, s in zip(xs.tolist(), scales.view(np.float32).tolist(), strict=True):
        mag, _ = _significand(Fraction(x) * Fraction(s))
        assert mag - int(mag) == Fraction(1, 2), (x, s)


def test_ties_round_to_even_at_every_step() -> None:
    half = int(np.float32(0.5).view(np.int32))
    x = np.array([1, 3, 5, -1, -3, 2**25 + 2, 2**25 + 6], dtype=np.int32)
    # x * 0.5: integer ties; 2^25 + 2 and 2^25 + 6 convert to binary32 with a tie (to 2^25, 2^25 + 8)
    assert requantize_float(x, np.full(x.shape, half, np.int32)).tolist() == [0, 2, 2, 0, -2, 2**24, 2**24 + 4]


def test_special_scales() -> None:
    x = np.array([5, -5, 0], dtype=np.int32)

    def run(pattern: int) -> list[int]:
        return requantize_float(x, np.full(3, np.uint32(pattern).view(np.int32))).tolist()

    big, small = int(I32.max), int(I32.min)
    assert run(0x7F80_0000) == [big, small, 0]       # +inf
    assert run(0xFF80_0000) == [small, big, 0]       # -inf
    assert run(0x7FC0_0000) == [big, small, 0]       # NaN: the infinity of its sign
    assert run(0xFFC0_0001) == [small, big, 0]
    assert run(0x0000_0001) == [0, 0, 0]             # subnormal
    assert run(0x8000_0000) == [0, 0, 0]             # -0
    assert run(0x7F7F_FFFF) == [big, small, 0]       # the largest finite scale saturates


def test_yaml_semantics_text_is_the_python_rule() -> None:
    """isa.yaml's numpy semantics of vrequantf, executed, agrees with requantize_float."""
    xs, scales = cases(np.random.default_rng(12), n_random=500)
    acc = np.zeros((2, xs.size), dtype=np.int32)
    acc[0], acc[1] = scales, xs
    with np.errstate(over="ignore", invalid="ignore"):
        exec(ISA.by_mnemonic["vrequantf"].semantics, {"np": np, "acc": acc, "src": 0, "dst": 1, "rows": 1})
    assert acc[1].tolist() == requantize_float(xs, scales).tolist()


@pytest.mark.usefixtures("sim_engine")  # the Python core and the native one
def test_vrequantf_on_the_simulator() -> None:
    xs, scales = cases(np.random.default_rng(13), n_random=1000)
    n_rows = len(xs) // T
    xs, scales = xs[:n_rows * T].reshape(n_rows, T), scales[:n_rows * T].reshape(n_rows, T)
    rows = np.concatenate([scales, xs])  # row r of xs is scaled by row r of scales
    m = machine([load("acc", 0, 0, rows=2 * n_rows), SYNC,
                 *[("vrequantf", {"dst": n_rows + r, "src": r, "rows": 1}) for r in range(n_rows)], HALT])
    m.write_dram(0, np.ascontiguousarray(rows))
    m.run()
    assert np.array_equal(m.state.acc[n_rows:2 * n_rows], requantize_float(xs, scales))
    assert np.array_equal(m.state.acc[:n_rows], scales)  # the scale rows are untouched


@pytest.mark.usefixtures("sim_engine")
def test_vrequantf_broadcasts_its_scale_row() -> None:
    rng = np.random.default_rng(14)
    x = rng.integers(-(2**20), 2**20, (8, T)).astype(np.int32)
    s = rng.uniform(1e-4, 1e-2, T).astype(np.float32)
    m = machine([load("acc", 0, 0, rows=9), SYNC, ("vrequantf", {"dst": 1, "src": 0, "rows": 8}), HALT])
    m.write_dram(0, np.ascontiguousarray(np.concatenate([s.view(np.int32)[None], x])))
    m.run()
    assert np.array_equal(m.state.acc[1:9], np.rint((x.astype(np.float32) * s).astype(np.float64)).astype(np.int32))


def _fault(instrs: list, cfg=DEFAULT) -> str:
    with pytest.raises(SimFault) as exc:
        machine(instrs, cfg).run()
    return exc.value.message


def test_scale_row_inside_destination_is_a_fault() -> None:
    msg = _fault([("vrequantf", {"dst": 4, "src": 7, "rows": 8}), HALT])
    assert msg == ("instruction 0 (pc 0x0, vrequantf): the scale row 7 lies inside the destination rows 4..11; "
                   "it must lie outside them."), msg
    machine([("vrequantf", {"dst": 4, "src": 12, "rows": 8}), ("vrequantf", {"dst": 4, "src": 3, "rows": 8}),
             HALT]).run()


def test_scale_row_out_of_range_and_float_config() -> None:
    rows = DEFAULT.rows("acc")
    msg = _fault([("vrequantf", {"dst": 0, "src": rows, "rows": 8}), HALT])
    assert msg == f"instruction 0 (pc 0x0, vrequantf): src: acc row {rows} is out of range (acc has {rows} rows).", msg
    msg = _fault([("vrequantf", {"dst": 0, "src": 8, "rows": 1}), HALT], FP32)
    assert "vrequantf is for integer configs only (config 'fp32' is float32)" in msg, msg


def test_assembler_names_the_scale_row() -> None:
    from tinynpu.assembler import assemble

    with pytest.raises(AsmError) as exc:
        assemble("vrequantf acc[16], acc[20], rows=16", filename="t.s", isa=ISA, cfg=DEFAULT)
    assert str(exc.value) == ("t.s:1:20: vrequantf: the scale row 20 lies inside the destination rows 16..31; "
                              "it must lie outside them."), str(exc.value)
    assert len(assemble("vrequantf acc[16], acc[32], rows=16", isa=ISA, cfg=DEFAULT).words) == 1
