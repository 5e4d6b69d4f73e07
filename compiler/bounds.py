"""The yardsticks every run is reported against, each defined once here.

- ``io_lower_bound_bytes`` (matmul):
  ``max(compulsory, max(0, 2*M*N*K/sqrt(S) - 2*S)*in_bytes + M*N*out_bytes)``
  with ``S = cfg.onchip_elements`` (every scratchpad element, all scopes).
  ``2MNK/sqrt(S) - 2S`` is the proven I/O lower bound for matmul with S words
  of fast memory (Smith, Low, Langou, van de Geijn, "A tight I/O lower bound
  for matrix multiplication", 2019; Hong & Kung's red-blue pebble game
  without constants); the ``- 2S`` term credits data that can sit on chip at
  the start and the end.  The form without it, often quoted, is not a bound
  when the whole problem nearly fits on chip (512x512x64 moves less than
  ``2MNK/sqrt(S) + MN``), so tinynpu keeps the proven form.
  ``compulsory`` is reading every input once and writing every output once.
- ``best_tiling_bytes``: the least DRAM traffic of any tiling in the
  compiler's space (every block size bm x bn in tiles, chunk bk, block loop
  order, single/double buffers, resident panels) that fits the scopes, by
  exhaustive enumeration (:func:`least_traffic`, one for every workload) of
  the exact traffic formula of the lowering (:func:`pass_traffic`; a dense
  GEMM's is :func:`tiling_traffic`).
- ``roofline_cycles``: ``max(useful MACs / MACs per cycle, io_lower_bound_bytes / DRAM bytes per cycle)``.
- ``padding_ceiling``: useful MACs / MACs issued by tmm (whole tile steps),
  the best utilization any program issuing those steps could reach.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import replace

from tinynpu.compiler.schedule import Tiling, fits
from tinynpu.errors import UsageError
from tinynpu.intmath import ceil_div
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


def pass_traffic(m: int, n: int, t: Tiling, cfg: ArchConfig, *, a_pass_bytes: int, b_pass_bytes: int,
                 out_bytes: int, bias: int = 0) -> int:
    """DRAM bytes of the output-stationary lowering of an ``m x n`` output for ``t``, given its passes.

    Every output block reads its whole row panel of A and column panel of B
    once, so A is read once per column block and B once per row block, unless
    that operand's panel stays resident (then once); C is written once; ``bias``
    parameter rows per column (a bias, or a layer epilogue's rows: accumulator
    elements) are read once per block.  ``a_pass_bytes`` and
    ``b_pass_bytes`` are the bytes of one pass over each operand: a dense
    matrix's size, or what a conv's implicit im2col reads.
    """
    e = cfg.tile
    row_blocks = ceil_div(m, t.bm * e)
    col_blocks = ceil_div(n, t.bn * e)
    a_reads = 1 if t.resident == "a" else col_blocks
    b_reads = 1 if t.resident == "b" else row_blocks
    traffic = a_pass_bytes * a_reads + b_pass_bytes * b_reads + m * n * out_bytes
    traffic += int(bias) * n * cfg.elem_bytes("acc") * row_blocks
    return traffic


def tiling_traffic(m: int, n: int, k: int, t: Tiling, cfg: ArchConfig, *, in_bytes: int, out_bytes: int,
                   bias: int = 0) -> int:
    """DRAM bytes the lowering of a dense GEMM moves for ``t``: exact, matching the instructions it emits."""
    return pass_traffic(m, n, t, cfg, a_pass_bytes=m * k * in_bytes, b_pass_bytes=n * k * in_bytes,
                        out_bytes=out_bytes, bias=bias)


def block_shapes(m: int, n: int, cfg: ArchConfig) -> Iterator[tuple[int, int]]:
    """Every output block ``(bm, bn)`` in tiles, up to the accumulator's capacity in tiles."""
    e = cfg.tile
    mt, nt = ceil_div(m, e), ceil_div(n, e)
    acc_tiles = cfg.rows("acc") // e
    for bm in range(1, min(mt, acc_tiles) + 1):
        for bn in range(1, min(nt, acc_tiles // bm) + 1):
            yield bm, bn


def tiling_space(m: int, n: int, k: int, cfg: ArchConfig, *, bias: int = 0) -> Iterator[Tiling]:
    """Every tiling of the compiler's space that fits the scopes (the space search and enumeration share)."""
    kt = ceil_div(k, cfg.tile)
    mt, nt = ceil_div(m, cfg.tile), ceil_div(n, cfg.tile)
    for db in (True, False):
        for accb in (1, 2):
            for bm, bn in block_shapes(m, n, cfg):
                for bk in range(1, kt + 1):
                    t = Tiling(bm=bm, bn=bn, bk=bk, double_buffer=db, acc_buffers=accb)
                    if not fits(t, cfg, bias=bias):
                        break
                    yield t
                    if mt > bm and nt > bn:  # order matters only with several blocks both ways
                        yield replace(t, order="nm")
                    yield from resident_panels(t, cfg, k=k, bias=bias, panel_buffers=(2, 1))


def resident_panels(t: Tiling, cfg: ArchConfig, *, k: int, bias: int,
                    panel_buffers: tuple[int, ...]) -> Iterator[Tiling]:
    """``t`` with A (order mn) or B (order nm) resident as a whole panel (block x all of ``k``), if it fits."""
    for pb in panel_buffers:
        for order, res in (("mn", "a"), ("nm", "b")):
            r = replace(t, order=order, resident=res, panel_buffers=pb)
            if fits(r, cfg, bias=bias, k=k):
                yield r


def least_traffic(m: int, n: int, k: int, cfg: ArchConfig, traffic: Callable[[Tiling], int], *,
                  bias: int = 0) -> int:
    """The least ``traffic(t)`` over the tiling space of an ``m x n x k`` GEMM (``best_tiling_bytes``).

    Traffic depends only on the block sizes and the resident operand, so the
    enumeration visits each (bm, bn) with the smallest chunk and single
    buffers (those fit whenever anything with the same blocks does), and with
    A or B resident when a whole panel (block x all of K) fits its scope.

    Raises:
        UsageError: no tiling fits the scopes (not even one tile per buffer).
    """
    costs: list[int] = []
    for bm, bn in block_shapes(m, n, cfg):
        streamed = Tiling(bm=bm, bn=bn, bk=1, double_buffer=False)
        candidates = [streamed] if fits(streamed, cfg, bias=bias) else []
        candidates += resident_panels(streamed, cfg, k=k, bias=bias, panel_buffers=(1,))
        costs += map(traffic, candidates)
    if not costs:
        raise UsageError(f"no tiling of the {m} x {n} x {k} GEMM fits the scratchpads of config {cfg.name!r}.")
    return min(costs)


def best_tiling_bytes(m: int, n: int, k: int, cfg: ArchConfig, *, in_bytes: int, out_bytes: int,
                      bias: int = 0) -> int:
    """``best_tiling_bytes`` of a dense GEMM: :func:`least_traffic` of :func:`tiling_traffic`."""
    return least_traffic(m, n, k, cfg, lambda t: tiling_traffic(m, n, k, t, cfg, in_bytes=in_bytes,
                                                                out_bytes=out_bytes, bias=bias), bias=bias)


__all__ = ["best_tiling_bytes", "block_shapes", "compulsory_bytes", "least_traffic", "matmul_io_lower_bound",
           "pass_traffic", "resident_panels", "roofline_cycles", "tiling_space", "tiling_traffic"]
