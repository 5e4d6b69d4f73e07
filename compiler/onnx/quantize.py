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
- Already quantized models (QDQ, or QOperator rewritten to QDQ on import)
  are taken as they are.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.importer import OnnxError

FUSED_ACTIVATIONS = ("Relu", "Clip")
FUSING_PRODUCERS = ("Conv", "Gemm", "MatMul")


def is_quantized(model: Any) -> bool:
    """Whether the model already carries QDQ quantization (QOperator nodes are QDQ after import)."""
    ops = {n.op_type for n in model.graph.node}
    return bool(ops & {"QuantizeLinear", "DequantizeLinear"})


def quantize(model: Any, calibration: list[dict[str, np.ndarray]]) -> Any:
    """The QDQ int8 model of the float ``model``, calibrated (min/max) on ``calibration`` inputs."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class _Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
            self._it = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

    with tempfile.TemporaryDirectory(prefix="tinynpu-onnx-") as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, str(src))
        import logging

        import onnxruntime

        logging.getLogger().setLevel(logging.ERROR)  # the quantizer's "consider pre-processing" advice
        onnxruntime.set_default_logger_severity(3)  # and the calibration sessions' unused-initializer notes
        try:
            quantize_static(str(src), str(dst), _Reader(calibration), quant_format=QuantFormat.QDQ,
                            per_channel=True, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                            extra_options={"ActivationSymmetric": True, "WeightSymmetric": True},
                            calibration_providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise OnnxError(f"onnxruntime's quantize_static failed on this model: "
                            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        q = onnx.load(str(dst))
    align_activation_scales(q)
    return q


def align_activation_scales(model: Any) -> int:
    """Give the Q/DQ pair between a Conv/Gemm/MatMul and its only consumer Relu/Clip the activation
    output's scale and zero point (see above); returns how many pairs it changed.

    The pair's own scale and zero-point initializers are left to the ones still reading them and
    removed when nothing does.
    """
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    uses: dict[str, list[Any]] = {}
    for n in graph.node:
        for i in n.input:
            uses.setdefault(i, []).append(n)
    outputs = {o.name for o in graph.output}
    replaced: set[str] = set()
    aligned = 0
    for q in graph.node:
        if q.op_type != "QuantizeLinear":
            continue
        src = producer.get(q.input[0])
        if src is None or src.op_type not in FUSING_PRODUCERS or len(uses.get(q.input[0], [])) != 1:
            continue
        dqs = uses.get(q.output[0], [])
        if len(dqs) != 1 or dqs[0].op_type != "DequantizeLinear" or q.output[0] in outputs:
            continue
        dq = dqs[0]
        acts = uses.get(dq.output[0], [])
        if len(acts) != 1 or acts[0].op_type not in FUSED_ACTIVATIONS or dq.output[0] in outputs:
            continue
        after = uses.get(acts[0].output[0], [])
        if len(after) != 1 or after[0].op_type != "QuantizeLinear" or len(after[0].input) < 3:
            continue
        for node in (q, dq):
            replaced.update(node.input[1:3])
            node.input[1], node.input[2] = after[0].input[1], after[0].input[2]
        aligned += 1
    read = {i for n in graph.node for i in n.input}
    for init in [i for i in graph.initializer if i.name in replaced and i.name not in read]:
        graph.initializer.remove(init)
    return aligned


def calibration_inputs(make: Callable[[int], dict[str, np.ndarray]], count: int) -> list[dict[str, np.ndarray]]:
    """``count`` seeded inputs for calibration (seeds 1000.., apart from the run's own inputs)."""
    if isinstance(count, bool) or count <= 0:
        from tinynpu.errors import UsageError

        raise UsageError(f"--calibrate must be a positive number of inputs, not {count!r}.")
    return [make(1000 + i) for i in range(count)]


__all__ = ["align_activation_scales", "calibration_inputs", "is_quantized", "quantize"]
