"""Module-level cocotb benches: the MAC array, the requantizer and a vrequantf lane against numpy."""

from __future__ import annotations

from typing import Any

import cocotb
import numpy as np
from cocotb.triggers import Timer

TILE = 16


def pack(values: np.ndarray, bits: int) -> int:
    """Lane 0 in the low bits, two's complement."""
    mask = (1 << bits) - 1
    out = 0
    for i, v in enumerate(values.reshape(-1).tolist()):
        out |= (int(v) & mask) << (i * bits)
    return out


def unpack(value: int, lanes: int, bits: int) -> np.ndarray:
    out = [(value >> (i * bits)) & ((1 << bits) - 1) for i in range(lanes)]
    return np.array([v - (1 << bits) if v >> (bits - 1) else v for v in out], dtype=np.int64)


@cocotb.test()
async def mac_array_matches_numpy(dut: Any) -> None:
    """dot[c] = sum_x a[x] * b[c][x], wrapped to int32, for random and extreme operands."""
    rng = np.random.default_rng(1)
    for trial in range(300):
        a = rng.integers(-128, 128, TILE)
        b = rng.integers(-128, 128, (TILE, TILE))
        if trial < 4:  # extremes: every product +16384 or -16256
            a[:] = -128 if trial % 2 == 0 else 127
            b[:] = -128
        dut.a_row.value = pack(a, 8)
        dut.b_tile.value = pack(b, 8)
        await Timer(1, "ns")
        got = unpack(int(dut.dot.value), TILE, 32)
        want = (b @ a).astype(np.int64)
        assert np.array_equal(got, want), f"trial {trial}: {got} != {want}"


@cocotb.test()
async def requantizer_matches_numpy(dut: Any) -> None:
    """Round-shift (ties toward +inf), relu, saturate to int8; raw mode keeps int32 with relu."""
    rng = np.random.default_rng(2)
    for trial in range(300):
        x = rng.integers(-(2**31), 2**31, TILE)
        x[:6] = [2**31 - 1, -(2**31), 0, -1, 1 << (trial % 31), -(1 << (trial % 31))]
        narrow, relu, shift = trial % 3 != 0, int(rng.integers(0, 2)), int(rng.integers(0, 32))
        if not narrow:
            shift = 0
        dut.acc_row.value = pack(x, 32)
        dut.narrow.value = int(narrow)
        dut.relu.value = relu
        dut.shift.value = shift
        await Timer(1, "ns")
        v = x.astype(np.int64)
        if narrow:
            v = (v + ((1 << shift) >> 1)) >> shift
        if relu:
            v = np.maximum(v, 0)
        if narrow:
            want = np.clip(v, -128, 127)
            got = unpack(int(dut.rq_out.value) & ((1 << (8 * TILE)) - 1), TILE, 8)
        else:
            want = v
            got = unpack(int(dut.rq_out.value), TILE, 32)
        assert np.array_equal(got, want), f"trial {trial} shift {shift} relu {relu}: {got} != {want}"


@cocotb.test()
async def requantf_lane_matches_numpy(dut: Any) -> None:
    """vrequantf's lane: every special x with every special scale, exact product ties, random operands."""
    from tinynpu.rtl.tb.requantf_cases import cases
    from tinynpu.simulator.semantics import requantize_float

    xs, scales = cases(np.random.default_rng(3))
    want = requantize_float(xs, scales)
    bad = []
    for x, s, w in zip(xs.tolist(), scales.tolist(), want.tolist(), strict=True):
        dut.rqf_x.value = x & 0xFFFFFFFF
        dut.rqf_scale.value = s & 0xFFFFFFFF
        await Timer(1, "ns")
        got = int(dut.rqf_y.value)
        got -= (got >> 31) << 32
        if got != w:
            bad.append(f"x={x} scale=0x{s & 0xFFFFFFFF:08x}: {got} != {w}")
    assert not bad, f"{len(bad)} of {len(xs)} differ: " + "; ".join(bad[:8])
