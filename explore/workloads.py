"""Workload layer lists from files: CSV layer lists in the two common formats, and ONNX models.

Two CSV formats are recognized by their header row (case, spaces and a
trailing empty column ignored):

* ``Layer, M, N, K``: one GEMM per row, C (M x N) = A (M x K) B (K x N).
* SCALE-Sim's topology format, ``Layer name, IFMAP Height, IFMAP Width,
  Filter Height, Filter Width, Channels, Num Filter, Strides``: one conv2d
  per row (batch 1).  SCALE-Sim takes the IFMAP as already padded: its output
  is ``(IFMAP - Filter) / Strides + 1`` rows (``topologies.py``,
  ``topo_calc_hyperparams``), so a row becomes a conv2d with ``pad 0`` on an
  input of exactly that size, and one stride for both axes.

An ONNX model is one workload: the whole network as ``tinynpu run onnx``
compiles and runs it on each config (batch 1 where the batch is dynamic),
every accelerator program counted (convolutions and GEMMs with their int8
epilogues, residual adds, nonlinear programs), so that a sweep's figures for
a model equal that command's on the same config
(:mod:`tinynpu.compiler.onnx.verify.totals`); the host steps' time is left
out by both, and both say so.  A model's programs run one after another in
one task (a network is compiled, quantized and planned as a whole).
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tinynpu.errors import SpecError, TinyNpuError
from tinynpu.fsio import read_text

GEMM_HEADER = ("layer", "m", "n", "k")
SCALESIM_HEADER = ("layer name", "ifmap height", "ifmap width", "filter height", "filter width", "channels",
                   "num filter", "strides")
MAX_CSV_BYTES = 1 << 20


@dataclass(frozen=True)
class Layer:
    """One workload read from a file: its kind (``gemm``, ``conv2d``, or ``onnx`` for a whole network), sizes,
    how often the file has it, where it was read (``file:line``, or the model), and a network's model file
    (resolved) and the sha256 of its bytes."""

    kind: str
    sizes: tuple[tuple[str, int], ...]
    count: int
    where: str
    model: str = ""
    model_sha256: str = ""


def _normalize(cell: str) -> str:
    return re.sub(r"\s+", " ", cell.strip().lower())


def read_layer_csv(path: Path) -> list[Layer]:
    """The layers of a CSV layer list in either format.

    Raises:
        SpecError: with ``file:line:col`` for an unknown header, a missing or non-integer value, or a
            size below 1 (or a filter larger than its input).
    """
    text = read_text(path, what="workload CSV", limit=MAX_CSV_BYTES, error=SpecError)
    rows = [(number, row) for number, row in enumerate(csv.reader(io.StringIO(text)), start=1)
            if any(cell.strip() for cell in row)]
    if not rows:
        raise SpecError(f"{path}:1:1: the workload CSV is empty; its first row must be a header, either "
                        f"{', '.join(GEMM_HEADER)} or SCALE-Sim's {', '.join(SCALESIM_HEADER)}.")
    header_line, header = rows[0]
    names = [_normalize(cell) for cell in header]
    while names and not names[-1]:  # SCALE-Sim's own files end every row with a comma
        names.pop()
    fields: tuple[str, ...]
    if tuple(names) == GEMM_HEADER:
        kind, fields = "gemm", ("m", "n", "k")
    elif tuple(names) == SCALESIM_HEADER:
        kind, fields = "conv2d", ("h", "w", "r", "s", "c", "k", "stride")
    else:
        raise SpecError(f"{path}:{header_line}:1: the header {', '.join(c.strip() for c in header)!r} is neither "
                        f"{', '.join(GEMM_HEADER)!r} nor SCALE-Sim's {', '.join(SCALESIM_HEADER)!r}.")
    layers = []
    for line, row in rows[1:]:
        values: dict[str, int] = {}
        for index, name in enumerate(fields, start=1):
            column = header[index].strip()
            raw = row[index] if index < len(row) else ""
            cell = raw.strip()
            # The value's own column (past the comma and any blanks), or just past the row's end when missing.
            col = (len(",".join(row[:index])) + 2 + len(raw) - len(raw.lstrip()) if index < len(row)
                   else len(",".join(row)) + 1)
            try:
                value = int(cell)
            except ValueError:
                raise SpecError(f"{path}:{line}:{col}: {column} of layer {row[0].strip()!r} must be a positive "
                                f"integer, not {cell!r}.") from None
            if value < 1:
                raise SpecError(f"{path}:{line}:{col}: {column} of layer {row[0].strip()!r} must be at least 1, "
                                f"not {value}.")
            values[name] = value
        if kind == "conv2d":
            for size, filt in (("h", "r"), ("w", "s")):
                if values[filt] > values[size]:
                    raise SpecError(f"{path}:{line}:1: layer {row[0].strip()!r}: the filter ({values[filt]}) is "
                                    f"larger than the (already padded) IFMAP ({values[size]}).")
            sizes = {"n": 1, "c": values["c"], "h": values["h"], "w": values["w"], "k": values["k"],
                     "r": values["r"], "s": values["s"], "stride": values["stride"], "pad": 0}
            layers.append(Layer("conv2d", tuple(sizes.items()), 1, f"{path}:{line}"))
        else:
            layers.append(Layer("gemm", tuple(values.items()), 1, f"{path}:{line}"))
    return layers


def read_onnx_network(path: Path) -> list[Layer]:
    """The network of an ONNX model as one workload, once the model imports (batch 1 where it is dynamic).

    Raises:
        SpecError: the model cannot be imported (not ONNX, truncated, shapes unknown), naming the file.
    """
    from tinynpu.compiler.onnx.frontend.importer import import_model
    from tinynpu.fsio import read_bytes

    try:
        import_model(path, batch=1)
        digest = hashlib.sha256(read_bytes(path, what="the ONNX model", error=SpecError)).hexdigest()
    except TinyNpuError as exc:
        raise SpecError(f"{path}: {exc.message}") from None
    return [Layer("onnx", (("batch", 1),), 1, str(path), model=str(path.resolve()), model_sha256=digest)]


READERS: dict[str, Callable[[Path], list[Layer]]] = {"csv": read_layer_csv, "onnx": read_onnx_network}

__all__ = ["GEMM_HEADER", "READERS", "SCALESIM_HEADER", "Layer", "read_layer_csv", "read_onnx_network"]
