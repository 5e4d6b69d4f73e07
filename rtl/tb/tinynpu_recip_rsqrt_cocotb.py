"""cocotb bench of rtl/tinynpu_recip_rsqrt.sv against the exact Python-integer reference.

The environment says what the build is: ``TNPU_RECIP_CYCLES`` / ``TNPU_RSQRT_CYCLES`` (the
module's parameters: ``done_o`` must come exactly that many cycles after the start) and
``TNPU_BENCH_FULL=1`` for the long case lists (pytest's slow run).  Inputs change and outputs are
read at falling edges, so every read sees the values of a settled cycle.
"""

from __future__ import annotations

import os
import random
from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge

from tinynpu.rtl.tb.recip_rsqrt_cases import (
    INT32_MAX,
    Case,
    edge_cases,
    exhaustive_cases,
    random_cases,
    square_cases,
)

RECIP_CYCLES = int(os.environ.get("TNPU_RECIP_CYCLES", "32"))
RSQRT_CYCLES = int(os.environ.get("TNPU_RSQRT_CYCLES", "64"))
FULL = os.environ.get("TNPU_BENCH_FULL") == "1"
MASK32 = (1 << 32) - 1


def cycles(case: Case) -> int:
    return RSQRT_CYCLES if case.is_rsqrt else RECIP_CYCLES


async def reset(dut: Any) -> None:
    """Start the clock and hold reset for two cycles; leave it in a cycle with start_i low."""
    Clock(dut.clk_i, 10, unit="ns").start()  # cocotb 2: the clock runs its own task
    dut.start_i.value = 0
    dut.rsqrt_i.value = 0
    dut.x_i.value = 0
    dut.shift_i.value = 0
    dut.rst_ni.value = 0
    await ClockCycles(dut.clk_i, 2, rising=False)
    dut.rst_ni.value = 1
    await FallingEdge(dut.clk_i)


def present(dut: Any, case: Case) -> None:
    dut.start_i.value = 1
    dut.rsqrt_i.value = int(case.is_rsqrt)
    dut.x_i.value = case.x & MASK32
    dut.shift_i.value = case.shift


def outcome(dut: Any, case: Case, want: int | None = None) -> str | None:
    """None if this cycle shows done_o and ``want`` (default: ``case``'s exact result), else what differs."""
    want = case.expected if want is None else want
    done, got = int(dut.done_o.value), int(dut.r_o.value)
    if done == 1 and got == want:
        return None
    return f"{case}: done_o={done} r_o={got}, want done_o=1 r_o={want}"


async def run_back_to_back(dut: Any, cases: list[Case], wants: list[int] | None = None) -> list[str]:
    """Each value starts in the done cycle of the one before; returns every mismatch."""
    errors: list[str] = []
    for n, case in enumerate(cases):
        present(dut, case)
        await FallingEdge(dut.clk_i)
        dut.start_i.value = 0
        await ClockCycles(dut.clk_i, cycles(case) - 1, rising=False)
        if (error := outcome(dut, case, None if wants is None else wants[n])) is not None:
            errors.append(error)
    await FallingEdge(dut.clk_i)
    if int(dut.done_o.value) != 0:
        errors.append("done_o stayed high after the last value")
    return errors


def report(errors: list[str], total: int) -> None:
    assert not errors, f"{len(errors)} of {total} values wrong:\n" + "\n".join(errors[:20])


@cocotb.test()
async def values_match_the_exact_reference(dut: Any) -> None:
    """Extremes, saturation edges, exact squares, random; FULL adds every S and many more."""
    await reset(dut)
    rng = random.Random(26)
    cases = edge_cases(FULL) + square_cases(rng, 1000 if FULL else 40) + random_cases(rng, 6000 if FULL else 250)
    if FULL:
        cases += exhaustive_cases(-3, 130)
    report(await run_back_to_back(dut, cases), len(cases))


@cocotb.test()
async def done_pulses_once_exactly_c_cycles_after_the_start(dut: Any) -> None:
    """done_o in cycle s + C only (checked every cycle), r_o held while idle, both operations mixed."""
    await reset(dut)
    errors: list[str] = []
    cases = [Case(False, 7, 40), Case(True, 5, 31), Case(True, 1, 31), Case(False, -5, 3), Case(False, 1, 62)]
    for idle in (0, 3):
        for case in cases:
            present(dut, case)
            await FallingEdge(dut.clk_i)
            dut.start_i.value = 0
            for k in range(1, cycles(case)):
                if int(dut.done_o.value) != 0:
                    errors.append(f"{case}: done_o early, {k} cycles after the start")
                await FallingEdge(dut.clk_i)
            if (error := outcome(dut, case)) is not None:
                errors.append(error)
            for k in range(idle):  # idle cycles: no pulse, the result stays
                await FallingEdge(dut.clk_i)
                done, got = int(dut.done_o.value), int(dut.r_o.value)
                if done != 0 or got != case.expected:
                    errors.append(f"{case}: idle cycle {k + 1}: done_o={done} r_o={got}")
    report(errors, 2 * len(cases))


@cocotb.test()
async def a_new_start_abandons_the_running_value(dut: Any) -> None:
    """A start while busy restarts: only the new value completes, C cycles after its own start."""
    await reset(dut)
    first, second = Case(True, 3, 20), Case(False, 3, 20)
    present(dut, first)
    await FallingEdge(dut.clk_i)
    dut.start_i.value = 0
    await ClockCycles(dut.clk_i, 5, rising=False)
    present(dut, second)
    await FallingEdge(dut.clk_i)
    dut.start_i.value = 0
    errors = []
    for k in range(1, cycles(first)):
        if k != cycles(second) and int(dut.done_o.value) != 0:
            errors.append(f"done_o {k} cycles after the second start")
        if k == cycles(second) and (error := outcome(dut, second)) is not None:
            errors.append(error)
        await FallingEdge(dut.clk_i)
    report(errors, 1)


@cocotb.test()
async def rsqrt_takes_a_shift_past_31_modulo_32(dut: Any) -> None:
    """The ISA rejects S >= 32 for vrsqrt; the unit's documented behaviour is S mod 32."""
    await reset(dut)
    cases = [Case(True, x, s) for s in (32, 33, 62, 63) for x in (1, 2, 3, 1000, INT32_MAX)]
    wants = [Case(True, case.x, case.shift % 32).expected for case in cases]
    report(await run_back_to_back(dut, cases, wants), len(cases))
