"""``DIR/index.md`` of a sweep: per-config totals, Pareto fronts as figures, the best config per objective.

A config is named by its base and the swept values that set it apart
(``t32, dram.bytes_per_cycle=64``), never by the hash its file name carries.
A config is ranked only when every workload ran on it (and its area is known,
when area is an objective) and it meets every constraint; its figures are
summed over the workloads, each weighted by how often the workload set holds
it (EDP: total energy x total delay, in the simulator's EDP units); its area
is the config's own.  The index shows every complete config's totals, the
Pareto fronts (cycles against area and energy against cycles, those of them
the objectives allow, else the first two objectives), the best config per
objective, each objective's sensitivity to each parameter
(:mod:`tinynpu.explore.sensitivity`) and to each pair of them
(:mod:`tinynpu.explore.interactions`).  Numbers are written in their units
(:mod:`tinynpu.explore.quantities`); ``--json`` keeps them raw.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinynpu.explore import figures, interactions, llm_workload, quantities, sensitivity
from tinynpu.explore.execute import BREAKDOWN
from tinynpu.explore.spec import BASE_KEY, SweepSpec
from tinynpu.fsio import write_atomic

RUN_COMMAND = {"gemm": "matmul", "conv2d": "conv2d", "mlp": "mlp", "onnx": "onnx", "llm": "llm"}
#: The fronts shown when the objectives allow them: (x, y), better is lower (tokens per second: higher).
FRONTS = (("area_mm2", "cycles"), ("cycles", "energy_pj"), ("area_mm2", "time_per_output_token_s"),
          ("time_per_output_token_s", "energy_per_token_pj"))
UNITS = {"cycles": "cycles", "dram_bytes": "bytes", "energy_pj": "pJ", "edp": "pJ*s", "area_mm2": "mm^2",
         **llm_workload.OBJECTIVES}
#: The columns of the per-config totals table, with their headings.
TOTALS_COLUMNS = (("cycles", "cycles"), ("dram_bytes", "DRAM traffic"), ("energy_pj", "energy"), ("edp", "EDP"),
                  ("time_to_first_token_s", "time to first token"), ("time_per_output_token_s", "time per token"),
                  ("tokens_per_second", "tokens/s"), ("energy_per_token_pj", "energy per token"),
                  ("area_mm2", "area"))


@dataclass(frozen=True)
class ConfigTotals:
    """One config's figures summed over the sweep's workloads."""

    config: str
    label: str  # the base and the swept values that set this config apart, for people
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
        if len(group) < len(spec.workloads) or any(r["status"] != "ok" for r in group) or (
                "area_mm2" in spec.objectives and not group[0].get("area_mm2")):
            incomplete.append(config_label(spec, group[0]))
            continue
        # A layer the workloads have `count` times counts that often (it ran once).
        weight = [int(r.get("count") or 1) for r in group]
        totals = {name: sum(w * float(r[name]) for w, r in zip(weight, group, strict=True))
                  for name in ("cycles", "dram_bytes")}
        if all(r.get("energy_pj") for r in group):
            totals["energy_pj"] = sum(w * float(r["energy_pj"]) for w, r in zip(weight, group, strict=True))
            # The workloads run one after another: total energy x total delay (each run's edp / energy).
            delay = sum(w * float(r["edp"]) / float(r["energy_pj"]) for w, r in zip(weight, group, strict=True)
                        if float(r["energy_pj"]))
            totals["edp"] = totals["energy_pj"] * delay
            for column in BREAKDOWN:  # energy by component, where the points carry it
                if all(r.get(column) not in (None, "") for r in group):
                    totals[column] = sum(w * float(r[column]) for w, r in zip(weight, group, strict=True))
        totals |= llm_workload.config_totals(group)
        if group[0].get("area_mm2"):
            totals["area_mm2"] = float(group[0]["area_mm2"])
        feasible = all(c.holds(totals[c.objective]) for c in spec.constraints if c.objective in totals)
        complete.append(ConfigTotals(config=name, label=config_label(spec, group[0]),
                                     config_file=group[0]["config_file"],
                                     overrides=tuple((p.key, group[0][p.key]) for p in spec.parameters),
                                     totals=totals, feasible=feasible,
                                     first_workload=(group[0]["kind"], group[0]["run_args"])))
    return complete, incomplete


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def config_label(spec: SweepSpec, row: dict[str, str]) -> str:
    """``t32, dram.bytes_per_cycle=64``: the base (when several are swept) and each swept key's value
    (keys with one value are the same for every config and left out); the base's name when nothing varies."""
    parts = [row[p.key] if p.key == BASE_KEY else f"{p.key}={row[p.key]}"
             for p in spec.parameters if len(p.values) > 1]
    return ", ".join(parts) or spec.bases[0].name


def pareto_front(configs: list[ConfigTotals], x: str, y: str) -> list[ConfigTotals]:
    """The configs no other config beats on both ``x`` and ``y`` (lower is better, tokens per second higher),
    sorted by ``x``."""

    def cost(c: ConfigTotals) -> tuple[float, float]:
        return llm_workload.cost(x, c.totals[x]), llm_workload.cost(y, c.totals[y])

    front = [c for c in configs
             if not any(cost(o)[0] <= cost(c)[0] and cost(o)[1] <= cost(c)[1] and cost(o) != cost(c) for o in configs)]
    return sorted(front, key=cost)


def front_axes(spec: SweepSpec) -> list[tuple[str, str]]:
    """The (x, y) pairs whose Pareto fronts the report draws."""
    fronts = [(x, y) for x, y in FRONTS if x in spec.objectives and y in spec.objectives]
    if not fronts:
        measured = [*spec.objectives, *(o for o in ("cycles", "dram_bytes") if o not in spec.objectives)]
        fronts = [(measured[0], measured[1])]
    return fronts


def figure_name(x: str, y: str) -> str:
    return f"pareto-{y}-vs-{x}.png"


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
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(y))
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    figures.save(path, fig, front_data(configs, front, x, y), dpi=110)


def front_data(configs: list[ConfigTotals], front: list[ConfigTotals], x: str, y: str) -> dict[str, Any]:
    """What a Pareto-front figure plots (its PNG carries this data's digest)."""
    return {"x": x, "y": y, "points": [[c.config, c.totals[x], c.totals[y]] for c in configs],
            "front": [c.config for c in front]}


def _label(name: str) -> str:
    return f"{name} ({UNITS[name]}{', the config' if name == 'area_mm2' else ', sum over workloads'})"


def reproduce_command(c: ConfigTotals) -> str:
    kind, args = c.first_workload
    # a network run or a generation has no race checker to turn off (their programs run unchecked unless a
    # test asks)
    checks = "" if kind in ("onnx", llm_workload.KIND) else " --no-race-check"
    return f"tinynpu run {RUN_COMMAND[kind]} {args} --config {c.config_file}{checks}"


def best_configs(spec: SweepSpec, ranked: list[ConfigTotals]) -> dict[str, ConfigTotals]:
    """The ranked config with the best total (the lowest; tokens per second the highest), per objective (the
    objectives every ranked config has)."""
    return {objective: min(ranked, key=lambda c, o=objective: llm_workload.cost(o, c.totals[o]))  # type: ignore[misc]
            for objective in spec.objectives if ranked and all(objective in c.totals for c in ranked)}


def networks_left_out(spec: SweepSpec) -> str:
    """What an ONNX network's totals leave out (the sentence ``tinynpu run onnx`` prints too), or "" when the
    spec has no network."""
    if not any(w.kind == "onnx" for w in spec.workloads):
        return ""
    from tinynpu.compiler.onnx.verify.totals import LEFT_OUT

    return LEFT_OUT


def summary(spec: SweepSpec, rows: list[dict[str, str]]) -> dict[str, Any]:
    """The results in brief, for ``--json``: configs ranked, the best per objective, the sensitivities."""
    configs, incomplete = config_totals(spec, rows)
    ranked = [c for c in configs if c.feasible]
    return {
        "configs": len(configs) + len(incomplete), "ranked": len(ranked),
        **({"not_counted": text} if (text := networks_left_out(spec)) else {}),
        "totals": [{"config": c.config, "label": c.label, "overrides": dict(c.overrides), "ranked": c.feasible,
                    **c.totals} for c in configs],
        "best": {o: {"config": c.config, "label": c.label, "overrides": dict(c.overrides), "value": c.totals[o],
                     "command": reproduce_command(c)} for o, c in best_configs(spec, ranked).items()},
        "sensitivity": [{"objective": s.objective, "parameter": s.parameter, **s.to_json()}
                        for s in sensitivity.sensitivities(spec, ranked)],
        "interactions": [i.to_json() for i in interactions.interactions(spec, ranked)],
    }


def totals_table(spec: SweepSpec, configs: list[ConfigTotals]) -> list[str]:
    """The index.md section: every complete config's totals over the workloads, in their units."""
    if not configs:
        return []
    columns = [(key, head) for key, head in TOTALS_COLUMNS if any(key in c.totals for c in configs)]
    left_out = networks_left_out(spec)
    weighted = sum(w.count for w in spec.workloads)
    lines = ["## Every config: totals over the workloads", "",
             f"Each of the {_count(len(spec.workloads), 'workload')} counted as often as the set holds it "
             f"({weighted} in all); EDP is the total energy times the total delay; area is the config's own.  "
             "Ranked: ran every workload and meets the constraints.", "",
             *([f"ONNX networks: every accelerator program counted, as `tinynpu run onnx` counts them; {left_out}.",
                ""] if left_out else []),
             f"| config | {' | '.join(head for _, head in columns)} | ranked |",
             f"|---|{'---:|' * len(columns)}---|"]
    for c in configs:
        cells = [quantities.objective(key, c.totals[key]) if key in c.totals else "-" for key, _ in columns]
        lines.append(f"| {c.label} | {' | '.join(cells)} | {'yes' if c.feasible else 'no: a constraint'} |")
    return [*lines, ""]


def breakdown_table(configs: list[ConfigTotals]) -> list[str]:
    """The index.md section: each config's total energy by component (docs/energy.md says what each is)."""
    columns = [c for c in BREAKDOWN if any(c in config.totals for config in configs)]
    if not columns:
        return []
    heads = [c.removeprefix("energy_").removesuffix("_pj") for c in columns]
    lines = ["## Energy by component", "", "Totals over the workloads; docs/energy.md defines each component.", "",
             f"| config | {' | '.join(heads)} |", f"|---|{'---:|' * len(columns)}"]
    for c in configs:
        cells = [quantities.objective("energy_pj", c.totals[k]) if k in c.totals else "-" for k in columns]
        lines.append(f"| {c.label} | {' | '.join(cells)} |")
    return [*lines, ""]


def write_index(spec: SweepSpec, out: Path, rows: list[dict[str, str]]) -> list[Path]:
    """Write ``out/index.md`` (and, when any config is ranked, a ``pareto-Y-vs-X.png`` per front and
    ``sensitivity.png``); returns the files written."""
    configs, incomplete = config_totals(spec, rows)
    ranked = [c for c in configs if c.feasible]
    bases = ", ".join(f"`{b.name}`" for b in spec.bases)  # as the spec names them: no machine's paths
    lines = [f"# Sweep {spec.source.name}", "",
             f"{len(rows)} points ({sum(r['status'] != 'ok' for r in rows)} failed) over "
             f"{_count(len(configs), 'complete config')} and {_count(len(spec.workloads), 'workload')}; "
             f"base config{'s' if len(spec.bases) > 1 else ''} "
             f"{bases}; results in `results.csv`.", ""]
    if spec.constraints:
        lines += [f"Constraints: {', '.join(f'`{c.text}`' for c in spec.constraints)}: {len(ranked)} of "
                  f"{len(configs)} configs meet them.", ""]
    if incomplete:
        lines += [f"Not ranked (a workload failed or did not run, or its area is unknown): "
                  f"{', '.join(sorted(incomplete))}.", ""]
        errors = sorted({r["area_error"] for r in rows if r.get("area_error")})
        lines += [f"Area failed: {e}" for e in errors] + ([""] if errors else [])
    written = [out / "index.md"]
    lines += totals_table(spec, configs)
    lines += breakdown_table(configs)
    if ranked:
        for x, y in front_axes(spec):
            front = pareto_front(ranked, x, y)
            _figure(out / figure_name(x, y), ranked, front, x, y)
            written.append(out / figure_name(x, y))
            lines += [f"## Pareto front: {y} against {x}", "", f"![Pareto front: {y} against {x}]({figure_name(x, y)})",
                      "", f"| config | {x} | {y} |", "|---|---:|---:|"]
            lines += [f"| {c.label} | {quantities.objective(x, c.totals[x])} | "
                      f"{quantities.objective(y, c.totals[y])} |" for c in front]
            lines += [""]
        lines += ["## Best config per objective", ""]
        for objective, best in best_configs(spec, ranked).items():
            lines += [f"- **{objective}**: {best.label}: {quantities.objective(objective, best.totals[objective])}; "
                      f"one workload on it: `{reproduce_command(best)}`"]
        lines += [""]
        found = sensitivity.sensitivities(spec, ranked)
        if found:
            sensitivity.write_figure(out / sensitivity.FIGURE, spec, ranked, found)
            written.append(out / sensitivity.FIGURE)
            lines += sensitivity.markdown(found)
        lines += interactions.markdown(interactions.interactions(spec, ranked))
    else:
        lines += ["No config ran every workload and met the constraints, so nothing is ranked."]
    write_atomic(out / "index.md", "\n".join(lines) + "\n", what="sweep index")
    return written


__all__ = ["ConfigTotals", "best_configs", "breakdown_table", "config_label", "config_totals", "figure_name",
           "front_axes", "front_data", "pareto_front", "reproduce_command", "summary", "totals_table", "write_index"]
