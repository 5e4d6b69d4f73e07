"""The Gantt figure: one steady-state block loop of the simulator's timeline, unit by unit."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FuncFormatter

from tinynpu.report.figures_common import (
    UNIT_COLORS,
    Figure,
    TimelineRow,
    finish_figure,
    timeline_rows,
)

# ----------------------------------------------------------------------------------------- gantt


def steady_state_window(rows: Sequence[TimelineRow]) -> tuple[int, int]:
    """Program-order index range [lo, hi] of one steady-state output-block loop.

    A block loop ends with the stores of its output block.  A block may store
    column by column, interleaved with the next block's first loads, so the
    stores are clustered by their distance in program order: when the gaps
    between consecutive stores vary by more than 2x, gaps below the midpoint
    of the smallest and largest join stores into one block's group; otherwise
    every store ends a block (the naive loop).  The loop between the two
    groups around the middle of the program is neither filling nor draining
    the pipeline.  With fewer than three blocks the whole program is the window.
    """
    ordered = sorted(rows, key=lambda r: r.index)
    stores = [r.index for r in ordered if r.mnemonic == "store"]
    ends = list(stores)
    if len(stores) >= 2:
        gaps = [b - a for a, b in zip(stores, stores[1:], strict=False)]
        if max(gaps) > 2 * min(gaps):
            cut = (min(gaps) + max(gaps)) / 2
            ends = [a for a, gap in zip(stores, gaps, strict=False) if gap > cut] + [stores[-1]]
    if len(ends) < 3:
        return ordered[0].index, ordered[-1].index
    mid = len(ends) // 2
    return ends[mid - 1] + 1, ends[mid]


def _covered(spans: Iterable[tuple[int, int]], t0: int, t1: int) -> int:
    """Cycles of [t0, t1) covered by at least one span (pipelined DMA spans overlap)."""
    total, reach = 0, t0
    for start, end in sorted(spans):
        start, end = max(start, reach), min(end, t1)
        if end > start:
            total += end - start
            reach = end
    return total


def gantt(timeline: Iterable[Any], *, label: str, path: Path, max_bars: int = 5000) -> Figure:
    """Per-unit Gantt chart of one steady-state tile loop, with whatever overlaps it in time.

    Args:
        timeline: ``stats.timeline`` rows (index, unit, mnemonic, dispatch, start, end).
        label: Workload name for the title.
        path: PNG to write.
        max_bars: At most this many instructions are drawn (the first ones of
            the window in program order); the data and the title say if any were cut.
    """
    rows = sorted(timeline_rows(timeline), key=lambda r: r.index)
    rows = [r for r in rows if r.unit != "control"]
    lo, hi = steady_state_window(rows)
    loop = [r for r in rows if lo <= r.index <= hi]
    t0 = min(r.start for r in loop)
    t1 = max(r.end for r in loop)
    # Instructions of neighbouring loops that run during this one show the overlap double buffering buys.
    shown = [r for r in rows if r.end > t0 and r.start < t1]
    cut = max(len(shown) - max_bars, 0)
    shown = shown[:max_bars]
    units = [u for u in UNIT_COLORS if any(r.unit == u for r in shown)]
    units += sorted({r.unit for r in shown} - set(units))
    fig = MplFigure(figsize=(10.0, 1.2 + 0.55 * len(units)))
    ax = fig.add_subplot()
    for r in shown:
        inside = lo <= r.index <= hi
        ax.barh(
            units.index(r.unit),
            max(r.end - r.start, 1),
            left=r.start,
            height=0.6,
            color=UNIT_COLORS.get(r.unit, "#555555"),
            alpha=1.0 if inside else 0.35,
            edgecolor="black",
            linewidth=0.3 if len(shown) < 300 else 0.0,  # edges would paint dense loops black
        )
    busy = {u: _covered([(r.start, r.end) for r in shown if r.unit == u], t0, t1) for u in units}
    ax.set_yticks(
        range(len(units)),
        [f"{u}\n{100.0 * busy[u] / max(t1 - t0, 1):.0f}% active" for u in units],
        fontsize=8,
    )
    ax.invert_yaxis()
    ax.set_xlim(t0, t1)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    ax.set_xlabel("cycle")
    ax.set_title(
        f"One steady-state block loop of {label}\ninstructions {lo}..{hi}, cycles {t0:,}..{t1:,} "
        "(faded: neighbouring loops)" + (f"; first {max_bars} of {max_bars + cut} bars drawn" if cut else ""),
        fontsize=9,
    )
    ax.grid(True, axis="x", alpha=0.3)
    return finish_figure(
        fig,
        path,
        title=f"Pipeline timeline: {label}",
        caption=(
            f"Start-to-end bars of each instruction from the simulator's timeline for {label}, between the "
            f"stores that close two consecutive output blocks (instructions {lo}..{hi}, "
            f"cycles {t0:,} to {t1:,}, "
            f"{t1 - t0:,} cycles). Faded bars belong to neighbouring tile loops running at the same time; "
            "the percentage under each unit is the share of this window in which it has an "
            "instruction in flight."
        ),
        data={
            "window": {"first_index": lo, "last_index": hi, "start_cycle": t0, "end_cycle": t1},
            "bars": [r.__dict__ for r in shown],
            "bars_cut": cut,
            "active_in_window": busy,
        },
    )

