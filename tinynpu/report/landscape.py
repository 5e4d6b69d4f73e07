"""The tile-size search landscape: modelled cycles over the output block (bm x bn) of a matmul.

The compiler's search space (:func:`tinynpu.compiler.search.tune_space`: block
sizes by perfect-tile factors, reduction chunk, loop order, buffering, which
operand stays resident) is ranked with the compiler's analytic cost model
(:func:`tinynpu.compiler.cost.estimate`).  Each cell is the least modelled
cycles over every tiling with that output block, so it is the best the
search could reach with that block; the tiling ``--schedule auto`` picks is
marked.
"""

from __future__ import annotations

from typing import Any

from tinynpu.isa import ArchConfig


def matmul_landscape(m: int, n: int, k: int, cfg: ArchConfig) -> dict[str, Any] | None:
    """Keyword arguments for :func:`tinynpu.report.figures.landscape` (plus ``command``), or None.

    Returns None when the compiler's search is not importable (a partial install).
    """
    try:
        from tinynpu.compiler.search import auto_tiling, rank, tune_space
    except ImportError:
        return None
    e = cfg.tile
    in_bytes, out_bytes = cfg.elem_bytes("a_reg"), cfg.elem_bytes("acc")
    best: dict[tuple[int, int], int] = {}
    for r in rank(m, n, k, cfg, tune_space(m, n, k, cfg), in_bytes=in_bytes, out_bytes=out_bytes):
        key = (r.tiling.bm, r.tiling.bn)
        best[key] = min(best.get(key, r.est.cycles), r.est.cycles)
    if not best:
        return None
    bms = sorted({bm for bm, _ in best})
    bns = sorted({bn for _, bn in best})
    grid: list[list[float | None]] = [[best.get((bm, bn)) for bn in bns] for bm in bms]
    chosen = auto_tiling(m, n, k, cfg, in_bytes=in_bytes, out_bytes=out_bytes).tiling
    return {
        "x_name": "output block columns bn",
        "x_values": [b * e for b in bns],
        "y_name": "output block rows bm",
        "y_values": [b * e for b in bms],
        "cycles": grid,
        "label": f"matmul {m}x{n}x{k}",
        "source": (
            "the compiler's analytic cost model (compiler/cost.py) over the tune search space, each cell "
            "minimised over reduction chunk, loop order, buffering and resident operand"
        ),
        "marks": {"block chosen by --schedule auto": (chosen.bn * e, chosen.bm * e)},  # (x = bn, y = bm)
        "command": f"tinynpu tune matmul --m {m} --n {n} --k {k}",
    }
