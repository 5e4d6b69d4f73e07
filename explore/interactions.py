"""Interactions: each objective against one parameter, per value of another.

The sensitivity view (:mod:`tinynpu.explore.sensitivity`) varies one
parameter with everything else pooled, so it hides what depends on a second
one: doubling the DRAM bandwidth barely moves an 8x8 array, which is compute
bound, and speeds a 32x32 one up 1.4x.  Here every pair of swept parameters
gets a table: a row per value of the first, a column per value of the
second, each cell the median objective over the ranked configs with that pair
of values (the other parameters pooled), and per row the ratio of its first
column to its last, the change that moving the second parameter across its
range brings for that row.  Rows whose ratios differ are an interaction.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinynpu.explore import quantities
from tinynpu.explore.spec import SweepSpec

if TYPE_CHECKING:
    from tinynpu.explore.report import ConfigTotals


@dataclass(frozen=True)
class Interaction:
    """One objective over two parameters: ``median[r][c]`` at the r-th row value and the c-th column value."""

    objective: str
    rows: str
    columns: str
    row_values: tuple[str, ...]
    column_values: tuple[str, ...]
    median: tuple[tuple[float | None, ...], ...]  # None: no ranked config has this pair of values

    def ratio(self, row: int) -> float | None:
        """The row's first column over its last (None when either is missing or the last is 0)."""
        first, last = self.median[row][0], self.median[row][-1]
        return first / last if first is not None and last else None

    def to_json(self) -> dict[str, Any]:
        return {"objective": self.objective, "rows": self.rows, "columns": self.columns,
                "row_values": list(self.row_values), "column_values": list(self.column_values),
                "median": [list(r) for r in self.median],
                "first_over_last": [self.ratio(i) for i in range(len(self.row_values))]}


def interactions(spec: SweepSpec, ranked: list[ConfigTotals]) -> list[Interaction]:
    """Every (objective, parameter pair) the ranked configs measure, in spec order; pairs where either
    parameter takes fewer than two values among them are left out."""
    found = []
    keys = [p.key for p in spec.parameters]
    for objective in spec.objectives:
        if not ranked or not all(objective in c.totals for c in ranked):
            continue
        for (i, rows), (j, columns) in itertools.combinations(enumerate(keys), 2):
            row_values = _present(spec, ranked, i)
            column_values = _present(spec, ranked, j)
            if len(row_values) < 2 or len(column_values) < 2:
                continue
            cells: dict[tuple[str, str], list[float]] = {}
            for c in ranked:
                cells.setdefault((c.overrides[i][1], c.overrides[j][1]), []).append(c.totals[objective])
            median = tuple(tuple(statistics.median(cells[r, k]) if (r, k) in cells else None
                                 for k in column_values) for r in row_values)
            found.append(Interaction(objective=objective, rows=rows, columns=columns, row_values=row_values,
                                     column_values=column_values, median=median))
    return found


def _present(spec: SweepSpec, ranked: list[ConfigTotals], index: int) -> tuple[str, ...]:
    """The values of parameter ``index`` that ranked configs take, in spec order."""
    taken = {c.overrides[index][1] for c in ranked}
    return tuple(v for v in map(str, spec.parameters[index].values) if v in taken)


def markdown(found: list[Interaction]) -> list[str]:
    """The index.md section: a table per objective and parameter pair."""
    if not found:
        return []
    lines = ["## Interactions: each objective against one parameter, per value of another", "",
             "Each cell is the median over the ranked configs with that pair of values; the last column is the "
             "first column over the last, the change the column parameter brings across its range for that row.  "
             "Rows with different ratios interact.", ""]
    for f in found:
        head = f"{f.column_values[0]} / {f.column_values[-1]}"
        lines += [f"**{f.objective}** by {f.rows} (rows) and {f.columns} (columns):", "",
                  f"| {f.rows} \\ {f.columns} | {' | '.join(f.column_values)} | {head} |",
                  f"|---|{'---:|' * len(f.column_values)}---:|"]
        for r, value in enumerate(f.row_values):
            cells = [quantities.objective(f.objective, m) if m is not None else "-" for m in f.median[r]]
            ratio = f.ratio(r)
            lines.append(f"| {value} | {' | '.join(cells)} | {quantities.ratio(ratio) if ratio else '-'} |")
        lines.append("")
    return lines


__all__ = ["Interaction", "interactions", "markdown"]
