"""The per-layer report as CSV (``tinynpu run onnx --csv FILE``, and ``layers.csv`` in ``--report DIR``).

One row per step in network order, the units in the column names; no total
row, so that a column sums to the network's total (the accelerator's cycles,
DRAM bytes and energy; the host steps' cells are 0).  Shapes are written as
``1x64x56x56``, several tensors joined by `` + ``.  The percentages are empty
where they are undefined: MAC utilization and padding ceiling for a program
without MACs (whose ``alu_busy_%`` is filled instead), all three for a host
step.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from tinynpu.compiler.onnx.verify.names import shape_text

COLUMNS = ("layer", "step", "op", "where", "input_shape", "output_shape", "cycles", "macs", "utilization_%",
           "padding_ceiling_%", "alu_busy_%", "dram_bytes", "compulsory_bytes", "host_bytes", "energy_pJ", "note")


def _percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.4f}"


def _row(e: dict[str, Any]) -> list[str]:
    npu = e["where"] == "npu"
    has_macs = npu and "alu_busy" not in e
    return [e["name"], e["step"], e["op"], e["where"],
            shape_text(tuple(tuple(s) for s in e["input_shapes"])),
            shape_text(tuple(tuple(s) for s in e["output_shapes"])),
            str(e["cycles"]), str(e["macs"]),
            _percent(e["utilization"] if has_macs else None),
            _percent(e["padding_ceiling"] if has_macs else None),
            _percent(e.get("alu_busy")),
            str(e["dram_bytes"]), str(e["compulsory_bytes"]), str(e["host_bytes"]),
            repr(float(e["energy_pj"])), e["note"]]


def layers_csv(r: dict[str, Any]) -> str:
    """The CSV text of a run report's layers (see the module docstring)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(_row(e) for e in r["layers"])
    return buf.getvalue()


__all__ = ["COLUMNS", "layers_csv"]
