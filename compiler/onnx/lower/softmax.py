"""Softmax along the last axis as an accelerator program, and its integer reference.

Per tile-row (:mod:`.rowwise`), on int8 codes ``x`` of scale ``s_in`` (the zero
point cancels in ``x - max``)::

    m = vredmax(x)                        per row
    d = vsubb(x, m)                       in [-255, 0]: exact
    e = vlut(d, base=-255)                entry i = round(exp((i - 255) s_in) * E), E = 32767 (16 bits)
    z = vredsum(e, shift=0)               exact: in [E, N E], N E < 2^31 for N < 65536
    r = vrecip(z, shift=45)               floor(2^45 / z), in [2^45 / (N E), 2^30]: below 2^31
    p = vmulb(e, r, shift=15)             rnd(e r / 2^15): e r <= E 2^45 / E = 2^45, so p <= 2^30
    y = vrequant(p, M, S) + zero point    p / 2^30 / s_out, one rounding; store narrow

Why no step loses precision or saturates: the maximum's entry is ``E`` exactly, so
``z >= E`` and ``r <= 2^45 / E < 2^31`` (no clamp); ``r >= 2^45 / (N E) >= 2^22``
for ``N <= 256``, so the reciprocal's floor costs less than ``2^-22`` relatively;
``p`` keeps 30 fraction bits of the probability (the reference's ``p / 2^30`` is
``e / z`` within ``2^-22`` relatively plus ``2^-30`` absolutely), never above
``2^30`` (``e <= z``), so ``vmulb`` never saturates; ``vrequant``'s product
``p M < 2^61`` is exact.  What remains is the table's rounding (half an entry of
``E``: ``1.5e-5`` of the row's largest probability) and the output's own
rounding.  The output scale must make ``2^-30 / s_out`` a q31 scale below 1
(``s_out > 2^-30``) no smaller than ``2^-62`` (``vrequant``'s shift); an output
scale outside that is refused.

A *masked* softmax (``masked=True``: an additive attention mask recognised by
:mod:`~tinynpu.compiler.onnx.frontend.masks`) reads scores whose kept entries
are clamped to ``[-127, 127]`` and whose masked entries are the code ``-128``.
One ``vlut`` first maps the code ``-128`` to ``MASKED_CODE`` (and every other
code to itself); the maximum is then a kept entry's (when the row has one), a
kept difference ``d = x - m`` lies in ``[-254, 0]`` and a masked one at or
below ``MASKED_CODE + 127 < -255``, where ``vlut`` clamps to entry 0: so entry
0 (``d = -255``, which no kept entry reaches) is 0, and a masked entry adds
nothing to the sum and gets probability 0, exactly as ``exp(-inf)`` does.  A
row with every entry masked has its maximum at ``MASKED_CODE``, all
differences 0, and comes out uniform (float gives the same for a finite mask
such as the dtype's minimum, and NaN, then 0 behind torch's guard, for -inf).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.epilogue import quantize_multiplier
from tinynpu.compiler.onnx.lower import fixed, runtime_mask, select
from tinynpu.compiler.onnx.lower.rowwise import Body, RowShape, TileRow, alu, broadcast_rows
from tinynpu.compiler.onnx.lower.runtime_mask import RuntimeMask
from tinynpu.errors import OnnxError, UsageError
from tinynpu.intmath import ceil_div

#: The exp table's value at 0 (the row's maximum): the largest 16-bit entry.
EXP_ONE = 2**15 - 1
RECIP_SHIFT = 45
PROB_SHIFT = 15
#: Fraction bits of the probability ``p`` after ``vmulb``: 45 - 15.
PROB_BITS = RECIP_SHIFT - PROB_SHIFT
#: Longest row: ``N * EXP_ONE`` must stay an int32 sum.
MAX_WIDTH = (2**31 - 1) // EXP_ONE
#: ``vlut``'s base: a difference ``d`` in [-255, 0] reads entry ``d + 255``.
LUT_BASE = -255
#: What a masked entry (int8 code -128) becomes before the maximum: low enough that ``x - max`` is below
#: ``LUT_BASE`` for any kept maximum (>= -127), and a 16-bit table entry.
MASKED_CODE = -1024
#: The first ``vlut`` of a masked softmax reads int8 codes: entry ``i`` for code ``i - 128``.
CODE_BASE = -128


@dataclass(frozen=True)
class SoftmaxParams:
    """A softmax's integer parameters: its exp table, its output requantization, its zero point."""

    table: np.ndarray  # 256 int entries, entry i = round(exp((i - 255) s_in) * EXP_ONE)
    multiplier: int
    shift: int
    zero_point: int
    masked: bool = False  # the input's code -128 marks a masked entry (see the module docstring)
    #: A constant mask the program applies itself (:mod:`.select`): bool, its ``period`` rows of the
    #: ``[rows, width]`` scores, True where masked; None: the scores arrive selected.
    mask: np.ndarray | None = None
    #: A per-run mask the program applies itself (:mod:`.runtime_mask`): where its codes are for each row.
    runtime: RuntimeMask | None = None


def mask_table() -> np.ndarray:
    """The masked softmax's first table: code -128 to ``MASKED_CODE``, every other code to itself."""
    table = np.arange(CODE_BASE, CODE_BASE + fixed.LUT_ENTRIES, dtype=np.int64)
    table[0] = MASKED_CODE
    return table


def softmax_params(s_in: float, s_out: float, zero_point: int, *, what: str, masked: bool = False) -> SoftmaxParams:
    """The parameters for input scale ``s_in`` and output ``s_out``, ``zero_point``; ``masked``: the input's
    code -128 is a masked entry (probability 0), its kept codes are within [-127, 127].

    Raises:
        OnnxError: ``2^-30 / s_out`` is no scale ``vrequant`` can hold (``what`` names the node).
    """
    d = np.arange(-255, 1, dtype=np.float64)
    table = np.rint(np.exp(d * float(s_in)) * EXP_ONE).astype(np.int64)
    if masked:  # d = -255 only a masked entry reaches (kept ones span 254 codes): it weighs nothing
        table[0] = 0
    real = 2.0**-PROB_BITS / float(s_out)
    try:
        m, s = quantize_multiplier(np.array([real]))
    except UsageError:
        m, s = np.array([0]), np.array([0])
    if not (real < 1.0 and int(m[0]) >= 2**30 and np.isfinite(s_in) and s_in > 0):
        raise OnnxError(f"{what}: softmax output scale {s_out!r} (input scale {s_in!r}) gives the requantization "
                        f"scale 2^-{PROB_BITS} / s_out = {real!r}, which vrequant's q31 multiplier and 5-bit shift "
                        "cannot represent (it needs 2^-62 <= scale < 1), so the softmax cannot be lowered.")
    return SoftmaxParams(table=table, multiplier=int(m[0]), shift=int(s[0]), zero_point=int(zero_point),
                         masked=masked)


def softmax_reference(x: np.ndarray, p: SoftmaxParams, codes: np.ndarray | None = None) -> np.ndarray:
    """The program's arithmetic on int8 rows ``x`` (softmax along the last axis), bit for bit; ``codes``: a
    per-run mask's (:mod:`.runtime_mask`)."""
    x2 = np.asarray(x, dtype=np.int64).reshape(-1, x.shape[-1])
    if p.mask is not None:
        x2 = select.select_reference(x2, p.mask)
    if p.runtime is not None:
        if codes is None:
            raise RuntimeError("a softmax with a per-run mask needs its codes")  # never: the runtime passes them
        x2 = runtime_mask.select_reference(x2, codes, p.runtime)
    if p.masked:
        x2 = fixed.lut(x2, mask_table(), CODE_BASE)
    d = x2 - fixed.red_max(x2)
    e = fixed.lut(d, p.table, LUT_BASE)
    z = fixed.red_sum(e, 0)
    r = fixed.recip(z, RECIP_SHIFT)
    prob = fixed.mul_b(e, r, PROB_SHIFT)
    from tinynpu.simulator.semantics import requantize

    y = requantize(prob, np.int32(p.multiplier), np.int32(p.shift)).astype(np.int64) + p.zero_point
    return fixed.store_narrow(fixed.wrap32(y)).reshape(x.shape)


def softmax_rows(p: SoftmaxParams, tile: int) -> np.ndarray:
    """The parameter rows: the table (``ceil(256 / T)`` rows), M, S, the zero point row if any, and a masked
    softmax's first table last."""
    rows = [_table_rows(p.table, tile), broadcast_rows(np.array([p.multiplier, p.shift]), tile)]
    if p.zero_point:
        rows.append(broadcast_rows(np.array([p.zero_point]), tile))
    if p.masked:
        rows.append(_table_rows(mask_table(), tile))
    return np.concatenate(rows).astype(np.int32)


def _table_rows(table: np.ndarray, tile: int) -> np.ndarray:
    """A 256-entry table as rows of ``tile`` (the last one padded with zeros where ``tile`` does not divide 256)."""
    rows = np.zeros((ceil_div(fixed.LUT_ENTRIES, tile), tile), dtype=np.int64)
    rows.reshape(-1)[:fixed.LUT_ENTRIES] = table
    return rows


def softmax_body(p: SoftmaxParams, tile: int, *, streamed_mask: bool = False) -> Body:
    """The instructions of one tile-row (two blocks: the maximum, then the sum and its reciprocal; with
    ``streamed_mask``, ``n`` more for the constant mask's rows of this tile-row, loaded from ``P``; a per-run
    mask's codes go through the tile-row's ``a`` rows and ``b``'s second tile, no block)."""
    table_rows = ceil_div(fixed.LUT_ENTRIES, tile)
    offsets = p.runtime.row_offsets() if p.runtime is not None else None

    def body(emit: Emitter, tr: TileRow, shape: RowShape) -> None:
        n, t, cols = shape.segments, shape.tile, shape.last_cols
        whole = n * t
        mx, sm = tr.blocks[:2]
        if p.mask is not None:  # the constant mask's select (see .select), its rows after the other parameters
            alu(emit, "vmax", tr.data, whole, imm=select.KEPT_FLOOR)
            row = len(softmax_rows(p, t)) + tr.index % select.blocks(p.mask, t) * whole
            src = tr.params + row
            if streamed_mask:
                emit.load("acc", tr.blocks[2], tr.p_addr + row * 4 * t, rows=whole, cols=t, stride=4 * t,
                          comment="the tile-row's mask rows")
                src = tr.blocks[2]
            alu(emit, "vadd", tr.data, whole, src=src)
        if offsets is not None:  # the per-run mask's codes, read from M (see .runtime_mask)
            runtime_mask.emit_select(emit, tr, shape, offsets, b_row=t)
        if p.masked:  # the mask's code -128 far below every kept code (the mask table: the last parameter rows)
            alu(emit, "vlut", tr.data, whole, src=tr.params + table_rows + 2 + bool(p.zero_point), base=CODE_BASE)
        alu(emit, "vredmax", mx, t, src=tr.data, n=n, cols=cols)
        alu(emit, "vsubb", tr.data, whole, src=mx)
        alu(emit, "vlut", tr.data, whole, src=tr.params, base=LUT_BASE)
        alu(emit, "vredsum", sm, t, src=tr.data, n=n, cols=cols, shift=0)
        alu(emit, "vrecip", sm, t, src=sm, shift=RECIP_SHIFT)
        alu(emit, "vmulb", tr.data, whole, src=sm, shift=PROB_SHIFT)
        alu(emit, "vrequant", tr.data, whole, src=tr.params + table_rows)
        if p.zero_point:
            alu(emit, "vaddrow", tr.data, whole, src=tr.params + table_rows + 2)

    return body


def check_width(width: int, *, what: str) -> None:
    """Refuse a row whose exp sum could leave int32."""
    if width > MAX_WIDTH:
        raise OnnxError(f"{what}: a softmax over {width} elements could sum {width} x {EXP_ONE} past int32 "
                        f"(at most {MAX_WIDTH} elements), so it cannot be lowered.")


__all__ = ["CODE_BASE", "EXP_ONE", "LUT_BASE", "MASKED_CODE", "MAX_WIDTH", "PROB_BITS", "SoftmaxParams",
           "check_width", "mask_table", "softmax_body", "softmax_params", "softmax_reference", "softmax_rows"]
