"""Report figures of where a run sits against its bounds: the roofline and the per-unit breakdown."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure as MplFigure

from tinynpu.report.figures_common import (
    BUSY_COLOR,
    IDLE_COLOR,
    STALL_COLORS,
    Figure,
    finish_figure,
)

# ---------------------------------------------------------------------------------------------- roofline


def useful_macs(report: Mapping[str, Any]) -> int:
    """The workload's useful MACs from a report dict.

    A workload report from ``run_compiled`` carries ``macs`` = useful MACs and
    ``issued_macs`` = what the tmm steps issued (padding included); a bare
    simulator stats dict has only ``macs`` = issued, so useful MACs are
    ``macs * padding_ceiling`` when that is given.
    """
    if "issued_macs" in report:
        return int(report["macs"])
    return round(float(report["macs"]) * float(report.get("padding_ceiling", 1.0)))


def roofline_point(label: str, report: Mapping[str, Any]) -> dict[str, Any]:
    """The roofline coordinates of one workload run.

    Arithmetic intensity is useful MACs per DRAM byte actually moved (read +
    write); achieved throughput is useful MACs per simulated cycle, so padded
    edge tiles do not count as work (see :func:`useful_macs`).
    """
    dram = int(report["dram_read_bytes"]) + int(report["dram_write_bytes"])
    useful = useful_macs(report)
    return {
        "label": label,
        "macs": int(report["macs"]),
        "useful_macs": useful,
        "dram_bytes": dram,
        "cycles": int(report["cycles"]),
        "intensity_mac_per_byte": useful / dram if dram else math.inf,
        "achieved_mac_per_cycle": useful / int(report["cycles"]),
    }


def roofline(
    points: Sequence[tuple[str, Mapping[str, Any]]], *, macs_per_cycle: int, bytes_per_cycle: int, path: Path
) -> Figure:
    """Achieved MAC/cycle against arithmetic intensity, under the compute and DRAM roofs.

    Args:
        points: (label, report) per workload run.
        macs_per_cycle: Compute roof (``cfg.macs_per_cycle``).
        bytes_per_cycle: DRAM bandwidth (``cfg.dram_bytes_per_cycle``); the
            bandwidth roof is intensity x bytes_per_cycle.
        path: PNG to write.
    """
    pts = [roofline_point(label, rep) for label, rep in points]
    finite = [p["intensity_mac_per_byte"] for p in pts if math.isfinite(p["intensity_mac_per_byte"])]
    ridge = macs_per_cycle / bytes_per_cycle
    lo = min([*finite, ridge]) / 4
    hi = max([*finite, ridge]) * 4
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    fig = MplFigure(figsize=(11.5, max(5.5, 1.5 + 0.19 * len(points))))
    ax = fig.add_subplot()
    ax.plot(xs, [min(macs_per_cycle, x * bytes_per_cycle) for x in xs], color="black", lw=1.5, label="roof")
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.annotate(
        f"compute roof {macs_per_cycle} MAC/cycle",
        (hi, macs_per_cycle),
        xytext=(-4, 4),
        textcoords="offset points",
        ha="right",
        va="bottom",
        fontsize=8,
    )
    markers = "osD^v<>phX*"
    for i, p in enumerate(pts):
        ax.plot(
            [p["intensity_mac_per_byte"]],
            [p["achieved_mac_per_cycle"]],
            marker=markers[i % len(markers)],
            ls="none",
            ms=7,
            label=f"{p['label']} ({p['achieved_mac_per_cycle']:.1f} MAC/cycle)",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (useful MACs per DRAM byte)")
    ax.set_ylabel("achieved throughput (useful MACs per cycle)")
    ax.set_title("Roofline: achieved throughput vs. DRAM traffic")
    ax.grid(True, which="both", alpha=0.3)
    bottom = min([p["achieved_mac_per_cycle"] for p in pts] + [macs_per_cycle]) / 3
    ax.set_ylim(bottom=bottom, top=macs_per_cycle * 2)
    # Label the sloped roof half-way (in log space) between where it enters the plot and the ridge.
    x_label = math.sqrt(max(lo, bottom / bytes_per_cycle) * ridge)
    ax.annotate(
        f"DRAM roof {bytes_per_cycle} B/cycle",
        (x_label, x_label * bytes_per_cycle),
        xytext=(-6, 6),
        textcoords="offset points",
        ha="right",
        va="bottom",
        fontsize=8,
    )
    # Outside the axes: with a whole suite, a legend inside would cover the points near the roof.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return finish_figure(
        fig,
        path,
        title="Roofline",
        caption=(
            "Each marker is one simulated workload: useful MACs (report `macs`, the workload's own) "
            "per DRAM byte "
            "moved (`dram_read_bytes` + `dram_write_bytes`) against useful MACs per cycle (`cycles`). "
            f"The roofs are the MAC array's peak ({macs_per_cycle} MAC/cycle) and the DRAM port "
            f"({bytes_per_cycle} B/cycle); the dotted line is the ridge point ({ridge:g} MAC/B)."
        ),
        data={"macs_per_cycle": macs_per_cycle, "bytes_per_cycle": bytes_per_cycle, "points": pts},
    )


# ------------------------------------------------------------------------------------ per-unit breakdown


def unit_breakdown_data(report: Mapping[str, Any]) -> dict[str, Any]:
    """Per-unit busy, stalled-by-cause and idle cycles out of the run's total ``cycles``.

    Idle is what is left of ``cycles`` after busy and stalls; it is clamped
    at zero and a negative remainder is reported (``overlap``) rather than
    hidden, since it would mean busy and stall cycles overlap in the stats.
    """
    cycles = int(report["cycles"])
    busy: Mapping[str, int] = report.get("busy_cycles", {})
    stalls: Mapping[str, Mapping[str, int]] = report.get("stall_cycles", {})
    units = [u for u in busy if u != "control"] + [u for u in stalls if u not in busy and u != "control"]
    rows = []
    for unit in units:
        b = int(busy.get(unit, 0))
        st = {cause: int(n) for cause, n in stalls.get(unit, {}).items() if int(n) > 0}
        rest = cycles - b - sum(st.values())
        rows.append({"unit": unit, "busy": b, "stall": st, "idle": max(rest, 0), "overlap": max(-rest, 0)})
    return {"cycles": cycles, "units": rows}


def unit_breakdown(report: Mapping[str, Any], *, label: str, path: Path) -> Figure:
    """Stacked horizontal bars per unit: busy, stalled by cause, idle (fractions of the run)."""
    data = unit_breakdown_data(report)
    cycles = data["cycles"]
    causes = sorted({c for row in data["units"] for c in row["stall"]})
    fig = MplFigure(figsize=(8.0, 0.8 + 0.6 * max(len(data["units"]), 2)))
    ax = fig.add_subplot()
    names = [row["unit"] for row in data["units"]]
    y = list(range(len(names)))
    left = [0.0] * len(names)

    def stack(values: list[int], color: str, label_: str) -> None:
        widths = [100.0 * v / cycles for v in values]
        ax.barh(y, widths, left=left, color=color, label=label_, edgecolor="white", height=0.6)
        for i, w in enumerate(widths):
            if w >= 7:
                ax.text(left[i] + w / 2, y[i], f"{w:.0f}%", ha="center", va="center", fontsize=7)
            left[i] += w

    stack([row["busy"] for row in data["units"]], BUSY_COLOR, "busy")
    for i, cause in enumerate(causes):
        stack(
            [row["stall"].get(cause, 0) for row in data["units"]],
            STALL_COLORS[i % len(STALL_COLORS)],
            f"stalled: {cause}",
        )
    stack([row["idle"] for row in data["units"]], IDLE_COLOR, "idle")
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel(f"share of the run's {cycles:,} cycles (%)")
    ax.set_title(f"Per-unit cycle breakdown: {label}", fontsize=10)
    ax.legend(
        fontsize=7,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.35 if len(names) <= 3 else -0.2),
        ncol=min(4, len(causes) + 2),
        frameon=False,
    )
    return finish_figure(
        fig,
        path,
        title=f"Cycle breakdown per unit: {label}",
        caption=(
            f"For {label}: each unit's `busy_cycles`, its `stall_cycles` by cause, and the rest of the run's "
            f"{cycles:,} `cycles` as idle, in percent of the run (the dispatcher, `control`, is left out: it "
            "executes no instructions of its own)."
        ),
        data=data,
    )

