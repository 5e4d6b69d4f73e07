"""A network run as text tables and as a report directory (index.md, layers.png, layers.csv, report.json)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from tinynpu.compiler.onnx.verify.names import shape_text

REPORT_FILES = ("index.md", "layers.png", "layers.csv", "report.json")


def _bytes(x: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(x) < 1024 or unit == "GiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.2f} {unit}"
        x /= 1024
    return str(x)


def summary_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The network totals and the three checks, as (label, value) rows with units."""
    q, f, mem = r["ort_quantized"], r["ort_float"], r["memory"]
    sec = r["seconds"]
    return [
        ("model", f"{r['model']} (config {r['config']})"),
        ("weights", f"seeded random (seed {r['random_weights']})" if r["random_weights"] is not None
         else "from the file"),
        ("layers", f"{r['npu_layers']} on the accelerator, {r['host_steps']} host steps; "
                   f"{r['programs_compiled']} distinct programs"),
        *(("calibration", r["calibration"]),) * ("calibration" in r),
        ("(a) bit-exact vs integer reference", str(r["verified"])),
        *(output_rows(r) if "outputs" in r else [
            ("(b) vs onnxruntime int8", f"{100 * q['equal_fraction']:.2f} % equal, "
                                        f"{100 * q['within_1lsb_fraction']:.2f} % within 1 LSB, "
                                        f"max {q['max_abs_lsb']} LSB, "
                                        f"top-1 {100 * q['top1_agree']:.0f} %, "
                                        f"top-5 overlap {100 * q['top5_agree']:.0f} % ({r['inputs_compared']} "
                                        "inputs)"),
            ("(c) vs onnxruntime float", f"top-1 {100 * f['top1_agree']:.0f} %, cosine {f['cosine']:.4f}")]),
        ("cycles (accelerator)", f"{r['cycles']:,} ({r['programs_run']:,} program runs)"),
        ("not counted", r["left_out"]),
        ("inferences/s", f"{r['inferences_per_second']:,.1f} at {r['clock_mhz']:.0f} MHz "
                         "(accelerator cycles only)"),
        ("utilization / padding ceiling", f"{100 * r['utilization_over_ceiling_mac_weighted']:.2f} % (MAC-weighted "
                                          f"over conv/gemm layers); utilization {100 * r['utilization']:.2f} %, "
                                          f"ceiling {100 * r['padding_ceiling']:.2f} %"),
        ("DRAM traffic (accelerator)", _bytes(r["dram_bytes"])),
        ("energy (accelerator)", f"{r['energy_pj'] / 1e6:,.3f} uJ  (" + ", ".join(
            f"{k} {v / r['energy_pj']:.0%}" for k, v in r["energy_breakdown_pj"].items() if v) + f"); "
                                 f"energy x delay {r['edp']:.4g} {r['edp_units']}"),
        ("host traffic", f"{_bytes(r['host_bytes'])}; host share of wall time "
                         f"{100 * r['host_share_of_wall_time']:.1f} %"),
        ("DRAM image", f"{_bytes(mem['dram_image_bytes'])}: weights {_bytes(mem['weight_bytes'])}, activations "
                       f"{_bytes(mem['activation_peak_bytes'])} at the peak vs "
                       f"{_bytes(mem['liveness_lower_bound_bytes'])} liveness lower bound"),
        ("time", ", ".join(f"{k} {v:.2f} s" for k, v in sec.items() if not k.startswith("ort_"))),
        ("onnxruntime per inference", f"int8 {1e3 * sec['ort_quantized_seconds']:.2f} ms (int8 kept int8, as "
                                      f"the comparison runs it: {1e3 * sec['ort_quantized_int8_kept_seconds']:.2f}"
                                      f" ms), float {1e3 * sec['ort_float_seconds']:.2f} ms"),
    ]


def _topk_text(c: dict[str, Any]) -> str:
    return (f", top-1 {100 * c['top1_agree']:.0f} %, top-5 overlap {100 * c['top5_agree']:.0f} %"
            if "top1_agree" in c else "")


def output_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """Checks (a), (b), (c) per graph output, each named (the outputs a user reads)."""
    rows = []
    n = r["inputs_compared"]
    for o in r["outputs"]:
        q, f = o["ort_quantized"], o["ort_float"]
        if q["on"] == "int8":
            b = (f"{100 * q['equal_fraction']:.2f} % equal, {100 * q['within_1lsb_fraction']:.2f} % within 1 LSB, "
                 f"max {q['max_abs_lsb']} LSB")
        else:
            b = f"float output: max difference {q['max_abs_difference']:.3g}, cosine {q['cosine']:.4f}"
        closer = {"equal": "", "tinynpu": "; tinynpu is closer to float",
                  "onnxruntime": "; onnxruntime int8 is closer to float"}[o["closer_to_float"]]
        rows.append((f"output {o['name']} {tuple(o['shape'])}",
                     f"(a) {'bit-exact' if o['verified'] else 'DIFFERS'}; (b) vs onnxruntime int8: {b}"
                     f"{_topk_text(q)} ({n} inputs); (c) vs float: cosine {f['cosine']:.4f}, "
                     f"max error {f['max_abs_error']:.3g}, relative RMS {f['relative_rms_error']:.3f}"
                     f"{_topk_text(f)} (onnxruntime int8: cosine {q['cosine_vs_float']:.4f}){closer}"))
    return rows


def _util_cells(e: dict[str, Any]) -> tuple[str, str]:
    """The utilization and ceiling cells: MAC utilization over the padding ceiling for a layer with MACs;
    for an accelerator program without MACs (a residual add, a nonlinear program) the vector ALU's busy
    share of its cycles, and no ceiling (docs/onnx.md)."""
    if e["where"] != "npu":
        return "-", "-"
    if "alu_busy" in e:
        return f"alu {100 * e['alu_busy']:.1f} %", "n/a: no MACs"
    ratio = e["utilization"] / e["padding_ceiling"] if e["padding_ceiling"] else 0.0
    return f"{100 * ratio:.1f} %", f"{100 * e['padding_ceiling']:.1f} %"


def layer_rows(r: dict[str, Any]) -> list[list[str]]:
    """The per-layer table (a header row, one row per step, a total row); the last column is the note."""
    rows = [["layer", "op", "where", "input", "output", "cycles", "util/ceiling", "ceiling", "DRAM", "compulsory",
             "host bytes", "energy", "note"]]
    for e in r["layers"]:
        npu = e["where"] == "npu"
        rows.append([e["name"], e["op"], e["where"], shape_text(_shapes(e["input_shapes"])),
                     shape_text(_shapes(e["output_shapes"])), f"{e['cycles']:,}" if npu else "-", *_util_cells(e),
                     _bytes(e["dram_bytes"]) if npu else "-", _bytes(e["compulsory_bytes"]) if npu else "-",
                     _bytes(e["host_bytes"]), f"{e['energy_pj'] / 1e6:.3f} uJ" if npu else "-", e["note"]])
    rows.append(["total", "", "", "", "", f"{r['cycles']:,}",
                 f"{100 * r['utilization_over_ceiling_mac_weighted']:.1f} %", f"{100 * r['padding_ceiling']:.1f} %",
                 _bytes(r["dram_bytes"]), _bytes(sum(e["compulsory_bytes"] for e in r["layers"])),
                 _bytes(r["host_bytes"]), f"{r['energy_pj'] / 1e6:.3f} uJ", r["left_out"]])
    return rows


def _shapes(shapes: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(s) for s in shapes)


def format_run(r: dict[str, Any]) -> str:
    """Totals, then the per-layer table, as plain text."""
    rows = summary_rows(r)
    width = max(len(k) for k, _ in rows)
    head = "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
    table = layer_rows(r)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1] for row in table]
    return head + "\n\nper layer:\n" + "\n".join(lines)


def plot_layers(r: dict[str, Any]) -> bytes:
    """PNG: accelerator cycles per layer, bars shaded by utilization over the padding ceiling."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    npu = [e for e in r["layers"] if e["where"] == "npu"]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.18 * len(npu) + 2), 3.5))
    eff = [e["utilization"] / e["padding_ceiling"] if e["padding_ceiling"] else 0 for e in npu]
    ax.bar(range(len(npu)), [e["cycles"] for e in npu], color=[plt.cm.viridis(v) for v in eff])
    ax.set_xlabel("accelerator layer (network order)")
    ax.set_ylabel("cycles")
    ax.set_title(f"{Path(r['model']).name}: cycles per layer (colour: utilization / padding ceiling)")
    sm = plt.cm.ScalarMappable(cmap="viridis", norm=plt.Normalize(0, 1))
    fig.colorbar(sm, ax=ax)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def markdown(r: dict[str, Any]) -> str:
    out = [f"# Network run: {Path(r['model']).name}", "", "| what | value |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in summary_rows(r)]
    out += ["", "![cycles per layer](layers.png)", "", "## Per layer", ""]
    table = layer_rows(r)
    out.append("| " + " | ".join(table[0]) + " |")
    out.append("|" + "---|" * len(table[0]))
    out += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table[1:]]
    return "\n".join(out) + "\n"


def write_report(out: Path, r: dict[str, Any]) -> None:
    """index.md, layers.png, layers.csv and report.json into ``out`` (replaced as one set)."""
    from tinynpu import fsio
    from tinynpu.compiler.onnx.verify.layers_csv import layers_csv

    fsio.write_dir(out, {"index.md": markdown(r), "layers.png": plot_layers(r), "layers.csv": layers_csv(r),
                         "report.json": json.dumps(r, indent=1) + "\n"}, what="--report")


__all__ = ["REPORT_FILES", "format_run", "markdown", "output_rows", "plot_layers", "summary_rows", "write_report"]
