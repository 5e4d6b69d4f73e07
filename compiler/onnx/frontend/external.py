"""External data: an ONNX model's tensors stored in files beside it, read into memory once, from its own folder.

torch's default exporter (``torch.onnx.export(..., dynamo=True)``) writes the
weights to ``MODEL.onnx.data`` beside ``MODEL.onnx``; each such tensor names
its file (``location``, relative to the model's folder), ``offset`` and
``length``.  onnx's own loader resolves ``location`` against a base folder
it is given, and the checker and onnxruntime against the current directory
when given an in-memory model: the same file name in the working directory
would then be read instead of the model's.  So tinynpu reads every external
tensor itself, once, right after parsing, and from that point on the model
is whole in memory (the checker, the quantizer's temporary copy and every
onnxruntime session get the weights, whatever the working directory).

The rule (docs/onnx.md, "Bad models and options"): a data file is read only from inside the model's
own folder: ``location`` must be a relative path without ``..``, resolving
(symlinks followed) to a regular file inside that folder; ``offset`` and
``length`` must be decimal byte counts that lie inside the file, and the
length must be exactly what the tensor's shape and type need.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from tinynpu.errors import OnnxError

#: The keys of a tensor's ``external_data`` (ONNX's external-data specification).
_KEYS = frozenset(("location", "offset", "length", "checksum"))
#: The longest name one path component may have on the file systems tinynpu runs on.
_NAME_MAX = 255


def tensors(model: Any) -> list[tuple[str, Any]]:
    """Every tensor of ``model`` that can hold data, with where it is (for messages): initializers,
    sparse initializers, and the tensor attributes of nodes (``Constant``), subgraphs included."""
    out: list[tuple[str, Any]] = []

    def graph(g: Any, where: str) -> None:
        for t in g.initializer:
            out.append((f"{where}initializer {t.name!r}", t))
        for s in g.sparse_initializer:
            out.append((f"{where}sparse initializer {s.values.name!r}", s.values))
            out.append((f"{where}sparse initializer {s.values.name!r} (indices)", s.indices))
        for node in g.node:
            label = node.name or (node.output[0] if node.output else node.op_type)
            for a in node.attribute:
                if a.HasField("t"):
                    out.append((f"{where}node {label!r} attribute {a.name!r}", a.t))
                for i, t in enumerate(a.tensors):
                    out.append((f"{where}node {label!r} attribute {a.name!r}[{i}]", t))
                if a.HasField("g"):
                    graph(a.g, f"{where}node {label!r} subgraph {a.name!r}: ")
                for sub in a.graphs:
                    graph(sub, f"{where}node {label!r} subgraph {a.name!r}: ")

    graph(model.graph, "")
    return out


def is_external(t: Any) -> bool:
    from onnx import TensorProto

    return bool(t.data_location == TensorProto.EXTERNAL)


def _count(text: str, key: str, where: str, source: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise OnnxError(f"{source}: {where} has external-data {key} {text[:40]!r}; expected a byte count "
                        "(a decimal number, 0 or more).")
    return int(text)


def data_path(folder: Path, location: str, where: str, source: str) -> Path:
    """The file ``location`` names, checked to resolve to a regular file inside ``folder``."""
    if not location or "\0" in location:
        raise OnnxError(f"{source}: {where} is stored as external data but names no file (location "
                        f"{location[:60]!r}).")
    rel = PurePosixPath(location.replace("\\", "/"))
    if rel.is_absolute() or ".." in rel.parts or any(len(p) > _NAME_MAX for p in rel.parts):
        raise OnnxError(f"{source}: {where} names its external data file {location[:120]!r}, which is not a plain "
                        "relative path inside the model's folder; tinynpu reads a model's data only from beside "
                        "the model (no absolute paths, no '..').")
    base = folder.resolve()
    path = (base / rel).resolve()
    if path != base and base not in path.parents:
        raise OnnxError(f"{source}: {where} names its external data file {location!r}, which resolves to {path}, "
                        f"outside the model's folder {base} (a symlink out of it); tinynpu reads a model's data "
                        "only from beside the model.")
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise OnnxError(f"{source}: {where} is stored in {location!r} beside the model, but {base / rel} cannot "
                        f"be read ({exc.strerror or exc}); copy the data file next to the .onnx file.") from None
    if not stat.S_ISREG(mode):
        raise OnnxError(f"{source}: {where} is stored in {location!r} beside the model, but {base / rel} is not a "
                        "regular file.")
    return path


def expected_bytes(t: Any) -> int | None:
    """Bytes a tensor of ``t``'s type and shape holds in raw form, or None for a type without a fixed size."""
    from tinynpu.compiler.onnx.frontend.validate import element_bits

    size = element_bits(int(t.data_type))
    if size is None:
        return None
    count = 1
    for d in t.dims:
        count *= int(d)
    bits = size * count
    return (bits + 7) // 8


def load_external(model: Any, model_path: str | Path, *, limit: int) -> int:
    """Read every external tensor of ``model`` (loaded from ``model_path``) into it; the bytes read.

    Every location, offset and length is checked before any byte is read, and their sum against
    ``limit`` (bytes of host memory the weights may take).

    Raises:
        OnnxError: a location outside the model's folder, a missing, short or non-regular data file,
            an offset or length that is not a byte count or lies outside the file, a length that is not
            what the tensor's shape and type need, a checksum that does not match, a key ONNX does not define.
    """
    from onnx import TensorProto

    from tinynpu.compiler.onnx.frontend.validate import type_name

    source = str(model_path)
    folder = Path(model_path).parent
    plan: list[tuple[str, Any, Path, int, int, str | None]] = []
    total = 0
    for where, t in tensors(model):
        if not is_external(t):
            continue
        info = {e.key: e.value for e in t.external_data}
        unknown = sorted(set(info) - _KEYS)
        if unknown:
            raise OnnxError(f"{source}: {where} has external-data key {unknown[0]!r}; ONNX defines "
                            f"{', '.join(sorted(_KEYS))}.")
        if t.data_type in (TensorProto.STRING, TensorProto.UNDEFINED):
            raise OnnxError(f"{source}: {where} is of type {type_name(t.data_type)}, which cannot be stored as "
                            "external data.")
        if t.HasField("raw_data") and t.raw_data:
            raise OnnxError(f"{source}: {where} has both inline raw data and external data; one of them is "
                            "left over from an edit.")
        path = data_path(folder, info.get("location", ""), where, source)
        size = path.stat().st_size
        offset = _count(info["offset"], "offset", where, source) if "offset" in info else 0
        want = expected_bytes(t)
        if want is None:
            raise OnnxError(f"{source}: {where} is of type {type_name(t.data_type)}, which tinynpu does not read.")
        length = _count(info["length"], "length", where, source) if "length" in info else want
        if offset > size or length > size - offset:
            raise OnnxError(f"{source}: {where}: its external data ({length} bytes at offset {offset} of "
                            f"{info['location']!r}) runs past the end of that file ({size} bytes); the data file "
                            "is short, or not the one written with this model.")
        if length != want:
            raise OnnxError(f"{source}: {where} has shape {list(t.dims)} and type {type_name(t.data_type)}, which take "
                            f"{want} bytes, but its external data is {length} bytes long.")
        total += length
        if total > limit:
            raise OnnxError(f"{source}: the model's external data takes more than {limit:,} bytes (at {where}); "
                            "tinynpu holds a model's weights in host memory and takes at most that.")
        plan.append((where, t, path, offset, length, info.get("checksum")))
    for where, t, path, offset, length, checksum in plan:
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                data = os.pread(fd, length, offset) if length else b""
            finally:
                os.close(fd)
        except OSError as exc:
            raise OnnxError(f"{source}: {where}: reading its external data from {path} failed "
                            f"({exc.strerror or exc}).") from None
        if len(data) != length:
            raise OnnxError(f"{source}: {where}: {path} ended after {len(data)} of the {length} bytes at offset "
                            f"{offset} (the file changed while being read?).")
        if checksum is not None and hashlib.sha1(data).hexdigest() != checksum.lower():
            raise OnnxError(f"{source}: {where}: its external data in {path} does not match the SHA-1 checksum "
                            "the model records for it.")
        t.raw_data = data
        del t.external_data[:]
        t.data_location = TensorProto.DEFAULT
    return total


__all__ = ["data_path", "expected_bytes", "is_external", "load_external", "tensors"]
