"""The report's network section: ONNX model-zoo networks end to end, per-layer table and plot, totals.

Each network is imported, quantized, compiled, simulated layer by layer and
verified three ways by :func:`tinynpu.compiler.onnx.run_network`, exactly as
``tinynpu run onnx`` does; the section shows that run's totals, its
per-layer table (the ``layers`` fields of the ``--json`` contract) and its
cycles-per-layer plot.  SqueezeNet runs in every suite report (seconds);
ResNet-50 only in the full suite (about a minute of simulation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tinynpu.isa import ArchConfig
from tinynpu.progress import step
from tinynpu.report.figures import Figure
from tinynpu.report.markdown import Section, table

QUICK_NETWORKS = ("squeezenet",)
FULL_NETWORKS = ("squeezenet", "resnet50")

#: The per-layer fields of ``tinynpu run onnx --json`` the table shows, in order.
LAYER_FIELDS = ("name", "op", "where", "cycles", "utilization", "padding_ceiling", "dram_bytes")


def network_command(name: str, cfg: ArchConfig) -> str:
    """The ``tinynpu run onnx`` command that reproduces a network's numbers."""
    config = "" if cfg.name == "default" else f" --config {cfg.source}"
    return f'tinynpu run onnx "$M/light_{name}.onnx"{config} --json'


def run_networks(names: Sequence[str], cfg: ArchConfig, *, quiet: bool) -> dict[str, Any]:
    """Run each model-zoo network (random weights, batch 1, seed 0) and keep its ``--json`` report."""
    from tinynpu.compiler.onnx.bench import zoo_path
    from tinynpu.compiler.onnx.network import compile_onnx, run_network

    runs = []
    for name in names:
        with step(f"network {name}: import, quantize, compile, simulate, verify", quiet=quiet):
            report = run_network(compile_onnx(zoo_path(name), cfg=cfg))
        runs.append(dict(report, network=name, command=network_command(name, cfg)))
    return {"runs": runs}


def _pct(x: float) -> str:
    return f"{100.0 * x:.2f}%"


def totals_table(runs: Sequence[Mapping[str, Any]]) -> str:
    """One row per network: the checks and the totals."""
    headers = ["network", "bit-exact", "within 1 LSB of ORT int8", "top-1 = ORT int8", "cosine vs float",
               "cycles", "inferences/s", "util / ceiling (MAC-weighted)", "DRAM MiB", "host share of time",
               "accelerator layers", "host steps"]
    body = [[r["network"], bool(r["verified"]), _pct(r["ort_quantized"]["within_1lsb_fraction"]),
             _pct(r["ort_quantized"]["top1_agree"]), f"{r['ort_float']['cosine']:.4f}", int(r["cycles"]),
             f"{r['inferences_per_second']:,.1f} at {r['clock_mhz']:.0f} MHz",
             _pct(r["utilization_over_ceiling_mac_weighted"]), f"{r['dram_bytes'] / 2**20:.2f}",
             _pct(r["host_share_of_wall_time"]), int(r["npu_layers"]), int(r["host_steps"])] for r in runs]
    return table(headers, body, align="llrrrrrrrrrr")


def layer_table(run: Mapping[str, Any]) -> str:
    """Every step of the network with the ``layers`` fields of the JSON contract (host steps included)."""
    body = []
    for e in run["layers"]:
        npu = e["where"] == "npu"
        body.append([e["name"], e["op"], e["where"], int(e["cycles"]) if npu else "-",
                     _pct(e["utilization"]) if npu else "-", _pct(e["padding_ceiling"]) if npu else "-",
                     int(e["dram_bytes"]) if npu else "-"])
    return table(["layer", "op", "where", "cycles", "utilization", "padding ceiling", "DRAM bytes"], body,
                 align="lllrrrr")


def network_sections(data: Mapping[str, Any], figs_dir: Path) -> tuple[list[Section], list[Figure]]:
    """The network totals section, then one section per network with its plot and layer table."""
    from tinynpu.compiler.onnx.report import plot_layers

    runs = data["runs"]
    model_dir = 'M=$(python -c "import onnx, os; print(os.path.dirname(onnx.__file__))")/backend/test/data/light'
    commands = (model_dir, *(str(r["command"]) for r in runs))
    body = ("Model-zoo graphs from the `onnx` wheel (seeded random weights, batch 1), quantized to int8 and run "
            "layer by layer: convolutions and GEMMs on the simulated accelerator, the rest on the host. "
            "Bit-exact: every step against the numpy integer reference; ORT: onnxruntime running the same int8 "
            "model (and the float model for the cosine); cycles and inferences/s count accelerator cycles "
            "only.\n\n" + totals_table(runs))
    sections = [Section("Networks (ONNX)", body, commands)]
    figures: list[Figure] = []
    for r in runs:
        path = figs_dir / f"network_{r['network']}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(plot_layers(r))
        npu = [e for e in r["layers"] if e["where"] == "npu"]
        fig = Figure(name=path.stem, path=path, title=f"{r['network']}: cycles per accelerator layer",
                     caption=("Simulated cycles of each accelerator layer in network order, coloured by its "
                              "utilization over its padding ceiling (the `layers` of the run's JSON)."),
                     data={"layers": [{k: e[k] for k in LAYER_FIELDS} for e in npu]})
        figures.append(fig)
        sections.append(Section(f"Network layers: {r['network']}",
                                f"{r['npu_layers']} accelerator layers and {r['host_steps']} host steps.\n\n"
                                + layer_table(r), (str(r["command"]),), (fig,)))
    return sections, figures


__all__ = ["FULL_NETWORKS", "LAYER_FIELDS", "QUICK_NETWORKS", "network_sections", "run_networks"]
