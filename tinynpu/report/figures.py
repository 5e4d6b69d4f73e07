"""Report figures: pure functions from stats dicts to a PNG plus the data plotted.

Every function takes the numbers it plots from the report dicts of
:func:`tinynpu.compiler.run_compiled` (fields in docs/architecture.md), the
simulator's ``stats.timeline`` or a benchmark's ``--json`` object, writes one
PNG with labelled axes (units included) and returns a :class:`Figure` whose
``data`` is exactly what was drawn, so tests and readers can check a figure
against the stats it claims to show.

Figures are drawn with matplotlib's object API on the Agg canvas (no pyplot
global state, no display needed), and the PNG metadata omits the matplotlib
version so a regenerated report only differs where the numbers do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display; must precede any figure creation

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.figure import Figure as MplFigure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import FormatStrFormatter, FuncFormatter  # noqa: E402

MIB = 1024 * 1024
# One colour per unit and per stall cause, stable across figures.
UNIT_COLORS = {
    "load": "#1f77b4",
    "tensor": "#d62728",
    "alu": "#2ca02c",
    "store": "#9467bd",
    "control": "#7f7f7f",
}
STALL_COLORS = ("#ff7f0e", "#bcbd22", "#e377c2", "#17becf", "#8c564b", "#aec7e8", "#ffbb78")
IDLE_COLOR = "#e0e0e0"
BUSY_COLOR = "#2ca02c"


@dataclass(frozen=True)
class Figure:
    """One written figure.

    Attributes:
        name: File stem (the PNG is ``name + ".png"``).
        path: Where the PNG was written.
        title: Heading used in the Markdown index.
        caption: What the figure shows and where its numbers come from.
        data: Exactly the values drawn (JSON-ready), for tests and ``--json``.
    """

    name: str
    path: Path
    title: str
    caption: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TimelineRow:
    """One simulated instruction: the simulator's ``stats.timeline`` row."""

    index: int
    unit: str
    mnemonic: str
    dispatch: int
    start: int
    end: int


def _finish(fig: MplFigure, path: Path, *, title: str, caption: str, data: dict[str, Any]) -> Figure:
    """Lay out ``fig``, write it to ``path`` (no software tag, so reruns give the same bytes) and describe it."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    return Figure(name=path.stem, path=path, title=title, caption=caption, data=data)


def timeline_rows(timeline: Iterable[Any]) -> list[TimelineRow]:
    """Normalise ``stats.timeline`` entries (tuples, named tuples or dicts) to :class:`TimelineRow`."""
    rows = []
    keys = ("index", "unit", "mnemonic", "dispatch", "start", "end")
    for entry in timeline:
        if isinstance(entry, Mapping):
            values = [entry[k] for k in keys]
        elif all(hasattr(entry, k) for k in keys):
            values = [getattr(entry, k) for k in keys]
        else:
            values = list(entry)[:6]
        rows.append(
            TimelineRow(int(values[0]), str(values[1]), str(values[2]), int(values[3]), int(values[4]), int(values[5]))
        )
    return rows


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
    return _finish(
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
    return _finish(
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
    return _finish(
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
    return _finish(
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
    return _finish(
        fig,
        path,
        title="Energy",
        caption=(
            "`energy_pj` of each run split into its `energy_breakdown_pj` components (MAC array, ALU, each "
            "scratchpad's reads and writes, DRAM, static power over the run's cycles), priced with the "
            "config's energy table; the label gives the total and `edp` (energy x delay, "
            f"{rows[0]['edp_units']})."
        ),
        data={"rows": rows},
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
    return _finish(
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
    return _finish(
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
