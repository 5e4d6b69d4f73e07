"""Assemble a report directory: index.md, figures/*.png and report.json.

:func:`write_report` takes finished workload results (report dicts from the
compiler's ``run_compiled``) and optional extra measurements (tile-size
landscape, simulator speed, co-simulation), draws every figure through
:mod:`tinynpu.report.figures`, and writes the Markdown index with the
command that reproduces each number.  ``report.json`` holds every report
dict and every figure's plotted data, so a reader can check a figure against
the stats it claims to show.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinynpu import fsio
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig
from tinynpu.report import figures as F
from tinynpu.report.markdown import MARKER, Section, render, table
from tinynpu.report.suite import Result

MIB = 1024 * 1024
FIG_DIR = "figures"


@dataclass(frozen=True)
class Written:
    """What a report run wrote."""

    index: Path
    files: tuple[Path, ...]
    figures: tuple[F.Figure, ...]
    summary: dict[str, Any]


REPORT_FILES = ("index.md", "report.json")


def prepare_dir(out: Path, *, force: bool) -> None:
    """Check, before any work, that ``out`` may receive a report without clobbering anything the user made.

    An existing directory is reused only if it is empty or holds an earlier
    tinynpu report (its index.md starts with the generator's marker);
    otherwise ``--force`` is needed.  Nothing is written here: :func:`write_report`
    replaces the directory as a whole, so no stale figure survives and a
    killed run leaves the old report.
    """
    fsio.check_output_dir(out, (), force=True, ours=True, what="report directory")  # a directory we may write
    # An empty figures/ left by a run that failed early does not count as content.
    content = (
        [p for p in out.iterdir() if not (p.name == FIG_DIR and p.is_dir() and not any(p.iterdir()))]
        if out.is_dir()
        else []
    )
    if content:
        index = out / "index.md"
        ours = index.is_file() and index.read_text(encoding="utf-8", errors="replace").startswith(MARKER)
        if not ours and not force:
            raise UsageError(
                f"report directory {out} is not empty and holds no earlier tinynpu report (no {index.name} "
                "with the generator's marker); choose another -o or pass --force to write into it."
            )
        fsio.check_output_dir(out, REPORT_FILES, force=True, ours=True, what="report directory")


def _pct(x: float) -> str:
    return f"{100.0 * x:.2f}%"  # two decimals: 99.96% must not print as 100.0%


def summary_rows(results: Sequence[Result]) -> list[dict[str, Any]]:
    """One row per workload with the report's yardstick ratios (all from the report dicts)."""
    rows = []
    for r in results:
        rep = r.report
        moved = int(rep["dram_read_bytes"]) + int(rep["dram_write_bytes"])
        ceiling = float(rep.get("padding_ceiling", 1.0))
        rows.append(
            {
                "workload": r.label,
                "group": r.workload.group,
                "command": r.workload.command,
                "cycles": int(rep["cycles"]),
                "roofline_cycles": int(rep["roofline_cycles"]),
                "utilization": float(rep["utilization"]),
                "padding_ceiling": ceiling,
                "util_over_ceiling": float(rep["utilization"]) / ceiling if ceiling else 0.0,
                "dram_bytes": moved,
                "traffic_over_bound": moved / int(rep["io_lower_bound_bytes"]),
                "traffic_over_best": moved / int(rep["best_tiling_bytes"]) if rep.get("best_tiling_bytes") else None,
                "bound_kind": F.bound_kind(rep),
                "verified": bool(rep["verified"]),
                "sim_seconds": float(rep["simulator_wall_seconds"]),
                "compile_seconds": r.compile_seconds,
                "instructions": _instr_total(rep),
                "energy_pj": float(rep["energy_pj"]),
                "energy_breakdown_pj": dict(rep["energy_breakdown_pj"]),
                "edp": float(rep["edp"]),
                "edp_units": str(rep["edp_units"]),
            }
        )
    return rows


def _instr_total(rep: Mapping[str, Any]) -> int:
    instr = rep.get("instructions", 0)
    return int(instr["total"]) if isinstance(instr, Mapping) else int(instr)


def summary_table(rows: Sequence[Mapping[str, Any]]) -> str:
    headers = [
        "workload",
        "cycles",
        "roofline",
        "util",
        "pad. ceiling",
        "util / ceiling",
        "DRAM MiB",
        "/ I/O bound",
        "/ best tiling",
        "verified",
        "sim s",
    ]
    body = [
        [
            row["workload"],
            row["cycles"],
            row["roofline_cycles"],
            _pct(row["utilization"]),
            _pct(row["padding_ceiling"]),
            _pct(row["util_over_ceiling"]),
            f"{row['dram_bytes'] / MIB:.2f}",
            f"{row['traffic_over_bound']:.2f}x",
            "-" if row["traffic_over_best"] is None else f"{row['traffic_over_best']:.2f}x",
            row["verified"],
            f"{row['sim_seconds']:.2f}",
        ]
        for row in rows
    ]
    return table(headers, body, align="lrrrrrrrrlr")


def energy_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Energy per run with its largest components' shares, and energy x delay."""
    headers = ["workload", "energy uJ", "largest components", "EDP"]
    body = []
    for row in rows:
        total = row["energy_pj"]
        parts = sorted(row["energy_breakdown_pj"].items(), key=lambda kv: -kv[1])[:3]
        body.append([row["workload"], f"{total / 1e6:,.3f}",
                     ", ".join(f"{k} {v / total:.0%}" for k, v in parts if v),
                     f"{row['edp']:.4g} {row['edp_units']}"])
    return table(headers, body, align="lrlr")


def write_report(
    out: Path,
    results: Sequence[Result],
    *,
    cfg: ArchConfig,
    title: str,
    intro: str,
    command: str,
    featured: Sequence[Result] = (),
    speed: Mapping[str, Any] | None = None,
    landscape: Mapping[str, Any] | None = None,
    cosim: Mapping[str, Any] | None = None,
    network: Mapping[str, Any] | None = None,
) -> Written:
    """Draw every figure and write index.md and report.json into ``out`` (already prepared).

    Args:
        out: Report directory (see :func:`prepare_dir`).
        results: Every workload run, in table order.
        cfg: The config they ran on (roofs, units).
        title: Report heading.
        intro: First paragraph.
        command: The command that regenerates the whole report.
        featured: Runs that get a per-unit breakdown and a Gantt chart (need a timeline).
        speed: ``{"runs": [...], "numpy_seconds": s, "command": ...}`` for the simulator-speed figure.
        landscape: keyword arguments of :func:`figures.landscape` plus ``command``.
        cosim: ``{"rows": [...], "command": ...}`` RTL-vs-model cycles, if co-simulation ran.
        network: ``{"runs": [...]}`` ONNX network runs (:mod:`tinynpu.report.network`), if any.
    """
    with fsio.replace_dir(out, what="report directory") as stage:
        written = _write_into(stage, out, results, cfg=cfg, title=title, intro=intro, command=command,
                              featured=featured, speed=speed, landscape=landscape, cosim=cosim,
                              network=network)
    return written


def _write_into(
    out: Path,
    final: Path,
    results: Sequence[Result],
    *,
    cfg: ArchConfig,
    title: str,
    intro: str,
    command: str,
    featured: Sequence[Result],
    speed: Mapping[str, Any] | None,
    landscape: Mapping[str, Any] | None,
    cosim: Mapping[str, Any] | None,
    network: Mapping[str, Any] | None = None,
) -> Written:
    figs_dir = out / FIG_DIR
    rows = summary_rows(results)
    all_verified = all(row["verified"] for row in rows)
    sections = [_summary_section(rows, cfg, all_verified)]
    figures = _overview_figures(results, rows, cfg, figs_dir, sections)
    for r in featured:
        figures += _featured_figures(r, figs_dir, sections)
    if landscape is not None:
        figures.append(_landscape_figure(landscape, command, figs_dir, sections))
    if speed is not None:
        fig = F.sim_speed(speed["runs"], numpy_seconds=float(speed["numpy_seconds"]), path=figs_dir / "sim_speed.png")
        figures.append(fig)
        sections.append(Section("Simulator speed", str(speed.get("note", "")), (str(speed["command"]),), (fig,)))
    sections.append(_cosim_section(cosim))
    if network is not None and network.get("runs"):
        from tinynpu.report.network import network_sections

        net_sections, net_figures = network_sections(network, figs_dir)
        sections += net_sections
        figures += net_figures
    sections.append(Section("Configuration", _config_text(cfg), (command,)))
    index = out / "index.md"
    index.write_text(render(title, intro, sections, index_dir=out), encoding="utf-8")
    # Written into the staging directory ``out``, reported as where it will be: ``final``.
    figures = [dataclasses.replace(f, path=final / f.path.relative_to(out)) for f in figures]
    summary: dict[str, Any] = {
        "index": str(final / index.name),
        "config": cfg.name,
        "command": command,
        "workloads": [dict(row, report=r.report) for row, r in zip(rows, results, strict=True)],
        "figures": {f.name: {"path": str(f.path), "caption": f.caption, "data": f.data} for f in figures},
        "cosim": None if cosim is None else dict(cosim),
        "network": None if network is None else dict(network),
        "all_verified": all_verified and all(r["verified"] for r in (network or {}).get("runs", [])),
    }
    data_path = out / "report.json"
    data_path.write_text(json.dumps(summary, indent=1, default=_json_default) + "\n", encoding="utf-8")
    index, data_path = final / index.name, final / data_path.name
    files = (index, data_path, *(f.path for f in figures))
    summary["files"] = [str(p) for p in files]
    return Written(index, files, tuple(figures), summary)


def _summary_section(rows: Sequence[Mapping[str, Any]], cfg: ArchConfig, all_verified: bool) -> Section:
    """The report's first section: one row per run, and the command of each."""
    return Section(
        "Summary",
        "Every workload compiled, simulated with timing, and checked against numpy "
        f"({'all verified' if all_verified else '**NOT all verified**'}). Cycles are the simulator's; "
        "`roofline` is max(useful MACs / peak, I/O lower bound / DRAM bandwidth); utilization = "
        "useful MACs / "
        "(cycles x peak); the padding ceiling is useful MACs / MACs issued (edge tiles padded to "
        f"{cfg.tile}), so util / ceiling is the MAC array's own utilization. Each row is reproduced "
        "by the "
        "command listed below the table, in the same order.\n\n" + summary_table(rows),
        tuple(row["command"] for row in rows),
    )


def _overview_figures(results: Sequence[Result], rows: Sequence[Mapping[str, Any]], cfg: ArchConfig,
                      figs_dir: Path, sections: list[Section]) -> list[F.Figure]:
    """The figures over every run (roofline, DRAM traffic, energy); their sections go to ``sections``."""
    runs = [(r.label, r.report) for r in results]
    roof = F.roofline(runs, macs_per_cycle=cfg.macs_per_cycle, bytes_per_cycle=cfg.dram_bytes_per_cycle,
                      path=figs_dir / "roofline.png")
    from_summary = "One point per run of the Summary table; the commands listed there reproduce every number."
    sections.append(Section("Roofline", from_summary, (), (roof,)))
    traffic = F.traffic(runs, path=figs_dir / "traffic.png")
    sections.append(Section("DRAM traffic", from_summary.replace("point", "group of bars"), (), (traffic,)))
    power = F.energy(runs, path=figs_dir / "energy.png")
    sections.append(Section("Energy", from_summary.replace("point", "bar") + "\n\n" + energy_table(rows),
                            (), (power,)))
    return [roof, traffic, power]


def _featured_figures(r: Result, figs_dir: Path, sections: list[Section]) -> list[F.Figure]:
    """A featured run's per-unit breakdown and Gantt chart; its section goes to ``sections``."""
    slug = _slug(r.label)
    figs = [F.unit_breakdown(r.report, label=r.label, path=figs_dir / f"units_{slug}.png")]
    if r.timeline:
        figs.append(F.gantt(r.timeline, label=r.label, path=figs_dir / f"gantt_{slug}.png"))
    sim_dir = f"out/{slug}"
    body = (
        "`tinynpu run` reports the busy cycles; the stall causes and the per-instruction timeline come from "
        "the simulator itself (`tinynpu sim --json` and `--trace`, a Perfetto trace of the same timeline), "
        "on the same program; timing does not depend on the data."
    )
    commands = (
        r.workload.command,
        r.workload.command.replace("tinynpu run", "tinynpu compile").replace(" --json", f" -o {sim_dir} --force"),
        f"tinynpu sim {sim_dir}/program.bin --json --trace {sim_dir}/trace.json",
    )
    sections.append(Section(f"Where the cycles go: {r.label}", body, commands, tuple(figs)))
    return figs


def _landscape_figure(landscape: Mapping[str, Any], command: str, figs_dir: Path,
                      sections: list[Section]) -> F.Figure:
    """The tile-size search landscape; its section goes to ``sections``."""
    kwargs = {k: v for k, v in landscape.items() if k != "command"}
    fig = F.landscape(**kwargs, path=figs_dir / "landscape.png")
    sections.append(
        Section(
            "Tile-size search landscape",
            "The grid is evaluated by this report (the first command regenerates it); `tinynpu tune` "
            "runs the "
            "compiler's search over the same cost model and prints the schedule it picks.",
            (command, str(landscape["command"])),
            (fig,),
        )
    )
    return fig


def _cosim_section(cosim: Mapping[str, Any] | None) -> Section:
    """RTL against the model, or why the report has no co-simulation."""
    if cosim is not None and cosim.get("rows"):
        rows_c = cosim["rows"]
        agree = all(int(r["rtl_cycles"]) == int(r["model_cycles"]) and r.get("outputs_match") for r in rows_c)
        ran = sorted({str(r["simulator"]).capitalize() for r in rows_c if r.get("simulator")})
        ran = ran or ["Verilator or Icarus"]
        body = (
            f"The same binaries run on the Verilog RTL ({' and '.join(ran)}, cocotb) and on the Python simulator; "
            "every output tensor is compared bit for bit and every instruction's (dispatch, start, end) cycle "
            f"against the simulator's timeline. {'They agree on every program.' if agree else '**They differ.**'}"
            "\n\n" + cosim_table(rows_c)
        )
        commands = tuple(str(r["command"]) for r in rows_c if "command" in r) or (str(cosim["command"]),)
        return Section("RTL vs. model cycles", body, commands)
    why = cosim.get("skipped", "") if cosim is not None else ""
    return Section(
        "RTL vs. model cycles",
        "No co-simulation in this report"
        + (f": {why}" if why else "")
        + ". (`--run-cosim` co-simulates small workloads on Verilator, else Icarus; `--cosim FILE` tabulates "
        "the JSON of `tinynpu cosim --json`.)",
    )


def cosim_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """RTL cycles against the simulator's for each co-simulated program."""
    body = [
        [
            str(r.get("workload", r.get("name", "?"))),
            int(r["rtl_cycles"]),
            int(r["model_cycles"]),
            int(r["rtl_cycles"]) - int(r["model_cycles"]),
            str(r.get("instructions_compared", "-")),
            str(r.get("trace_mismatches", "-")),
            bool(r.get("outputs_match", False)),
        ]
        for r in rows
    ]
    headers = [
        "program",
        "RTL cycles",
        "model cycles",
        "difference",
        "instructions compared",
        "timing mismatches",
        "outputs match",
    ]
    return table(headers, body, align="lrrrrrl")


def _config_text(cfg: ArchConfig) -> str:
    items = [
        ("config", cfg.name),
        ("MAC array peak", f"{cfg.macs_per_cycle} MAC/cycle"),
        ("DRAM port", f"{cfg.dram_bytes_per_cycle} B/cycle, {cfg.dram_latency_cycles} cycles latency"),
        ("scratchpads", ", ".join(f"{k} {cfg.scope_bytes(k) // 1024} KiB" for k, _ in cfg.scope_rows)),
        ("dtypes", f"{cfg.input_dtype} x {cfg.input_dtype} -> {cfg.acc_dtype}"),
    ]
    return table(["parameter", "value"], [list(i) for i in items], align="ll")


def _slug(label: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in label).strip("_").lower()


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
