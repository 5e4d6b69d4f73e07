"""Synchronization tokens from recorded accesses, for a whole program at once (vectorized).

The :class:`~tinynpu.compiler.emitter.Emitter` records what every
instruction reads and writes (scratchpad rows, DRAM byte spans) and this
module turns those records into the ISA's ``wait``/``signal`` masks with
numpy, so the cost per instruction is a few array operations rather than a
Python loop.  The rules:

* Scratchpads are tracked per granule of ``tile`` rows (touching part of a
  granule counts as touching all of it: conservative, therefore safe).  A
  read depends on the granule's last writer; a write depends on the last
  writer and on every read since that write (read-after-write,
  write-after-write, write-after-read).  Only accesses by *other* units need
  a token: a unit retires in order.
* In DRAM, a load depends on the latest earlier store whose byte span
  overlaps its own, and a store on the latest such load.
* A ``sync`` barrier starts a new segment: nothing is tracked across it.
* Per consumer, only the latest producer of each unit matters (units retire
  in order); and a consumer unit that already waited for a later
  instruction of that producer unit needs no second wait (units start in
  order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Accesses:
    """A program's recorded accesses, one entry per instruction or per access (all int64 arrays).

    Attributes:
        unit: Per instruction: the queued unit's index (0..units-1), or -1 for control instructions.
        segment: Per instruction: the number of barriers before it.
        range_op, range_scope, range_first, range_last, range_write: Per scratchpad access: the
            instruction, the scope's index, its first and last granule, and 1 for a write (0: read).
        dram_op, dram_lo, dram_hi, dram_store: Per DRAM access: the instruction, the first and the
            end byte, and 1 for a store (0: a load).
        extra_consumer, extra_producer: Dependencies the caller asked for explicitly.
    """

    unit: np.ndarray
    segment: np.ndarray
    range_op: np.ndarray
    range_scope: np.ndarray
    range_first: np.ndarray
    range_last: np.ndarray
    range_write: np.ndarray
    dram_op: np.ndarray
    dram_lo: np.ndarray
    dram_hi: np.ndarray
    dram_store: np.ndarray
    extra_consumer: np.ndarray
    extra_producer: np.ndarray


def _granule_deps(acc: Accesses, scope_granules: list[int], units: int) -> tuple[np.ndarray, np.ndarray]:
    """(consumer, producer) pairs from scratchpad accesses (possibly repeated; all cross-unit)."""
    n_ops = len(acc.unit)
    count = acc.range_last - acc.range_first + 1
    total = int(count.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.cumsum(count) - count
    granule = np.repeat(acc.range_first - starts, count) + np.arange(total, dtype=np.int64)
    offsets = np.cumsum([0, *scope_granules[:-1]])
    span = int(sum(scope_granules))
    gid = (np.repeat(acc.segment[acc.range_op] * span + offsets[acc.range_scope], count) + granule)
    # One sort orders events by granule, then instruction, reads before writes (an op's own read
    # of a granule it also writes comes first, as in program order).
    key = np.sort(gid * (2 * n_ops) + np.repeat(acc.range_op * 2 + acc.range_write, count))
    gid, rest = np.divmod(key, 2 * n_ops)
    op, write = np.divmod(rest, 2)
    write = write.astype(bool)
    unit = acc.unit[op]
    pos = np.arange(len(key), dtype=np.int64)
    start = np.maximum.accumulate(np.where(np.r_[True, gid[1:] != gid[:-1]], pos, 0))
    last_write = np.maximum.accumulate(np.where(write, pos, -1))
    prev_write = np.r_[-1, last_write[:-1]]  # the latest write strictly before each event
    consumers, producers = [], []
    has = prev_write >= start
    w = np.where(has, prev_write, 0)
    sel = has & (unit[w] != unit)
    consumers.append(op[sel])
    producers.append(op[w[sel]])
    for u in range(units):  # a write waits for the latest read of each other unit since the last write
        last_read = np.maximum.accumulate(np.where(~write & (unit == u), pos, -1))
        sel = write & (unit != u) & (last_read > prev_write) & (last_read >= start)
        consumers.append(op[sel])
        producers.append(op[last_read[sel]])
    return np.concatenate(consumers), np.concatenate(producers)


#: Candidate x other-access pairs tested per numpy pass of :func:`_dram_deps` (bounds its memory to a few MB).
_PAIRS_PER_PASS = 1 << 20


def _dram_deps(acc: Accesses) -> tuple[list[int], list[int]]:
    """(consumer, producer) pairs from DRAM spans: a load after the latest overlapping store, and vice versa.

    A bounding-box test per segment rules out almost everything (a GEMM never loads what it stores); the
    instructions it does not rule out (an epilogue's parameter rows next to the output, say) are resolved
    exactly, a chunk of them per numpy pass against the other kind's accesses within the chunk's own box:
    a Python loop per candidate over every earlier access took a minute for an LM head's 50257 columns.
    """
    consumers: list[int] = []
    producers: list[int] = []
    if not len(acc.dram_op):
        return consumers, producers
    seg = acc.segment[acc.dram_op]
    for s in range(int(seg.min()), int(seg.max()) + 1):
        mine = seg == s
        if not mine.any():
            continue
        ops, lo, hi, store = acc.dram_op[mine], acc.dram_lo[mine], acc.dram_hi[mine], acc.dram_store[mine]
        for kind in (0, 1):
            other = store != kind
            if not other.any():
                continue
            box_lo, box_hi = lo[other].min(), hi[other].max()
            cand = np.flatnonzero((store == kind) & (lo < box_hi) & (box_lo < hi))
            if len(cand):
                c, p = _latest_overlaps(ops[cand], lo[cand], hi[cand], ops[other], lo[other], hi[other])
                consumers += c
                producers += p
    return consumers, producers


def _latest_overlaps(c_ops: np.ndarray, c_lo: np.ndarray, c_hi: np.ndarray, o_ops: np.ndarray, o_lo: np.ndarray,
                     o_hi: np.ndarray) -> tuple[list[int], list[int]]:
    """For each candidate, the last (in ``o_*`` order) access before it in the program whose byte span
    overlaps its own: (candidates that have one, that access's instruction)."""
    consumers: list[int] = []
    producers: list[int] = []
    # Only accesses inside the candidates' own box can overlap one (an LM head's column stores lie between
    # its weights and its epilogue's rows, so every store is a candidate, but no load touches the output).
    inside = (o_ops < c_ops.max()) & (c_lo.min() < o_hi) & (o_lo < c_hi.max())
    o_ops, o_lo, o_hi = o_ops[inside], o_lo[inside], o_hi[inside]
    if not len(o_ops):
        return consumers, producers
    step = max(1, _PAIRS_PER_PASS // len(o_ops))
    for first in range(0, len(c_ops), step):
        ops, lo, hi = c_ops[first:first + step], c_lo[first:first + step], c_hi[first:first + step]
        near = np.flatnonzero((o_ops < ops.max()) & (lo.min() < o_hi) & (o_lo < hi.max()))
        if not len(near):
            continue
        hit = (o_ops[near] < ops[:, None]) & (lo[:, None] < o_hi[near]) & (o_lo[near] < hi[:, None])
        latest = np.where(hit, near, -1).max(axis=1)
        found = latest >= 0
        consumers += ops[found].tolist()
        producers += o_ops[latest[found]].tolist()
    return consumers, producers


def tokens(acc: Accesses, *, scope_granules: list[int], unit_bits: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The ``wait`` and ``signal`` masks of every instruction.

    Args:
        acc: The recorded accesses.
        scope_granules: Granules per scope, by scope index.
        unit_bits: The token bit of each queued unit, by unit index.

    Returns:
        Two int64 arrays, one entry per instruction.
    """
    n_ops = len(acc.unit)
    units = len(unit_bits)
    g_cons, g_prod = _granule_deps(acc, scope_granules, units)
    d_cons, d_prod = _dram_deps(acc)
    consumer = np.concatenate([g_cons, np.asarray(d_cons, np.int64), acc.extra_consumer])
    producer = np.concatenate([g_prod, np.asarray(d_prod, np.int64), acc.extra_producer])
    # latest[i, u]: the latest instruction of unit u that instruction i depends on (-1: none).
    latest = np.full(n_ops * units, -1, dtype=np.int64)
    np.maximum.at(latest, consumer * units + acc.unit[producer], producer)
    by_unit = latest.reshape(n_ops, units)
    wait = np.zeros(n_ops, dtype=np.int64)
    signal = np.zeros(n_ops, dtype=np.int64)
    bits = np.asarray(unit_bits, dtype=np.int64)
    for v in range(units):
        ops_v = np.flatnonzero(acc.unit == v)
        if not len(ops_v):
            continue
        for u in range(units):
            p = by_unit[ops_v, u]
            # Units start in order: an earlier wait of unit v on a later instruction of u covers p.
            covered = np.r_[-1, np.maximum.accumulate(p)[:-1]]
            need = p > covered
            wait[ops_v[need]] |= bits[u]
            signal[p[need]] |= bits[v]  # strictly increasing: no index twice
    return wait, signal


__all__ = ["Accesses", "tokens"]
