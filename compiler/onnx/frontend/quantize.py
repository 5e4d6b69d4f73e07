"""Post-training int8 quantization with onnxruntime's ``quantize_static`` (QDQ format).

Choices (and why):

- Weights int8, symmetric, per output channel: zero point 0, so a weight is
  used by ``tmm`` as it is; the per-channel scale goes into the per-column
  binary32 requantization scale of the layer's epilogue.
- Activations int8, symmetric, per tensor (``ActivationSymmetric``): zero
  point 0.  A convolution's zero padding is then the integer 0 the
  accelerator's halo ``zero`` rows write, and ``(x - zx) * w`` needs no
  correction term; asymmetric activations would need a per-output-channel
  ``zx * sum(w)`` term and a padding value of ``zx``.  The cost is one bit of
  range on relu outputs (never negative); it shows in the float comparison.
- A ``Relu``/``Clip`` right after a ``Conv``/``Gemm``/``MatMul``: the
  quantizer puts a Q/DQ pair between them (with symmetric activations it
  cannot drop the relu), scaled for the range before the relu.  That pair is
  given the relu output's own scale and zero point after quantization
  (:func:`align_activation_scales`): the layer then rounds once, straight to
  the relu output's scale, and ``DQ -> Relu -> Q`` at one scale is an integer
  clamp, exactly what the accelerator's store does.  Keeping the pair (rather
  than removing it) keeps the model onnxruntime runs integer: it computes the
  layer as a ``QLinearConv``/``QGemm``, bit for bit what ``vrequantf`` does,
  where ``DQ -> Conv -> Relu -> Q`` would be a float ``FusedConv`` whose
  float32 sums round differently near ties.  The values the old scale could
  represent and the new cannot are the ones below zero the relu clears
  anyway, and the ones above the relu output's range its Q saturates anyway.
- The inputs of a ``Concat`` are given its output's scale and zero point
  (:func:`align_concat_scales`), as TFLite's int8 specification requires of
  a concatenation: the output's calibrated range covers every input's, so
  nothing saturates, and the concatenation is then a copy of int8 values
  (onnxruntime's ``QLinearConcat`` does not requantize, and neither does the
  host) instead of a requantization of each input.  An input that something
  else reads too keeps its own scale.
- Leading rows of the residual stream far smaller than the others (a ViT's
  class token at init) are carried as tensors of their own before
  calibration (:mod:`.rowgroups`), so they get a scale of their own rather
  than a few codes of the patch rows' one.
- An additive attention mask and the softmax it feeds are left out
  (:mod:`.masks`): the scores keep the scale calibrated on themselves.
- Already quantized models (QDQ, or QOperator rewritten to QDQ on import)
  are taken as they are.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.errors import OnnxError

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource

FUSED_ACTIVATIONS = ("Relu", "Clip")
FUSING_PRODUCERS = ("Conv", "Gemm", "MatMul")


def is_quantized(model: Any) -> bool:
    """Whether the model already carries QDQ quantization (QOperator nodes are QDQ after import)."""
    ops = {n.op_type for n in model.graph.node}
    return bool(ops & {"QuantizeLinear", "DequantizeLinear"})


def quantize(model: Any, calibration: list[dict[str, np.ndarray]],
             ranges: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> Any:
    """The QDQ int8 model of the float ``model``, calibrated (min/max) on ``calibration`` inputs, or with
    ``ranges`` measured already on them (:class:`~.calibration.MinMaxRanges`: onnxruntime's calibrator, which
    builds, saves and runs a copy of the model with two reductions per tensor, is then skipped)."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class _Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
            self._it = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

    from tinynpu.compiler.onnx.frontend.masks import mask_adds
    from tinynpu.compiler.onnx.frontend.rotary import rotary_muls
    from tinynpu.compiler.onnx.frontend.rowgroups import split_small_rows

    # small leading rows (a ViT's class token) get their own tensors and scales: see rowgroups.py; ranges
    # measured already name the tensors of the model as given, so a model with ranges is taken as it is
    if ranges is None:
        model, _ = split_small_rows(model, calibration, _opset(model))
    excluded = mask_adds(model)  # an attention mask must not set the scale of the scores: see masks.py
    excluded += rotary_muls(model)  # cos and sin stay float: see rotary.py
    with tempfile.TemporaryDirectory(prefix="tinynpu-onnx-") as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
        # the weights beside the graph, not inside it: the quantizer and its calibrator each run shape
        # inference on this file, which otherwise parses and writes every weight byte again (GPT-2-small:
        # 500 MB, twice)
        _save_weights_apart(model, src)
        import logging

        import onnxruntime

        logging.getLogger().setLevel(logging.ERROR)  # the quantizer's "consider pre-processing" advice
        onnxruntime.set_default_logger_severity(3)  # and the calibration sessions' unused-initializer notes
        measured = None
        if ranges is not None:
            from onnxruntime.quantization.calibrate import CalibrationMethod, TensorsData, save_tensors_data

            measured = Path(tmp) / "ranges.json"
            save_tensors_data(TensorsData(CalibrationMethod.MinMax, dict(ranges)), measured)
        try:
            quantize_static(str(src), str(dst), None if measured else _Reader(calibration),
                            calibration_cache_path=measured, quant_format=QuantFormat.QDQ,
                            per_channel=True, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                            extra_options={"ActivationSymmetric": True, "WeightSymmetric": True},
                            nodes_to_exclude=excluded,
                            calibration_providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise OnnxError(f"onnxruntime's quantize_static failed on this model: "
                            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        q = onnx.load(str(dst))
    align_concat_scales(q)
    align_activation_scales(q)  # after: a relu before a concat takes the concat's scale
    return q


def _opset(model: Any) -> int:
    return next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)


#: Initializers larger than this many bytes are written beside the graph file.
EXTERNAL_BYTES = 1024


def _save_weights_apart(model: Any, path: Path) -> None:
    """Save ``model`` at ``path`` with its large initializers in a file beside it (ONNX external data),
    leaving ``model`` itself as it was (``onnx.save``'s ``save_as_external_data`` rewrites the model it is
    given into references to the file, which would outlive the file)."""
    import onnx
    from onnx import numpy_helper

    light = onnx.ModelProto()
    light.CopyFrom(model)  # the graph and small constants; the large ones are replaced below
    light.graph.ClearField("initializer")
    weights = path.with_suffix(".weights")
    with weights.open("wb") as out:
        for t in model.graph.initializer:
            raw = t.raw_data if t.HasField("raw_data") else numpy_helper.to_array(t).tobytes()
            if len(raw) <= EXTERNAL_BYTES:
                light.graph.initializer.append(t)
                continue
            ref = light.graph.initializer.add()
            ref.name, ref.data_type = t.name, t.data_type
            ref.dims.extend(t.dims)
            for key, value in (("location", weights.name), ("offset", out.tell()), ("length", len(raw))):
                ref.external_data.add(key=key, value=str(value))
            ref.data_location = onnx.TensorProto.EXTERNAL
            out.write(raw)
    onnx.save(light, str(path))


def _index(graph: Any) -> tuple[dict[str, Any], dict[str, list[Any]], set[str]]:
    """The graph's producer of each tensor, readers of each tensor, and output names."""
    producer = {o: n for n in graph.node for o in n.output}
    uses: dict[str, list[Any]] = {}
    for n in graph.node:
        for i in n.input:
            uses.setdefault(i, []).append(n)
    return producer, uses, {o.name for o in graph.output}


def _only_reader(uses: dict[str, list[Any]], outputs: set[str], tensor: str, op_types: tuple[str, ...]) -> Any:
    """The one node reading ``tensor`` when it is of ``op_types`` and ``tensor`` is no graph output, else None."""
    readers = uses.get(tensor, [])
    ok = len(readers) == 1 and readers[0].op_type in op_types and tensor not in outputs
    return readers[0] if ok else None


def _share_params(graph: Any, nodes: list[Any], source: Any) -> None:
    """Make the Q/DQ ``nodes`` read ``source``'s scale and zero point; drop their own when nothing reads them."""
    replaced = {i for n in nodes for i in n.input[1:3]}
    for n in nodes:
        n.input[1], n.input[2] = source.input[1], source.input[2]
    read = {i for n in graph.node for i in n.input}
    for init in [i for i in graph.initializer if i.name in replaced and i.name not in read]:
        graph.initializer.remove(init)


def align_concat_scales(model: Any) -> int:
    """Give each Q/DQ pair feeding only a Concat the Concat output's scale and zero point (see above);
    returns how many pairs it changed."""
    graph = model.graph
    producer, uses, outputs = _index(graph)
    aligned = 0
    for concat in graph.node:
        after = _only_reader(uses, outputs, concat.output[0], ("QuantizeLinear",))
        if concat.op_type != "Concat" or after is None or len(after.input) < 3:
            continue
        for x in concat.input:
            dq = producer.get(x)
            if dq is None or dq.op_type != "DequantizeLinear" or _only_reader(uses, outputs, x, ("Concat",)) is None:
                continue
            q = producer.get(dq.input[0])
            if q is None or q.op_type != "QuantizeLinear" or len(q.input) < 3 or len(dq.input) < 3:
                continue
            if _only_reader(uses, outputs, q.output[0], ("DequantizeLinear",)) is not None:
                _share_params(graph, [q, dq], after)
                aligned += 1
    return aligned


def align_activation_scales(model: Any) -> int:
    """Give the Q/DQ pair between a Conv/Gemm/MatMul and its only consumer Relu/Clip the activation
    output's scale and zero point (see above); returns how many pairs it changed."""
    graph = model.graph
    producer, uses, outputs = _index(graph)
    aligned = 0
    for q in graph.node:
        src = producer.get(q.input[0]) if q.op_type == "QuantizeLinear" else None
        if src is None or src.op_type not in FUSING_PRODUCERS or len(uses.get(q.input[0], [])) != 1:
            continue
        dq = _only_reader(uses, outputs, q.output[0], ("DequantizeLinear",))
        act = _only_reader(uses, outputs, dq.output[0], FUSED_ACTIVATIONS) if dq is not None else None
        after = _only_reader(uses, set(), act.output[0], ("QuantizeLinear",)) if act is not None else None
        if after is not None and len(after.input) >= 3:
            _share_params(graph, [q, dq], after)
            aligned += 1
    return aligned


def calibration_inputs(make: Callable[[int], dict[str, np.ndarray]], count: int,
                       supplied: CalibrationSource | None = None) -> list[dict[str, np.ndarray]]:
    """The calibration samples: ``supplied`` ones (``--calibration``, ``--input``), else ``count`` seeded
    inputs (seeds 1000.., apart from the run's own inputs)."""
    if supplied is not None:
        return list(supplied.samples)
    if isinstance(count, bool) or count <= 0:
        from tinynpu.errors import UsageError

        raise UsageError(f"--calibrate must be a positive number of inputs, not {count!r}.")
    return [make(1000 + i) for i in range(count)]


__all__ = ["align_activation_scales", "align_concat_scales", "calibration_inputs", "is_quantized", "quantize"]
