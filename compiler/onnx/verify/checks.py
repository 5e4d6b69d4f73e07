"""The three checks of a network run, and the user's inputs checked against the network.

(a) :func:`verify_exact`: the outputs of every step against the numpy integer
    reference of the same network (bit for bit; the first differing step is named);
(b) :func:`ort_compare` against onnxruntime running the same QDQ model: fraction
    of elements equal, largest difference in LSBs, top-1/top-5 agreement of the logits;
(c) against onnxruntime running the float model: top-1 agreement and cosine
    similarity of the logits (the quantization error, reported).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from tinynpu.compiler.onnx.frontend.calibration import check_sample
from tinynpu.compiler.onnx.frontend.importer import input_specs
from tinynpu.compiler.onnx.ir import Network
from tinynpu.compiler.onnx.runtime.execute import Execution
from tinynpu.errors import OnnxError, TinyNpuError

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.network import CompiledNetwork


class NetworkVerificationError(TinyNpuError):
    """The accelerator's network output differs from the integer reference (a bug, never the user's)."""


def check_inputs(cn: CompiledNetwork, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The user's inputs, checked against the network's names, shapes and dtypes."""
    specs = {name: (shape, dtype) for name, shape, dtype in input_specs(cn.imported.model)}
    for name in feeds:
        if name not in specs:
            raise OnnxError(f"--input {name}=...: the network has no input {name!r}; its inputs are "
                            f"{', '.join(sorted(specs))}.")
    out = cn.make_inputs(0)
    for name, arr in feeds.items():
        shape, dtype = specs[name]
        if tuple(arr.shape) != tuple(shape):
            raise OnnxError(f"--input {name}: shape {tuple(arr.shape)} differs from the network's {tuple(shape)}.")
        out[name] = check_sample(cn.imported.model, {name: arr}, f"--input {name}")[name]
    return out


def session(model: Any, extra: list[str], *, optimize: bool = True, save_optimized: str | None = None,
             keep_int8: bool = True) -> Any:
    """An onnxruntime CPU session of ``model`` with the tensors ``extra`` as further outputs.

    ``model`` is a ModelProto, or the path of a model file (no ``extra`` then): a large model's
    session is made without serializing it again.

    ``optimize=False`` runs the graph as it is (a graph onnxruntime optimized already);
    ``save_optimized`` writes the graph onnxruntime optimized to that path.

    ``keep_int8`` (the comparison sessions) keeps the model's int8 tensors int8.  By default
    onnxruntime on x86 rewrites int8 Q/DQ pairs to uint8 (zero point + 128) for its faster
    kernels, but only a QuantizeLinear with one DequantizeLinear reader: a convolution reading
    a tensor two nodes read (a ResNet block's input, read by the block and by its shortcut)
    would then see an int8 input and a uint8 output and run in float between
    DequantizeLinear and QuantizeLinear, not as the integer QLinearConv the model describes.
    ``keep_int8=False`` is onnxruntime's default, used to time its inference.
    """
    import onnx
    import onnxruntime as ort

    source: Any = model
    if isinstance(model, str):  # a model file, run as saved (its external data beside it)
        if extra:
            raise ValueError(f"session({model!r}): extra outputs need the model in memory")
    else:
        have = {o.name for o in model.graph.output}
        missing = [name for name in extra if name not in have]
        if missing:  # a copy: the caller's model keeps its outputs
            source = onnx.ModelProto()
            source.CopyFrom(model)
            source.graph.output.extend(onnx.ValueInfoProto(name=name) for name in missing)
        source = source.SerializeToString()
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    # One thread that sleeps when idle: the checks run one small batch, and on a shared 2-core
    # machine a spinning thread pool takes cores from the simulator and the other processes.
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if keep_int8:
        opts.add_session_config_entry("session.qdqisint8allowed", "1")
    if not optimize:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if save_optimized is not None:
        opts.optimized_model_filepath = save_optimized
    return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])


def _topk(x: np.ndarray, k: int) -> np.ndarray:
    rows = x.reshape(x.shape[0], -1) if x.ndim > 1 else x.reshape(1, -1)
    k = min(k, rows.shape[1])
    return np.argsort(-rows.astype(np.float64), axis=1, kind="stable")[:, :k]


def compare_quantized(ours: np.ndarray, theirs: np.ndarray) -> dict[str, Any]:
    """Check (b): int8 outputs of two runs of the same quantized network."""
    diff = np.abs(ours.astype(np.int64) - theirs.astype(np.int64))
    t1o, t1t = _topk(ours, 1), _topk(theirs, 1)
    t5o, t5t = _topk(ours, 5), _topk(theirs, 5)
    overlap = np.mean([len(set(a) & set(b)) / len(a) for a, b in zip(t5o, t5t, strict=True)])
    return {"equal_fraction": float(np.mean(diff == 0)), "within_1lsb_fraction": float(np.mean(diff <= 1)),
            "max_abs_lsb": int(diff.max(initial=0)), "top1_agree": float(np.mean(t1o[:, 0] == t1t[:, 0])),
            "top5_agree": float(overlap)}


def compare_float(ours: np.ndarray, theirs: np.ndarray) -> dict[str, Any]:
    """Check (c): dequantized logits against the float model's."""
    a, b = ours.reshape(-1).astype(np.float64), theirs.reshape(-1).astype(np.float64)
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return {"top1_agree": float(np.mean(_topk(ours, 1)[:, 0] == _topk(theirs, 1)[:, 0])),
            "cosine": float(a @ b / denom) if denom else 0.0}


def verify_exact(net: Network, got: Execution, want: Execution) -> None:
    """Check (a): every tensor every step wrote, bit for bit, in step order."""
    for step in net.steps:
        for name in step.outputs:
            if not name:
                continue
            g, w = got.values[name], want.values[name]
            if g.shape != w.shape or not np.array_equal(g, w):
                bad = int(np.sum(g != w)) if g.shape == w.shape else -1
                raise NetworkVerificationError(
                    f"step {step.name!r} ({step.op} on the {step.where}): output {name!r} differs from the "
                    f"integer reference" + (f" at {bad} of {w.size} elements" if bad >= 0 else
                                            f" in shape ({g.shape} vs {w.shape})") + ".")


def ort_compare(cn: CompiledNetwork, feeds_list: list[dict[str, np.ndarray]],
                ours_list: list[np.ndarray]) -> tuple[dict[str, Any], dict[str, Any], dict[str, float]]:
    """Checks (b) and (c) over several inputs (our int8 logits given per input)."""
    lq, lf = cn.logits
    qs, fs = session(cn.qmodel, [lq]), session(cn.imported.model, [lf])
    timed = session(cn.qmodel, [lq], keep_int8=False)  # onnxruntime's own speed: its default kernels
    theirs_q, theirs_f = [], []
    t_q = t_f = t_kept = 0.0
    for feeds in feeds_list:
        t0 = time.perf_counter()
        theirs_q.append(np.asarray(qs.run([lq], feeds)[0]))
        t_kept += time.perf_counter() - t0
        t0 = time.perf_counter()
        timed.run([lq], feeds)
        t_q += time.perf_counter() - t0
        t0 = time.perf_counter()
        theirs_f.append(np.asarray(fs.run([lf], feeds)[0]))
        t_f += time.perf_counter() - t0
    ours = np.concatenate([o.reshape(1, -1) if o.shape[0] == 1 else o.reshape(o.shape[0], -1) for o in ours_list])
    tq = np.concatenate([t.reshape(ours.shape[0] // len(feeds_list), -1) for t in theirs_q])
    tf = np.concatenate([t.reshape(ours.shape[0] // len(feeds_list), -1) for t in theirs_f])
    qp = cn.net.qparams[lq]
    deq = (ours.astype(np.float64) - qp.z) * qp.s
    n = len(feeds_list)
    times = {"ort_quantized_seconds": t_q / n, "ort_quantized_int8_kept_seconds": t_kept / n,
             "ort_float_seconds": t_f / n}
    return compare_quantized(ours, tq), compare_float(deq, tf), times


__all__ = ["NetworkVerificationError", "check_inputs", "compare_float", "compare_quantized", "ort_compare", "session",
           "verify_exact"]
