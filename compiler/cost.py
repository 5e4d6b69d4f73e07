"""Analytic cost model of a tiled GEMM: cycles from DMA beats, latencies, tmm steps and overlap.

The model follows the lowering's pipeline at the granularity of a chunk (one
``bk``-tile slice of A and B) with the ISA's timing rules from the config:

- a chunk's tmm time ``C = ni * nj * nk * tmm_interval``;
- its load time ``L`` = DMA beats on the one DRAM port (``rows * ceil(cols *
  bytes / bytes_per_cycle)`` per load) plus ``dram.latency_cycles`` before
  the data can be used;
- double buffered: chunk ``g+1`` loads while chunk ``g`` computes, so a chunk
  costs ``max(C, L_next)``; single buffered: ``L + latency + C + tmm latency``;
- at the end of a block its column stores (one per output column tile) start
  as their column finishes; with one acc buffer the next block's column ``j``
  must wait for store ``j`` to complete: that wait is the block-boundary stall;
- the DRAM port is shared: the total never drops below all beats moved.

Blocks of equal shape cost the same, so the model evaluates each distinct
block shape once: cheap enough to rank tens of thousands of tilings per second.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from tinynpu.compiler.bounds import tiling_traffic
from tinynpu.compiler.schedule import Tiling
from tinynpu.intmath import ceil_div
from tinynpu.isa import ArchConfig


@dataclass(frozen=True)
class Estimate:
    """The model's prediction for one tiling.

    Attributes:
        cycles: Predicted total cycles.
        dram_bytes: Exact DRAM traffic (read + write) of the lowering.
        compute_cycles: tmm cycles alone (issued steps x interval).
    """

    cycles: int
    dram_bytes: int
    compute_cycles: int


def _beats(rows: int, cols: int, nbytes: int, cfg: ArchConfig) -> int:
    return rows * math.ceil(cols * nbytes / cfg.dram_bytes_per_cycle)


@dataclass(frozen=True)
class _Blocks:
    """The blocks of ``block`` tiles that cover ``tiles`` tiles of one dimension (the last one may be short)."""

    tiles: int
    block: int

    @property
    def count(self) -> int:
        return ceil_div(self.tiles, self.block)

    def size(self, start: int) -> int:
        """Tiles of the block starting at tile ``start``."""
        return min(self.block, self.tiles - start)

    @property
    def last(self) -> tuple[int, int]:
        """(first tile, tiles) of the last block."""
        start = (self.count - 1) * self.block
        return start, self.size(start)

    @functools.lru_cache(maxsize=1 << 12)  # noqa: B019 (a frozen record of two ints: the cache holds no more)
    def groups(self, *, split_first: bool) -> tuple[tuple[tuple[int, int, bool], int], ...]:
        """Blocks that cost the same, counted: (first tile, or 0 for an inner full block; tiles; whether it
        is the first block, kept apart when ``split_first``) -> how many.

        The first block, the inner ones (all full) and the last one: three entries at most, whatever the
        number of blocks, so that the LM head's 3,000 column tiles cost no more to rank than 30.
        """
        out: dict[tuple[int, int, bool], int] = {}

        def add(key: tuple[int, int, bool], count: int) -> None:
            if count:
                out[key] = out.get(key, 0) + count

        count, last_start = self.count, (self.count - 1) * self.block
        first_size = self.size(0)
        # the first block keeps its start (0) whether it is full, short or the last one
        add((0, first_size, split_first), 1)
        add((0, self.block, False), max(0, count - 2))  # inner blocks are full and not last
        if count > 1:
            add((last_start, self.size(last_start), False), 1)
        return tuple(out.items())


#: What :func:`estimate` can share between tilings of one GEMM: per (bk, double buffering, ring), the
#: costs of the block shapes it met.
Memo = dict[tuple[int, bool, int], dict[tuple[int, int, int, int], tuple[int, int, int, int, int]]]


@functools.lru_cache(maxsize=1 << 16)
def _column_stall(store: int, nj: int, tau: int, tau0: int, alu_col: int, lat: int) -> float:
    """The block-boundary stall of one acc buffer: column j's store is ready once its last tmm (and its
    ALU steps) end and completes after the store unit drained columns 0..j; the next block rewrites
    column j at (nj + j) * tau0.  The worst column sets the stall.  (A pure function of integers, so
    the tilings that share a block shape share its value.)"""
    per_col = store / nj
    stall = 0.0
    end = 0.0
    for j in range(nj):
        end = max((j + 1) * tau + alu_col, end) + per_col
        stall = max(stall, end + lat - (nj * tau + j * tau0))
    return stall


@functools.lru_cache(maxsize=1 << 16)
def _drain(store: int, nj: int, tau: int, alu_col: int) -> float:
    """When the last block's column stores have drained, after its last column's tmm ends (per column as
    in :func:`_column_stall`)."""
    end = 0.0
    for j in range(nj):
        end = max((j + 1) * tau + alu_col, end) + store / nj
    return end


def estimate(m: int, n: int, k: int, t: Tiling, cfg: ArchConfig, *, in_bytes: int, out_bytes: int,
             bias: int = 0, alu_ops: int = 0, memo: Memo | None = None) -> Estimate:
    """Predict cycles and traffic of :func:`tinynpu.compiler.lower.lower_gemm` for tiling ``t``.

    ``bias`` is the accumulator parameter rows per output column tile (their traffic), ``alu_ops``
    the vector-ALU instructions each output column tile runs before its store (a layer epilogue):
    the ALU overlaps the tensor unit, so it bounds a block's time and delays each column's store.
    ``memo``: one dict shared by the estimates of many tilings of this GEMM (the same arguments but
    ``t``), so that a block shape's cost is worked out once for all tilings that chunk it alike.
    """
    e = cfg.tile
    mt, nt, kt = ceil_div(m, e), ceil_div(n, e), ceil_div(k, e)
    interval = cfg.tmm_interval_cycles
    lat = cfg.dram_latency_cycles
    k_last_cols = k - (kt - 1) * e

    def load_beats(rows: int, nk: int, k0: int) -> int:
        # nk reduction tiles starting at tile k0; the last tile of K may be narrow.
        full = nk - (1 if k0 + nk == kt else 0)
        beats = _beats(rows, e, in_bytes, cfg) * full
        if k0 + nk == kt:
            beats += _beats(rows, k_last_cols, in_bytes, cfg)
        return beats

    chunk_starts = list(range(0, kt, t.bk))
    iblocks = _Blocks(mt, t.bm)
    jblocks = _Blocks(nt, t.bn)
    cache = {} if memo is None else memo.setdefault((t.bk, t.double_buffer, t.stream_buffers), {})

    def block(i0: int, ni: int, j0: int, nj: int, la: bool = True,
              lb: bool = True) -> tuple[int, int, int, int, int]:
        """(steady cycles, store beats, first-load beats, last-column tmm time, ALU time per column)."""
        rows_a = min(ni * e, m - i0 * e)
        rows_b = min(nj * e, n - j0 * e)
        key = (rows_a if la else -rows_a, rows_b if lb else -rows_b, ni, nj)
        if key in cache:
            return cache[key]
        # Every chunk but the last is a full chunk of bk tiles with the same loads and tmm time.
        chunks = len(chunk_starts)
        last_k0 = chunk_starts[-1]

        def chunk_load(k0: int) -> int:
            nk = min(t.bk, kt - k0)
            return load_beats(rows_a, nk, k0) * la + load_beats(rows_b, nk, k0) * lb

        load_full, load_last = chunk_load(0), chunk_load(last_k0)
        comp_full, comp_last = ni * nj * min(t.bk, kt) * interval, ni * nj * (kt - last_k0) * interval
        if t.double_buffer:
            ring = t.stream_buffers

            def period(comp: int, nxt: int) -> int:
                # R buffers: chunk g+R-1's loads start when chunk g-1's tmm ends and must land (plus
                # DRAM latency) before chunk g+R-1 computes, so R periods span a chunk's tmm, its
                # loads and the latency (two buffers: one period spans two chunks).
                return max(comp, nxt, (comp + nxt + lat + cfg.tmm_latency_cycles + 1) // ring)

            if chunks == 1:
                cycles = period(comp_last, load_last)
            else:  # the last chunk's period overlaps the next block's first loads
                cycles = ((chunks - 2) * period(comp_full, load_full) + period(comp_full, load_last)
                          + period(comp_last, load_full))
        else:
            cycles = ((chunks - 1) * (comp_full + load_full) + comp_last + load_last
                      + chunks * (lat + cfg.tmm_latency_cycles))
        alu_col = alu_ops * (ceil_div(ni * e, cfg.alu_rows_per_cycle) + cfg.alu_latency_cycles)
        cycles = max(cycles, nj * alu_col)
        cols_last = min(e, n - (j0 + nj - 1) * e)
        store = (nj - 1) * _beats(rows_a, e, out_bytes, cfg) + _beats(rows_a, cols_last, out_bytes, cfg)
        tau = ni * min(t.bk, kt - chunk_starts[-1]) * interval
        cache[key] = (cycles, store, load_full if chunks > 1 else load_last, tau, alu_col)
        return cache[key]

    # Blocks of equal shape cost the same: count them per dimension (:meth:`_Blocks.groups`).
    # A resident panel is loaded only by the first block of its outer row (column).
    shapes: dict[tuple[int, int, int, int, bool, bool], int] = {}
    for (i0, ni, fi), ci in iblocks.groups(split_first=t.resident == "b"):
        for (j0, nj, fj), cj in jblocks.groups(split_first=t.resident == "a"):
            key = (i0, ni, j0, nj, t.resident != "a" or fj, t.resident != "b" or fi)
            shapes[key] = shapes.get(key, 0) + ci * cj
    n_blocks = iblocks.count * jblocks.count
    total = 0
    compute = mt * nt * kt * interval
    for (i0, ni, j0, nj, la, lb), count in shapes.items():
        cyc, store, _, tau, alu_col = block(i0, ni, j0, nj, la, lb)
        per_block = cyc
        if t.acc_buffers == 1 or n_blocks == 1:
            stall = _column_stall(store, nj, tau, ni * min(t.bk, kt) * interval, alu_col, lat)
            if t.init == "fill_zero":
                stall = max(stall, store + lat)  # one zero of the whole block waits for every store
            per_block += int(max(0.0, stall))
        if not t.double_buffer:
            per_block += store + lat
        if t.resident != "none" and t.panel_buffers == 1 and (la if t.resident == "a" else lb) \
                and t.bk >= kt:
            # A single panel buffer reloaded in one chunk: the next panel loads only after this
            # row's last tmm (with several chunks, each chunk's slice reloads as soon as it is free).
            rows_p = min(ni * e, m - i0 * e) if t.resident == "a" else min(nj * e, n - j0 * e)
            per_block += load_beats(rows_p, kt, 0) + lat
        total += per_block * count
    _, _, first_load, _, _ = block(0, iblocks.size(0), 0, jblocks.size(0))
    (i_l, ni_l), (j_l, nj_l) = iblocks.last, jblocks.last  # the last block in either order
    _, last_store, _, tau_l, alu_l = block(i_l, ni_l, j_l, nj_l)
    # The first tmm waits only for the first reduction tile's loads of chunk 0.
    prologue = first_load // min(t.bk, kt) + lat
    # The last block's column stores drain after its last column's tmm.
    epilogue = int(_drain(last_store, nj_l, tau_l, alu_l) - nj_l * tau_l) + lat
    traffic = tiling_traffic(m, n, k, t, cfg, in_bytes=in_bytes, out_bytes=out_bytes, bias=bias)
    port = math.ceil(traffic / cfg.dram_bytes_per_cycle)
    cycles = max(total, port) + prologue + (epilogue if t.double_buffer else 0) + cfg.tmm_latency_cycles
    return Estimate(cycles=int(cycles), dram_bytes=traffic, compute_cycles=compute)


__all__ = ["Estimate", "Memo", "estimate"]
