"""cocotb bench of rtl/tinynpu_lut.sv (vlut's lookup register) against exact Python integers.

The environment gives the build's lane count ``TNPU_LUT_LANES`` (the module's ``Lanes``, any T,
also one that does not divide 256) and ``TNPU_BENCH_FULL=1`` for the long runs.  Inputs change at
falling edges and the combinational outputs are read one nanosecond later.
"""

from __future__ import annotations

import os
import random
from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge, Timer

LANES = int(os.environ.get("TNPU_LUT_LANES", "16"))
FULL = os.environ.get("TNPU_BENCH_FULL") == "1"
ENTRIES, ENTRY_BITS, ACC_BITS = 256, 16, 32
ROWS = -(-ENTRIES // LANES)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MASK32 = (1 << ACC_BITS) - 1


def pack(values: list[int]) -> int:
    """Lane 0 in the low bits, two's complement."""
    return sum((v & MASK32) << (ACC_BITS * i) for i, v in enumerate(values))


def unpack(value: int) -> list[int]:
    lanes = [(value >> (ACC_BITS * i)) & MASK32 for i in range(LANES)]
    return [v - (1 << ACC_BITS) if v >> (ACC_BITS - 1) else v for v in lanes]


def sext16(value: int) -> int:
    value &= (1 << ENTRY_BITS) - 1
    return value - (1 << ENTRY_BITS) if value >> (ENTRY_BITS - 1) else value


def lookup(table: list[int], x: int, base: int) -> int:
    """vlut on one element: idx = clamp(x - base, 0, 255) exactly, the entry sign-extended."""
    return sext16(table[min(max(x - base, 0), ENTRIES - 1)])


def random_acc_row(rng: random.Random) -> list[int]:
    """A full-width int32 row: the bits above an entry's 16 must be ignored."""
    return [rng.randrange(INT32_MIN, INT32_MAX + 1) for _ in range(LANES)]


async def write_rows(dut: Any, rows: dict[int, list[int]], table: list[int]) -> None:
    """Write each table row in one cycle (at falling edges), updating the model ``table``."""
    for row, data in rows.items():
        dut.wr_en_i.value = 1
        dut.wr_row_i.value = row
        dut.wr_data_i.value = pack(data)
        await FallingEdge(dut.clk_i)
        for lane, value in enumerate(data):
            if row * LANES + lane < ENTRIES:
                table[row * LANES + lane] = value
    dut.wr_en_i.value = 0


async def check(dut: Any, table: list[int], xs: list[int], base: int) -> str | None:
    """Present one row of lookups; None if every lane matches the model."""
    dut.x_i.value = pack(xs)
    dut.base_i.value = base & MASK32
    await Timer(1, "ns")
    got = unpack(int(dut.y_o.value))
    want = [lookup(table, x, base) for x in xs]
    return None if got == want else f"base {base} x {xs}: got {got}, want {want}"


async def start(dut: Any, rng: random.Random) -> list[int]:
    """Start the clock and fill the whole table with random rows; returns the model."""
    Clock(dut.clk_i, 10, unit="ns").start()  # cocotb 2: the clock runs its own task
    dut.wr_en_i.value = 0
    await FallingEdge(dut.clk_i)
    table = [0] * ENTRIES
    await write_rows(dut, {r: random_acc_row(rng) for r in range(ROWS)}, table)
    return table


async def mismatches(dut: Any, table: list[int], lookups: list[tuple[list[int], int]]) -> list[str]:
    """Every (lanes' x, base) row of lookups that does not match the model."""
    return [error for xs, base in lookups if (error := await check(dut, table, xs, base)) is not None]


def report(errors: list[str], total: int) -> None:
    assert not errors, f"{len(errors)} of {total} lookups wrong (T = {LANES}):\n" + "\n".join(errors[:10])


@cocotb.test()
async def every_index_and_both_clamp_ends(dut: Any) -> None:
    """x - base over -3 .. 258 (each index, both clamps) at several bases, the int32 extremes among them."""
    rng = random.Random(LANES)
    table = await start(dut, rng)
    offsets = list(range(-3, ENTRIES + 3))
    bases = [0, -1000, 77, INT32_MIN, INT32_MIN + 3, INT32_MAX - ENTRIES - 3, INT32_MAX]
    if FULL:
        bases += [rng.randrange(INT32_MIN + 3, INT32_MAX - ENTRIES - 3) for _ in range(20)]
    lookups = []
    for base in bases:
        valid = [d for d in offsets if INT32_MIN <= base + d <= INT32_MAX]
        shuffled = rng.sample(valid, len(valid))  # each lane sees many different indices
        for i in range(0, len(shuffled), LANES):
            xs = [base + d for d in shuffled[i:i + LANES]]
            lookups.append((xs + [base] * (LANES - len(xs)), base))
    report(await mismatches(dut, table, lookups), len(lookups))


@cocotb.test()
async def differences_past_int32_never_wrap(dut: Any) -> None:
    """x - base beyond int32 (base at the extremes): a wrapped difference would pick the other end."""
    rng = random.Random(LANES + 1)
    table = await start(dut, rng)
    pairs = [(INT32_MAX, INT32_MIN), (INT32_MIN, INT32_MAX), (INT32_MIN, INT32_MIN), (INT32_MAX, INT32_MAX),
             (0, INT32_MIN), (-1, INT32_MAX), (INT32_MIN + 255, INT32_MIN), (INT32_MAX, INT32_MAX - 255),
             (INT32_MIN + 256, INT32_MIN), (INT32_MAX - 256, INT32_MAX)]
    for _ in range(3000 if FULL else 200):
        pairs.append((rng.randrange(INT32_MIN, INT32_MAX + 1),
                      rng.choice([INT32_MIN, INT32_MAX, rng.randrange(INT32_MIN, INT32_MAX)])))
    lookups = [([x] + [rng.randrange(INT32_MIN, INT32_MAX + 1) for _ in range(LANES - 1)], base) for x, base in pairs]
    report(await mismatches(dut, table, lookups), len(lookups))


@cocotb.test()
async def a_write_lands_at_the_edge_and_only_in_its_row(dut: Any) -> None:
    """A lookup in the write's cycle sees the old entry; after the edge, only that row has changed."""
    rng = random.Random(LANES + 2)
    table = await start(dut, rng)
    errors, total = [], 0
    for row in sorted({0, 1, ROWS // 2, ROWS - 1}):
        data = random_acc_row(rng)
        dut.wr_en_i.value = 1
        dut.wr_row_i.value = row
        dut.wr_data_i.value = pack(data)
        xs = [row * LANES + lane for lane in range(LANES)]  # base 0: the row's own entries
        total += 2
        if (error := await check(dut, table, xs, 0)) is not None:  # before the edge: old entries
            errors.append(f"before the write edge: {error}")
        await RisingEdge(dut.clk_i)
        await FallingEdge(dut.clk_i)
        dut.wr_en_i.value = 0
        for lane, value in enumerate(data):
            if row * LANES + lane < ENTRIES:
                table[row * LANES + lane] = value
        # every entry, table row by table row: the other rows kept theirs
        lookups = [([first + lane for lane in range(LANES)], 0) for first in range(0, ENTRIES, LANES)]
        errors += [f"after writing row {row}: {error}" for error in await mismatches(dut, table, lookups)]
        total += len(lookups)
    report(errors, total)


@cocotb.test()
async def random_lookups_after_random_rewrites(dut: Any) -> None:
    """Random rows rewritten (the last, partial one among them) between random lookups near the table."""
    rng = random.Random(LANES + 3)
    table = await start(dut, rng)
    rounds = 400 if FULL else 30
    errors = []
    for _ in range(rounds):
        await write_rows(dut, {rng.randrange(ROWS): random_acc_row(rng) for _ in range(rng.randrange(1, 4))}, table)
        base = rng.randrange(INT32_MIN + 40, INT32_MAX - ENTRIES - 40)
        xs = [base + rng.randrange(-40, ENTRIES + 40) for _ in range(LANES)]
        if (error := await check(dut, table, xs, base)) is not None:
            errors.append(error)
    report(errors, rounds)
