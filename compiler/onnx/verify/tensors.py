"""onnxruntime's int8 tensors beside tinynpu's, tensor by tensor, in the network's step order.

Each quantized step output that onnxruntime's optimized graph holds (found as
:mod:`.origins` finds it) is compared twice:

- **along the run**: tinynpu's own value (an :class:`Execution`'s, the
  simulator's or the integer reference's) against onnxruntime's, so a
  difference made upstream shows in every tensor after it;
- **on onnxruntime's inputs** (``own``): the step recomputed by the integer
  reference from onnxruntime's own values of its inputs, so what differs is
  that step's own arithmetic.

The first says where two runs part; the second says which operator makes them part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.ir import Network
from tinynpu.compiler.onnx.runtime.execute import reference_step
from tinynpu.compiler.onnx.verify.checks import session
from tinynpu.compiler.onnx.verify.origins import Carrier, as_ours, carriers, optimized_model


@dataclass(frozen=True)
class TensorDifference:
    """One quantized step output, tinynpu against onnxruntime (differences in LSBs of its scale).

    Attributes:
        position: The step's index in the network's step order.
        step: The step's name; ``kind``: its kind (``gemm``, ``norm``, ``softmax``, ...).
        kernel: The onnxruntime operator computing the tensor (``QLinearMatMul``, ``LayerNormalization``, ...);
            None where onnxruntime's graph does not hold the tensor (fused away), or holds it at another
            scale or before a transpose it moved: nothing is compared.
        layer: The decoder layer the step belongs to (:func:`layer_of`), None where it cannot be told.
        differing, max_abs_lsb: Along the run (None: no run values given).
        own_differing, own_max_abs_lsb: The step recomputed on onnxruntime's inputs.
    """

    position: int
    step: str
    kind: str
    kernel: str | None
    tensor: str
    layer: int | None
    elements: int
    differing: int | None
    max_abs_lsb: int | None
    own_differing: int
    own_max_abs_lsb: int


class OrtTensors:
    """onnxruntime's int8 tensors of one QDQ model: its optimized graph, run with them as outputs.

    The graph is optimized once (saving it is the slow part at GPT-2-small's size) and serves every
    step network built from the model (their tensor names are the model's); sessions are kept per set
    of outputs.
    """

    def __init__(self, qmodel: Any) -> None:
        self.qmodel = qmodel
        self.optimized = optimized_model(qmodel)
        self._sessions: dict[tuple[str, ...], Any] = {}

    def carried(self, net: Network) -> dict[str, Carrier]:
        return carriers(net, self.qmodel, self.optimized)

    def run(self, names: list[str], feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        key = tuple(sorted(set(names)))
        if key not in self._sessions:
            self._sessions[key] = session(self.optimized, list(key), optimize=False)
        return dict(zip(key, (np.asarray(v) for v in self._sessions[key].run(list(key), feeds)), strict=True))


def layer_of(net: Network) -> dict[str, int | None]:
    """Each step's decoder layer, told by its normalizations: a decoder layer normalizes a fixed number
    of times (2 in GPT-2 and Llama blocks) and the model once more at the end, so with ``n`` norm steps in
    ``L`` layers a step after the ``k``-th norm is in layer ``(k - 1) // ((n - 1) / L)``.  Steps before
    the first norm (the embedding) are None, as is every step when the norms do not divide so."""
    norms = [i for i, s in enumerate(net.steps) if s.kind == "norm"]
    concats = sum(1 for s in net.steps if s.kind == "concat")  # present key and value per layer
    layers = concats // 2
    per = (len(norms) - 1) // layers if layers and (len(norms) - 1) % layers == 0 and len(norms) > 1 else 0
    out: dict[str, int | None] = {}
    seen = 0
    for i, s in enumerate(net.steps):
        seen += i in norms
        out[s.name] = min((seen - 1) // per, layers - 1) if per and seen else None
    return out


def _same_scale(carrier: Carrier, ours: float) -> bool:
    """Whether onnxruntime's tensor has our scale: its graph rewrites may requantize a tensor (a
    DequantizeLinear/QuantizeLinear pair of two scales merged into one), and int8 values at two scales
    do not compare."""
    return carrier.scale is None or bool(np.isclose(carrier.scale, ours, rtol=1e-6, atol=0.0))


def tensor_differences(net: Network, ort: OrtTensors, feeds: dict[str, np.ndarray],
                       run: dict[str, np.ndarray] | None = None) -> list[TensorDifference]:
    """Every quantized step output, in step order (see the module docstring).

    ``feeds`` are the model's float inputs; ``run`` tinynpu's values of the same run (an Execution's
    ``values``), None to compare each step on onnxruntime's inputs alone.
    """
    carried = ort.carried(net)
    values = ort.run(sorted({c.tensor for c in carried.values()}), feeds)
    layers = layer_of(net)
    env: dict[str, np.ndarray] = dict(net.constants)
    env.update(feeds)
    out: list[TensorDifference] = []
    for position, step in enumerate(net.steps):
        if not all(i in env for i in step.inputs if i):
            continue
        for name, ours in zip(step.outputs, reference_step(step, env, net), strict=False):
            if not name:
                continue
            if name not in net.qparams:
                env[name] = ours
                continue
            c = carried.get(name)
            theirs = None if c is None or not _same_scale(c, net.qparams[name].s) else as_ours(
                values[c.tensor].astype(np.int64) - c.zero_point + net.qparams[name].z, ours.shape,
                c.channels_last, f"step {step.name!r}: onnxruntime's {c.tensor!r}")
            if c is None or theirs is None:
                out.append(TensorDifference(position, step.name, step.kind, None, name, layers[step.name],
                                            int(ours.size), None if run is None else 0, None if run is None else 0,
                                            0, 0))
                env[name] = ours
                continue
            own = np.abs(ours.astype(np.int64) - theirs)
            along = None if run is None else np.abs(run[name].astype(np.int64) - theirs)
            out.append(TensorDifference(
                position=position, step=step.name, kind=step.kind, kernel=c.kernel, tensor=name,
                layer=layers[step.name], elements=int(own.size),
                differing=None if along is None else int(np.count_nonzero(along)),
                max_abs_lsb=None if along is None else int(along.max(initial=0)),
                own_differing=int(np.count_nonzero(own)), own_max_abs_lsb=int(own.max(initial=0))))
            env[name] = theirs.astype(ours.dtype)
    return out


__all__ = ["OrtTensors", "TensorDifference", "layer_of", "tensor_differences"]
