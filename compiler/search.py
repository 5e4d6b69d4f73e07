"""Schedule search: exhaustive ranking for ``auto``, perfect-tile sampling for ``tinynpu tune``.

Both rank tilings of :func:`tinynpu.compiler.bounds.tiling_space` with the
analytic model :func:`tinynpu.compiler.cost.estimate`.  Among tilings whose
predicted cycles are within ``_CYCLE_SLACK`` of the fastest, the one moving
the least DRAM traffic wins (ties: fewer instructions, i.e. larger chunks),
so a compute-bound shape also gets the traffic-optimal blocking.
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from tinynpu.compiler.bounds import resident_panels
from tinynpu.compiler.cost import Estimate, Memo, estimate
from tinynpu.compiler.schedule import STREAM_BUFFERS, Tiling, fits, require_a_fit
from tinynpu.intmath import ceil_div
from tinynpu.isa import ArchConfig

_CYCLE_SLACK = 1.03  # the model is within a few percent of the simulator on the GEMM suite
_RING_MIN_LATENCIES = 10  # rings are ranked when the weights stream for at least this many DRAM latencies


@dataclass(frozen=True)
class Ranked:
    """A tiling with its model estimate."""

    tiling: Tiling
    est: Estimate


def _score(r: Ranked) -> tuple[int, int, int]:
    return (r.est.cycles, r.est.dram_bytes, -r.tiling.bk)


def pick(ranked: Iterable[Ranked]) -> Ranked:
    """Fastest within the slack, then least traffic, then largest chunk."""
    items = list(ranked)
    fastest = min(r.est.cycles for r in items)
    near = [r for r in items if r.est.cycles <= fastest * _CYCLE_SLACK]
    return min(near, key=lambda r: (r.est.dram_bytes, r.est.cycles, -r.tiling.bk))


def rank(m: int, n: int, k: int, cfg: ArchConfig, tilings: Iterable[Tiling], *, in_bytes: int, out_bytes: int,
         bias: int = 0, alu_ops: int = 0) -> list[Ranked]:
    memo: Memo = {}  # block costs shared by tilings that chunk alike
    return [Ranked(t, estimate(m, n, k, t, cfg, in_bytes=in_bytes, out_bytes=out_bytes, bias=bias, alu_ops=alu_ops,
                               memo=memo))
            for t in tilings]


def balanced(extent_tiles: int, limit: int) -> list[int]:
    """Block sizes that split ``extent_tiles`` into q near-equal blocks (q = 1, 2, ...), at most ``limit``.

    Traffic depends only on the number of blocks, and for a given number the
    smallest block size wastes least at the edge, so these dominate all others.
    """
    sizes = {ceil_div(extent_tiles, q) for q in range(1, extent_tiles + 1)}
    return sorted(x for x in sizes if x <= limit)


def _auto_space(m: int, n: int, k: int, cfg: ArchConfig, *, bias: int) -> Iterable[Tiling]:
    """The candidates ``auto`` ranks: balanced block shapes, chunks of 1, 2, 4, ... tiles and the largest.

    Chunk size changes instruction counts and the block-boundary overlap, not
    traffic, so powers of two (plus the largest that fits) cover it; double
    buffering of a_reg/b_reg never loses, so ``auto`` always uses it.
    """
    e = cfg.tile
    mt, nt, kt = ceil_div(m, e), ceil_div(n, e), ceil_div(k, e)
    acc_tiles = cfg.rows("acc") // e
    # One row of tiles whose weights take many DRAM latencies to stream: a ring's steady state
    # dominates; below that, the model's per-chunk view misses the per-block costs a ring adds
    # (measured: the 1 x 48 x 64 attention matmuls ran 7-16% slower with a ring).
    weight_beats = nt * kt * ceil_div(e * e, cfg.dram_bytes_per_cycle)
    streams = mt == 1 and weight_beats >= _RING_MIN_LATENCIES * cfg.dram_latency_cycles
    for accb in (1, 2):
        for bm in balanced(mt, acc_tiles):
            for bn in balanced(nt, acc_tiles // bm):
                chunk = partial(Tiling, bm=bm, bn=bn, acc_buffers=accb)
                chunk_sizes = []
                bk = 1
                while bk <= kt and fits(chunk(bk=bk), cfg, bias=bias):
                    chunk_sizes.append(bk)
                    bk *= 2
                if not chunk_sizes:
                    continue
                top = chunk_sizes[-1]
                while top < kt and fits(chunk(bk=top + 1), cfg, bias=bias):
                    top += 1
                chunks = [chunk(bk=bk) for bk in sorted(set(chunk_sizes) | {top})]
                yield from chunks
                # A whole panel (block x all of K) can stay resident, with one or two panel buffers.
                panels = [list(resident_panels(t, cfg, k=k, bias=bias, panel_buffers=(2, 1))) for t in chunks]
                for resident in panels:
                    yield from resident
                # After them (so a tie keeps two buffers): rings of streamed chunks, for the rows of
                # at most one tile (batch-1 decode and small batches) where loads match compute.
                for t, resident in zip(chunks, panels, strict=True) if streams else ():
                    yield from rings((t, *resident), cfg, k=k, bias=bias)


def rings(bases: tuple[Tiling, ...], cfg: ArchConfig, *, k: int, bias: int) -> Iterable[Tiling]:
    """Each of ``bases`` (a chunking and its resident panels) with its streamed chunks in a ring of 3 or 4
    buffers, where they fit.

    A ring lets a chunk's loads start a whole chunk earlier than two buffers do: what batch-1
    GEMVs need, whose chunks take as long to load as to compute.
    """
    for base in bases:
        for ring in STREAM_BUFFERS[2:]:
            r = replace(base, stream_buffers=ring)
            if fits(r, cfg, bias=bias, k=k):
                yield r


def auto_tiling(m: int, n: int, k: int, cfg: ArchConfig, *, in_bytes: int, out_bytes: int,
                bias: int = 0, alu_ops: int = 0) -> Ranked:
    """The ``auto`` schedule: the model's best over the (pruned) exhaustive space.

    ``bias``: accumulator parameter rows per output column tile; ``alu_ops``: vector-ALU
    instructions per output column tile (see :func:`~tinynpu.compiler.cost.estimate`).

    Raises:
        UsageError: not even one tile per buffer fits the config's scopes.
    """
    require_a_fit(cfg, bias=bias)
    return pick(rank(m, n, k, cfg, _auto_space(m, n, k, cfg, bias=bias), in_bytes=in_bytes,
                     out_bytes=out_bytes, bias=bias, alu_ops=alu_ops))


def tune_space(m: int, n: int, k: int, cfg: ArchConfig, *, bias: int = 0) -> Iterable[Tiling]:
    """Every tiling ``tune`` can sample: perfect-tile factors per extent, both orders, buffering choices."""
    e = cfg.tile
    mt, nt, kt = ceil_div(m, e), ceil_div(n, e), ceil_div(k, e)
    acc_tiles = cfg.rows("acc") // e
    blocks = ((bm, bn, bk) for bm in tile_candidates(mt, acc_tiles)
              for bn in tile_candidates(nt, max(1, acc_tiles // bm)) for bk in tile_candidates(kt, kt))
    for (bm, bn, bk), order, db, accb in itertools.product(blocks, ("mn", "nm"), (True, False), (1, 2)):
        panel = "a" if order == "mn" else "b"
        for res, pb in (("none", 2), (panel, 2), (panel, 1)):
            t = Tiling(bm=bm, bn=bn, bk=bk, order=order, double_buffer=db, acc_buffers=accb, resident=res,
                       panel_buffers=pb)
            if fits(t, cfg, bias=bias, k=k):
                yield t
            for ring in STREAM_BUFFERS[2:] if db and mt == 1 else ():  # rings for one row of tiles, as auto
                r = replace(t, stream_buffers=ring)
                if fits(r, cfg, bias=bias, k=k):
                    yield r


def exhaustive(m: int, n: int, k: int, cfg: ArchConfig, *, in_bytes: int, out_bytes: int,
               bias: int = 0) -> Ranked:
    """The model's best over every tiling ``tune`` can sample (the yardstick of the search gap)."""
    return pick(rank(m, n, k, cfg, tune_space(m, n, k, cfg, bias=bias), in_bytes=in_bytes,
                     out_bytes=out_bytes, bias=bias))


def _divisors(x: int) -> list[int]:
    return [d for d in range(1, x + 1) if x % d == 0]


def tile_candidates(extent_tiles: int, limit: int) -> list[int]:
    """Inner factors (in tiles) perfect-tile sampling draws from.

    As in the course: factors dividing the extent.  Extents with few divisors
    (primes) would leave the search nothing to try, so the ceiling-division
    factors ``ceil(extent / q)`` (q near-equal blocks) are candidates too.
    """
    cands = {d for d in _divisors(extent_tiles) if d <= limit}
    cands |= set(balanced(extent_tiles, limit))
    return sorted(cands)


def sample_perfect_tile(extent_tiles: int, limit: int, rng: random.Random) -> int:
    """One perfect-tile sample: a uniformly chosen :func:`tile_candidates` factor."""
    return rng.choice(tile_candidates(extent_tiles, limit))


@dataclass(frozen=True)
class TuneResult:
    best: Ranked
    top: tuple[Ranked, ...]
    trials: int
    seconds: float


def tune(m: int, n: int, k: int, cfg: ArchConfig, *, in_bytes: int, out_bytes: int, trials: int = 256,
         seed: int = 0, bias: int = 0, progress: bool = False, keep: int = 3) -> TuneResult:
    """Sample ``trials`` tilings by perfect-tile sampling, rank them with the model.

    Deterministic for a given ``seed``.  ``progress`` shows a tqdm bar on stderr.

    Raises:
        UsageError: not even one tile per buffer fits the config's scopes.
    """
    require_a_fit(cfg, bias=bias)
    e = cfg.tile
    mt, nt, kt = ceil_div(m, e), ceil_div(n, e), ceil_div(k, e)
    acc_tiles = cfg.rows("acc") // e
    rng = random.Random(seed)
    start = time.perf_counter()
    seen: dict[tuple[object, ...], Ranked] = {}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=trials, file=sys.stderr, desc="tune", unit="trial")
    attempts = 0
    while len(seen) < trials and attempts < trials * 20:
        attempts += 1
        bm = sample_perfect_tile(mt, acc_tiles, rng)
        bn = sample_perfect_tile(nt, max(1, acc_tiles // bm), rng)
        bk = sample_perfect_tile(kt, kt, rng)
        order = rng.choice(("mn", "nm"))
        res = ("a" if order == "mn" else "b") if rng.random() < 0.5 else "none"
        db = rng.random() < 0.75
        t = Tiling(bm=bm, bn=bn, bk=bk, order=order, double_buffer=db, acc_buffers=rng.choice((1, 2)),
                   resident=res, panel_buffers=rng.choice((1, 2)),
                   stream_buffers=rng.choice(STREAM_BUFFERS[1:]) if db and mt == 1 else 0)
        if t.key() in seen or not fits(t, cfg, bias=bias, k=k):
            continue
        seen[t.key()] = Ranked(t, estimate(m, n, k, t, cfg, in_bytes=in_bytes, out_bytes=out_bytes,
                                           bias=bias))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    if not seen:  # nothing sampled fit: fall back to the smallest tiling, which require_a_fit checked
        t = Tiling(bm=1, bn=1, bk=1, double_buffer=False)
        seen[t.key()] = Ranked(t, estimate(m, n, k, t, cfg, in_bytes=in_bytes, out_bytes=out_bytes,
                                           bias=bias))
    ranked = sorted(seen.values(), key=_score)
    best = pick(ranked)
    top = [best] + [r for r in ranked if r is not best][: keep - 1]
    return TuneResult(best=best, top=tuple(top), trials=len(seen), seconds=time.perf_counter() - start)


def tune_matmul(m: int, n: int, k: int, *, cfg: ArchConfig, dtype: str = "int8", trials: int = 256,
                seed: int = 0, verify: int = 3, progress: bool = False) -> dict[str, Any]:
    """``tinynpu tune matmul``: sample, rank by the model, simulate the best ``verify``, pick the fastest.

    Returns:
        A JSON-ready dict: the best trace (``schedule``), the simulated candidates, the
        search time, and the gap between the sampled best and the exhaustive best (model cycles).
    """
    from tinynpu.compiler.matmul import compile_matmul
    from tinynpu.compiler.run import run_compiled
    from tinynpu.compiler.schedule import from_tiling

    in_bytes = cfg.elem_bytes("a_reg")
    out_bytes = cfg.elem_bytes("acc")
    res = tune(m, n, k, cfg, in_bytes=in_bytes, out_bytes=out_bytes, trials=trials, seed=seed,
               progress=progress, keep=max(1, verify))
    simulated = []
    for cand in res.top[: max(1, verify)]:
        sched = from_tiling(cand.tiling, cfg, "tuned")
        compiled = compile_matmul(m, n, k, dtype=dtype, cfg=cfg, schedule=sched)
        rep = run_compiled(compiled, cfg=cfg, seed=seed, check_races=False)
        simulated.append({"tiling": _tiling_json(cand.tiling), "model_cycles": cand.est.cycles,
                          "cycles": rep["cycles"], "dram_bytes": rep["dram_bytes"],
                          "verified": rep["verified"], "schedule": sched.to_json()})
    best = min(simulated, key=lambda v: (v["cycles"], v["dram_bytes"]))
    return {"workload": {"kind": "matmul", "m": m, "n": n, "k": k, "dtype": dtype, "config": cfg.name},
            "seed": seed, "trials": res.trials, "search_seconds": res.seconds, "verified": simulated,
            "best": best, "schedule": best["schedule"]}


def _tiling_json(t: Tiling) -> dict[str, Any]:
    return {"bm": t.bm, "bn": t.bn, "bk": t.bk, "order": t.order, "double_buffer": t.double_buffer,
            "acc_buffers": t.acc_buffers, "resident": t.resident, "panel_buffers": t.panel_buffers,
            "stream_buffers": t.stream_buffers}


__all__ = ["Ranked", "TuneResult", "auto_tiling", "exhaustive", "pick", "rank", "rings", "sample_perfect_tile",
           "tile_candidates", "tune", "tune_matmul", "tune_space"]
