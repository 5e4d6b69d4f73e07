"""Residual adds and products on the accelerator: ``y = clamp(round(sum_i x_i * r_i))`` and
``y = clamp(round(x * u * r))`` of int8 tensors, in place.

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

The product of two activations (Llama's SwiGLU, ``silu(gate) * up``) brings both inputs in the same way,
multiplies them elementwise with ``vmulb`` (the second input's tile of ``T`` rows is the block each ``T``
rows of the first are multiplied by: int8 times int8, exact in int32), and requantizes the product
once (``vrequant``, after a ``vmul`` by ``2^g`` when the ratio ``r = s_x s_u / s_y`` is not below 1);
:func:`product_reference` is that arithmetic.  With a gate table (:func:`gate_table`: SwiGLU's SiLU fused in)
the first input's codes go through ``vlut`` first, into 16-bit values of the SiLU at a finer scale
``s_t = max|silu| / (2^15 - 1)``, so the SiLU is not rounded to int8 on the way: the only roundings are the
table's (``2^-16`` of its largest value) and the output's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.compiler.epilogue import quantize_multiplier
from tinynpu.intmath import ceil_div, round_up
from tinynpu.isa import ArchConfig, load_isa
from tinynpu.simulator.semantics import requantize

if TYPE_CHECKING:
    from tinynpu.compiler.compiled import Compiled
    from tinynpu.compiler.emitter import Emitter

#: Bits below the point each term keeps until the store rounds the sum (a sum within 2^-20 of a
#: rounding tie may round apart from the exact one; ResNet-50's 5.4 M residual outputs: none do).
FRACTION_BITS = 20
#: Largest pre-scale exponent: an int8 term times 2^g stays well inside int32.
MAX_PRESCALE = 23
#: Bits of an int8 product's magnitude (``|x u| <= 2^14``); a gate table's 16-bit entries times int8: 22.
PRODUCT_BITS = 14
GATED_PRODUCT_BITS = 22
#: Largest entry of a gate table (``vlut`` keeps 16 bits, signed).
GATE_MAX = 2**15 - 1


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


def product_scale(ratio: float, *, bits: int = PRODUCT_BITS) -> TermScale | None:
    """The product's :class:`TermScale` for ``r = s_x s_u / s_y``: ``vmul`` by ``2^g`` (only when ``r >= 1``) and a
    q31 ``vrequant`` by ``r / 2^g``; None when ``r`` is not positive and finite or needs ``g`` past ``30 - bits``
    (a product of up to ``2^bits`` times ``2^g`` would leave int32)."""
    if not (math.isfinite(ratio) and ratio > 0):
        return None
    prescale = max(0, math.frexp(ratio)[1])  # ratio / 2^prescale < 1, as vrequant needs
    if prescale > 30 - bits:
        return None
    m, s = quantize_multiplier(np.array([ratio / 2.0**prescale]))
    return TermScale(prescale, int(m[0]), int(s[0]))


def gate_table(values: np.ndarray) -> tuple[np.ndarray, float] | None:
    """A gate function's 256 float values (entry ``i`` for input code ``i - 128``) as ``vlut`` entries of 16 bits,
    ``round(v / s_t)`` with ``s_t = max|v| / GATE_MAX``, and ``s_t``; None when the values are all 0 or not finite."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    amax = float(np.max(np.abs(v))) if v.size == 256 else 0.0
    if not (math.isfinite(amax) and amax > 0):
        return None
    scale = amax / GATE_MAX
    return np.clip(np.rint(v / scale), -GATE_MAX, GATE_MAX).astype(np.int32), scale


def product_reference(x: np.ndarray, u: np.ndarray, scale: TermScale, gate: np.ndarray | None = None) -> np.ndarray:
    """The product program's arithmetic on int8 ``x``, ``u`` of one shape (see the module docstring); ``gate``:
    ``x``'s codes looked up first (``vlut``, base -128)."""
    xs = np.asarray(x, dtype=np.int64)
    if gate is not None:
        xs = np.asarray(gate, dtype=np.int64)[xs + 128]
    p = xs * np.asarray(u, dtype=np.int64)  # vmulb, shift 0: exact, |p| <= 2^22
    wide = (p << scale.prescale).astype(np.int32)  # vmul: exact, |p| 2^g <= 2^30
    y = requantize(wide, np.int32(scale.multiplier), np.int32(scale.shift))
    return np.clip(y, -128, 127).astype(np.int8)  # the narrow store saturates


def product_parameters(scale: TermScale, gate: np.ndarray | None, tile: int) -> np.ndarray:
    """The product's ``P`` rows: the multiplier and shift rows, then the gate table's ``ceil(256 / T)`` rows."""
    head = add_parameters((scale,), tile)
    if gate is None:
        return head
    table = np.zeros(ceil_div(256, tile) * tile, dtype=np.int32)
    table[:256] = gate
    return np.concatenate([head, table.reshape(-1, tile)])


def chunk_rows(cfg: ArchConfig, inputs: int, params: int | None = None) -> int:
    """Pixels per pass: each input's rows in the accumulators at once, beside the parameter rows (default two
    per input)."""
    t = cfg.tile
    fit = (cfg.rows("acc") - (2 * inputs if params is None else params)) // inputs // t * t
    return max(t, min(fit, 127 * t, cfg.rows("a_reg") // inputs // t * t))


def _program(cfg: ArchConfig, pixels: int, channels: int, n: int, params: int,
             combine: Callable[[Emitter, int, int], None], *, relu: bool, shift: int) -> Program:
    """The program reading ``n`` int8 tensors ``X0, X1, ...`` (``pixels`` x ``channels``) into ``Y``: per pass,
    each input's rows through ``tmm`` with the identity tile into its accumulator rows, ``combine(emit, rows,
    param_row)`` leaving the result in the first input's rows, and the store (rounding by ``shift``).

    Built through the compiler's :class:`~tinynpu.compiler.emitter.Emitter` like every other
    program: it records the rows each instruction reads and writes and derives the tokens.  Input
    ``i`` lives in ``a`` rows and ``acc`` rows ``i*rows..`` of every pass, so a pass's loads wait only
    for the previous pass's ``tmm`` of their rows, and run while the ALU works on that pass.
    """
    from tinynpu.compiler.emitter import Emitter
    from tinynpu.compiler.workload import DramAllocator

    t = cfg.tile
    rows = min(chunk_rows(cfg, n, params), round_up(pixels, t))
    dram = DramAllocator(cfg, "the elementwise program")
    xs = [dram.add(f"X{i}", (pixels, channels), "int8", "input") for i in range(n)]
    ident = dram.add("I", (t, t), "int8", "input")
    param = dram.add("P", (params, t), "int32", "input")
    y = dram.add("Y", (pixels, channels), "int8", "output")
    emit = Emitter(load_isa(), cfg)
    param_row = n * rows  # the parameter rows after every input's rows
    emit.load("b", 0, ident.addr, rows=t, cols=t, stride=t, comment="identity tile")
    emit.load("acc", param_row, param.addr, rows=params, cols=t, stride=4 * t, comment="parameter rows")
    emit.barrier()
    for r0 in range(0, pixels, rows):
        for c0 in range(0, channels, t):
            r, cols = min(rows, pixels - r0), min(t, channels - c0)
            for i, x in enumerate(xs):
                emit.load("a", i * rows, x.addr + r0 * channels + c0, rows=r, cols=cols, stride=channels)
            for i in range(n):  # x_i exactly into acc rows: x_i @ I
                emit.tmm(i * rows, i * rows, 0, m=ceil_div(r, t), n=1, k=1, accumulate=False)
            combine(emit, rows, r)
            emit.store(0, y.addr + r0 * channels + c0, rows=r, cols=cols, stride=channels, narrow=True,
                       relu=relu, shift=shift)
    words, _ = emit.finish()
    return Program.build(load_isa(), cfg, words, dram.tensors)


def add_program(cfg: ArchConfig, pixels: int, channels: int, scales: tuple[TermScale, ...], *,
                relu: bool) -> Program:
    """The program adding ``len(scales)`` int8 tensors ``X0, X1, ...`` (``pixels`` x ``channels``) into ``Y``
    (:func:`_program`): each term scaled (``vmul``, ``vrequant``), summed (``vadd``), rounded by the store.

    The derived tokens are those the earlier hand-written program carried, plus one: a pass's
    first ``tmm`` also waits for the ALU (it overwrites the rows the last ``vadd`` wrote), which
    the store it already waits for had waited for; the per-instruction timeline is the same.
    """
    n = len(scales)

    def combine(emit: Emitter, rows: int, r: int) -> None:
        param_row = n * rows
        for i, sc in enumerate(scales):
            if sc.prescale:
                emit.alu("vmul", i * rows, rows=r, imm=1 << sc.prescale)
            emit.alu("vrequant", i * rows, rows=r, src=param_row + 2 * i)
        for i in range(1, n):
            emit.alu("vadd", 0, rows=r, src=i * rows)

    return _program(cfg, pixels, channels, n, 2 * n, combine, relu=relu, shift=FRACTION_BITS)


def product_program(cfg: ArchConfig, pixels: int, channels: int, scale: TermScale,
                    gate: np.ndarray | None = None) -> Program:
    """The program multiplying int8 ``X0`` (through ``gate``'s ``vlut`` first, if given) by ``X1`` elementwise
    (``pixels`` x ``channels``) into ``Y`` (:func:`_program`): ``vmulb`` by the second input's ``T``-row tile,
    then one requantization."""
    t = cfg.tile

    def combine(emit: Emitter, rows: int, r: int) -> None:
        if gate is not None:
            emit.emit("vlut", {"dst": 0, "rows": r, "src": 2 * rows + 2, "base": -128},
                      comment="the gate (SiLU) in 16 bits")
        for k in range(0, r, t):  # X0's T rows times X1's T rows (the block vmulb repeats every T rows)
            emit.alu("vmulb", k, rows=min(t, r - k), src=rows + k, shift=0, comment="x * u: exact products")
        if scale.prescale:
            emit.alu("vmul", 0, rows=r, imm=1 << scale.prescale)
        emit.alu("vrequant", 0, rows=r, src=2 * rows)

    params = product_parameters(scale, gate, t).shape[0]
    return _program(cfg, pixels, channels, 2, params, combine, relu=False, shift=0)


def _compiled(program: Program, workload: dict[str, Any], io: int, cfg: ArchConfig,
              make_inputs: Callable[[int], dict[str, np.ndarray]],
              reference: Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]]) -> Compiled:
    """An elementwise program as a compiled workload: no MACs of its own, its inputs and output its traffic."""
    from tinynpu.compiler.compiled import Bounds, Compiled

    return Compiled(program=program, comments={}, workload=workload | {"config": cfg.name}, trace=(),
                    bounds=Bounds(io_lower_bound_bytes=io, best_tiling_bytes=io,
                                  roofline_cycles=ceil_div(io, cfg.dram_bytes_per_cycle), padding_ceiling=0.0,
                                  useful_macs=0, issued_macs=0, bound_kind="compulsory"),
                    host_traffic_bytes=0, make_inputs=make_inputs, reference=reference, outputs=("Y",))


def _random_inputs(seed: int, n: int, pixels: int, channels: int, tile: int,
                   params: np.ndarray) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    xs = {f"X{i}": rng.integers(-128, 128, (pixels, channels), dtype=np.int8) for i in range(n)}
    return xs | {"I": np.eye(tile, dtype=np.int8), "P": params}


def add_compiled(cfg: ArchConfig, pixels: int, channels: int, scales: tuple[TermScale, ...], *,
                 relu: bool) -> Compiled:
    """:func:`add_program` as a compiled workload."""
    n = len(scales)

    def reference(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"Y": add_reference([inputs[f"X{i}"] for i in range(n)], scales, relu=relu)}

    return _compiled(add_program(cfg, pixels, channels, scales, relu=relu),
                     {"kind": "add", "pixels": pixels, "channels": channels, "inputs": n, "relu": relu},
                     (n + 1) * pixels * channels, cfg,
                     lambda seed: _random_inputs(seed, n, pixels, channels, cfg.tile, add_parameters(scales, cfg.tile)),
                     reference)


def product_compiled(cfg: ArchConfig, pixels: int, channels: int, scale: TermScale,
                     gate: np.ndarray | None = None) -> Compiled:
    """:func:`product_program` as a compiled workload."""

    def reference(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"Y": product_reference(inputs["X0"], inputs["X1"], scale, gate)}

    return _compiled(product_program(cfg, pixels, channels, scale, gate),
                     {"kind": "product", "pixels": pixels, "channels": channels, "gated": gate is not None},
                     3 * pixels * channels, cfg,
                     lambda seed: _random_inputs(seed, 2, pixels, channels, cfg.tile,
                                                 product_parameters(scale, gate, cfg.tile)),
                     reference)


def add_parameters(scales: tuple[TermScale, ...], tile: int) -> np.ndarray:
    """The ``P`` rows: each input's multiplier row, then its shift row, every column alike."""
    return np.array([row for sc in scales for row in ([sc.multiplier] * tile, [sc.shift] * tile)], dtype=np.int32)


__all__ = ["FRACTION_BITS", "GATED_PRODUCT_BITS", "GATE_MAX", "PRODUCT_BITS", "TermScale", "add_compiled",
           "add_parameters", "add_program", "add_reference", "chunk_rows", "gate_table", "product_compiled",
           "product_parameters", "product_program", "product_reference", "product_scale", "term_scales"]
