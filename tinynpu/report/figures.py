"""Report figures: pure functions from stats dicts to a PNG plus the data plotted.

Every figure function takes the numbers it plots from the report dicts of
:func:`tinynpu.compiler.run_compiled`, the simulator's ``stats.timeline`` or a
benchmark's ``--json`` object, writes one PNG and returns a :class:`Figure`
whose ``data`` is exactly what was drawn.  This module is the one place the
report code imports them from; each lives in a module of its kind:

* :mod:`tinynpu.report.figures_common`: :class:`Figure`, :class:`TimelineRow`, colours, the PNG writer;
* :mod:`tinynpu.report.figures_roofline`: the roofline and the per-unit breakdown;
* :mod:`tinynpu.report.figures_gantt`: the steady-state Gantt chart;
* :mod:`tinynpu.report.figures_traffic`: DRAM traffic against its bounds, and energy;
* :mod:`tinynpu.report.figures_landscape`: a design-space landscape, and the simulator's speed.
"""

from __future__ import annotations

from tinynpu.report.figures_common import (
    BUSY_COLOR,
    IDLE_COLOR,
    MIB,
    STALL_COLORS,
    UNIT_COLORS,
    Figure,
    TimelineRow,
    finish_figure,
    timeline_rows,
)
from tinynpu.report.figures_gantt import gantt, steady_state_window
from tinynpu.report.figures_landscape import landscape, sim_speed
from tinynpu.report.figures_roofline import roofline, roofline_point, unit_breakdown, unit_breakdown_data, useful_macs
from tinynpu.report.figures_traffic import bound_kind, energy, energy_data, traffic, traffic_data

__all__ = [
    "BUSY_COLOR",
    "IDLE_COLOR",
    "MIB",
    "STALL_COLORS",
    "UNIT_COLORS",
    "Figure",
    "TimelineRow",
    "bound_kind",
    "energy",
    "energy_data",
    "finish_figure",
    "gantt",
    "landscape",
    "roofline",
    "roofline_point",
    "sim_speed",
    "steady_state_window",
    "timeline_rows",
    "traffic",
    "traffic_data",
    "unit_breakdown",
    "unit_breakdown_data",
    "useful_macs",
]
