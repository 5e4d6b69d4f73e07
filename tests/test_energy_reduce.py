"""The row reductions' energy events: what the unit reads and combines, the same on both simulator cores.

A reduction (``vredmax``, ``vredsum``, ``vredsq``: stats class ``alu_reduce``)
steps through rows x n source rows, one per cycle, all T lanes of each through
its adder or comparator tree, and writes one destination row per logical row
(docs/energy.md, "What is counted"; docs/transformer_ops.md).  The expected
counts below are those formulas, written out independently of simulator/stats.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_sim_support import HALT, SYNC, TILE_CONFIGS, machine

from tinynpu.isa import ArchConfig

REDUCTIONS = ("vredmax", "vredsum", "vredsq")
ACC_BYTES = 4  # int32 accumulator elements


def _program(t: int, rows: int, n: int, cols: int) -> list[tuple[str, dict[str, Any]]]:
    """The three reductions over the same n segments (rows < T: the access span has rows between segments
    that the unit does not read), then a vadd of their destination rows (rows x T elements, class alu)."""
    dst = n * t  # past the source span [0, (n - 1) * T + rows)
    prog: list[tuple[str, dict[str, Any]]] = []
    for mnemonic in REDUCTIONS:
        operands = {"dst": dst, "src": 0, "rows": rows, "n": n, "cols": cols}
        prog += [(mnemonic, operands if mnemonic == "vredmax" else {**operands, "shift": 4}), SYNC]
    prog += [("vadd", {"dst": dst, "src": dst, "rows": rows}), HALT]
    return prog


def _events(cfg: ArchConfig, engine: str, rows: int, n: int, cols: int) -> dict[str, Any]:
    m = machine(_program(cfg.tile, rows, n, cols), cfg)
    rng = np.random.default_rng(7)
    m.state.acc[:n * cfg.tile] = rng.integers(-(1 << 20), 1 << 20, (n * cfg.tile, cfg.tile))
    stats = m.run(engine=engine)
    assert stats.engine == engine
    return stats.to_json()


@pytest.mark.parametrize("cfg", TILE_CONFIGS, ids=lambda c: c.name)
def test_reductions_count_every_segment_they_read(cfg: ArchConfig) -> None:
    t = cfg.tile
    rows, n, cols = t // 2, 3, t - 1
    runs = {engine: _events(cfg, engine, rows, n, cols) for engine in ("python", "native")}
    ev = runs["python"]["energy_events"]
    # Each reduction: rows * n source rows read, rows * n * T elements combined, rows rows written; the vadd
    # reads its two source rows per row and writes one, rows * T elements.
    assert ev["alu_elements"] == {"alu_reduce": 3 * rows * n * t, "alu": rows * t}
    row_bytes = t * ACC_BYTES
    assert ev["scratchpad_read_bytes"]["acc"] == (3 * rows * n + 2 * rows) * row_bytes
    assert ev["scratchpad_write_bytes"]["acc"] == (3 * rows + rows) * row_bytes
    e = cfg.energy
    assert runs["python"]["energy_breakdown_pj"]["alu"] == pytest.approx(
        3 * rows * n * t * e.alu_pj("alu_reduce") + rows * t * e.alu_pj("alu"))
    # Both cores report the same counts and the same breakdown (the stats are shared, the runs are not).
    for key in ("energy_events", "energy_breakdown_pj", "energy_pj", "cycles"):
        assert runs["native"][key] == runs["python"][key], key


def test_the_count_grows_with_the_segments_not_the_span() -> None:
    """n = 1 and n = 4 over the same rows: 4x the elements; the span (3T + rows rows) would say otherwise."""
    cfg = TILE_CONFIGS[1]
    one, four = (_events(cfg, "python", 4, n, cfg.tile)["energy_events"] for n in (1, 4))
    assert four["alu_elements"]["alu_reduce"] == 4 * one["alu_elements"]["alu_reduce"] == 4 * 3 * 4 * cfg.tile
