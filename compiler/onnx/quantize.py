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
- A ``Relu``/``Clip`` right after a ``Conv``/``Gemm``/``MatMul`` is fused into
  that layer's store: the quantizer puts a Q/DQ pair between them (with
  symmetric activations it cannot drop the relu), which would round twice; the
  pair is removed after quantization so that the layer requantizes once,
  straight to the relu output's scale, as the accelerator's store does.
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
    fuse_activations(q)
    return q


def fuse_activations(model: Any) -> int:
    """Remove the Q/DQ pair between a Conv/Gemm/MatMul and its only consumer Relu/Clip (see above)."""
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    uses: dict[str, list[Any]] = {}
    for n in graph.node:
        for i in n.input:
            uses.setdefault(i, []).append(n)
    outputs = {o.name for o in graph.output}
    drop = []
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
        acts[0].input[0] = q.input[0]
        drop += [q, dq]
    for n in drop:
        graph.node.remove(n)
    return len(drop) // 2


def calibration_inputs(make: Callable[[int], dict[str, np.ndarray]], count: int) -> list[dict[str, np.ndarray]]:
    """``count`` seeded inputs for calibration (seeds 1000.., apart from the run's own inputs)."""
    if isinstance(count, bool) or count <= 0:
        from tinynpu.errors import UsageError

        raise UsageError(f"--calibrate must be a positive number of inputs, not {count!r}.")
    return [make(1000 + i) for i in range(count)]


__all__ = ["calibration_inputs", "fuse_activations", "is_quantized", "quantize"]
