"""Report figures of a decoder's generation (``tinynpu run llm``): prefill and decode on the roofline, and the
time per token as the context grows.

Both take the run's JSON (:func:`tinynpu.compiler.onnx.llm.run_llm`) and plot its per-step figures as they
are: a step's ``macs`` (useful MACs of its accelerator programs), ``dram_bytes``, ``cycles``,
``cycles_by_kind``, ``lower_bound_cycles``.  Times are the cycles at the run's ``clock_mhz``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure as MplFigure

from tinynpu.report.figures_common import Figure, finish_figure

#: The kinds of work a step's cycles are split into (the run's ``cycles_by_kind``), bottom to top, and colours.
KIND_COLORS = {"weights": "#1f77b4", "attention": "#d62728", "residual": "#2ca02c", "nonlinear": "#9467bd"}
PREFILL_COLOR = "#ff7f0e"


def _phase(step: Mapping[str, Any]) -> str:
    return "prefill" if int(step["step"]) == 0 else "decode"


def llm_roofline_data(run: Mapping[str, Any], *, macs_per_cycle: int, bytes_per_cycle: int) -> dict[str, Any]:
    """Per step (the prompt's, then each decode step) its arithmetic intensity (useful MACs per DRAM byte) and
    attained MACs per cycle, with the two roofs."""
    points = []
    for s in run["steps"]:
        macs, dram, cycles = int(s["macs"]), int(s["dram_bytes"]), int(s["cycles"])
        points.append({"step": int(s["step"]), "phase": _phase(s), "context_tokens": int(s["past_tokens"])
                       + int(s["new_tokens"]), "macs": macs, "dram_bytes": dram, "cycles": cycles,
                       "intensity_mac_per_byte": macs / dram if dram else math.inf,
                       "achieved_mac_per_cycle": macs / cycles if cycles else 0.0})
    return {"macs_per_cycle": macs_per_cycle, "bytes_per_cycle": bytes_per_cycle, "points": points}


def llm_roofline(run: Mapping[str, Any], *, macs_per_cycle: int, bytes_per_cycle: int, path: Path) -> Figure:
    """Prefill and every decode step under the config's compute and DRAM roofs (log-log)."""
    data = llm_roofline_data(run, macs_per_cycle=macs_per_cycle, bytes_per_cycle=bytes_per_cycle)
    pts = data["points"]
    finite = [p["intensity_mac_per_byte"] for p in pts if math.isfinite(p["intensity_mac_per_byte"])
              and p["intensity_mac_per_byte"] > 0]
    ridge = macs_per_cycle / bytes_per_cycle
    lo, hi = min([*finite, ridge]) / 4, max([*finite, ridge]) * 4
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    fig = MplFigure(figsize=(8.0, 5.2))
    ax = fig.add_subplot()
    ax.plot(xs, [min(macs_per_cycle, x * bytes_per_cycle) for x in xs], color="black", lw=1.5,
            label=f"roofs: {macs_per_cycle} MAC/cycle, {bytes_per_cycle} B/cycle")
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    decode = [p for p in pts if p["phase"] == "decode"]
    if decode:
        dots = ax.scatter([p["intensity_mac_per_byte"] for p in decode], [p["achieved_mac_per_cycle"] for p in decode],
                          c=[p["context_tokens"] for p in decode], cmap="viridis", s=28, zorder=3,
                          label=f"decode steps 1-{decode[-1]['step']}")
        fig.colorbar(dots, ax=ax, label="context (tokens in the cache after the step)")
    for p in pts:
        if p["phase"] == "prefill":
            ax.plot([p["intensity_mac_per_byte"]], [p["achieved_mac_per_cycle"]], marker="*", ms=14, ls="none",
                    color=PREFILL_COLOR, zorder=4, label=f"prefill ({p['context_tokens']} tokens)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (useful MACs per DRAM byte)")
    ax.set_ylabel("attained throughput (useful MACs per cycle)")
    ax.set_title("Prefill against decode on the roofline")
    ax.grid(True, which="both", alpha=0.3)
    bottom = min([p["achieved_mac_per_cycle"] for p in pts if p["achieved_mac_per_cycle"] > 0] + [macs_per_cycle]) / 3
    ax.set_ylim(bottom=bottom, top=macs_per_cycle * 2)
    ax.legend(fontsize=8, loc="lower right")
    return finish_figure(
        fig, path, title="Prefill and decode on the roofline",
        caption=("Each marker is one step of the generation: its useful MACs (`macs`) per DRAM byte (`dram_bytes`) "
                 "against its useful MACs per cycle (`cycles`); the star is the prompt's step, the dots the decode "
                 "steps coloured by the context they attend to.  The roofs are the MAC array's peak "
                 f"({macs_per_cycle} MAC/cycle) and the DRAM port ({bytes_per_cycle} B/cycle); the dotted line is the "
                 f"ridge ({ridge:g} MAC/B).  Decode at batch 1 reads every weight for one token: an intensity near "
                 "1 MAC/B, far left of the ridge."),
        data=data)


def time_per_token_data(run: Mapping[str, Any]) -> dict[str, Any]:
    """Per decode step: the context after it, its time by kind of work and in all, and its DRAM lower bound."""
    clock = float(run["clock_mhz"]) * 1e6
    steps = [{"step": int(s["step"]), "context_tokens": int(s["past_tokens"]) + int(s["new_tokens"]),
              "seconds": float(s["seconds"]),
              "seconds_by_kind": {k: int(c) / clock for k, c in s["cycles_by_kind"].items()},
              "lower_bound_seconds": float(s["lower_bound_cycles"]) / clock}
             for s in run["steps"] if _phase(s) == "decode"]
    return {"clock_mhz": float(run["clock_mhz"]), "time_to_first_token_s": float(run["time_to_first_token_s"]),
            "time_per_output_token_s": float(run["time_per_output_token_s"]), "steps": steps}


def time_per_token(run: Mapping[str, Any], *, path: Path) -> Figure:
    """Stacked bars per decode step (time by kind of work) against the context, with the DRAM lower bound."""
    data = time_per_token_data(run)
    steps = data["steps"]
    fig = MplFigure(figsize=(9.6, 4.6))
    ax = fig.add_subplot()
    xs = [s["context_tokens"] for s in steps]
    bottom = [0.0] * len(steps)
    kinds = [k for k in KIND_COLORS if any(k in s["seconds_by_kind"] for s in steps)]
    kinds += sorted({k for s in steps for k in s["seconds_by_kind"]} - set(kinds))
    for kind in kinds:
        heights = [1e6 * s["seconds_by_kind"].get(kind, 0.0) for s in steps]
        ax.bar(xs, heights, bottom=bottom, width=0.8, color=KIND_COLORS.get(kind, "#7f7f7f"), label=kind)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.plot(xs, [1e6 * s["lower_bound_seconds"] for s in steps], "k--", marker=".", lw=1.2,
            label="DRAM lower bound (weights + cache bytes / bandwidth)")
    ax.axhline(1e6 * data["time_per_output_token_s"], color="grey", ls=":", lw=1,
               label=f"mean {1e6 * data['time_per_output_token_s']:.1f} us per token")
    ax.set_xlabel("context after the step (tokens: the cache read plus the new one)")
    ax.set_ylabel(f"time per token at {data['clock_mhz']:.0f} MHz (us)")
    ax.set_title("Decode: time per token as the context grows")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return finish_figure(
        fig, path, title="Time per token as the context grows",
        caption=("Each bar is one decode step at the context it reaches: its accelerator cycles (`cycles_by_kind`: "
                 "the weight layers, the attention matmuls reading the cache, the residual adds, the nonlinear "
                 f"layers) at the run's {data['clock_mhz']:.0f} MHz; the dashed line is the step's DRAM lower bound "
                 "(`lower_bound_cycles`: every int8 weight and every cached key and value read once).  The prompt's "
                 f"step (time to first token, {1e6 * data['time_to_first_token_s']:.1f} us) is not drawn."),
        data=data)


__all__ = ["KIND_COLORS", "llm_roofline", "llm_roofline_data", "time_per_token", "time_per_token_data"]
