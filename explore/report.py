"""``DIR/index.md`` of a sweep: per-config totals, the Pareto front as a figure, the best config per objective.

A config is ranked only when every workload ran on it and it meets every
constraint; its figures are summed over the workloads (EDP: total energy x
total delay, in the simulator's EDP units).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from tinynpu.explore.spec import SweepSpec
from tinynpu.fsio import write_atomic

RUN_COMMAND = {"gemm": "matmul", "conv2d": "conv2d", "mlp": "mlp"}


@dataclass(frozen=True)
class ConfigTotals:
    """One config's figures summed over the sweep's workloads."""

    config: str
    config_file: str
    overrides: tuple[tuple[str, str], ...]
    totals: dict[str, float]
    feasible: bool
    first_workload: tuple[str, str]  # (kind, run args) of one workload, for the reproducing command


def config_totals(spec: SweepSpec, rows: list[dict[str, str]]) -> tuple[list[ConfigTotals], list[str]]:
    """Totals of every config whose workloads all succeeded, and the names of those with a failure."""
    by_config: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_config.setdefault(row["config"], []).append(row)
    complete, incomplete = [], []
    for name, group in by_config.items():
        if len(group) < len(spec.workloads) or any(r["status"] != "ok" for r in group):
            incomplete.append(name)
            continue
        totals = {"cycles": sum(float(r["cycles"]) for r in group),
                  "dram_bytes": sum(float(r["dram_bytes"]) for r in group)}
        if all(r.get("energy_pj") for r in group):
            totals["energy_pj"] = sum(float(r["energy_pj"]) for r in group)
            # The workloads run one after another: total energy x total delay (each run's edp / energy).
            delay = sum(float(r["edp"]) / float(r["energy_pj"]) for r in group if float(r["energy_pj"]))
            totals["edp"] = totals["energy_pj"] * delay
        feasible = all(c.holds(totals[c.objective]) for c in spec.constraints if c.objective in totals)
        complete.append(ConfigTotals(config=name, config_file=group[0]["config_file"],
                                     overrides=tuple((p.key, group[0][p.key]) for p in spec.parameters),
                                     totals=totals, feasible=feasible,
                                     first_workload=(group[0]["kind"], group[0]["run_args"])))
    return complete, incomplete


def pareto_front(configs: list[ConfigTotals], x: str, y: str) -> list[ConfigTotals]:
    """The configs no other config beats on both ``x`` and ``y`` (lower is better), sorted by ``x``."""
    front = [c for c in configs
             if not any(o.totals[x] <= c.totals[x] and o.totals[y] <= c.totals[y] and
                        (o.totals[x], o.totals[y]) != (c.totals[x], c.totals[y]) for o in configs)]
    return sorted(front, key=lambda c: (c.totals[x], c.totals[y]))


def _axes(spec: SweepSpec) -> tuple[str, str]:
    measured = [o for o in spec.objectives if o in ("cycles", "dram_bytes", "energy_pj", "edp")]
    x = measured[0] if measured else "cycles"
    others = [o for o in measured[1:] if o != x] or [o for o in ("dram_bytes", "cycles") if o != x]
    return x, others[0]


def _figure(path: Path, configs: list[ConfigTotals], front: list[ConfigTotals], x: str, y: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    ax.scatter([c.totals[x] for c in configs], [c.totals[y] for c in configs], s=18, color="0.6",
               label="design points")
    ax.plot([c.totals[x] for c in front], [c.totals[y] for c in front], "o-", color="tab:red",
            label="Pareto front")
    ax.set_xlabel(f"{x} (sum over workloads)")
    ax.set_ylabel(f"{y} (sum over workloads)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    write_atomic(path, buf.getvalue(), what="sweep figure")


def reproduce_command(c: ConfigTotals) -> str:
    kind, args = c.first_workload
    return f"tinynpu run {RUN_COMMAND[kind]} {args} --config {c.config_file} --no-race-check"


def write_index(spec: SweepSpec, out: Path, rows: list[dict[str, str]]) -> list[Path]:
    """Write ``out/index.md`` (and ``out/pareto.png`` when any config is complete); returns the files written."""
    configs, incomplete = config_totals(spec, rows)
    ranked = [c for c in configs if c.feasible]
    x, y = _axes(spec)
    lines = [f"# Sweep {spec.source.name}", "",
             f"{len(rows)} points ({sum(r['status'] != 'ok' for r in rows)} failed) over {len(configs)} complete "
             f"configs and {len(spec.workloads)} workloads; base config `{spec.base}`; results in "
             "`results.csv`.", ""]
    if spec.constraints:
        lines += [f"Constraints: {', '.join(f'`{c.text}`' for c in spec.constraints)}: {len(ranked)} of "
                  f"{len(configs)} configs meet them.", ""]
    if incomplete:
        lines += [f"Not ranked (a workload failed or did not run): {', '.join(sorted(incomplete))}.", ""]
    written = [out / "index.md"]
    if ranked:
        front = pareto_front(ranked, x, y)
        _figure(out / "pareto.png", ranked, front, x, y)
        written.append(out / "pareto.png")
        lines += [f"## Pareto front: {x} against {y}", "", "![Pareto front](pareto.png)", "",
                  f"| config | {' | '.join(p.key for p in spec.parameters)} | {x} | {y} |",
                  f"|---|{'---|' * len(spec.parameters)}---:|---:|"]
        lines += [f"| {c.config} | {' | '.join(v for _, v in c.overrides)} | {c.totals[x]:.0f} | {c.totals[y]:.0f} |"
                  for c in front]
        lines += ["", "## Best config per objective", ""]
        for objective in spec.objectives:
            if not all(objective in c.totals for c in ranked):
                continue
            best = min(ranked, key=lambda c, o=objective: c.totals[o])  # type: ignore[misc]
            shown = ", ".join(f"{k}={v}" for k, v in best.overrides)
            lines += [f"- **{objective}**: {best.config} ({shown}): {best.totals[objective]:.6g}; one workload "
                      f"on it: `{reproduce_command(best)}`"]
    else:
        lines += ["No config ran every workload and met the constraints, so nothing is ranked."]
    write_atomic(out / "index.md", "\n".join(lines) + "\n", what="sweep index")
    return written


__all__ = ["ConfigTotals", "config_totals", "pareto_front", "reproduce_command", "write_index"]
