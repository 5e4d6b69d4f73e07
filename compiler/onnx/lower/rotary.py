"""Rotary position embeddings (Llama's ``q*cos + rotate_half(q)*sin``) as an accelerator program.

Along the last axis (``d`` wide) a rotary embedding is, for the row at position ``p``::

    y = x * C[p] + (x @ M) * S[p]

with ``M`` a signed permutation (``rotate_half``: ``-x[d/2:]`` then ``x[:d/2]``; the front end reads it
off the graph's ``Slice``/``Neg``/``Concat`` nodes, :mod:`~tinynpu.compiler.onnx.frontend.rotary`) and
``C``, ``S`` constant tables, one row per position (``cos``, ``sin``).  Per tile-row (:mod:`.rowwise`)
on int8 codes ``x`` of scale ``s_in``::

    x      tmm with the identity tile       exact, as every row program brings its rows in
    r      tmm with M's tiles               exact: int8 products by -1, 0, 1
    x *= C vmulb by the tile-row's C block  C = round(cos * 2^F) (F = TABLE_BITS for |cos| <= 1): exact
    r *= S vmulb by its S block             the same for sin
    x += r vadd                             |x C| + |r S| <= 2 * 128 * 2^F < 2^31: exact
    y = vrequant(x, M, S)                   x * s_in / (2^F s_out), one rounding; store narrow (int8)

So the only roundings are the tables' (``2^-(F+1)`` of a code each, ``128 * 2^-(F+1) = 1/256`` LSB at
most) and the output's own: the result is within 0.5 LSB (+1/128) of float rotary on the same int8 input.

Why a matmul by ``M`` rather than moves: ``rotate_half`` crosses the middle of the row, which in the
accumulators is a move across columns, and no ALU instruction moves a column (the lanes are
independent); a DMA could write the two halves to shifted columns, but only through DRAM and back.  The
MAC array's ``tmm`` already reads any column into any other: one ``T x T`` tile per output segment (a
permutation has one source segment each when ``d/2`` is a multiple of ``T``, or ``d <= T``), int8 by
``-1/0/1``, exact.  ``C`` and ``S`` vary by position (row) and column, which is what ``vmulb``'s
``T``-row block is: block row ``i mod T`` times accumulator row ``i``.  A tile-row of ``T`` positions
needs one block per segment; the tables repeat every ``period`` rows (the sequence length: every head
has the same positions), so the parameter rows hold ``lcm(period, T) / T`` blocks per segment, as the
constant mask's rows do (:func:`.select.block_rows`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.epilogue import quantize_multiplier
from tinynpu.compiler.onnx.lower import select
from tinynpu.compiler.onnx.lower.rowwise import Body, RowShape, TileRow, alu, broadcast_rows
from tinynpu.errors import OnnxError, UsageError
from tinynpu.isa import ArchConfig
from tinynpu.simulator.semantics import requantize

#: Fraction bits of the cos/sin tables for values within [-1, 1] (one bit fewer per doubling beyond).
TABLE_BITS = 14


@dataclass(frozen=True, eq=False)
class RotaryParams:
    """The integer form of one rotary embedding.

    Attributes:
        rotation: ``[d, d]`` int8, ``x @ rotation`` is the rotated row (values -1, 0, 1).
        cos: ``[period, d]`` int32, the direct term's table times ``2^frac_bits``, row ``r mod period``.
        sin: ``[period, d]`` int32, the rotated term's table, the same way.
        frac_bits: The tables' fraction bits.
        multiplier, shift: ``vrequant``'s q31 scale ``s_in / (2^frac_bits s_out)``.
    """

    rotation: np.ndarray
    cos: np.ndarray
    sin: np.ndarray
    frac_bits: int
    multiplier: int
    shift: int

    @property
    def period(self) -> int:
        return int(self.cos.shape[0])


def rotary_params(rotation: np.ndarray, cos: np.ndarray, sin: np.ndarray, s_in: float, s_out: float, *,
                  what: str) -> RotaryParams:
    """The parameters for float tables ``cos``, ``sin`` (``[rows, d]``, broadcast to the input's rows).

    Raises:
        OnnxError: a table too large for int32 products, or ``s_in / (2^F s_out)`` no scale ``vrequant`` holds
            (``what`` names the node).
    """
    both = np.concatenate([np.asarray(cos, np.float64), np.asarray(sin, np.float64)], axis=1)
    amax = float(np.max(np.abs(both))) if both.size else 0.0
    frac = TABLE_BITS - max(0, math.ceil(math.log2(amax))) if amax > 0 and math.isfinite(amax) else TABLE_BITS
    real = float(s_in) / (float(s_out) * 2.0**frac)
    try:
        m, s = quantize_multiplier(np.array([real]))
    except UsageError:
        m, s = np.array([0]), np.array([0])
    if frac < 0 or not math.isfinite(amax) or not (real < 1.0 and int(m[0]) >= 2**30):
        raise OnnxError(f"{what}: rotary tables up to {amax!r} with input scale {s_in!r} and output scale "
                        f"{s_out!r} need the requantization scale {real!r} (tables with {frac} fraction bits), which "
                        "vrequant's q31 multiplier and 5-bit shift cannot represent (it needs 2^-62 <= scale < 1 "
                        "and tables below 2^14), so the rotary embedding cannot be lowered.")
    period = select.period(both)
    scaled = np.rint(both[:period] * 2.0**frac).astype(np.int32)
    d = cos.shape[1]
    return RotaryParams(rotation=np.asarray(rotation, np.int8), cos=scaled[:, :d], sin=scaled[:, d:], frac_bits=frac,
                        multiplier=int(m[0]), shift=int(s[0]))


def rotary_reference(x: np.ndarray, p: RotaryParams) -> np.ndarray:
    """The program's arithmetic on int8 ``x`` (last axis ``d``), statement by statement (module docstring)."""
    d = p.rotation.shape[0]
    xr = np.asarray(x, dtype=np.int64).reshape(-1, d)
    idx = np.arange(xr.shape[0]) % p.period
    rot = xr @ p.rotation.astype(np.int64)
    acc = xr * p.cos[idx] + rot * p.sin[idx]  # vmulb (shift 0) twice and vadd: exact, |acc| < 2^31
    y = requantize(acc.astype(np.int32), np.int32(p.multiplier), np.int32(p.shift))
    return np.clip(y, -128, 127).astype(np.int8).reshape(np.shape(x))


def table_blocks(p: RotaryParams, tile: int) -> int:
    """Blocks per segment of each table: ``lcm(period, T) / T`` (tile-row ``i`` uses block ``i mod`` that)."""
    return select.blocks(p.cos, tile)


def rotary_rows(p: RotaryParams, shape: RowShape) -> np.ndarray:
    """The ``P`` rows: the requantization's multiplier and shift rows, then ``cos``'s blocks, then ``sin``'s."""
    head = broadcast_rows(np.array([p.multiplier, p.shift]), shape.tile)
    return np.concatenate([head, select.block_rows(p.cos, shape), select.block_rows(p.sin, shape)]).astype(np.int32)


def rotation_tiles(p: RotaryParams, shape: RowShape) -> tuple[np.ndarray, tuple[tuple[int, int], ...]]:
    """The ``b`` tiles of the rotation (``tmm`` multiplies by ``B^T``: tile = ``M``'s block transposed) after
    the identity tile, and for each of them ``(output segment, source segment)``."""
    t, n = shape.tile, shape.segments
    m = np.zeros((n * t, n * t), dtype=np.int8)
    m[:shape.width, :shape.width] = p.rotation
    tiles, where = [np.eye(t, dtype=np.int8)], []
    for j in range(n):
        for kk in range(n):
            block = m[kk * t:(kk + 1) * t, j * t:(j + 1) * t]
            if block.any():
                tiles.append(np.ascontiguousarray(block.T))
                where.append((j, kk))
    return np.concatenate(tiles), tuple(where)


def streamed(p: RotaryParams, shape: RowShape, cfg: ArchConfig) -> bool:
    """Whether the tables stay in DRAM, each tile-row loading its own blocks: when holding every block (two
    tile-row buffers of ``2n`` blocks beside them) would not fit the accumulators."""
    whole = 2 + 2 * table_blocks(p, shape.tile) * shape.segments * shape.tile
    return whole + 2 * 2 * shape.segments * shape.tile > cfg.rows("acc")


def resident_rows(p: RotaryParams, shape: RowShape, cfg: ArchConfig) -> int:
    """The parameter rows loaded once: all, or the requantization's two when the tables are streamed."""
    return 2 if streamed(p, shape, cfg) else int(rotary_rows(p, shape).shape[0])


def body_blocks(p: RotaryParams, shape: RowShape, cfg: ArchConfig) -> int:
    """The tile-row's blocks: the rotated rows (``n``), and the cos and sin blocks when streamed (``2n``)."""
    return shape.segments * (3 if streamed(p, shape, cfg) else 1)


def rotary_body(p: RotaryParams, shape: RowShape, cfg: ArchConfig) -> Body:
    """The instructions of one tile-row (:func:`body_blocks` blocks)."""
    _, where = rotation_tiles(p, shape)
    k = table_blocks(p, shape.tile)
    stream = streamed(p, shape, cfg)

    def body(emit: Emitter, tr: TileRow, rs: RowShape) -> None:
        n, t = rs.segments, rs.tile
        rot = tr.blocks[0]
        block = tr.index % k
        cos0, sin0 = tr.params + 2 + block * n * t, tr.params + 2 + (k + block) * n * t
        if stream:  # this tile-row's cos and sin blocks from DRAM into its own blocks
            for table, dst in ((0, tr.blocks[n]), (1, tr.blocks[2 * n])):
                row = 2 + (table * k + block) * n * t
                emit.load("acc", dst, tr.p_addr + row * 4 * t, rows=n * t, cols=t, stride=4 * t,
                          comment="the tile-row's " + ("cos" if table == 0 else "sin") + " blocks")
            cos0, sin0 = tr.blocks[n], tr.blocks[2 * n]
        started: set[int] = set()
        for b, (j, kk) in enumerate(where, start=1):  # r = x @ M, a tile per (output, source) segment pair
            emit.tmm(rot + j * t, tr.a + kk * t, b * t, m=1, n=1, k=1, accumulate=j in started,
                     comment="rotate_half: x @ M (signed permutation)")
            started.add(j)
        for j in range(n):
            alu(emit, "vmulb", tr.data + j * t, t, src=cos0 + j * t, shift=0)
            alu(emit, "vmulb", rot + j * t, t, src=sin0 + j * t, shift=0)
        alu(emit, "vadd", tr.data, n * t, src=rot)
        alu(emit, "vrequant", tr.data, n * t, src=tr.params)

    return body


__all__ = ["TABLE_BITS", "RotaryParams", "body_blocks", "resident_rows", "rotary_body", "rotary_params",
           "rotary_reference", "rotary_rows", "rotation_tiles", "streamed", "table_blocks"]
