"""Post-training int8 quantization: the QDQ model onnxruntime's ``quantize_static`` writes, with these options.

The model is written by :mod:`.qdq_write` (onnxruntime's rules, its arithmetic
in numpy: seconds where ``quantize_static`` takes minutes at GPT-2-small);
``quantize_static`` itself writes it where the writer declines, and the tests
hold the two to the same model.  Calibration ranges are min/max over the
samples, from one float session (:func:`.calibration.measure_ranges`), or
measured by the caller already (the LLM path's float run).

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

import sys
import tempfile
from collections import Counter
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
    ``ranges`` measured already on them (:class:`~.calibration.MinMaxRanges`).

    The model is the one onnxruntime's ``quantize_static`` writes with the options above, written by
    :mod:`.qdq_write` in numpy; where that writer declines (it says why), ``quantize_static`` writes it.
    """
    from tinynpu.compiler.onnx.frontend.calibration import measure_ranges
    from tinynpu.compiler.onnx.frontend.qdq_rules import WriterDeclines
    from tinynpu.compiler.onnx.frontend.qdq_write import write_qdq

    model, excluded = prepare(model, calibration, ranges)
    if ranges is None:
        ranges = measure_ranges(model, calibration)
    try:
        q = write_qdq(model, ranges, excluded)
    except WriterDeclines as why:
        print(f"tinynpu: quantizing with onnxruntime's quantize_static (slower): the QDQ writer declines: {why}.",
              file=sys.stderr)
        q = quantize_static(model, excluded, ranges=ranges)
    align_concat_scales(q)
    align_activation_scales(q)  # after: a relu before a concat takes the concat's scale
    return q


def prepare(model: Any, calibration: list[dict[str, np.ndarray]],
            ranges: dict[str, tuple[np.ndarray, np.ndarray]] | None) -> tuple[Any, list[str]]:
    """The passes before quantization, in order: the model to quantize and the nodes left in float.

    1. Small leading rows of the residual stream (a ViT's class token) become tensors of their own, with
       scales of their own (:mod:`.rowgroups`).  A rewrite of the graph, so it runs only when the ranges are
       still to be measured: ranges measured already name the tensors of the model as given.
    2. An additive attention mask and its softmax stay float (:mod:`.masks`): the mask must not set the
       scale of the scores.
    3. A rotary embedding's products with cos and sin stay float (:mod:`.rotary`).
    """
    from tinynpu.compiler.onnx.frontend.masks import mask_adds
    from tinynpu.compiler.onnx.frontend.rotary import rotary_muls
    from tinynpu.compiler.onnx.frontend.rowgroups import split_small_rows

    if ranges is None:
        model, _ = split_small_rows(model, calibration, _opset(model))
    return model, [*mask_adds(model), *rotary_muls(model)]


def quantize_static(model: Any, excluded: list[str], *, calibration: list[dict[str, np.ndarray]] | None = None,
                    ranges: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> Any:
    """onnxruntime's ``quantize_static`` of ``model`` with tinynpu's options (the QDQ model before the scale
    alignments), calibrated by its own calibrator on ``calibration`` or handed ``ranges`` as its calibration
    cache: the writer's fallback, and the model the writer is tested against."""
    import logging

    import onnx
    import onnxruntime
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType
    from onnxruntime.quantization import quantize_static as ort_quantize_static
    from onnxruntime.quantization.calibrate import CalibrationMethod, TensorsData, save_tensors_data

    class _Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
            self._it = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

    with tempfile.TemporaryDirectory(prefix="tinynpu-onnx-") as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
        # the weights beside the graph (onnx's own external-data writer, on a copy: it rewrites the model it
        # is given), so the quantizer's shape inference does not parse and write them again
        light = onnx.ModelProto()
        light.CopyFrom(model)
        onnx.save_model(light, str(src), save_as_external_data=True, all_tensors_to_one_file=True,
                        location="float.weights", size_threshold=1024)
        logging.getLogger().setLevel(logging.ERROR)  # the quantizer's "consider pre-processing" advice
        onnxruntime.set_default_logger_severity(3)  # and the calibration sessions' unused-initializer notes
        cache = None
        if ranges is not None:
            cache = Path(tmp) / "ranges.json"
            save_tensors_data(TensorsData(CalibrationMethod.MinMax, dict(ranges)), cache)
        reader = _Reader(calibration) if cache is None and calibration is not None else None
        try:
            ort_quantize_static(str(src), str(dst), reader, calibration_cache_path=cache,
                                quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QInt8,
                                weight_type=QuantType.QInt8,
                                extra_options={"ActivationSymmetric": True, "WeightSymmetric": True},
                                nodes_to_exclude=excluded, calibration_providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise OnnxError(f"onnxruntime's quantize_static failed on this model: "
                            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        return onnx.load(str(dst))


def _opset(model: Any) -> int:
    return next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)


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


def _reads(graph: Any) -> Counter[str]:
    """How many node inputs read each tensor."""
    return Counter(i for n in graph.node for i in n.input)


def _share_params(graph: Any, reads: Counter[str], nodes: list[Any], source: Any) -> None:
    """Make the Q/DQ ``nodes`` read ``source``'s scale and zero point; drop their own when nothing reads them
    (``reads`` kept up to date)."""
    replaced = {i for n in nodes for i in n.input[1:3]}
    for n in nodes:
        for k in (1, 2):
            reads[n.input[k]] -= 1
            n.input[k] = source.input[k]
            reads[n.input[k]] += 1
    unread = [k for k, init in enumerate(graph.initializer) if init.name in replaced and reads[init.name] <= 0]
    for k in reversed(unread):
        del graph.initializer[k]


def align_concat_scales(model: Any) -> int:
    """Give each Q/DQ pair feeding only a Concat the Concat output's scale and zero point (see above);
    returns how many pairs it changed."""
    graph = model.graph
    producer, uses, outputs = _index(graph)
    reads = _reads(graph)
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
                _share_params(graph, reads, [q, dq], after)
                aligned += 1
    return aligned


def align_activation_scales(model: Any) -> int:
    """Give the Q/DQ pair between a Conv/Gemm/MatMul and its only consumer Relu/Clip the activation
    output's scale and zero point (see above); returns how many pairs it changed."""
    graph = model.graph
    producer, uses, outputs = _index(graph)
    reads = _reads(graph)
    aligned = 0
    for q in graph.node:
        src = producer.get(q.input[0]) if q.op_type == "QuantizeLinear" else None
        if src is None or src.op_type not in FUSING_PRODUCERS or len(uses.get(q.input[0], [])) != 1:
            continue
        dq = _only_reader(uses, outputs, q.output[0], ("DequantizeLinear",))
        act = _only_reader(uses, outputs, dq.output[0], FUSED_ACTIVATIONS) if dq is not None else None
        after = _only_reader(uses, set(), act.output[0], ("QuantizeLinear",)) if act is not None else None
        if after is not None and len(after.input) >= 3:
            _share_params(graph, reads, [q, dq], after)
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


__all__ = ["align_activation_scales", "align_concat_scales", "calibration_inputs", "is_quantized", "prepare",
           "quantize", "quantize_static"]
