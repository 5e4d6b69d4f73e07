"""Copies and fills: ``BufferStore`` loop nests become ``load``, ``store`` and ``zero`` instructions.

A copy is a loop nest whose two innermost loops (rows, then columns) nest
perfectly around ``dst[...] = src[...]``.  Into a scratchpad from a DRAM
parameter it is a 2-D strided ``load``, one per T-wide column strip of the
buffer (:mod:`~tinynpu.compiler.tvm.buffers`); from the accumulator to a DRAM
parameter a ``store``; ``buf[...] = 0`` into a scratchpad a ``zero`` of whole
rows.  The loops around the nest repeat the instruction: its fields are
evaluated for all repetitions at once (:mod:`~tinynpu.compiler.tvm.grid`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tinynpu.compiler.tvm.buffers import Placed
from tinynpu.compiler.tvm.exprs import evaluate, flat_index, linear_in, uses
from tinynpu.compiler.tvm.grid import Grid, grid
from tinynpu.compiler.tvm.nest import Leaf, Loop, describe, loaded
from tinynpu.compiler.tvm.parts import Context, Part
from tinynpu.errors import UsageError
from tinynpu.intmath import ceil_div


@dataclass(frozen=True)
class _Nest:
    """A copy's own loops (``row`` is None for a single-row copy) and the instances around them."""

    row: Loop | None
    col: Loop
    grid: Grid
    where: str

    @property
    def own(self) -> tuple[Any, ...]:
        return tuple(loop.var for loop in (self.row, self.col) if loop is not None)

    def value(self, expr: Any, row: int = 0, col: int = 0) -> np.ndarray:
        env = self.grid.at(self.col.var, self.col.start + col)
        if self.row is not None:
            env[self.row.var] = np.full(self.grid.size, self.row.start + row, dtype=np.int64)
        return np.broadcast_to(evaluate(expr, env, self.where), (self.grid.size,)).astype(np.int64)

    def rows(self) -> int:
        return self.row.extent if self.row is not None else 1


def _bad(leaf: Leaf, why: str) -> UsageError:
    return UsageError(f"TIR statement `{describe(leaf.stmt)}`: {why}")


def _nest(leaf: Leaf) -> _Nest:
    if leaf.perfect == 0:
        raise _bad(leaf, "a single-element copy; copies lower as loop nests over rows and columns (the loops "
                         "cache_read/cache_write write), each nest one DMA instruction.")
    col = leaf.loops[-1]
    row = leaf.loops[-2] if leaf.perfect >= 2 else None
    own = (row, col) if row is not None else (col,)
    return _Nest(row, col, grid(leaf, own), f"TIR statement `{describe(leaf.stmt)}`")


def _scratch_origin(leaf: Leaf, nest: _Nest, indices: Any, placed: Placed, tile: int) -> tuple[np.ndarray, ...]:
    """Scratchpad row of each instance's first element, and its first row and column within the buffer.

    Raises:
        UsageError: the copy's rows are not the buffer's rows or its columns not the buffer's columns.
    """
    idx = list(indices)
    row_var = (nest.row.var,) if nest.row is not None else ()
    col_var = (nest.col.var,)
    lead_ok = not any(uses(i, nest.own) for i in idx[:-2])
    if not (lead_ok and linear_in(idx[-1], col_var) and not uses(idx[-1], row_var) and linear_in(idx[-2], row_var)
            and not uses(idx[-2], col_var)):
        raise _bad(leaf, f"the copy's inner loops must run over {placed.name}'s last two dimensions, rows then "
                         "columns, one element per iteration (a transposing or scattering copy is no DMA).")
    r0, c0 = nest.value(idx[-2]), nest.value(idx[-1])
    steps = [(nest.value(idx[-1], col=1) - c0, "column")] if nest.col.extent > 1 else []
    if nest.row is not None and nest.row.extent > 1:
        steps.append((nest.value(idx[-2], row=1) - r0, "row"))
    for step, what in steps:
        if np.any(step != 1):
            raise _bad(leaf, f"consecutive {what}s of the copy are not consecutive {what}s of {placed.name}.")
    plane = np.zeros(nest.grid.size, dtype=np.int64)
    for index, extent in zip(idx[:-2], placed.lead, strict=True):
        plane = plane * extent + nest.value(index)
    if np.any(c0 % tile):
        raise _bad(leaf, f"the copy starts at column {int(c0[np.argmax(c0 % tile != 0)])} of {placed.name}, not at a "
                         f"multiple of the tile edge {tile}; a DMA row starts at a scratchpad row's first element.")
    version = placed.version(nest.grid.env, nest.grid.size) * placed.version_rows(tile)
    return placed.base + version + plane * placed.plane_rows(tile) + (c0 // tile) * placed.rows + r0, r0, c0


def _dram_origin(leaf: Leaf, nest: _Nest, buf: Any, indices: Any) -> tuple[np.ndarray, np.ndarray]:
    """Element offset of each instance's first element in the DRAM tensor, and its row stride in elements."""
    shape = tuple(int(d) for d in buf.shape)
    flat = flat_index(list(indices), shape)
    if not linear_in(flat, nest.own):
        raise _bad(leaf, f"the copy's element address in {buf.name} is not affine in its row and column loops.")
    base = nest.value(flat)
    if nest.col.extent > 1 and np.any(nest.value(flat, col=1) - base != 1):
        raise _bad(leaf, f"consecutive columns of the copy are not consecutive elements of {buf.name}; a DMA row "
                         "is contiguous in DRAM.")
    stride = nest.value(flat, row=1) - base if nest.row is not None and nest.row.extent > 1 else np.zeros_like(base)
    return base, stride



def _strips(nest: _Nest, c0: np.ndarray, placed: Placed, tile: int, leaf: Leaf, *, fill: bool) -> int:
    """How many T-wide column strips the copy covers; refuses a narrow strip that is not the buffer's last.

    A ``load`` (and a ``zero``) writes whole scratchpad rows, zeroing past its columns: a copy narrower than
    a tile may only end where the buffer's columns end, else it would clear columns another copy wrote.
    """
    width = nest.col.extent
    partial = width % tile != 0
    if fill and partial and np.any(c0 + width != placed.cols):
        raise _bad(leaf, f"the copy writes {width} columns of {placed.name} ({placed.cols} columns), not whole "
                         f"{tile}-element rows up to the buffer's last column; load and zero write whole "
                         "scratchpad rows.")
    return ceil_div(width, tile)


def _load_or_store(leaf: Leaf, ctx: Context, nest: _Nest, *, load: bool) -> list[Part]:
    st, tile = leaf.stmt, ctx.cfg.tile
    src = loaded(st.value)
    assert src is not None
    sp_buf, sp_idx = (st.buffer, st.indices) if load else src
    dram_buf, dram_idx = src if load else (st.buffer, st.indices)
    placed, tensor = ctx.placed[sp_buf], ctx.tensors[dram_buf]
    if str(dram_buf.dtype) != placed.dtype:
        raise _bad(leaf, f"{dram_buf.name} holds {dram_buf.dtype} and {placed.name} {placed.dtype}; the DMA copies "
                         "elements unchanged (store the accumulator's type, cast on the host).")
    sp_row, _, c0 = _scratch_origin(leaf, nest, sp_idx, placed, tile)
    strips = _strips(nest, c0, placed, tile, leaf, fill=load)
    base, stride = _dram_origin(leaf, nest, dram_buf, dram_idx)
    eb = np.dtype(tensor.dtype).itemsize
    width = tensor.shape[-1] if tensor.shape else 1
    parts = []
    for j in range(strips):
        cols = min(tile, nest.col.extent - j * tile)
        first = base + j * tile
        fields: dict[str, np.ndarray | int] = {
            "sp_row": sp_row + j * placed.rows, "dram": tensor.addr + first * eb, "stride": stride * eb,
            "rows": nest.rows(), "cols": cols}
        if load:
            fields["scope"] = ctx.isa.scope_by_name[placed.scope].id
        parts.append(Part("load" if load else "store", nest.grid.slots + j, fields,
                          comment=f"{tensor.name}[{{}}, {{}}:+{cols}] {'->' if load else '<-'} {placed.name}",
                          comment_args=(first // width, first % width)))
    return parts


def _zero(leaf: Leaf, ctx: Context, nest: _Nest) -> list[Part]:
    """One ``zero`` per run of consecutive rows the fill writes in one pass of its perfect loop nest.

    The instances of one pass (one iteration of the loops outside the perfect nest) follow each other in
    program order with nothing between them, so their rows may be cleared in any order: sorted, every
    contiguous run of them is one instruction (a block's T x T fills become one ``zero`` of the block).
    """
    st, tile = leaf.stmt, ctx.cfg.tile
    placed = ctx.placed[st.buffer]
    sp_row, _, c0 = _scratch_origin(leaf, nest, st.indices, placed, tile)
    strips = _strips(nest, c0, placed, tile, leaf, fill=True)
    passes = np.zeros(nest.grid.size, dtype=np.int64)
    for loop in leaf.loops[:len(leaf.loops) - leaf.perfect]:
        passes = passes * loop.extent + (nest.grid.env[loop.var] - loop.start)
    first = np.concatenate([sp_row + j * placed.rows for j in range(strips)])
    group = np.tile(passes, strips)
    slots = np.tile(nest.grid.slots, strips)
    rows = nest.rows()
    order = np.lexsort((first, group))
    first, group, slots = first[order], group[order], slots[order]
    starts = np.r_[True, (group[1:] != group[:-1]) | (first[1:] != first[:-1] + rows)] if len(first) else first
    run = np.cumsum(starts) - 1
    count = np.bincount(run) if len(run) else np.zeros(0, np.int64)
    slot = np.full(len(count), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(slot, run, slots)
    return [Part("zero", slot, {"scope": ctx.isa.scope_by_name[placed.scope].id, "sp_row": first[starts],
                                "rows": count * rows}, comment=f"fill_zero({placed.name})")]


def _is_zero(value: Any) -> bool:
    return type(value).__name__ in ("IntImm", "FloatImm") and float(value.value) == 0.0


def lower_store(leaf: Leaf, ctx: Context) -> list[Part]:
    """The instructions of a ``BufferStore`` leaf (see the module docstring).

    Raises:
        UsageError: a store that is no copy between DRAM and a scratchpad and no zero fill, naming it and why.
    """
    st = leaf.stmt
    dst_sp = st.buffer in ctx.placed
    value = st.value
    source = loaded(value)
    if source is not None:
        src = source[0]
        if dst_sp and src in ctx.tensors:
            return _load_or_store(leaf, ctx, _nest(leaf), load=True)
        if src in ctx.placed and st.buffer in ctx.tensors:
            if ctx.placed[src].scope != "acc":
                raise _bad(leaf, f"a copy out of {src.name} ({src.scope()}); only the accumulator is stored to "
                                 "DRAM.")
            return _load_or_store(leaf, ctx, _nest(leaf), load=False)
        raise _bad(leaf, f"a copy from {src.name} ({src.scope() or 'global'}) to {st.buffer.name} "
                         f"({st.buffer.scope() or 'global'}); tinynpu copies DRAM -> a scratchpad (load) and "
                         "accumulator -> DRAM (store).")
    if _is_zero(value) and dst_sp:
        return _zero(leaf, ctx, _nest(leaf))
    where = "a scratchpad" if dst_sp else "DRAM"
    raise _bad(leaf, f"computes {st.buffer.name} in {where} element by element, which tinynpu cannot run: only "
                     "copies, zero fills and the tensorized tmm block lower (tensorize this block, or "
                     "decompose_reduction so that its init is a fill of the accumulator).")


__all__ = ["lower_store"]
