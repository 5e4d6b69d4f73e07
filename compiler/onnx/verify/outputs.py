"""The checks on what users read: every graph output (logits, last_hidden_state, pooler_output, present
keys and values), each compared on its own.

One tensor per network is not enough for a transformer: the input of its last
Softmax is an attention score deep inside, and a cosine of 0.99 there says
nothing about the hidden states the user reads.  So for every output of the
float model:

- ``verified``: tinynpu's value equals the integer reference's, bit for bit
  (check a, per output);
- ``ort_quantized``: against onnxruntime running the same QDQ model (check
  b): on the int8 tensor the output dequantizes when it has one (fraction
  equal, within one LSB, largest difference in LSBs), on the float values
  otherwise (largest difference, cosine);
- ``ort_float``: against onnxruntime running the float model (check c):
  cosine, largest and mean absolute error, relative RMS error;
- ``closer_to_float``: when the two int8 runs disagree, which of them is
  nearer the float model (by cosine): ``tinynpu``, ``onnxruntime`` or ``equal``.

Top-1 and top-5 agreement are given only for a distribution over classes or
a vocabulary (an output named ``logits``, or one a Softmax writes), taken
per row of its last axis (per token of a language model's logits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.ir import OnnxStep
from tinynpu.compiler.onnx.verify.checks import session

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.network import CompiledNetwork


#: Cosines closer than this are a tie: a float host operator (Tanh, Softmax) rounds differently from
#: onnxruntime's in the last bits, which moves a cosine by about 1e-8, not by a meaningful amount.
COSINE_TIE = 1e-6


@dataclass(frozen=True)
class GraphOutput:
    """A graph output: its name, the int8 tensor it dequantizes (or None), whether it is a distribution."""

    name: str
    int8: str | None
    distribution: bool


def graph_outputs(cn: CompiledNetwork) -> list[GraphOutput]:
    """Every output of the network, in the float model's order."""
    producer = {o: s for s in cn.net.steps for o in s.outputs}
    float_producer = {o: n.op_type for n in cn.imported.model.graph.node for o in n.output}
    q_tensors = {o for n in cn.qmodel.graph.node for o in n.output}  # not the codes of a float output's table
    out = []
    for name in cn.net.outputs:
        step = producer.get(name)
        int8 = None
        if (isinstance(step, OnnxStep) and step.op == "DequantizeLinear" and step.inputs[0] in cn.net.qparams
                and step.inputs[0] in q_tensors):
            int8 = step.inputs[0]
        dist = "logits" in name.lower() or float_producer.get(name) in ("Softmax", "LogSoftmax")
        out.append(GraphOutput(name, int8, dist))
    return out


def _rows(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, x.shape[-1]) if x.ndim > 1 else x.reshape(1, -1)


def _topk_agree(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    ra, rb = _rows(a).astype(np.float64), _rows(b).astype(np.float64)
    k = min(5, ra.shape[1])
    ta, tb = (np.argsort(-r, axis=1, kind="stable")[:, :k] for r in (ra, rb))
    return {"top1_agree": float(np.mean(ta[:, 0] == tb[:, 0])),
            "top5_agree": float(np.mean([len(set(x) & set(y)) / k for x, y in zip(ta, tb, strict=True)]))}


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    x, y = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    denom = float(np.linalg.norm(x) * np.linalg.norm(y))
    if denom == 0.0:
        return 1.0 if not (x.any() or y.any()) else 0.0
    return float(x @ y / denom)


def _float_figures(ours: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    d = ours.astype(np.float64) - ref.astype(np.float64)
    rms_ref = float(np.sqrt(np.mean(np.square(ref.astype(np.float64))))) if ref.size else 0.0
    return {"cosine": _cosine(ours, ref), "max_abs_error": float(np.abs(d).max(initial=0.0)),
            "mean_abs_error": float(np.abs(d).mean()) if d.size else 0.0,
            "relative_rms_error": float(np.sqrt(np.mean(np.square(d))) / rms_ref) if rms_ref else 0.0}


def compare_outputs(cn: CompiledNetwork, feeds_list: list[dict[str, np.ndarray]],
                    ours_list: list[dict[str, np.ndarray]], exact: dict[str, bool]) -> list[dict[str, Any]]:
    """Checks (a), (b), (c) on every graph output, over the inputs of ``feeds_list``.

    Args:
        cn: The compiled network.
        feeds_list: The float inputs compared.
        ours_list: Per input, every tensor of tinynpu's run (the int8 tensors and the graph outputs).
        exact: Per graph output, whether the simulator's run equals the integer reference's (check a).
    """
    outs = graph_outputs(cn)
    q_names = [o.name for o in outs] + [o.int8 for o in outs if o.int8]
    qs, fs = session(cn.qmodel, q_names), session(cn.imported.model, [o.name for o in outs])
    theirs_q = [dict(zip(q_names, (np.asarray(v) for v in qs.run(q_names, f)), strict=True)) for f in feeds_list]
    theirs_f = [dict(zip([o.name for o in outs], (np.asarray(v) for v in fs.run([o.name for o in outs], f)),
                         strict=True)) for f in feeds_list]
    report = []
    for o in outs:
        ours = np.stack([np.asarray(v[o.name], np.float64) for v in ours_list])
        ort_q = np.stack([np.asarray(t[o.name], np.float64) for t in theirs_q])
        ref = np.stack([np.asarray(t[o.name], np.float64) for t in theirs_f])
        if o.int8 is not None:
            a = np.stack([v[o.int8] for v in ours_list]).astype(np.int64)
            b = np.stack([t[o.int8] for t in theirs_q]).astype(np.int64)
            diff = np.abs(a - b)
            q: dict[str, Any] = {"on": "int8", "tensor": o.int8, "equal_fraction": float(np.mean(diff == 0)),
                                 "within_1lsb_fraction": float(np.mean(diff <= 1)),
                                 "max_abs_lsb": int(diff.max(initial=0))}
            agree = bool(np.array_equal(a, b))
        else:
            q = {"on": "float", "max_abs_difference": float(np.abs(ours - ort_q).max(initial=0.0)),
                 "cosine": _cosine(ours, ort_q)}
            agree = bool(np.array_equal(ours, ort_q))
        f = _float_figures(ours, ref)
        ort_q_vs_float = _cosine(ort_q, ref)
        q["cosine_vs_float"] = ort_q_vs_float
        if o.distribution:
            q |= _topk_agree(ours, ort_q)
            f |= _topk_agree(ours, ref)
        if agree or abs(f["cosine"] - ort_q_vs_float) < COSINE_TIE:
            closer = "equal"
        else:
            closer = "tinynpu" if f["cosine"] > ort_q_vs_float else "onnxruntime"
        report.append({"name": o.name, "shape": list(ours.shape[1:]), "verified": exact[o.name],
                       "ort_quantized": q, "ort_float": f, "closer_to_float": closer})
    return report


__all__ = ["COSINE_TIE", "GraphOutput", "compare_outputs", "graph_outputs"]
