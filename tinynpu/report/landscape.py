"""The tile-size search landscape: modelled cycles over the output block (bm x bn) of a matmul.

For each output block of ``bm x bn`` tiles (powers of two that fit ``acc``),
the compiler's analytic cost model (:func:`tinynpu.compiler.cost.estimate`) is
minimised over the remaining choices of the compiler's space (reduction chunk
``bk`` in powers of two, loop order, double buffering, one or two acc
buffers), so each cell is the best the search could reach with that block.
"""

from __future__ import annotations

from typing import Any

from tinynpu.isa import ArchConfig


def _powers(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def matmul_landscape(m: int, n: int, k: int, cfg: ArchConfig) -> dict[str, Any] | None:
    """Keyword arguments for :func:`tinynpu.report.figures.landscape` (plus ``command``), or None.

    Returns None when the compiler's cost model is not importable (a partial install).
    """
    try:
        from tinynpu.compiler.cost import estimate
        from tinynpu.compiler.schedule import Tiling, fits
    except ImportError:
        return None
    e = cfg.tile
    mt, nt, kt = -(-m // e), -(-n // e), -(-k // e)
    acc_tiles = cfg.rows("acc") // e
    in_bytes, out_bytes = cfg.elem_bytes("a_reg"), cfg.elem_bytes("acc")
    bms = _powers(min(mt, acc_tiles))
    bns = _powers(min(nt, acc_tiles))
    grid: list[list[float | None]] = []
    best: tuple[float, int, int, Any] | None = None
    for bm in bms:
        row: list[float | None] = []
        for bn in bns:
            cell: float | None = None
            for bk in _powers(kt):
                for order in ("mn", "nm"):
                    for db in (True, False):
                        for accb in (1, 2):
                            t = Tiling(bm, bn, bk, order, db, accb, "fold")
                            if not fits(t, cfg):
                                continue
                            c = estimate(m, n, k, t, cfg, in_bytes=in_bytes, out_bytes=out_bytes).cycles
                            if cell is None or c < cell:
                                cell = c
                            if best is None or c < best[0]:
                                best = (c, bm * e, bn * e, t)
            row.append(cell)
        grid.append(row)
    if best is None:
        return None
    return {
        "x_name": "output block columns bn",
        "x_values": [b * e for b in bns],
        "y_name": "output block rows bm",
        "y_values": [b * e for b in bms],
        "cycles": grid,
        "label": f"matmul {m}x{n}x{k}",
        "source": (
            "the compiler's analytic cost model (compiler/cost.py), each cell minimised over the reduction "
            "chunk "
            "(powers of two), loop order, double buffering and acc buffers"
        ),
        "marks": {"model's best": (best[2], best[1])},  # (x = bn, y = bm)
        "command": f"tinynpu tune matmul --m {m} --n {n} --k {k}",
    }
