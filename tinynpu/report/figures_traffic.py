"""Report figures of DRAM traffic against its lower bounds, and of energy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure as MplFigure

from tinynpu.report.figures_common import (
    MIB,
    Figure,
    finish_figure,
)

# --------------------------------------------------------------------------------------- traffic


def bound_kind(report: Mapping[str, Any]) -> str:
    """Which I/O lower bound a report uses: ``matmul`` or ``compulsory``."""
    return str(report.get("io_bound_kind", report.get("bound_kind", "matmul")))


def traffic_data(label: str, report: Mapping[str, Any]) -> dict[str, Any]:
    """DRAM bytes moved against the I/O lower bound and the best tiling of the compiler's space."""
    moved = int(report["dram_read_bytes"]) + int(report["dram_write_bytes"])
    bound = int(report["io_lower_bound_bytes"])
    best = report.get("best_tiling_bytes")
    return {
        "label": label,
        "dram_bytes": moved,
        "io_lower_bound_bytes": bound,
        "best_tiling_bytes": None if best is None else int(best),
        "traffic_over_bound": moved / bound,
        "traffic_over_best": None if not best else moved / int(best),
        "bound_kind": bound_kind(report),
    }


def traffic(entries: Sequence[tuple[str, Mapping[str, Any]]], *, path: Path) -> Figure:
    """Grouped bars per workload: bytes moved, best tiling, I/O lower bound (MiB, log scale)."""
    rows = [traffic_data(label, rep) for label, rep in entries]
    fig = MplFigure(figsize=(9.0, 1.5 + 0.55 * len(rows) + (0.6 if len(rows) < 3 else 0)))
    ax = fig.add_subplot()
    h = 0.26
    series = (
        ("dram_bytes", "moved (read + write)", "#d62728"),
        ("best_tiling_bytes", "best tiling in the compiler's space", "#1f77b4"),
        ("io_lower_bound_bytes", "I/O lower bound", "#7f7f7f"),
    )
    for s, (key, name, color) in enumerate(series):
        ys = [i + (s - 1) * h for i in range(len(rows))]
        vals = [(row[key] or 0) / MIB for row in rows]
        ax.barh(ys, vals, height=h, color=color, label=name)
    for i, row in enumerate(rows):
        note = f"{row['traffic_over_bound']:.2f}x bound"
        if row["traffic_over_best"] is not None:
            note += f", {row['traffic_over_best']:.2f}x best"
        ax.text(row["dram_bytes"] / MIB * 1.08, i - h, note, va="center", fontsize=7)
    ax.set_yticks(range(len(rows)), [row["label"] for row in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    xmax = max(row["dram_bytes"] for row in rows) / MIB
    xmin = min(row["io_lower_bound_bytes"] for row in rows) / MIB
    ax.set_xlim(xmin / 4, xmax * 15)  # every bar visibly longer than the axis start
    ax.set_xlabel("DRAM traffic (MiB, log scale)")
    ax.set_title("DRAM traffic against the I/O lower bound and the best tiling", fontsize=10, pad=22)
    # Above the axes, so it can never cover a bar.
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    kinds = sorted({row["bound_kind"] for row in rows})
    return finish_figure(
        fig,
        path,
        title="DRAM traffic",
        caption=(
            "Bytes the simulator moved over the DRAM port (`dram_read_bytes` + `dram_write_bytes`) against "
            "`best_tiling_bytes` (least traffic of any tiling in the compiler's space, by exhaustive "
            "enumeration) "
            "and `io_lower_bound_bytes` (bound kind: " + ", ".join(kinds) + "; 'matmul' = max(compulsory, "
            "(2MNK/sqrt(S) - 2S) x in_bytes + MN x out_bytes), 'compulsory' = every tensor read or written once)."
        ),
        data={"rows": rows},
    )


# ------------------------------------------------------------------------------------- energy


def energy_data(label: str, report: Mapping[str, Any]) -> dict[str, Any]:
    """A run's energy (pJ), its breakdown per component and its energy x delay, from the run's stats."""
    return {
        "label": label,
        "energy_pj": float(report["energy_pj"]),
        "energy_breakdown_pj": {k: float(v) for k, v in report["energy_breakdown_pj"].items()},
        "edp": float(report["edp"]),
        "edp_units": str(report["edp_units"]),
    }


def energy(entries: Sequence[tuple[str, Mapping[str, Any]]], *, path: Path) -> Figure:
    """Stacked bars per workload: energy per component (uJ), with the total and the energy x delay."""
    rows = [energy_data(label, rep) for label, rep in entries]
    components = list(rows[0]["energy_breakdown_pj"])
    fig = MplFigure(figsize=(9.0, 1.6 + 0.4 * len(rows) + (0.6 if len(rows) < 3 else 0)))
    ax = fig.add_subplot()
    colors = matplotlib.colormaps["tab10"]
    left = [0.0] * len(rows)
    for c, name in enumerate(components):
        vals = [row["energy_breakdown_pj"].get(name, 0.0) / 1e6 for row in rows]
        ax.barh(range(len(rows)), vals, left=left, height=0.6, color=colors(c % 10), label=name)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    for i, row in enumerate(rows):
        ax.text(row["energy_pj"] / 1e6 * 1.02, i, f"{row['energy_pj'] / 1e6:,.3g} uJ, EDP {row['edp']:.3g} "
                f"{row['edp_units']}", va="center", fontsize=7)
    ax.set_yticks(range(len(rows)), [row["label"] for row in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(row["energy_pj"] for row in rows) / 1e6 * 1.45)  # room for the labels
    ax.set_xlabel("energy per run (uJ)")
    ax.set_title("Energy per component (stacked) and energy x delay", fontsize=10, pad=22)
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(components), frameon=False)
    ax.grid(True, axis="x", alpha=0.3)
    return finish_figure(
        fig,
        path,
        title="Energy",
        caption=(
            "`energy_pj` of each run split into its `energy_breakdown_pj` components (the MAC array "
            "computing, its leakage while it waits, ALU, each scratchpad's reads and writes, DRAM, the rest "
            "of the leakage, the clocked registers; docs/energy.md), priced with the figures the config's "
            "sizes derive; the label gives the total and `edp` (energy x delay, "
            f"{rows[0]['edp_units']})."
        ),
        data={"rows": rows},
    )

