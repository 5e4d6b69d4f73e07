"""What every report figure shares: the :class:`Figure` record, the timeline row, the colours, the PNG writer.

The figures themselves are in the ``figures_*`` modules; :mod:`tinynpu.report.figures` gathers them.
Every figure function takes the numbers it plots from the report dicts of
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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display; must precede any figure creation

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure as MplFigure  # noqa: E402

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


def finish_figure(fig: MplFigure, path: Path, *, title: str, caption: str, data: dict[str, Any]) -> Figure:
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

