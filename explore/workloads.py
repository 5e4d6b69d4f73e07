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

An ONNX model becomes one workload per layer the accelerator runs: each Conv
(each group of a grouped one) and each Gemm/MatMul by a constant weight,
with the shapes the ONNX front end (``tinynpu run onnx``) compiles them at
and the same rules for which convs run on the accelerator.  Per layer, not
one point per network: identical layers (ResNet-50 repeats most of its
blocks) run once and are counted as often as the model has them; the layers
of one model spread over every worker instead of running one after another
in one task; and the results show which layer dominates.  The network's
accelerator figures are the sum over its layers, which is what a sweep's
totals are; host steps (pooling, residual adds) are not accelerator cycles.
A layer runs as a plain conv2d or GEMM with int32 outputs: the network's
programs add the layer's epilogue (bias, requantization to int8, clamp: a
few vector-ALU instructions per output column tile), which needs the
quantized model, and the sweep does not quantize.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinynpu.errors import SpecError, TinyNpuError
from tinynpu.fsio import read_text

GEMM_HEADER = ("layer", "m", "n", "k")
SCALESIM_HEADER = ("layer name", "ifmap height", "ifmap width", "filter height", "filter width", "channels",
                   "num filter", "strides")
MAX_CSV_BYTES = 1 << 20


@dataclass(frozen=True)
class Layer:
    """One layer read from a file: its kind (``gemm`` or ``conv2d``), sizes, how often the file has it, and
    where it was read (``file:line`` or ``model: node``)."""

    kind: str
    sizes: tuple[tuple[str, int], ...]
    count: int
    where: str


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


def _attr(node: Any, name: str, default: Any) -> Any:
    from onnx import helper

    for attribute in node.attribute:
        if attribute.name == name:
            return helper.get_attribute_value(attribute)
    return default


def read_onnx_layers(path: Path) -> list[Layer]:
    """The accelerator layers of an ONNX model (batch 1 where the batch is dynamic).

    Raises:
        SpecError: the model cannot be imported (not ONNX, truncated, shapes unknown), naming the file.
    """
    from onnx import numpy_helper

    from tinynpu.compiler.onnx.importer import import_model
    from tinynpu.compiler.onnx.npu import groups_per_program
    from tinynpu.isa import load_config

    default_tile = load_config("default").tile
    try:
        model = import_model(path, batch=1).model
    except TinyNpuError as exc:
        raise SpecError(f"{path}: {exc.message}") from None
    graph = model.graph
    weights = {t.name: tuple(numpy_helper.to_array(t).shape) for t in graph.initializer}
    shapes: dict[str, tuple[int, ...]] = {}
    for info in [*graph.value_info, *graph.input, *graph.output]:
        dims = info.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            shapes[info.name] = tuple(int(d.dim_value) for d in dims)
    layers = []
    for node in graph.node:
        name = node.name or node.output[0]
        where = f"{path}: node {name!r}"
        x = shapes.get(node.input[0]) if node.input else None
        w = weights.get(node.input[1]) if len(node.input) > 1 else None
        if x is None or w is None:
            continue
        if node.op_type == "Conv" and len(x) == 4 and len(w) == 4:
            group = int(_attr(node, "group", 1))
            pads, strides = list(_attr(node, "pads", [0, 0, 0, 0])), list(_attr(node, "strides", [1, 1]))
            if len(set(strides)) > 1 or len(set(pads)) > 1 or list(_attr(node, "dilations", [1, 1])) != [1, 1]:
                continue  # a sweep's conv2d workload has one stride and one pad (as `tinynpu run conv2d`)
            n, c, h, wd = x
            # the front end's programs: small groups packed block-diagonal (at the default config's tile edge)
            per = groups_per_program(group, c // group, default_tile)
            sizes = {"n": n, "c": c // group * per, "h": h, "w": wd, "k": w[0] // group * per, "r": w[2], "s": w[3],
                     "stride": strides[0], "pad": pads[0]}
            layers.append(Layer("conv2d", tuple(sizes.items()), group // per, where))
        elif node.op_type in ("Gemm", "MatMul") and len(x) >= 2 and len(w) == 2:
            trans_a, trans_b = int(_attr(node, "transA", 0)), int(_attr(node, "transB", 0))
            if len(x) > 2 and node.op_type == "Gemm":
                continue  # not a valid Gemm: the front end leaves it to the host
            if trans_a:
                x = x[::-1]  # A arrives K x M; the front end transposes it for the accelerator
            m = 1
            for dim in x[:-1]:
                m *= dim
            n_out, k = (w[0], w[1]) if trans_b else (w[1], w[0])
            layers.append(Layer("gemm", (("m", m), ("n", n_out), ("k", k)), 1, where))
    if not layers:
        raise SpecError(f"{path}: the model has no Conv, Gemm or MatMul layer the accelerator runs, so it gives "
                        "no workload.")
    return layers


READERS: dict[str, Callable[[Path], list[Layer]]] = {"csv": read_layer_csv, "onnx": read_onnx_layers}

__all__ = ["GEMM_HEADER", "READERS", "SCALESIM_HEADER", "Layer", "read_layer_csv", "read_onnx_layers"]
