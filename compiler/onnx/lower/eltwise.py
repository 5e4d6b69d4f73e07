"""Residual adds on the accelerator: ``y = clamp(round(sum_i x_i * r_i))`` of int8 tensors, in place.

The accelerator has no int8 load into the accumulators, so each input comes in
through the MAC array: ``tmm`` against an identity tile puts ``x_i`` exactly
into accumulator rows.  Then each term is scaled with ``FRACTION_BITS`` bits
below the point kept (``vmul`` by ``2^g_i`` so that ``vrequant``'s multiplier,
a q31 scale below 1, can hold ``r_i * 2^FRACTION_BITS / 2^g_i``), the terms are
summed (``vadd``), and the store rounds the sum to an integer (``shift``),
saturates to int8 and clears negatives for a fused Relu.  :func:`add_reference`
is that arithmetic in numpy, statement by statement: the reference the run is
checked against bit for bit.  With 20 bits below the point it differs from the
real-valued ``round(sum_i x_i * r_i)`` only where that sum lies within about
2^-20 of a rounding tie (and rounds an exact tie up where onnxruntime's float
rounds it to even).

The program works on ``rows`` pixels (NHWC rows) of every channel tile at a time,
built through the compiler's Emitter, which derives the tokens from the rows
each instruction touches (see :func:`add_program`), so one pass's loads run
while the previous pass is scaled, summed and stored.  It is relocated into the
DRAM image like a conv's program, the inputs and output at their planned places
(their rows a whole pixel apart).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.compiler.epilogue import quantize_multiplier
from tinynpu.intmath import ceil_div, round_up
from tinynpu.isa import ArchConfig, load_isa
from tinynpu.simulator.semantics import requantize

if TYPE_CHECKING:
    from tinynpu.compiler.compiled import Compiled

#: Bits below the point each term keeps until the store rounds the sum (a sum within 2^-20 of a
#: rounding tie may round apart from the exact one; ResNet-50's 5.4 M residual outputs: none do).
FRACTION_BITS = 20
#: Largest pre-scale exponent: an int8 term times 2^g stays well inside int32.
MAX_PRESCALE = 23


@dataclass(frozen=True)
class TermScale:
    """One input's scaling: ``vmul`` by ``2^prescale``, then ``vrequant`` by ``multiplier * 2^-(31+shift)``."""

    prescale: int
    multiplier: int
    shift: int


def term_scales(ratios: list[float]) -> tuple[TermScale, ...] | None:
    """Each input's :class:`TermScale` for its ratio ``r_i = s_i / s_out``, or None when one cannot be held
    (a pre-scale past :data:`MAX_PRESCALE`, or int8 terms whose scaled sum could leave int32)."""
    if sum(128 * r * 2.0**FRACTION_BITS for r in ratios) >= 2.0**31:
        return None
    out = []
    for r in ratios:
        target = r * 2.0**FRACTION_BITS
        if not (math.isfinite(target) and target > 0):
            return None
        prescale = max(0, math.frexp(target)[1])  # target / 2^prescale < 1, as vrequant needs
        if prescale > MAX_PRESCALE:
            return None
        m, s = quantize_multiplier(np.array([target / 2.0**prescale]))
        out.append(TermScale(prescale, int(m[0]), int(s[0])))
    return tuple(out)


def add_reference(xs: list[np.ndarray], scales: tuple[TermScale, ...], *, relu: bool) -> np.ndarray:
    """The program's arithmetic on int8 inputs of one shape (see the module docstring)."""
    total = np.zeros(np.shape(xs[0]), dtype=np.int64)
    for x, sc in zip(xs, scales, strict=True):
        wide = (np.asarray(x, dtype=np.int64) << sc.prescale).astype(np.int32)  # vmul: exact, |x| 2^g < 2^31
        total += requantize(wide, np.int32(sc.multiplier), np.int32(sc.shift))
    total = total.astype(np.int32).astype(np.int64)  # vadd wraps in int32 (never: term_scales bounds the sum)
    y = (total + (1 << (FRACTION_BITS - 1))) >> FRACTION_BITS
    if relu:
        y = np.maximum(y, 0)
    return np.clip(y, -128, 127).astype(np.int8)


def chunk_rows(cfg: ArchConfig, inputs: int) -> int:
    """Pixels per pass: each input's rows in the accumulators at once, beside the parameter rows."""
    t = cfg.tile
    fit = (cfg.rows("acc") - 2 * inputs) // inputs // t * t
    return max(t, min(fit, 127 * t, cfg.rows("a_reg") // inputs // t * t))


def add_program(cfg: ArchConfig, pixels: int, channels: int, scales: tuple[TermScale, ...], *,
                relu: bool) -> Program:
    """The program adding ``len(scales)`` int8 tensors ``X0, X1, ...`` (``pixels`` x ``channels``) into ``Y``.

    Built through the compiler's :class:`~tinynpu.compiler.emitter.Emitter` like every other
    program: it records the rows each instruction reads and writes and derives the tokens.  Input
    ``i`` lives in ``a`` rows and ``acc`` rows ``i*rows..`` of every pass, so a pass's loads wait only
    for the previous pass's ``tmm`` of their rows, and run while the ALU scales and sums that pass.

    The derived tokens are those the earlier hand-written program carried, plus one: a pass's
    first ``tmm`` also waits for the ALU (it overwrites the rows the last ``vadd`` wrote), which
    the store it already waits for had waited for; the per-instruction timeline is the same.
    """
    from tinynpu.compiler.emitter import Emitter
    from tinynpu.compiler.workload import DramAllocator

    t, n = cfg.tile, len(scales)
    rows = min(chunk_rows(cfg, n), round_up(pixels, t))
    dram = DramAllocator(cfg, "the residual add")
    xs = [dram.add(f"X{i}", (pixels, channels), "int8", "input") for i in range(n)]
    ident = dram.add("I", (t, t), "int8", "input")
    params = dram.add("P", (2 * n, t), "int32", "input")
    y = dram.add("Y", (pixels, channels), "int8", "output")
    emit = Emitter(load_isa(), cfg)
    param_row = n * rows  # the accumulator rows of M_i, S_i after every input's rows
    emit.load("b", 0, ident.addr, rows=t, cols=t, stride=t, comment="identity tile")
    emit.load("acc", param_row, params.addr, rows=2 * n, cols=t, stride=4 * t, comment="each input's M, S rows")
    emit.barrier()
    for r0 in range(0, pixels, rows):
        for c0 in range(0, channels, t):
            r, cols = min(rows, pixels - r0), min(t, channels - c0)
            for i, x in enumerate(xs):
                emit.load("a", i * rows, x.addr + r0 * channels + c0, rows=r, cols=cols, stride=channels)
            for i in range(n):  # x_i exactly into acc rows: x_i @ I
                emit.tmm(i * rows, i * rows, 0, m=ceil_div(r, t), n=1, k=1, accumulate=False)
            for i, sc in enumerate(scales):
                if sc.prescale:
                    emit.alu("vmul", i * rows, rows=r, imm=1 << sc.prescale)
                emit.alu("vrequant", i * rows, rows=r, src=param_row + 2 * i)
            for i in range(1, n):
                emit.alu("vadd", 0, rows=r, src=i * rows)
            emit.store(0, y.addr + r0 * channels + c0, rows=r, cols=cols, stride=channels, narrow=True,
                       relu=relu, shift=FRACTION_BITS)
    words, _ = emit.finish()
    return Program.build(load_isa(), cfg, words, dram.tensors)


def add_compiled(cfg: ArchConfig, pixels: int, channels: int, scales: tuple[TermScale, ...], *,
                 relu: bool) -> Compiled:
    """:func:`add_program` as a compiled workload: no MACs of its own, its inputs and output its traffic."""
    from tinynpu.compiler.compiled import Bounds, Compiled

    n, t = len(scales), cfg.tile
    io = (n + 1) * pixels * channels

    def make_inputs(seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        xs = {f"X{i}": rng.integers(-128, 128, (pixels, channels), dtype=np.int8) for i in range(n)}
        return xs | {"I": np.eye(t, dtype=np.int8), "P": add_parameters(scales, t)}

    def reference(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"Y": add_reference([inputs[f"X{i}"] for i in range(n)], scales, relu=relu)}

    return Compiled(program=add_program(cfg, pixels, channels, scales, relu=relu), comments={},
                    workload={"kind": "add", "pixels": pixels, "channels": channels, "inputs": n, "relu": relu,
                              "config": cfg.name},
                    trace=(), bounds=Bounds(io_lower_bound_bytes=io, best_tiling_bytes=io,
                                            roofline_cycles=ceil_div(io, cfg.dram_bytes_per_cycle),
                                            padding_ceiling=0.0, useful_macs=0, issued_macs=0,
                                            bound_kind="compulsory"),
                    host_traffic_bytes=0, make_inputs=make_inputs, reference=reference, outputs=("Y",))


def add_parameters(scales: tuple[TermScale, ...], tile: int) -> np.ndarray:
    """The ``P`` rows: each input's multiplier row, then its shift row, every column alike."""
    return np.array([row for sc in scales for row in ([sc.multiplier] * tile, [sc.shift] * tile)], dtype=np.int32)


__all__ = ["FRACTION_BITS", "TermScale", "add_compiled", "add_parameters", "add_program", "add_reference", "chunk_rows",
           "term_scales"]
