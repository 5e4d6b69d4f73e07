"""``tinynpu report llm``: a decoder's generation as a report (index.md, the two LLM figures, report.json).

The run is ``tinynpu run llm``'s (:func:`tinynpu.compiler.onnx.llm.run_llm`): made here from a model, or
read from the JSON a run printed (``tinynpu run llm ... --json > run.json``).  The figures plot the run's
own per-step numbers (:mod:`tinynpu.report.figures_llm`); ``report.json`` keeps the run and every figure's
plotted data beside each other, so a reader can check one against the other.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tinynpu import fsio
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig
from tinynpu.report.build import FIG_DIR, Written
from tinynpu.report.figures_llm import llm_roofline, time_per_token
from tinynpu.report.markdown import Section, render, table

#: The fields of a run's JSON the report reads (top level, then per step).
RUN_FIELDS = ("model", "config", "clock_mhz", "batch", "prompt", "generated", "verified", "steps",
              "time_to_first_token_s", "time_per_output_token_s", "tokens_per_second", "decode_over_lower_bound",
              "decode_energy_per_token_pj", "decode_utilization", "batch1_row_ceiling")
STEP_FIELDS = ("step", "past_tokens", "new_tokens", "cycles", "seconds", "cycles_by_kind", "macs", "dram_bytes",
               "lower_bound_cycles")


def check_run(run: Any, origin: str) -> dict[str, Any]:
    """The run's JSON, refused with the first missing field named when it is not ``tinynpu run llm --json``'s.

    Raises:
        UsageError: not an object, a field missing, or a step lacking one.
    """
    if not isinstance(run, dict):
        raise UsageError(f"{origin}: expected the JSON object of `tinynpu run llm ... --json`, not a "
                         f"{type(run).__name__}.")
    missing = [f for f in RUN_FIELDS if f not in run]
    if missing:
        raise UsageError(f"{origin}: the run lacks the field {missing[0]!r} of `tinynpu run llm ... --json`; "
                         "give that command's output.")
    if not isinstance(run["steps"], list) or not run["steps"]:
        raise UsageError(f"{origin}: the run's 'steps' must be a non-empty list of its steps' figures.")
    for index, step in enumerate(run["steps"]):
        lacking = [f for f in STEP_FIELDS if not isinstance(step, dict) or f not in step]
        if lacking:
            raise UsageError(f"{origin}: step {index} lacks the field {lacking[0]!r} of `tinynpu run llm --json`.")
    return run


def check_config(run: Mapping[str, Any], cfg: ArchConfig, origin: str) -> None:
    """The roofs must be the run's config's: its name and clock.

    Raises:
        UsageError: naming both configs.
    """
    if cfg.name != run["config"] or float(cfg.clock_mhz) != float(run["clock_mhz"]):
        raise UsageError(f"{origin}: the run was on config {run['config']!r} at {run['clock_mhz']} MHz, but the "
                         f"report's config is {cfg.name!r} at {cfg.clock_mhz} MHz; pass --config with the run's "
                         "config (its name or YAML path).")


def _summary(run: Mapping[str, Any]) -> Section:
    decode = len(run["steps"]) - 1
    rows = [["time to first token", f"{run['time_to_first_token_s'] * 1e6:.2f} us"],
            ["time per output token", f"{run['time_per_output_token_s'] * 1e6:.2f} us (mean of {decode} decode "
                                      "steps)"],
            ["tokens per second", f"{run['tokens_per_second']:,.0f} (batch {run['batch']})"],
            ["decode against its DRAM lower bound", f"{run['decode_over_lower_bound']:.2f}x"],
            ["energy per token (accelerator)", f"{run['decode_energy_per_token_pj'] / 1e6:.3f} uJ"],
            ["decode utilization (batch-1 ceiling)", f"{run['decode_utilization']:.1%} "
                                                     f"({run['batch1_row_ceiling']:.1%})"],
            ["tokens equal to the integer reference", run["verified"]]]
    body = (f"`{run['model']}` on config `{run['config']}` at {run['clock_mhz']:.0f} MHz: a prompt of "
            f"{len(run['prompt'][0])} tokens, then {len(run['generated'][0])} generated per sequence.\n\n"
            + table(["figure", "value"], rows, align="ll"))
    return Section("Generation", body)


def _steps_table(run: Mapping[str, Any]) -> str:
    kinds = list(run["steps"][0]["cycles_by_kind"])
    rows = [[int(s["step"]), int(s["past_tokens"]), int(s["new_tokens"]), int(s["cycles"]),
             *(int(s["cycles_by_kind"][k]) for k in kinds), round(float(s["lower_bound_cycles"])),
             f"{float(s['seconds']) * 1e6:.2f}"] for s in run["steps"]]
    return table(["step", "past", "new", "cycles", *kinds, "lower bound", "us"], rows, align="r" * (len(kinds) + 7))


def write_llm_report(out: Path, run: Mapping[str, Any], *, cfg: ArchConfig, command: str) -> Written:
    """Draw the two figures of ``run`` (checked with :func:`check_run`) and write index.md and report.json into
    ``out`` (already prepared with :func:`tinynpu.report.build.prepare_dir`)."""
    with fsio.replace_dir(out, what="report directory") as stage:
        figs = stage / FIG_DIR
        roof = llm_roofline(run, macs_per_cycle=cfg.macs_per_cycle, bytes_per_cycle=cfg.dram_bytes_per_cycle,
                            path=figs / "llm_roofline.png")
        per_token = time_per_token(run, path=figs / "llm_time_per_token.png")
        sections = [_summary(run),
                    Section("Prefill and decode on the roofline", "", (command,), (roof,)),
                    Section("Time per token as the context grows", _steps_table(run), (command,), (per_token,))]
        title = f"LLM generation: {Path(str(run['model'])).name} on {run['config']}"
        intro = ("The prompt's step (prefill) and every greedy decode step of one `tinynpu run llm`, simulated with "
                 "the KV cache in DRAM; docs/llm.md explains each figure.")
        (stage / "index.md").write_text(render(title, intro, sections, index_dir=stage), encoding="utf-8")
        # Drawn into the staging directory, reported as where they will be: ``out``.
        figures = [dataclasses.replace(f, path=out / f.path.relative_to(stage)) for f in (roof, per_token)]
        summary = {"index": str(out / "index.md"), "config": cfg.name, "command": command, "run": dict(run),
                   "figures": {f.name: {"path": str(f.path), "caption": f.caption, "data": f.data} for f in figures},
                   "all_verified": bool(run["verified"])}
        (stage / "report.json").write_text(json.dumps(summary, indent=1, default=str) + "\n", encoding="utf-8")
    files = (out / "index.md", out / "report.json", *(f.path for f in figures))
    summary["files"] = [str(p) for p in files]
    return Written(out / "index.md", files, tuple(figures), summary)


__all__ = ["RUN_FIELDS", "STEP_FIELDS", "check_config", "check_run", "write_llm_report"]
