"""Every ONNX input checked before any work: what onnx, numpy or onnxruntime would otherwise raise, refused first.

Each check says, in one paragraph, which tensor, node or option is wrong and
what was expected, before the front end decodes, allocates or hands the
model to onnxruntime:

* :func:`check_tensors`: every tensor holding data (initializers, ``Constant``
  values) decodes: a known type tinynpu reads, non-negative dims, a size
  within the host-memory bound, and exactly the bytes (or values) its shape
  and type need.  Run after external data is read in (:mod:`.external`).
* :func:`check_graph`: the graph has outputs, each one written by something;
  its opset is one the installed onnx knows; its float tensors are float32
  (tinynpu quantizes float32 models; onnxruntime's quantizer refuses others).
* :func:`check_quantization`: every ``QuantizeLinear``/``DequantizeLinear``
  has constant, finite, positive float32 scales, zero points of its
  quantized type and of the scale's shape, and an axis inside its input's
  rank whose length is the scale's.
* :func:`check_tensor_sizes`: what one inference holds (every tensor of the
  shape-inferred graph), times the inferences a run keeps at once
  (calibration), against :data:`HOST_BYTES_LIMIT`.
* :func:`check_feeds`: the user's ``--input`` arrays: dtype kind, finite
  floats, token ids inside the table they index.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import numpy as np

from tinynpu.errors import OnnxError

#: Bytes of host memory the tensors of a run may take: one inference's tensors times the inferences
#: kept at once (onnxruntime's calibration keeps every tensor of every calibration input: DenseNet-121
#: at the default 8 inputs holds 2.6 GB); far above any model tinynpu's configs can hold in DRAM.
HOST_BYTES_LIMIT = 8 << 30

#: Bits per element of each ONNX tensor data type (None: no fixed size, STRING).
_BITS = {1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64, 14: 64, 15: 128,
         16: 16, 17: 8, 18: 8, 19: 8, 20: 8, 21: 4, 22: 4, 23: 4, 24: 8, 25: 2, 26: 2, 27: 6, 28: 6}
#: Data types tinynpu decodes (numbers numpy holds natively, float16 and bfloat16 included so that they
#: are named by the float32 rule rather than refused as unreadable).
_READABLE = frozenset((1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16))
#: Float types other than float32: refused by the float32 rule.
_OTHER_FLOATS = frozenset((10, 11, 16))
#: The typed field of a TensorProto that holds each readable type's values when there is no raw data.
_FIELD = {1: "float_data", 2: "int32_data", 3: "int32_data", 4: "int32_data", 5: "int32_data", 6: "int32_data",
          7: "int64_data", 9: "int32_data", 10: "int32_data", 11: "double_data", 12: "uint64_data",
          13: "uint64_data", 16: "int32_data"}
_FIELDS = ("float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data")

#: How many inferences' tensors a run keeps at once (set by the command from --calibrate).
_COPIES: ContextVar[int] = ContextVar("tinynpu_onnx_copies", default=8)


def element_bits(data_type: int) -> int | None:
    """Bits per element of ONNX data type ``data_type``; None for STRING and unknown types."""
    return _BITS.get(int(data_type))


def type_name(data_type: int) -> str:
    from onnx import TensorProto

    try:
        return str(TensorProto.DataType.Name(int(data_type))).lower()
    except ValueError:
        return f"unknown type {data_type}"


@contextlib.contextmanager
def inferences_held(count: int) -> Iterator[None]:
    """Within the block, a run keeps ``count`` inferences' tensors at once (for :func:`check_tensor_sizes`)."""
    token = _COPIES.set(max(int(count), 1))
    try:
        yield
    finally:
        _COPIES.reset(token)


def _elements(dims: Any, where: str, source: str) -> int:
    count = 1
    for d in dims:
        if int(d) < 0:
            raise OnnxError(f"{source}: {where} has a negative dimension in its shape {list(dims)}.")
        count *= int(d)
    return count


def check_tensor(t: Any, where: str, source: str) -> None:
    """One data-holding tensor decodes to exactly its shape and type (see the module docstring)."""
    from onnx import numpy_helper

    dt = int(t.data_type)
    if dt not in _READABLE:
        raise OnnxError(f"{source}: {where} is of type {type_name(dt)}, which tinynpu does not read (it takes "
                        "float32 models and their int8/uint8/int32/int64 tensors).")
    count = _elements(t.dims, where, source)
    bits = _BITS[dt]
    if count * max(bits // 8, 1) > HOST_BYTES_LIMIT:
        raise OnnxError(f"{source}: {where} has shape {list(t.dims)}: {count:,} elements, more than tinynpu's "
                        f"host-memory bound of {HOST_BYTES_LIMIT:,} bytes.")
    typed = {f: len(getattr(t, f)) for f in _FIELDS if len(getattr(t, f))}
    if t.HasField("raw_data"):
        if typed:
            raise OnnxError(f"{source}: {where} holds raw data and also values in {next(iter(typed))}; a tensor "
                            "holds one or the other.")
        want = count * bits // 8
        if len(t.raw_data) != want:
            raise OnnxError(f"{source}: {where} has shape {list(t.dims)} and type {type_name(dt)}, which take "
                            f"{want} bytes, but holds {len(t.raw_data)} bytes of raw data.")
    else:
        field = _FIELD[dt]
        stray = sorted(set(typed) - {field})
        if stray:
            raise OnnxError(f"{source}: {where} is of type {type_name(dt)} but holds values in {stray[0]}, the "
                            "field of another type.")
        if typed.get(field, 0) != count:
            raise OnnxError(f"{source}: {where} has shape {list(t.dims)} ({count} elements) but holds "
                            f"{typed.get(field, 0)} values.")
    try:
        numpy_helper.to_array(t)
    except Exception as exc:  # whatever numpy or onnx raise on a tensor the checks above let through
        raise OnnxError(f"{source}: {where} cannot be decoded: {str(exc).splitlines()[0] if str(exc) else exc!r}"
                        ) from None


def check_tensors(model: Any, source: str) -> None:
    """Every data-holding tensor of ``model`` decodes (after external data is read in), and their sum fits."""
    from tinynpu.compiler.onnx.frontend.external import is_external, tensors

    total = 0
    for where, t in tensors(model):
        if is_external(t):  # read in before this check; one left is a bug, not the user's
            raise OnnxError(f"{source}: {where} still refers to external data after loading.")
        check_tensor(t, where, source)
        total += len(t.raw_data) if t.HasField("raw_data") else _elements(t.dims, where, source) * 8
        if total > HOST_BYTES_LIMIT:
            raise OnnxError(f"{source}: the model's weights take more than tinynpu's host-memory bound of "
                            f"{HOST_BYTES_LIMIT:,} bytes (at {where}).")


def _value_types(graph: Any) -> dict[str, Any]:
    """Every tensor's type proto by name (inputs, outputs, value_info)."""
    return {v.name: v.type for v in (*graph.input, *graph.value_info, *graph.output)}


def check_graph(model: Any, source: str) -> None:
    """Outputs, opset and float types (see the module docstring)."""
    import onnx

    graph = model.graph
    newest = onnx.defs.onnx_opset_version()
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx") and not 1 <= imp.version <= newest:
            raise OnnxError(f"{source}: the model imports ONNX opset {imp.version}; the installed onnx knows "
                            f"opsets 1 to {newest}.")
    if not graph.output:
        raise OnnxError(f"{source}: the graph has no outputs, so there is nothing to compute or compare; an "
                        "exporter writes at least one graph output.")
    written = {o for n in graph.node for o in n.output} | {t.name for t in graph.initializer} | {
        i.name for i in graph.input}
    for out in graph.output:
        if out.name not in written:
            raise OnnxError(f"{source}: graph output {out.name!r} is written by no node (and is no input or "
                            "initializer).")
    for where, name, elem in _float_tensors(graph):
        if elem in _OTHER_FLOATS:
            raise OnnxError(f"{source}: {where} {name!r} is {type_name(elem)}; tinynpu quantizes float32 models "
                            "(onnxruntime's quantizer does not take others): export or convert the model to "
                            "float32.")


def _float_tensors(graph: Any) -> Iterator[tuple[str, str, int]]:
    for v in graph.input:
        yield "input", v.name, int(v.type.tensor_type.elem_type)
    for v in graph.output:
        yield "output", v.name, int(v.type.tensor_type.elem_type)
    for t in graph.initializer:
        yield "initializer", t.name, int(t.data_type)
    for node in graph.node:
        if node.op_type == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), 0)
            yield "Cast node", node.name or node.output[0], int(to)


def check_types(model: Any, source: str) -> Any:
    """The model with shapes inferred, its types checked node by node as onnxruntime checks them."""
    import onnx

    try:
        return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except Exception as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise OnnxError(f"{source}: the graph's types or shapes are inconsistent, which onnxruntime would "
                        f"refuse: {text[:600]}") from None


def _rank_and_shape(name: str, consts: dict[str, np.ndarray], types: dict[str, Any]) -> tuple[int, ...] | None:
    if name in consts:
        return tuple(consts[name].shape)
    t = types.get(name)
    if t is None or not t.tensor_type.HasField("shape"):
        return None
    return tuple(int(d.dim_value) if d.HasField("dim_value") else -1 for d in t.tensor_type.shape.dim)


def _elem_type(name: str, consts: dict[str, np.ndarray], types: dict[str, Any]) -> np.dtype | None:
    from onnx import helper

    if name in consts:
        return consts[name].dtype
    t = types.get(name)
    if t is None or not t.tensor_type.elem_type:
        return None
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type))
    except Exception:
        return None


_QUANTIZED = (np.dtype(np.int8), np.dtype(np.uint8))


def check_quantization(model: Any, source: str) -> None:
    """Every Q/DQ node's scale, zero point and axis (see the module docstring); shapes must be inferred."""
    from onnx import numpy_helper

    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    types = _value_types(graph)
    for node in graph.node:
        if node.op_type not in ("QuantizeLinear", "DequantizeLinear") or node.domain not in ("", "ai.onnx"):
            continue
        label = f"{source}: node {node.name or node.output[0]!r} ({node.op_type})"
        x, scale_name = node.input[0], node.input[1] if len(node.input) > 1 else ""
        zp_name = node.input[2] if len(node.input) > 2 else ""
        attrs = {a.name: a for a in node.attribute}
        if "block_size" in attrs and attrs["block_size"].i:
            raise OnnxError(f"{label}: blocked quantization (block_size {attrs['block_size'].i}) is not supported; "
                            "tinynpu takes per-tensor and per-channel scales.")
        scale = _checked_scale(label, scale_name, consts)
        want_q = _elem_type(x, consts, types) if node.op_type == "DequantizeLinear" else None
        if zp_name:
            _check_zero_point(label, node.op_type, zp_name, scale_name, scale, want_q, x, consts)
        elif want_q is not None and want_q not in (*_QUANTIZED, np.dtype(np.int32)):
            raise OnnxError(f"{label}: its input {x!r} is {want_q}; DequantizeLinear takes int8, uint8 or int32.")
        if node.op_type == "QuantizeLinear":
            xt = _elem_type(x, consts, types)
            if xt is not None and xt != np.float32:
                raise OnnxError(f"{label}: its input {x!r} is {xt}; QuantizeLinear quantizes float32 here.")
        if scale.ndim == 1:
            axis = int(attrs["axis"].i) if "axis" in attrs else 1
            _check_channel_axis(label, x, axis, scale_name, scale, consts, types)


def _checked_scale(label: str, scale_name: str, consts: dict[str, np.ndarray]) -> np.ndarray:
    """The node's scale: a float32 constant, one number or a vector, every value positive and finite."""
    if scale_name not in consts:
        raise OnnxError(f"{label}: its scale {scale_name!r} is not a constant; tinynpu needs static "
                        "quantization parameters (constants).")
    scale = consts[scale_name]
    if scale.dtype != np.float32:
        raise OnnxError(f"{label}: its scale {scale_name!r} is {scale.dtype}; scales are float32.")
    if scale.ndim > 1:
        raise OnnxError(f"{label}: its scale {scale_name!r} has shape {list(scale.shape)}; a scale is one "
                        "number (per tensor) or a vector (per channel).")
    bad = ~(np.isfinite(scale) & (scale > 0))
    if bad.any():
        raise OnnxError(f"{label}: its scale {scale_name!r} holds {scale.reshape(-1)[bad.reshape(-1)][0]!r} "
                        f"(at index {int(np.flatnonzero(bad)[0])}); a scale must be positive and finite.")
    return scale


def _check_zero_point(label: str, op_type: str, zp_name: str, scale_name: str, scale: np.ndarray,
                      want_q: np.dtype | None, x: str, consts: dict[str, np.ndarray]) -> None:
    """The zero point: a constant of the scale's shape and of the quantized tensor's type."""
    if zp_name not in consts:
        raise OnnxError(f"{label}: its zero point {zp_name!r} is not a constant; tinynpu needs static "
                        "quantization parameters.")
    zp = consts[zp_name]
    if zp.shape != scale.shape:
        raise OnnxError(f"{label}: its zero point {zp_name!r} has shape {list(zp.shape)} but its scale "
                        f"{scale_name!r} has shape {list(scale.shape)}; they must match.")
    allowed = (*_QUANTIZED, np.dtype(np.int32)) if op_type == "DequantizeLinear" else _QUANTIZED
    if zp.dtype not in allowed:
        raise OnnxError(f"{label}: its zero point {zp_name!r} is {zp.dtype}; tinynpu takes "
                        f"{', '.join(str(d) for d in allowed)} zero points.")
    if want_q is not None and zp.dtype != want_q:
        raise OnnxError(f"{label}: its zero point {zp_name!r} is {zp.dtype} but its input {x!r} is "
                        f"{want_q}; onnxruntime refuses a zero point of another type than the quantized tensor.")


def _check_channel_axis(label: str, x: str, axis: int, scale_name: str, scale: np.ndarray,
                        consts: dict[str, np.ndarray], types: dict[str, Any]) -> None:
    """A per-channel scale's axis lies inside its input, and the scale has one value per channel."""
    shape = _rank_and_shape(x, consts, types)
    if shape is None:
        return
    rank = len(shape)
    if not -rank <= axis < rank:
        raise OnnxError(f"{label}: axis {axis} is outside its input {x!r} of rank {rank} (axes "
                        f"{-rank}..{rank - 1}).")
    length = shape[axis]
    if length >= 0 and scale.size != length:
        raise OnnxError(f"{label}: its per-channel scale {scale_name!r} has {scale.size} values but "
                        f"axis {axis} of {x!r} has {length} channels.")


def check_tensor_sizes(model: Any, source: str) -> None:
    """One inference's tensors (inputs, every inferred intermediate, outputs), times the inferences a
    run keeps at once, against :data:`HOST_BYTES_LIMIT`."""
    graph = model.graph
    total = 0
    largest = ("", 0)
    for v in (*graph.input, *graph.value_info, *graph.output):
        tt = v.type.tensor_type
        if not tt.HasField("shape") or not all(d.HasField("dim_value") for d in tt.shape.dim):
            continue
        count = 1
        for d in tt.shape.dim:
            count *= max(int(d.dim_value), 0)
        size = count * max((element_bits(tt.elem_type) or 32) // 8, 4)  # held as float32 at least
        total += size
        if size > largest[1]:
            largest = (v.name, size)
    copies = _COPIES.get()
    if total * copies > HOST_BYTES_LIMIT:
        kept = f", and a run keeps {copies} inferences' tensors at once (--calibrate)" if copies > 1 else ""
        raise OnnxError(f"{source}: one inference holds {total:,} bytes of tensors (the largest, "
                        f"{largest[0]!r}, {largest[1]:,} bytes){kept}: more than tinynpu's host-memory bound of "
                        f"{HOST_BYTES_LIMIT:,} bytes; lower --batch{' or --calibrate' if copies > 1 else ''}.")


def check_input_sizes(graph: Any, source: str) -> None:
    """The network inputs alone (static after ``--batch``) against the host bound, before shape inference."""
    total = 0
    for v in graph.input:
        count = 1
        for d in v.type.tensor_type.shape.dim:
            count *= max(int(d.dim_value), 0)
        total += count * 8  # the seeded inputs are drawn as float64 first
        if total * _COPIES.get() > HOST_BYTES_LIMIT:
            raise OnnxError(f"{source}: input {v.name!r} has {count:,} elements; with the other inputs and "
                            f"{_COPIES.get()} inferences held at once (--calibrate) that is more than tinynpu's "
                            f"host-memory bound of {HOST_BYTES_LIMIT:,} bytes; lower --batch.")


def check_feeds(model: Any, feeds: dict[str, np.ndarray]) -> None:
    """The user's inputs: float inputs get finite real floats, integer inputs integers, and token ids
    fall inside every table they index (``Gather`` of a constant: :func:`~.calibration.check_ids`)."""
    from onnx import helper

    from tinynpu.compiler.onnx.frontend.calibration import check_ids, input_roles

    graph = model.graph
    specs = {v.name: v.type.tensor_type.elem_type for v in graph.input}
    roles = {r.name: r for r in input_roles(model)}
    for name, arr in feeds.items():
        if name not in specs:
            continue  # named by the shape and name check
        want = np.dtype(helper.tensor_dtype_to_np_dtype(specs[name]))
        kind = arr.dtype.kind
        if want.kind == "f":
            if kind not in "fiub":
                raise OnnxError(f"--input {name}: the array is {arr.dtype}; the network's input {name!r} is "
                                f"{want} (give real numbers).")
            if kind == "f" and not np.isfinite(arr).all():
                raise OnnxError(f"--input {name}: the array holds NaN or infinity (at index "
                                f"{np.unravel_index(int(np.flatnonzero(~np.isfinite(arr))[0]), arr.shape)}); "
                                "int8 quantization needs finite numbers.")
        elif want.kind in "iu":
            if kind not in "iub":
                raise OnnxError(f"--input {name}: the array is {arr.dtype}; the network's input {name!r} is "
                                f"{want} (give integers).")
            info = np.iinfo(want)
            if arr.size and (int(arr.min()) < info.min or int(arr.max()) > info.max):
                raise OnnxError(f"--input {name}: values {int(arr.min())}..{int(arr.max())} do not fit the "
                                f"network's {want} input.")
            if name in roles:
                check_ids(roles[name], arr, f"--input {name}")


__all__ = ["HOST_BYTES_LIMIT", "check_feeds", "check_graph", "check_input_sizes", "check_quantization",
           "check_tensor", "check_tensor_sizes", "check_tensors", "check_types", "element_bits",
           "inferences_held", "type_name"]
