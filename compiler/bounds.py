"""The yardsticks every run is reported against, each defined once here.

- ``io_lower_bound_bytes`` (matmul):
  ``max(compulsory, max(0, 2*M*N*K/sqrt(S) - 2*S)*in_bytes + M*N*out_bytes)``
  with ``S = cfg.onchip_elements`` (every scratchpad element, all scopes).
  ``2MNK/sqrt(S) - 2S`` is the proven I/O lower bound for matmul with S words
  of fast memory (Smith, Low, Langou, van de Geijn, "A tight I/O lower bound
  for matrix multiplication", 2019; Hong & Kung's red-blue pebble game
  without constants); the ``- 2S`` term credits data that can sit on chip at
  the start and the end.  DESIGN.md writes the bound without it; that form
  is not a bound when the whole problem nearly fits on chip (512x512x64
  moves less than ``2MNK/sqrt(S) + MN``), so tinynpu keeps the proven form.
  ``compulsory`` is reading every input once and writing every output once.
- ``best_tiling_bytes``: the least DRAM traffic of any tiling in the
  compiler's space (every block size bm x bn in tiles, chunk bk, block loop
  order, single/double buffers) that fits the scopes, by exhaustive
  enumeration of :func:`tiling_space` with the exact traffic formula
  :func:`tiling_traffic` of the lowering.
- ``roofline_cycles``: ``max(useful MACs / MACs per cycle, io_lower_bound_bytes / DRAM bytes per cycle)``.
- ``padding_ceiling``: useful MACs / MACs issued by tmm (whole tile steps),
  the best utilization any program issuing those steps could reach.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from tinynpu.compiler.schedule import Tiling, fits
from tinynpu.isa import ArchConfig


def compulsory_bytes(m: int, n: int, k: int, *, in_bytes: int, out_bytes: int, bias_bytes: int = 0) -> int:
    """Read A and B once, write C once (plus a bias vector)."""
    return (m * k + n * k) * in_bytes + m * n * out_bytes + bias_bytes


def matmul_io_lower_bound(m: int, n: int, k: int, cfg: ArchConfig, *, in_bytes: int, out_bytes: int,
                          bias_bytes: int = 0) -> int:
    """``io_lower_bound_bytes`` for a GEMM (see the module docstring)."""
    s = cfg.onchip_elements
    pebble = max(0, math.ceil(2 * m * n * k / math.sqrt(s)) - 2 * s) * in_bytes + m * n * out_bytes
    floor = compulsory_bytes(m, n, k, in_bytes=in_bytes, out_bytes=out_bytes, bias_bytes=bias_bytes)
    return max(floor, pebble)


def roofline_cycles(useful_macs: int, io_bytes: int, cfg: ArchConfig) -> int:
    """``roofline_cycles`` (see the module docstring)."""
    return max(math.ceil(useful_macs / cfg.macs_per_cycle), math.ceil(io_bytes / cfg.dram_bytes_per_cycle))


def tiling_traffic(m: int, n: int, k: int, t: Tiling, cfg: ArchConfig, *, in_bytes: int, out_bytes: int,
                   bias: bool = False) -> int:
    """DRAM bytes the lowering moves for ``t``: exact, matching the instructions it emits.

    Output stationary: every output block reads its whole row panel of A and
    column panel of B once, so A is read once per column block and B once per
    row block; C is written once; a bias slice is read once per block.
    """
    e = cfg.tile
    mb = -(-m // (t.bm * e))
    nb = -(-n // (t.bn * e))
    a_reads = 1 if t.resident == "a" else nb
    b_reads = 1 if t.resident == "b" else mb
    traffic = m * k * in_bytes * a_reads + n * k * in_bytes * b_reads + m * n * out_bytes
    if bias:
        traffic += n * 4 * mb
    return traffic


def tiling_space(m: int, n: int, k: int, cfg: ArchConfig, *, bias: bool = False) -> Iterator[Tiling]:
    """Every tiling of the compiler's space that fits the scopes (the space search and enumeration share)."""
    e = cfg.tile
    mt, nt, kt = -(-m // e), -(-n // e), -(-k // e)
    acc_tiles = cfg.rows("acc") // e
    for db in (True, False):
        for accb in (1, 2):
            for bm in range(1, min(mt, acc_tiles) + 1):
                for bn in range(1, min(nt, acc_tiles // bm) + 1):
                    for bk in range(1, kt + 1):
                        t = Tiling(bm, bn, bk, "mn", db, accb, "fold")
                        if not fits(t, cfg, bias=bias):
                            break
                        yield t
                        if mt > bm and nt > bn:  # order matters only with several blocks both ways
                            yield Tiling(bm, bn, bk, "nm", db, accb, "fold")
                        for pb in (2, 1):  # a panel (block x all of K) resident, 1 or 2 buffers
                            for order, res in (("mn", "a"), ("nm", "b")):
                                r = Tiling(bm, bn, bk, order, db, accb, "fold", res, pb)
                                if fits(r, cfg, bias=bias, k=k):
                                    yield r


def best_tiling_bytes(m: int, n: int, k: int, cfg: ArchConfig, *, in_bytes: int, out_bytes: int,
                      bias: bool = False) -> int:
    """``best_tiling_bytes``: exhaustive minimum of :func:`tiling_traffic` over :func:`tiling_space`.

    Traffic depends only on the block sizes and the resident operand, so the
    enumeration visits each (bm, bn) with the smallest chunk and single
    buffers (those fit whenever anything with the same blocks does), and with
    A or B resident when a whole panel (block x all of K) fits its scope.
    """
    e = cfg.tile
    mt, nt = -(-m // e), -(-n // e)
    acc_tiles = cfg.rows("acc") // e
    best: int | None = None
    for bm in range(1, min(mt, acc_tiles) + 1):
        for bn in range(1, min(nt, acc_tiles // bm) + 1):
            for t in (Tiling(bm, bn, 1, "mn", False, 1, "fold"),
                      Tiling(bm, bn, 1, "mn", False, 1, "fold", "a", 1),
                      Tiling(bm, bn, 1, "nm", False, 1, "fold", "b", 1)):
                if not fits(t, cfg, bias=bias, k=k):
                    continue
                bytes_ = tiling_traffic(m, n, k, t, cfg, in_bytes=in_bytes, out_bytes=out_bytes, bias=bias)
                best = bytes_ if best is None else min(best, bytes_)
    if best is None:
        raise ValueError("no tiling fits the scopes")  # cannot happen: 1x1x1 always fits a valid config
    return best


__all__ = ["best_tiling_bytes", "compulsory_bytes", "matmul_io_lower_bound", "roofline_cycles",
           "tiling_space", "tiling_traffic"]
