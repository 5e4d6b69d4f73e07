"""Load an ONNX model and bring it into the form the quantizer and the lowering expect.

Steps, in order (each one says why):

1. Load and check: a file that is not an ONNX protobuf, or a truncated one,
   is refused with one paragraph naming the file.
2. Rewrite QOperator nodes (``QLinearConv``, ``QLinearMatMul``,
   ``MatMulInteger``, ...) into the QDQ pattern they compute
   (:mod:`.qoperator`), so an already quantized model of either format is
   taken as it is.  Then fold constant subgraphs (``ConstantOfShape`` weights
   of the model-zoo graphs) into initializers: the quantizer and the version
   converter only handle weights that are initializers.  A
   ``DequantizeLinear`` of a constant is kept: it marks a quantized weight.
3. Replace constant weights by seeded, fan-in-scaled random ones when asked
   (and by default when every weight tensor is a constant), so that a
   network's outputs mean something: with all-equal weights every channel is
   the same and top-1 ties everywhere.
4. Convert to opset 13 (the first with per-axis ``DequantizeLinear``, which
   per-channel weights need).
5. Fold constants again: the converter writes ``Unsqueeze`` nodes of
   constants (the ``Unsqueeze -> Mul``/``Add`` chains DenseNet and
   Inception-v2 use for their batch-norm scale and shift), which
   ``onnx.reference`` evaluates only at opset 13.
6. Fold ``BatchNormalization``, and ``Mul``/``Add`` by per-output-channel
   constants, into the preceding ``Conv`` (each of these layers then runs as
   one accelerator layer, its activation fused, instead of two float host
   steps between Q/DQ pairs), and such a ``Mul``/``Add`` after a batch norm
   with no conv before it into that batch norm's scale and shift; drop ``Dropout`` (inference), fix a dynamic
   batch to ``--batch``, and run shape inference so every tensor has a static
   shape.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.frontend.affine import consumers, fold_batchnorm, fold_channel_affine
from tinynpu.compiler.onnx.frontend.external import load_external
from tinynpu.compiler.onnx.frontend.validate import (
    HOST_BYTES_LIMIT,
    check_graph,
    check_input_sizes,
    check_quantization,
    check_tensor_sizes,
    check_tensors,
    check_types,
)
from tinynpu.errors import OnnxError, UsageError

TARGET_OPSET = 13


def _onnx():
    import onnx

    return onnx


@dataclass(frozen=True)
class Imported:
    """A float model ready for quantization.

    Attributes:
        model: The ``onnx.ModelProto`` (opset >= 13, static shapes, initializers for every weight).
        source: Where it came from (file name, for messages).
        random_weights: The seed of the random weights that replaced constant ones, or None.
        notes: What the import did (folded batch norms, removed dropouts, ...), for the report.
    """

    model: Any
    source: str
    random_weights: int | None
    notes: tuple[str, ...]


def load_model(path: str | Path) -> Any:
    """Read ``path`` as an ONNX model; one clear error when it is not one or is cut short."""
    from tinynpu import fsio

    onnx = _onnx()
    p = Path(path)
    data = fsio.read_bytes(p, what="the ONNX model", error=OnnxError)
    try:
        model = onnx.load_from_string(data)
    except Exception as exc:  # protobuf raises DecodeError / RuntimeWarning subclasses
        raise OnnxError(f"{p}: not a readable ONNX model ({len(data)} bytes; the protobuf parser says: "
                        f"{str(exc).strip() or type(exc).__name__}). A truncated download looks like this "
                        "too.") from None
    if not model.HasField("graph") or not model.graph.node:
        raise OnnxError(f"{p}: parsed as protobuf but holds no ONNX graph (no nodes): not an ONNX model, "
                        "or a truncated one.")
    # External data is read in from the model's own folder before anything else looks at the model: from
    # here on it is whole in memory, and nothing resolves a data file against the working directory.
    external_bytes = load_external(model, p, limit=HOST_BYTES_LIMIT)
    check_tensors(model, str(p))
    check_graph(model, str(p))
    try:
        # The checker works on serialized bytes: without external data the file's own bytes are the
        # model's, so the proto is not serialized again (4 s for GPT-2-small's 500 MB).
        onnx.checker.check_model(model if external_bytes else data)
    except Exception as exc:
        raise OnnxError(f"{p}: the ONNX checker rejects the model: {_first_line(exc)}") from None
    return model


def _first_line(exc: BaseException) -> str:
    """A library's message in one line (the checker's run over several: "... of node:" then the node)."""
    text = " ".join(str(exc).split())
    return (text[:500] + "...") if len(text) > 500 else (text or type(exc).__name__)


def import_model(path: str | Path, *, batch: int | None = None, random_weights: int | None = None,
                 force_random: bool = False) -> Imported:
    """Load ``path`` and prepare it (see the module docstring).

    Args:
        path: The ``.onnx`` file.
        batch: Value for a dynamic first input dimension (required when there is one).
        random_weights: Seed for replacing constant weights by random ones; None = the default rule.
        force_random: Replace weights even when they are not all constants.

    Raises:
        OnnxError: not ONNX, truncated, a dynamic dimension without ``batch``, shape inference fails.
    """
    model = load_model(path)
    notes: list[str] = []
    opset = _default_opset(model)
    graph = model.graph
    init_names = {t.name for t in graph.initializer}
    # IR 3 models list initializers among the inputs; they are not inputs of the network.
    real_inputs = [i for i in graph.input if i.name not in init_names]
    del graph.input[:]
    graph.input.extend(real_inputs)
    _fix_batch(graph, batch, str(path))
    check_input_sizes(graph, str(path))
    from tinynpu.compiler.onnx.frontend.qoperator import to_qdq

    rewritten = to_qdq(model)
    if rewritten:
        notes.append(f"rewrote {rewritten} QOperator nodes (QLinearConv, QLinearMatMul, ...) into QDQ form")
    folded = _fold_constants(model, opset)
    if folded:
        notes.append(f"folded {folded} constant nodes into initializers")
    # "every weight a constant": every conv/gemm/matmul weight tensor holds one repeated value
    use = consumers(graph)
    weights = [w for name, w in _float_weights(graph).items() if _role(name, w.shape, use)[0] == "weight"]
    all_constant = bool(weights) and all(np.all(w == w.flat[0]) for w in weights)
    seed = random_weights
    if seed is None and all_constant:
        seed = 0
    if seed is not None and (all_constant or force_random or random_weights is not None):
        _randomize(graph, seed)
        notes.append(f"weights replaced by seeded fan-in-scaled random values (seed {seed})"
                     + (" because every weight in the file is a constant" if all_constant else ""))
    else:
        seed = None
    if model.ir_version < 7:  # IR 4+ lets initializers be absent from the inputs (they are, since above)
        model.ir_version = 7
    if opset < TARGET_OPSET:
        from onnx import version_converter

        try:
            model = version_converter.convert_version(model, TARGET_OPSET)
        except Exception as exc:
            raise OnnxError(f"{path}: converting opset {opset} to {TARGET_OPSET} failed: {_first_line(exc)}"
                            ) from None
        notes.append(f"converted opset {opset} -> {TARGET_OPSET}")
        graph = model.graph
        refolded = _fold_constants(model, TARGET_OPSET)
        if refolded:
            notes.append(f"folded {refolded} constant nodes the conversion wrote into initializers")
    n_bn = fold_batchnorm(graph)
    if n_bn:
        notes.append(f"folded {n_bn} BatchNormalization nodes into their Conv")
    n_affine = fold_channel_affine(graph)
    if n_affine:
        notes.append(f"folded {n_affine} Mul/Add by per-channel constants into their Conv or BatchNormalization")
    n_drop = _remove_identity_like(graph)
    if n_drop:
        notes.append(f"removed {n_drop} Dropout/Identity nodes")
    from tinynpu.compiler.onnx.frontend.fold import fold_static

    model, n_static = fold_static(model, max(opset, TARGET_OPSET))  # shapes, masks, positions: see fold.py
    if n_static:
        notes.append(f"folded {n_static} nodes computed from shapes and constants alone (masks, positions, "
                     "shape arithmetic) into initializers")
    check_all_supported(model, str(path))
    model = check_types(model, str(path))  # shapes inferred, as strictly as onnxruntime checks them
    check_quantization(model, str(path))
    check_tensor_sizes(model, str(path))
    return Imported(model=model, source=str(path), random_weights=seed, notes=tuple(notes))


def check_all_supported(model: Any, source: str) -> None:
    """Refuse a model with nodes no step can run, naming every such operator at once (with counts and
    the first node of each), not only the first one met."""
    from collections import Counter

    from tinynpu.compiler.onnx.frontend.hostops import node_name, runs_on_host

    missing: Counter[tuple[str, str]] = Counter()
    first: dict[tuple[str, str], str] = {}
    for node in model.graph.node:
        if not runs_on_host(node):
            key = (node.domain or "ai.onnx", node.op_type)
            missing[key] += 1
            first.setdefault(key, node_name(node))
    if not missing:
        return
    opset = _default_opset(model)
    kinds = "; ".join(f"{op} x{n} (domain {domain!r}; first node {first[(domain, op)]!r})"
                      for (domain, op), n in sorted(missing.items(), key=lambda kv: (-kv[1], kv[0][1])))
    raise OnnxError(f"{source}: {sum(missing.values())} nodes of {len(missing)} operator types (opset {opset}) "
                    f"have no accelerator lowering and no host fallback in tinynpu: {kinds}.")


def _default_opset(model: Any) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def _fix_batch(graph: Any, batch: int | None, source: str) -> None:
    if batch is not None and (isinstance(batch, bool) or batch <= 0):
        raise UsageError(f"--batch must be a positive integer, not {batch!r}.")
    for inp in graph.input:
        dims = inp.type.tensor_type.shape.dim
        for axis, d in enumerate(dims):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            if axis == 0 and batch is not None:
                d.dim_value = batch
                continue
            what = d.dim_param or "?"
            if axis == 0:
                raise OnnxError(f"{source}: input {inp.name!r} has a dynamic batch dimension ({what!r}); "
                                "give its size with --batch N.")
            raise OnnxError(f"{source}: input {inp.name!r} dimension {axis} is dynamic ({what!r}); tinynpu "
                            "compiles static shapes only and --batch sets only dimension 0.")
    if batch is not None:  # the outputs' batch follows from shape inference
        for out in graph.output:
            dims = out.type.tensor_type.shape.dim
            if dims and not (dims[0].HasField("dim_value") and dims[0].dim_value > 0):
                dims[0].dim_value = batch


#: Nodes kept even on constant inputs: a quantized weight's DequantizeLinear is what marks it quantized.
_NOT_FOLDED = ("Dropout", "DequantizeLinear", "QuantizeLinear")


def _fold_constants(model: Any, opset: int) -> int:
    """Evaluate every node whose inputs are all constants; its outputs become initializers."""
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    kept = []
    folded = 0
    for node in graph.node:
        if node.op_type in ("Constant",) or (node.input and all((not i) or i in consts for i in node.input)
                                             and node.op_type not in _NOT_FOLDED):
            try:
                ev = ReferenceEvaluator(node, opsets={"": opset})
                outs = ev.run(None, {i: consts[i] for i in node.input if i})
            except Exception:
                kept.append(node)
                continue
            for name, value in zip(node.output, outs, strict=False):
                consts[name] = np.asarray(value)
            folded += 1
            continue
        kept.append(node)
    if not folded:
        return 0
    used = {i for n in kept for i in n.input} | {o.name for o in graph.output}
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in consts.items() if k in used)
    return folded


def _float_weights(graph: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    out = {}
    for t in graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype.kind == "f" and a.size > 1:
            out[t.name] = a
    return out


def _randomize(graph: Any, seed: int) -> None:
    """Seeded weights by role: He-scaled conv/gemm weights, small biases, near-identity batch norms."""
    from onnx import numpy_helper

    rng = np.random.default_rng(seed)
    use = consumers(graph)
    new = []
    for t in graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype.kind != "f":
            new.append(t)
            continue
        role, fan_in = _role(t.name, a.shape, use)
        if role == "weight":
            v = rng.standard_normal(a.shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / max(fan_in, 1)))
        elif role == "bn_scale":
            v = rng.uniform(0.8, 1.2, a.shape)
        elif role == "bn_var":
            v = rng.uniform(0.5, 1.5, a.shape)
        elif role in ("bias", "bn_bias", "bn_mean"):
            v = rng.normal(0.0, 0.1, a.shape)
        else:
            new.append(t)  # a shape, an epsilon, a scale constant: kept as the model has it
            continue
        new.append(numpy_helper.from_array(v.astype(a.dtype), t.name))
    del graph.initializer[:]
    graph.initializer.extend(new)


def _role(name: str, shape: tuple[int, ...], use: dict[str, list[tuple[Any, int]]]) -> tuple[str, int]:
    for node, idx in use.get(name, []):
        op = node.op_type
        if op in ("Conv", "ConvTranspose") and idx == 1:
            return "weight", int(np.prod(shape[1:]))
        if op in ("Conv", "ConvTranspose", "Gemm") and idx == 2:
            return "bias", 0
        if op == "Gemm" and idx == 1:
            trans_b = any(a.name == "transB" and a.i for a in node.attribute)
            return "weight", int(shape[1] if trans_b else shape[0])
        if op == "MatMul" and idx == 1 and len(shape) >= 2:
            return "weight", int(shape[-2])
        if op == "BatchNormalization" and idx >= 1:
            return ("bn_scale", "bn_bias", "bn_mean", "bn_var")[idx - 1], 0
    return "other", 0


def _remove_identity_like(graph: Any) -> int:
    """Dropout (inference: identity) and Identity nodes are removed, their consumers rewired."""
    outputs = {o.name for o in graph.output}
    removed = 0
    for node in list(graph.node):
        if node.op_type not in ("Dropout", "Identity"):
            continue
        src, dst = node.input[0], node.output[0]
        if dst in outputs:
            continue
        for other in graph.node:
            for i, name in enumerate(other.input):
                if name == dst:
                    other.input[i] = src
        graph.node.remove(node)
        removed += 1
    return removed


def input_specs(model: Any) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    """``(name, shape, dtype)`` of every network input (static after import)."""
    from onnx import helper

    out = []
    for inp in model.graph.input:
        tt = inp.type.tensor_type
        shape = tuple(int(d.dim_value) for d in tt.shape.dim)
        out.append((inp.name, shape, np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))))
    return out


def seeded_inputs(model: Any, seed: int, names: Iterable[str] = ()) -> dict[str, np.ndarray]:
    """Seeded inputs by role: standard-normal floats, token ids within their tables, masks of ones
    (:mod:`.calibration`)."""
    from tinynpu.compiler.onnx.frontend.calibration import sample_inputs

    return sample_inputs(model, seed, names)


__all__ = ["import_model", "input_specs", "load_model", "seeded_inputs"]
