"""Sensitivity of each objective to each parameter: figures over the ranked configs, and the figure.

For a parameter and an objective, the ranked configs are grouped by the
parameter's value; each group's median and best (lowest; tokens per second: highest) objective show how
much the value matters with everything else varying.  ``spread`` is the
largest median over the smallest: 1.0 means the parameter does not move the
objective at all.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinynpu.explore import figures, quantities
from tinynpu.explore.llm_workload import HIGHER_IS_BETTER
from tinynpu.explore.spec import SweepSpec

if TYPE_CHECKING:
    from tinynpu.explore.report import ConfigTotals

FIGURE = "sensitivity.png"


@dataclass(frozen=True)
class Sensitivity:
    """One objective against one parameter: per value (in spec order) the median and best objective."""

    objective: str
    parameter: str
    values: tuple[str, ...]
    median: tuple[float, ...]
    best: tuple[float, ...]

    @property
    def spread(self) -> float:
        """Largest median over the smallest (1.0: the parameter does not matter; inf: a median is 0)."""
        low = min(self.median)
        return max(self.median) / low if low > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {"values": list(self.values), "median": list(self.median), "best": list(self.best),
                "spread": self.spread}


def sensitivities(spec: SweepSpec, ranked: list[ConfigTotals]) -> list[Sensitivity]:
    """Every (objective, parameter) pair the ranked configs measure, parameters with one value left out."""
    found = []
    for objective in spec.objectives:
        if not ranked or not all(objective in c.totals for c in ranked):
            continue
        for index, parameter in enumerate(spec.parameters):
            groups: dict[str, list[float]] = {str(v): [] for v in parameter.values}
            for c in ranked:
                groups.setdefault(c.overrides[index][1], []).append(c.totals[objective])
            present = {v: g for v, g in groups.items() if g}
            if len(present) < 2:
                continue
            found.append(Sensitivity(objective=objective, parameter=parameter.key, values=tuple(present),
                                     median=tuple(statistics.median(g) for g in present.values()),
                                     best=tuple(max(g) if objective in HIGHER_IS_BETTER else min(g)
                                                for g in present.values())))
    return found


def write_figure(path: Path, spec: SweepSpec, ranked: list[ConfigTotals], found: list[Sensitivity]) -> None:
    """Small multiples: a row per objective, a column per parameter; every config as a dot, medians joined."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    objectives = list(dict.fromkeys(s.objective for s in found))
    parameters = list(dict.fromkeys(s.parameter for s in found))
    fig = Figure(figsize=(2.6 * len(parameters) + 0.8, 2.2 * len(objectives) + 0.6))
    axes = fig.subplots(len(objectives), len(parameters), squeeze=False, sharey="row")
    index = {p.key: i for i, p in enumerate(spec.parameters)}
    for s in found:
        ax = axes[objectives.index(s.objective)][parameters.index(s.parameter)]
        position = {v: i for i, v in enumerate(s.values)}
        dots = [(position[c.overrides[index[s.parameter]][1]], c.totals[s.objective]) for c in ranked
                if c.overrides[index[s.parameter]][1] in position]
        ax.scatter([x for x, _ in dots], [y for _, y in dots], s=10, color="0.6")
        ax.plot(range(len(s.values)), s.median, "o-", color="tab:blue", label="median")
        ax.set_xticks(range(len(s.values)), s.values, fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(True, alpha=0.3)
        if s.objective == objectives[-1]:
            ax.set_xlabel(s.parameter, fontsize=8)
        if s.parameter == parameters[0]:
            ax.set_ylabel(s.objective, fontsize=8)
    fig.tight_layout()
    figures.save(path, fig, figure_data(spec, ranked, found), dpi=100)


def figure_data(spec: SweepSpec, ranked: list[ConfigTotals], found: list[Sensitivity]) -> list[dict[str, Any]]:
    """What the sensitivity figure plots (its PNG carries this data's digest)."""
    index = {p.key: i for i, p in enumerate(spec.parameters)}
    return [{"objective": s.objective, "parameter": s.parameter, **s.to_json(),
             "dots": [[c.overrides[index[s.parameter]][1], c.totals[s.objective]] for c in ranked]}
            for s in found]


def markdown(found: list[Sensitivity]) -> list[str]:
    """The index.md section: the figure and a table of spreads."""
    lines = ["## Sensitivity of each objective to each parameter", "",
             f"![Sensitivity]({FIGURE})", "",
             "Each dot is a ranked config; the line joins the medians per value.  Spread: the largest median "
             "over the smallest.", "",
             "| objective | parameter | median per value | spread |", "|---|---|---|---:|"]
    for s in found:
        per_value = ", ".join(f"{v}: {quantities.objective(s.objective, m)}"
                              for v, m in zip(s.values, s.median, strict=True))
        lines.append(f"| {s.objective} | {s.parameter} | {per_value} | {quantities.ratio(s.spread)} |")
    return [*lines, ""]


__all__ = ["FIGURE", "Sensitivity", "figure_data", "markdown", "sensitivities", "write_figure"]
