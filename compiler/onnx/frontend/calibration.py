"""Network inputs that mean what the model's inputs mean: seeded samples by role, and samples from files.

A transformer's inputs are not images.  Standard-normal values cast to int64
give token ids that are mostly 0 and sometimes negative, and type ids outside
their two-row table (``quantize_static`` then dies inside a ``Gather``).  So
each input gets a role, from the graph:

``index``
    an integer input that reaches a ``Gather`` of a constant table as its
    indices (through ``Cast``/``Reshape``/``Unsqueeze``/...): uniform in
    ``[0, rows)``, the rows of the smallest such table;
``mask``
    an input whose name says it is a mask (``attention_mask``): ones, every
    position attended, which is what a single unpadded sequence has;
``integer``
    any other integer or bool input: zeros;
``float``
    standard normal (an image normalized per channel looks like this).

Real samples come from ``--calibration FILE.npz`` (or a folder of ``.npz``
files): each file is one sample, one array per input name, checked against the
model's names, shapes and index ranges; and the ``--input`` values of a run
join calibration when nothing else is given.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.errors import OnnxError, UsageError

#: Operators an index passes through unchanged in value on its way to a Gather.
_INDEX_PATHS = ("Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand", "Slice")


@dataclass(frozen=True)
class InputRole:
    """What a network input is: its ``kind`` (index, mask, integer, float) and, for an index, the rows
    of the table it indexes (``limit``) and that table's name (``table``)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    kind: str
    limit: int = 0
    table: str = ""
    node: str = ""  # the Gather that indexes ``table`` with it

    def describe(self) -> str:
        if self.kind == "index":
            return f"{self.name}: ids uniform in [0, {self.limit}) (the rows of {self.table!r})"
        if self.kind == "mask":
            return f"{self.name}: ones (a mask, every position attended)"
        if self.kind == "integer":
            return f"{self.name}: zeros"
        return f"{self.name}: standard normal"


def _gather_tables(model: Any, name: str) -> list[tuple[int, str, str]]:
    """(rows, table name, Gather node name) of every constant Gather table ``name`` indexes, following
    value-preserving nodes."""
    from onnx import helper

    inits = {t.name: tuple(t.dims) for t in model.graph.initializer}
    readers: dict[str, list[Any]] = {}
    for n in model.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    found, todo, seen = [], [name], set()
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        for n in readers.get(t, []):
            if n.op_type == "Gather" and len(n.input) > 1 and n.input[1] == t and n.input[0] in inits:
                axis = next((helper.get_attribute_value(a) for a in n.attribute if a.name == "axis"), 0)
                dims = inits[n.input[0]]
                found.append((int(dims[axis]), n.input[0], n.name or n.output[0]))
            elif n.op_type in _INDEX_PATHS and n.input[0] == t:
                todo.extend(n.output)
    return found


def input_roles(model: Any) -> list[InputRole]:
    """Every network input's role (see the module docstring), in input order."""
    from tinynpu.compiler.onnx.frontend.importer import input_specs

    roles = []
    for name, shape, dtype in input_specs(model):
        tables = _gather_tables(model, name) if dtype.kind in "iu" else []
        if tables:
            rows, table, node = min(tables)
            roles.append(InputRole(name, shape, dtype, "index", rows, table, node))
        elif "mask" in name.lower():
            roles.append(InputRole(name, shape, dtype, "mask"))
        elif dtype.kind in "iub":
            roles.append(InputRole(name, shape, dtype, "integer"))
        else:
            roles.append(InputRole(name, shape, dtype, "float"))
    return roles


def sample_inputs(model: Any, seed: int, names: Iterable[str] = ()) -> dict[str, np.ndarray]:
    """Seeded inputs by role (a float input draws exactly what it always drew from the seed)."""
    rng = np.random.default_rng(seed)
    wanted = set(names)
    out = {}
    for role in input_roles(model):
        value: np.ndarray
        if role.kind == "index":
            value = rng.integers(0, role.limit, size=role.shape)
        elif role.kind == "mask":
            value = np.ones(role.shape)
        elif role.kind == "integer":
            value = np.zeros(role.shape)
        else:
            value = rng.standard_normal(role.shape)
        if not wanted or role.name in wanted:
            out[role.name] = value.astype(role.dtype)
    return out


def check_sample(model: Any, sample: dict[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    """``sample`` checked against the model's inputs (names, shapes, index ranges) and cast to their dtypes.

    Raises:
        OnnxError: a name the model does not have, a missing input, a shape that differs, an index outside
            its table; each naming ``where`` (the file, or ``--input NAME``).
    """
    roles = {r.name: r for r in input_roles(model)}
    unknown = sorted(set(sample) - set(roles))
    if unknown:
        raise OnnxError(f"{where}: the network has no input {', '.join(repr(u) for u in unknown)}; its inputs are "
                        f"{', '.join(roles)}.")
    out = {}
    for name, value in sample.items():
        role = roles[name]
        arr = np.asarray(value)
        if tuple(arr.shape) != role.shape:
            raise OnnxError(f"{where}: input {name!r} has shape {tuple(arr.shape)}, the network's is {role.shape}.")
        check_ids(role, arr, where)
        out[name] = arr.astype(role.dtype)
    return out


def check_ids(role: InputRole, arr: np.ndarray, where: str) -> None:
    """The token-id check of every path (``--input`` values, calibration files): an index input's values lie
    in ``[-rows, rows)`` of the smallest table it reaches, as ONNX's Gather takes them.

    Raises:
        OnnxError: naming ``where``, the input, the first offending value's index and value, and the
            table with its rows and the node that indexes it.
    """
    if role.kind != "index" or not arr.size or arr.dtype.kind not in "iub":
        return
    flat = arr.reshape(-1)
    bad = np.flatnonzero((flat < -role.limit) | (flat >= role.limit))
    if len(bad):
        at = tuple(int(i) for i in np.unravel_index(int(bad[0]), arr.shape))
        raise OnnxError(f"{where}: input {role.name!r} holds id {int(flat[bad[0]])} at index {at}, outside the "
                        f"{role.limit} rows of {role.table!r}, which node {role.node!r} (Gather) indexes with it "
                        f"(ids {-role.limit}..{role.limit - 1}; a token id beyond the vocabulary, or a type id "
                        "beyond the types).")


def load_calibration(model: Any, path: Path) -> list[dict[str, np.ndarray]]:
    """The samples of ``--calibration``: one ``.npz`` file, or every ``.npz`` of a folder (name order);
    each must give every network input."""
    files = sorted(path.glob("*.npz")) if path.is_dir() else [path]
    if not files:
        raise UsageError(f"--calibration {path}: the folder holds no .npz file.")
    names = [r.name for r in input_roles(model)]
    samples = []
    for f in files:
        try:
            with np.load(f, allow_pickle=False) as data:
                sample = {k: data[k] for k in data.files}
        except FileNotFoundError:
            raise UsageError(f"--calibration {f}: no such file.") from None
        except Exception as exc:
            raise UsageError(f"--calibration {f}: not a readable .npz file ({type(exc).__name__}: {exc}).") from None
        checked = check_sample(model, sample, f"--calibration {f}")  # names it should not hold, shapes, ranges
        missing = [n for n in names if n not in sample]
        if missing:
            raise OnnxError(f"--calibration {f}: gives no value for the network input(s) "
                            f"{', '.join(repr(m) for m in missing)} (the file holds {', '.join(sample) or 'nothing'};"
                            f" the network's inputs are {', '.join(names)}).")
        samples.append(checked)
    return samples


@dataclass(frozen=True)
class CalibrationSource:
    """Samples a run supplies for calibration (``compile_onnx``'s ``calibration``), and where they come from
    (for the report)."""

    samples: tuple[dict[str, np.ndarray], ...]
    origin: str


def describe_seeded(model: Any, count: int) -> str:
    """How seeded calibration draws each input, for the report."""
    return f"{count} seeded samples: " + "; ".join(r.describe() for r in input_roles(model))


def infer_light(model: Any) -> Any:
    """The graph of ``model`` with every tensor's type and shape inferred (onnx's shape inference), run on a copy
    whose large constants are declared inputs, so the weights are neither copied nor parsed (a GPT-2-small
    decoder's are 500 MB)."""
    import onnx
    from onnx import helper

    g = model.graph
    small = [t for t in g.initializer if int(np.prod(t.dims)) <= 4096]
    declared = [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                for t in g.initializer if int(np.prod(t.dims)) > 4096]
    light = helper.make_model(helper.make_graph(g.node, g.name, [*g.input, *declared], g.output, small,
                                                value_info=g.value_info), opset_imports=list(model.opset_import),
                              ir_version=model.ir_version)
    return onnx.shape_inference.infer_shapes(light).graph


def calibrated_tensors(model: Any) -> list[str]:
    """The tensors onnxruntime's min/max calibrator measures: every float input or output of a node of an
    operator type its quantizer handles, other than a constant (``select_tensors_to_calibrate``).

    The types come from shape inference on a copy of the graph whose large constants are declared inputs, so
    the weights are neither copied nor parsed (a GPT-2-small decoder's are 500 MB).
    """
    from onnx import TensorProto
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    g = model.graph
    inferred = infer_light(model)
    types = {v.name: v.type for v in [*inferred.value_info, *inferred.output, *inferred.input]}
    constants = {t.name for t in g.initializer}
    ops = set(QLinearOpsRegistry) | set(QDQRegistry)
    floats = (TensorProto.FLOAT, TensorProto.FLOAT16)
    names = dict.fromkeys(t for n in g.node if n.op_type in ops for t in [*n.input, *n.output]
                          if t in types and t not in constants and types[t].HasField("tensor_type")
                          and types[t].tensor_type.elem_type in floats)
    return list(names)


def measure_ranges(model: Any, samples: list[dict[str, np.ndarray]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The min/max ranges of :func:`calibrated_tensors` over ``samples``, from one float session run as
    onnxruntime's calibrator runs it (its graph optimizations off)."""
    from tinynpu.compiler.onnx.verify.checks import session

    ranges = MinMaxRanges(calibrated_tensors(model))
    run = session(model, ranges.names, optimize=False)
    names = [o.name for o in run.get_outputs()]
    for feeds in samples:
        ranges.add(dict(zip(names, run.run(names, feeds), strict=True)) | feeds)
    return ranges.ranges()


class MinMaxRanges:
    """Each tensor's smallest and largest value over the samples seen: onnxruntime's min/max calibration
    (``MinMaxCalibrater`` without its options: one ``ReduceMin``/``ReduceMax`` per sample, the minimum of the
    minima and the maximum of the maxima), computed on values a run already has instead of in a session of
    its own."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.low: dict[str, np.float32] = {}
        self.high: dict[str, np.float32] = {}

    def add(self, values: dict[str, np.ndarray]) -> None:
        """One sample's values of (some of) the tensors.  An empty tensor (a cache of length 0) reduces to
        ``(inf, -inf)``, as onnxruntime's ``ReduceMin``/``ReduceMax`` give it."""
        for name in self.names:
            v = values.get(name)
            if v is None:
                continue
            lo, hi = (np.min(v), np.max(v)) if v.size else (np.float32(np.inf), np.float32(-np.inf))
            self.low[name] = min(self.low.get(name, lo), lo)
            self.high[name] = max(self.high.get(name, hi), hi)

    def ranges(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The ranges, each bound an array of one value as the calibrator keeps it."""
        return {n: (np.array([self.low[n]], np.float32), np.array([self.high[n]], np.float32)) for n in self.low}


__all__ = ["CalibrationSource", "InputRole", "MinMaxRanges", "calibrated_tensors", "check_ids", "check_sample",
           "describe_seeded", "infer_light", "input_roles", "load_calibration", "measure_ranges",
           "sample_inputs"]
