"""A constant attention mask applied inside the masked softmax's program, instead of a host select.

The host's select (:func:`~tinynpu.compiler.onnx.runtime.host.mask_select`) gives a kept score
``max(x, -127)`` and a masked one the code -128, which the masked softmax's first ``vlut`` (base -128)
sends to ``MASKED_CODE``.  The program does the same with two existing ALU instructions on each
tile-row it brought into the accumulators: ``vmax`` with -127 (every score), then ``vadd`` of the
mask's rows, 0 where kept and :data:`MASK_ADD` where masked.  A masked score is then at most
``127 + MASK_ADD = -129``, which the first ``vlut`` clamps to its entry 0, the entry of the code
-128: ``MASKED_CODE``; a kept score is unchanged.  So every entry after that ``vlut`` is what the
host select and the same ``vlut`` give, bit for bit.

The mask is a constant, so its rows are parameter rows (loaded once with the softmax's tables, or,
when they do not fit beside a tile-row, loaded by each tile-row from DRAM: :func:`streamed`).
Broadcast to the scores ``[rows, width]`` it repeats every ``period`` rows (a causal mask: the
sequence length, the same for every head); tile-row ``i`` (rows ``i*T..``) needs rows
``i*T mod period..``, so the parameter rows hold the mask for ``lcm(period, T)`` rows, as
``lcm / T`` blocks of a tile-row's layout (segment ``j`` of row ``rr`` at ``j*T + rr``), and
tile-row ``i`` adds block ``i mod (lcm / T)``.
"""

from __future__ import annotations

import math

import numpy as np

from tinynpu.compiler.onnx.lower.rowwise import RowShape

#: Added to a masked score after the clamp to [-127, 127]: at most -129, below the first vlut's base -128.
MASK_ADD = -256
#: The largest score ``vmax`` leaves a kept entry at, and the floor it clamps to.
KEPT_FLOOR = -127


def period(masked: np.ndarray) -> int:
    """The fewest rows ``p`` (a divisor of the row count) after which the ``[rows, width]`` mask (or any
    table, such as a rotary embedding's) repeats."""
    rows = masked.shape[0]
    for p in range(1, rows + 1):
        if rows % p == 0 and np.array_equal(masked.reshape(rows // p, p, -1), np.broadcast_to(
                masked[:p], (rows // p, p, masked.shape[1]))):
            return p
    return rows  # never: p = rows always holds


def blocks(mask: np.ndarray, tile: int) -> int:
    """Tile-row blocks of the parameter rows of ``mask`` (or a table; its ``period`` rows): ``lcm(period, T) / T``."""
    return math.lcm(mask.shape[0], tile) // tile


def block_rows(table: np.ndarray, shape: RowShape) -> np.ndarray:
    """Int ``table`` (``period x width``, one row per logical row mod ``period``) as :func:`blocks` blocks of
    ``n*T`` rows, segment ``j`` of row ``rr`` at ``j*T + rr`` (padding columns 0), int32: what tile-row ``i``
    reads as block ``i mod blocks``.  A constant mask's rows, and a rotary embedding's tables."""
    t, n = shape.tile, shape.segments
    k = blocks(table, t)
    padded = np.zeros((table.shape[0], n * t), dtype=np.int64)
    padded[:, :shape.width] = table
    values = padded[np.arange(k * t) % table.shape[0]].reshape(k, t, n, t)  # block, row, segment, column
    return values.transpose(0, 2, 1, 3).reshape(k * n * t, t).astype(np.int32)


def mask_rows(mask: np.ndarray, shape: RowShape) -> np.ndarray:
    """The int32 parameter rows of ``mask`` (bool, ``period x width``): ``MASK_ADD`` where masked, else 0."""
    return block_rows(np.where(mask, MASK_ADD, 0), shape)


def streamed(mask: np.ndarray, shape: RowShape, head_rows: int, acc_rows: int) -> bool:
    """Whether the mask's rows stay in DRAM, each tile-row loading its own: when all of them beside the
    softmax's ``head_rows`` and one tile-row (``n`` segments and two blocks) do not fit ``acc_rows``.  Then
    the tile-row takes ``n`` more blocks for them, so a causal mask's length is bounded by the tile-row
    alone (``2n + 2`` blocks, about 500 positions at T = 16) instead of by its whole period."""
    n, t = shape.segments, shape.tile
    return head_rows + blocks(mask, t) * n * t + (n + 2) * t > acc_rows


def select_reference(x2: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The host select on ``[rows, width]`` int scores: masked (``mask``'s row ``r mod period``) to -128, the
    rest clamped to -127 (what the program's ``vmax``, ``vadd`` and first ``vlut`` leave, before that table)."""
    full = mask[np.arange(x2.shape[0]) % mask.shape[0]]
    return np.where(full, -128, np.maximum(x2, KEPT_FLOOR))


__all__ = ["KEPT_FLOOR", "MASK_ADD", "block_rows", "blocks", "mask_rows", "period", "select_reference", "streamed"]
