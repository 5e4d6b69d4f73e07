"""Report figures over many runs: a design-space landscape, and the simulator's own speed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.colors import LogNorm
from matplotlib.figure import Figure as MplFigure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FormatStrFormatter

from tinynpu.report.figures_common import (
    Figure,
    finish_figure,
)

# ------------------------------------------------------------------------------------- landscape


def landscape(
    x_name: str,
    x_values: Sequence[int],
    y_name: str,
    y_values: Sequence[int],
    cycles: Sequence[Sequence[float | None]],
    *,
    label: str,
    source: str,
    path: Path,
    marks: Mapping[str, tuple[int, int]] | None = None,
) -> Figure:
    """Heatmap of cycles over two tile dimensions (``None`` = tiling does not fit the scopes).

    Args:
        x_name, x_values: Tile dimension along columns and its sampled values.
        y_name, y_values: Tile dimension along rows and its values.
        cycles: ``cycles[iy][ix]`` for (y_values[iy], x_values[ix]).
        label: Workload name.
        source: Where the cycles come from (cost model or simulation), for the caption.
        path: PNG to write.
        marks: Named points to circle, e.g. {"chosen": (x, y)}.
    """
    finite = [c for row in cycles for c in row if c is not None]
    fig = MplFigure(figsize=(7.5, 6.0))
    ax = fig.add_subplot()
    grid = [[math.nan if c is None else float(c) / 1e6 for c in row] for row in cycles]
    # Log colours: one very bad corner (tiny blocks) must not wash out the differences near the optimum.
    norm = LogNorm(vmin=min(finite) / 1e6, vmax=max(finite) / 1e6) if max(finite) > min(finite) else None
    image = ax.imshow(grid, cmap="viridis_r", origin="lower", aspect="auto", norm=norm)
    cbar = fig.colorbar(image, ax=ax)
    cbar.set_label("cycles (millions, log colour scale; lower is better)")
    cbar.ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    cbar.ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    cbar.ax.tick_params(labelsize=7, which="both")
    best = min(finite)
    for iy, row in enumerate(cycles):
        for ix, c in enumerate(row):
            text = "n/a" if c is None else f"{c / 1e6:.2f}M" if c >= 1e6 else f"{c / 1e3:.0f}K"
            ax.text(
                ix,
                iy,
                text,
                ha="center",
                va="center",
                fontsize=6,
                color="black" if c is None or c < math.sqrt(best * max(finite)) else "white",
                fontweight="bold" if c == best else "normal",
            )
    for name, (xv, yv) in (marks or {}).items():
        if xv in x_values and yv in y_values:
            # A frame around the cell keeps its number readable.
            ix, iy = list(x_values).index(xv), list(y_values).index(yv)
            ax.add_patch(Rectangle((ix - 0.48, iy - 0.48), 0.96, 0.96, fill=False, ec="red", lw=2.5, label=name))
    if marks:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.08), frameon=False)
    ax.set_xticks(range(len(x_values)), [str(v) for v in x_values])
    ax.set_yticks(range(len(y_values)), [str(v) for v in y_values])
    ax.set_xlabel(f"{x_name} (elements)")
    ax.set_ylabel(f"{y_name} (elements)")
    ax.set_title(f"Tile-size landscape: {label}", fontsize=10)
    return finish_figure(
        fig,
        path,
        title=f"Tile-size search landscape: {label}",
        caption=(
            f"Cycles of {label} for each ({y_name}, {x_name}) tile size, from {source}; 'n/a' tilings do not "
            "fit the scratchpads. Bold: the least cycles in the grid; framed: the marked choice."
        ),
        data={
            "x_name": x_name,
            "x_values": list(x_values),
            "y_name": y_name,
            "y_values": list(y_values),
            "cycles": [list(row) for row in cycles],
            "marks": {k: list(v) for k, v in (marks or {}).items()},
        },
    )


# ----------------------------------------------------------------------------------- simulator speed


def sim_speed(runs: Sequence[Mapping[str, Any]], *, numpy_seconds: float, path: Path) -> Figure:
    """Wall time of each simulated run next to numpy's float32 matmul of the same size.

    Args:
        runs: One dict per simulated run with ``label``, ``wall_seconds``,
            ``instructions``, ``cycles`` and optionally ``numpy_seconds``
            (numpy timed in that run's own process; its ratio uses it).
        numpy_seconds: numpy's time for the same matmul, measured in the same
            process (the grey bar; the ratio of runs without their own).
        path: PNG to write.
    """
    labels = ["numpy float32 matmul"] + [str(r["label"]) for r in runs]
    secs = [numpy_seconds] + [float(r["wall_seconds"]) for r in runs]
    ratios = [s / float(r.get("numpy_seconds", numpy_seconds)) for r, s in zip(runs, secs[1:], strict=True)]
    # The measured ratios go under each label, so long numbers never run off the plot.
    ticks = [f"{labels[0]}\n{numpy_seconds:.3f} s"]
    for r, s, ratio in zip(runs, secs[1:], ratios, strict=True):
        ticks.append(
            f"{r['label']}\n{s:.2f} s = {ratio:.1f}x numpy\n"
            f"{int(r['instructions']) / s / 1e6:.2f} M instr/s, {int(r['cycles']) / s / 1e6:.1f} M cycles/s"
        )
    fig = MplFigure(figsize=(8.5, 1.2 + 0.75 * len(labels)))
    ax = fig.add_subplot()
    ax.barh(range(len(labels)), secs, color=["#7f7f7f"] + ["#1f77b4"] * len(runs), height=0.6)
    ax.set_yticks(range(len(labels)), ticks, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(min(secs) / 2, max(secs) * 2)
    ax.set_xlabel("wall time (s, log scale)")
    ax.set_title("Simulator speed against numpy (same process, same machine)", fontsize=10)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    return finish_figure(
        fig,
        path,
        title="Simulator speed",
        caption=(
            "Wall time of functional + timing simulation of each program, and numpy's float32 matmul "
            "of the same size (grey: the fastest measurement); each ratio is against numpy timed in the "
            "same process as that simulation. Measured, not modelled."
        ),
        data={
            "numpy_seconds": numpy_seconds,
            "runs": [dict(r, ratio_to_numpy=x) for r, x in zip(runs, ratios, strict=True)],
        },
    )
