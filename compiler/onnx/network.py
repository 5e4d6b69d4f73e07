"""``compile_onnx`` and ``run_network``: an ONNX model end to end, verified three ways.

Per-layer programs, not one program: every accelerator layer is a workload
the existing compiler already tiles, schedules and checks (conv2d by implicit
im2col, GEMM), cached by shape; host steps run between them.  One program
for the whole network would need the host steps (pooling, softmax, residual
rescaling) on the accelerator, which has no unit for them, so the network
would still be cut at every host step.

Verification on every run:

(a) the outputs of every step against the numpy integer reference of the
    same network (bit for bit; the first differing step is named);
(b) against onnxruntime running the same QDQ model: fraction of elements
    equal, largest difference in LSBs, top-1/top-5 agreement of the logits;
(c) against onnxruntime running the float model: top-1 agreement and cosine
    similarity of the logits (the quantization error, reported).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.graph import HOST, NPU, Network, Step, build_network, check_supported
from tinynpu.compiler.onnx.image import DramImage
from tinynpu.compiler.onnx.importer import Imported, OnnxError, import_model, input_specs, seeded_inputs
from tinynpu.compiler.onnx.intops import Epilogue
from tinynpu.compiler.onnx.memory import ALIGN, ChannelSlice, MemoryPlan, plan_memory
from tinynpu.compiler.onnx.npu import (
    LayerRun,
    ProgramCache,
    add_program_key,
    conv_places,
    conv_program,
    gemm_in_place,
    gemm_program,
    groups_per_program,
)
from tinynpu.compiler.onnx.runtime import Execution, execute
from tinynpu.errors import TinyNpuError
from tinynpu.intmath import round_up
from tinynpu.isa import ArchConfig, load_config
from tinynpu.isa.config import CONFIG_DIR

DEFAULT_CALIBRATION = 8


class NetworkVerificationError(TinyNpuError):
    """The accelerator's network output differs from the integer reference (a bug, never the user's)."""


@dataclass
class CompiledNetwork:
    """An imported, quantized and planned network with its accelerator programs.

    Attributes:
        imported: The float model after import.
        qmodel: The QDQ int8 model (``onnx.ModelProto``).
        net: The steps.
        cfg: The architecture config.
        cache: The accelerator programs by shape.
        memory: The DRAM plan.
        logits: ``(int8 tensor in the network, float tensor in the float model)`` compared against
            onnxruntime (the input of a final Softmax, else the first output).
        image: The DRAM image: activations planned, every layer's weights placed (written on the first run).
        timings: Seconds per phase (import, quantize, plan, compile).
        quantized_here: Whether tinynpu quantized the model (False: it came quantized).
    """

    imported: Imported
    qmodel: Any
    net: Network
    cfg: ArchConfig
    cache: ProgramCache
    memory: MemoryPlan
    logits: tuple[str, str]
    image: DramImage
    timings: dict[str, float] = field(default_factory=dict)
    quantized_here: bool = True

    def make_inputs(self, seed: int) -> dict[str, np.ndarray]:
        return seeded_inputs(self.imported.model, seed)


def _check_weights_fit(path: str | Path, model: Any, cfg: ArchConfig) -> None:
    """Refuse, before quantizing (minutes for VGG-19), a model whose int8 weights alone overflow DRAM.

    Every Conv/Gemm/MatMul weight initializer becomes at least one byte per element, so
    their element count is a lower bound of the image; the full plan is checked after quantizing.
    """
    from onnx import numpy_helper

    weights = {init.name: init for init in model.graph.initializer}
    names = {node.input[1] for node in model.graph.node
             if node.op_type in ("Conv", "Gemm", "MatMul") and len(node.input) > 1 and node.input[1] in weights}
    floor = sum(int(numpy_helper.to_array(weights[name]).size) for name in names)
    if floor <= cfg.dram_bytes:
        return
    bigger = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")
                    if (c := load_config(p.stem)).is_integer and c.dram_bytes >= floor)
    hint = f" (built-in configs with enough DRAM: {', '.join(bigger)})" if bigger else ""
    raise OnnxError(f"{path}: the network's int8 weights alone need at least {floor} bytes of DRAM, more than the "
                    f"{cfg.dram_bytes} bytes of config {cfg.name!r}; pass --config with a larger "
                    f"dram.bytes{hint}.")


def compile_onnx(path: str | Path, *, batch: int | None = None, random_weights: int | None = None,
                 calibrate: int = DEFAULT_CALIBRATION, cfg: ArchConfig | None = None) -> CompiledNetwork:
    """Import, quantize, plan and compile an ONNX model for the accelerator.

    Args:
        path: The ``.onnx`` file (float, or already QDQ-quantized).
        batch: Size of a dynamic batch dimension.
        random_weights: Seed of random weights replacing constant ones (default: only when every
            weight is a constant, seed 0).
        calibrate: Number of seeded calibration inputs for quantization.
        cfg: Architecture config (default: ``default``).

    Raises:
        OnnxError: not ONNX, truncated, unsupported op, dynamic shape without ``batch``, too big for DRAM.
    """
    from tinynpu.compiler.onnx.quantize import calibration_inputs, is_quantized, quantize

    cfg = cfg or load_config("default")
    if not cfg.is_integer:
        raise OnnxError(f"config {cfg.name!r} is not an integer config; ONNX networks run int8.")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    imported = import_model(path, batch=batch, random_weights=random_weights)
    check_supported(imported.model)
    _check_weights_fit(path, imported.model, cfg)
    timings["import"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    quantized_here = not is_quantized(imported.model)
    if quantized_here:
        qmodel = quantize(imported.model, calibration_inputs(lambda s: seeded_inputs(imported.model, s), calibrate))
    else:
        qmodel = imported.model
    timings["quantize"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    import onnx

    qmodel = onnx.shape_inference.infer_shapes(qmodel)
    net = build_network(qmodel)
    _place(net)
    memory = _plan(net, cfg.tile)
    if memory.total_bytes > cfg.dram_bytes:
        raise OnnxError(f"{path}: the network needs {memory.total_bytes} bytes of DRAM ({memory.weight_bytes} of "
                        f"weights, {memory.activation_peak_bytes} of activations at the peak), more than the "
                        f"{cfg.dram_bytes} bytes of config {cfg.name!r}.")
    logits = _logits(net, qmodel, imported.model)
    timings["plan"] = time.perf_counter() - t0
    cache = ProgramCache(cfg)
    _compile_programs(net, cache)
    image = DramImage(cfg, memory)
    _place_weights(net, cache, image)
    timings["compile"] = cache.compile_seconds
    return CompiledNetwork(imported=imported, qmodel=qmodel, net=net, cfg=cfg, cache=cache, memory=memory,
                           logits=logits, timings=timings, quantized_here=quantized_here, image=image)


def _place(net: Network) -> None:
    """Move accelerator steps the lowering cannot take to the host, with the reason."""
    for step in net.steps:
        if step.kind == "conv" and step.inputs[0] not in net.shapes:
            step.where, step.reason = HOST, "input shape unknown"


def _tensor_bytes(net: Network, name: str) -> int:
    shape = net.shapes.get(name)
    if shape is None:
        return 0
    qp = net.qparams.get(name)
    return int(np.prod(shape)) * (1 if qp is not None else 4)


def _plan(net: Network, tile: int) -> MemoryPlan:
    weight_bytes = 0
    for step in net.steps:
        if step.where == NPU and "weight" in step.attrs:
            w = step.attrs["weight"]
            groups = step.attrs.get("group", 1)
            per = groups_per_program(groups, w.shape[3], tile) if step.kind == "conv" else 1
            programs, k_part = groups // per, w.shape[0] // groups * per
            # each program's (block-diagonal) weights and its parameter rows (bias, M, S, zero point
            # per column tile), aligned
            weight_bytes += programs * (round_up(w.nbytes // programs * per, ALIGN)
                                        + round_up(4 * round_up(k_part, tile) * 4, ALIGN))
        elif step.where == NPU and step.kind == "add":  # an identity tile and two scale rows per input
            weight_bytes += round_up(tile * tile, ALIGN) + round_up(2 * len(step.inputs) * tile * 4, ALIGN)
    lifetimes: dict[str, tuple[int, int]] = {}
    for i, step in enumerate(net.steps):
        for name in step.outputs:
            if name:
                lifetimes[name] = (i, i)
        for name in step.inputs:
            if name in lifetimes:
                lifetimes[name] = (lifetimes[name][0], i)
            elif name in net.inputs:
                lifetimes[name] = (0, i)
    last = len(net.steps) - 1
    for name in net.outputs:
        if name in lifetimes:
            lifetimes[name] = (lifetimes[name][0], last)
    sizes = {name: _tensor_bytes(net, name) for name in lifetimes}
    plain = plan_memory(weight_bytes, sizes, lifetimes)
    slices = _channel_slices(net, tile)
    if not slices:
        return plain
    # a joined buffer lives from its first slice's producer on: kept only if the peak stays as low
    sliced = plan_memory(weight_bytes, sizes, lifetimes, slices)
    return sliced if sliced.activation_peak_bytes <= plain.activation_peak_bytes else plain


def _channel_slices(net: Network, tile: int) -> tuple[ChannelSlice, ...]:
    """The inputs of channel concatenations their producer can store in place in the joined buffer.

    An input qualifies when a conv run by one program (it stores its whole output) writes it and the
    concatenation is all that reads it; the others the host copies in at the concatenation's step.
    """
    producer = {o: s for s in net.steps for o in s.outputs}
    readers: dict[str, int] = {}
    for s in net.steps:
        for i in s.inputs:
            readers[i] = readers.get(i, 0) + 1
    found: list[ChannelSlice] = []
    for step in net.steps:
        out_shape = net.shapes.get(step.outputs[0]) if step.kind == "concat" else None
        if out_shape is None or len(out_shape) != 4 or step.attrs["axis"] not in (1, -3):
            continue
        offset = 0
        for name in step.inputs:
            src, c = producer.get(name), net.shapes[name][1]
            if (src is not None and src.kind == "conv" and src.where == NPU and readers[name] == 1
                    and name not in net.outputs and _conv_programs(src, tile) == 1):
                found.append(ChannelSlice(name=name, of=step.outputs[0], offset=offset, row_bytes=c,
                                          pitch=out_shape[1]))
            offset += c
    return tuple(found)


def _conv_programs(step: Step, tile: int) -> int:
    groups = step.attrs.get("group", 1)
    return groups // groups_per_program(groups, step.attrs["weight"].shape[3], tile)


def _logits(net: Network, qmodel: Any, float_model: Any) -> tuple[str, str]:
    """The int8 tensor compared against onnxruntime and its float-model counterpart."""
    producer = {o: s for s in net.steps for o in s.outputs}
    target = net.outputs[0]
    softmax = next((s for s in reversed(net.steps) if s.op == "Softmax"), None)
    if softmax is not None:
        target = softmax.inputs[0]
    # walk back through DequantizeLinear to the int8 tensor
    s = producer.get(target)
    while s is not None and s.op in ("DequantizeLinear",):
        target = s.inputs[0]
        s = producer.get(target)
    if target not in net.qparams:
        raise OnnxError(f"the network's output {net.outputs[0]!r} does not come from a quantized tensor; "
                        "tinynpu compares int8 outputs against onnxruntime.")
    q = next(n for n in qmodel.graph.node if n.op_type == "QuantizeLinear" and n.output[0] == target)
    float_name = q.input[0]
    float_names = {o for n in float_model.graph.node for o in n.output}
    if float_name not in float_names and float_name.endswith("_QuantizeLinear_Input"):
        float_name = float_name[: -len("_QuantizeLinear_Input")]
    if float_name not in float_names:
        float_name = next(o.name for o in float_model.graph.output)
    return target, float_name


def _compile_programs(net: Network, cache: ProgramCache) -> None:
    """Compile every accelerator layer's program (each distinct shape and epilogue form once)."""
    for step in net.steps:
        if step.where != NPU:
            continue
        if step.kind == "add":
            key = add_program_key(cache, step, net.shapes[step.inputs[0]])
            step.attrs["program"], step.attrs["programs"] = key, [key]
            continue
        epi: Epilogue = step.attrs["epilogue"]
        if step.kind == "conv":
            n, c, h, w = net.shapes[step.inputs[0]]
            wt = step.attrs["weight"]
            g = step.attrs["group"]
            k, r, s, cg = wt.shape
            per = groups_per_program(g, cg, cache.cfg.tile)
            kp = k // g * per
            keys = [conv_program(cache, n, cg * per, h, w, kp, r, s, step=step,
                                 epilogue=epi.channels(k, slice(i * kp, (i + 1) * kp)).on_accelerator())[0]
                    for i in range(g // per)]
        elif step.kind == "gemm":
            shape = net.shapes[step.inputs[0]]
            if step.attrs["trans_a"]:
                shape = shape[::-1]
            n_out = step.attrs["weight"].shape[0]
            keys = [gemm_program(cache, int(np.prod(shape[:-1])), n_out, shape[-1],
                                 epilogue=epi.channels(n_out).on_accelerator())[0]]
        elif step.kind == "matmul":
            a, b = net.shapes[step.inputs[0]], net.shapes[step.inputs[1]]
            keys = [gemm_program(cache, a[-2], b[-1], a[-1], epilogue=epi.channels(b[-1]).on_accelerator())[0]]
        else:
            continue
        step.attrs["program"], step.attrs["programs"] = keys[0], keys


def _place_weights(net: Network, cache: ProgramCache, image: DramImage) -> None:
    """Place every layer's weights and parameter rows in the image (each program's, in step order).

    A conv's programs (one per group set) have ``W<i>`` and ``P<i>``; a Gemm's ``B`` and
    ``P``; a matmul between two activations has no weights of its own (its operands are staged).
    """
    for step in net.steps:
        if step.where != NPU or step.kind == "matmul":
            continue
        for i, key in enumerate(step.attrs["programs"]):
            program = cache.programs[key].program
            if step.kind == "add":  # the identity tile and the terms' scale rows
                for name in ("I", "P"):
                    image.reserve((step.name, name), program.tensor(name).nbytes)
                continue
            w, suffix = ("W", str(i)) if step.kind == "conv" else ("B", "")
            image.reserve((step.name, f"{w}{suffix}"), program.tensor(w).nbytes)
            image.reserve((step.name, f"P{suffix}"), program.tensor("P").nbytes)


def describe(cn: CompiledNetwork) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The compiled network as JSON (steps, placement, programs, memory plan) and its program images."""
    names = {key: "-".join(str(k) for k in key) for key in cn.cache.programs}
    programs = {names[key]: comp.program.to_bytes() for key, comp in cn.cache.programs.items()}
    steps = []
    for step in cn.net.steps:
        entry: dict[str, Any] = {"name": step.name, "op": step.op, "kind": step.kind, "where": step.where,
                                 "inputs": list(step.inputs), "outputs": list(step.outputs)}
        if step.reason:
            entry["reason"] = step.reason
        if "program" in step.attrs:
            entry["program"] = names[step.attrs["program"]]
            entry["image"] = _step_image(cn, step, names)
        epi = step.attrs.get("epilogue")
        if epi is not None:
            entry["requant"] = {"scale": epi.scale.tolist(), "zero_point": epi.zero_point,
                                "clamp": [epi.lo, epi.hi]}
        steps.append(entry)
    doc = {"model": cn.imported.source, "config": cn.cfg.name, "import_notes": list(cn.imported.notes),
           "random_weights": cn.imported.random_weights, "npu_layers": sum(s.where == NPU for s in cn.net.steps),
           "host_steps": sum(s.where == HOST for s in cn.net.steps), "memory": cn.memory.to_json(),
           "image": cn.image.layout(),
           "programs": {names[key]: {"workload": comp.workload, "instructions": len(comp.program.words),
                                     "file": f"program-{names[key]}.bin"}
                        for key, comp in cn.cache.programs.items()},
           "steps": steps}
    return doc, programs


def _step_image(cn: CompiledNetwork, step: Step, names: dict[tuple[Any, ...], str]) -> list[dict[str, Any]]:
    """Each program of an accelerator step, with where its DRAM tensors are in the image.

    A tensor is at its planned activation place, at its placed weights, or ``staged``: the
    host writes it into the staging area for that program (a re-laid operand).  A tensor
    read or written as channels of wider pixels (a group's, or a concatenation's slice) gives
    the pitch between its rows.
    """
    image = cn.image
    programs = step.attrs["programs"]
    out = []
    for i, key in enumerate(programs):
        comp = cn.cache.programs[key]
        suffix = str(i) if step.kind == "conv" else ""
        places: dict[str, tuple[int, int | None] | None] = {}
        if step.kind == "conv":
            places["X"], places["Y"] = conv_places(image, step, comp, i, len(programs))
        elif step.kind == "add":
            for role, name in [*((f"X{j}", n) for j, n in enumerate(step.inputs)), ("Y", step.outputs[0])]:
                addr = image.address(name, 0)
                places[role] = (addr, None) if addr is not None else None
        elif step.kind == "gemm":
            for role, name, used in zip("AC", (step.inputs[0], step.outputs[0]),
                                        gemm_in_place(step, cn.net.shapes[step.inputs[0]]), strict=True):
                addr = image.address(name, comp.program.tensor(role).nbytes) if used else None
                places[role] = (addr, None) if addr is not None else None
        tensors: dict[str, Any] = {}
        for t in comp.program.tensors:
            if t.name in places or step.kind == "matmul":
                place = places.get(t.name)
            else:
                place = (image.reserved[(step.name, f"{t.name}{suffix}")][0], None)
            if place is None:
                tensors[t.name] = {"staged": True, "bytes": t.nbytes}
                continue
            tensors[t.name] = {"address": place[0], "bytes": t.nbytes}
            if place[1] is not None:  # a channel slice of every pixel: its rows this many bytes apart
                tensors[t.name]["pitch"] = place[1]
        out.append({"program": names[key], "instructions": len(comp.program.words),
                    "program_bytes": len(comp.program.to_bytes()), "tensors": tensors})
    return out


# -- running and verifying ---------------------------------------------------------------------------


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
        out[name] = np.asarray(arr, dtype=dtype)
    return out


def _session(model: Any, extra: list[str], *, optimize: bool = True, save_optimized: str | None = None,
             keep_int8: bool = True) -> Any:
    """An onnxruntime CPU session of ``model`` with the tensors ``extra`` as further outputs.

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

    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for name in extra:
        if name not in have:
            m.graph.output.append(onnx.ValueInfoProto(name=name))
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
    return ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])


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
    qs, fs = _session(cn.qmodel, [lq]), _session(cn.imported.model, [lf])
    timed = _session(cn.qmodel, [lq], keep_int8=False)  # onnxruntime's own speed: its default kernels
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


def run_network(cn: CompiledNetwork, *, feeds: dict[str, np.ndarray] | None = None, seed: int = 0,
                extra_seeds: int = 0) -> dict[str, Any]:
    """Run on the simulator, verify (a), (b), (c), and report per layer and in total.

    Args:
        cn: The compiled network.
        feeds: Float inputs by name (default: seeded random inputs from ``seed``).
        seed: Seed of the random inputs.
        extra_seeds: Further seeded inputs on which the integer reference (bit-exact with the
            simulator on the first input) is compared against onnxruntime too (checks b, c).
    """
    feeds = check_inputs(cn, feeds or {}) if feeds else cn.make_inputs(seed)
    t0 = time.perf_counter()
    got = execute(cn.net, feeds, cache=cn.cache, image=cn.image)
    run_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    want = execute(cn.net, feeds, cache=None)
    verify_exact(cn.net, got, want)
    lq = cn.logits[0]
    feeds_list, ours = [feeds], [got.values[lq]]
    for i in range(extra_seeds):
        f = cn.make_inputs(seed + 1 + i)
        feeds_list.append(f)
        ours.append(execute(cn.net, f, cache=None).values[lq])
    ref_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    q_cmp, f_cmp, ort_times = ort_compare(cn, feeds_list, ours)
    ort_seconds = time.perf_counter() - t0
    return _report(cn, got, {
        "run": run_seconds, "reference": ref_seconds, "onnxruntime_compare": ort_seconds, **ort_times,
    }) | {"ort_quantized": q_cmp, "ort_float": f_cmp, "inputs_compared": len(feeds_list)}


def _npu_note(run: LayerRun) -> str:
    note = "epilogue on the accelerator (bias, vrequantf, zero point, clamp; int8 store)"
    if run.groups_per_program > 1:
        note += (f"; {run.groups_per_program} groups per program, their kernels block-diagonal (each output "
                 f"channel uses 1/{run.groups_per_program} of the reduction lanes)")
    return note


def _report(cn: CompiledNetwork, ex: Execution, times: dict[str, float]) -> dict[str, Any]:
    cfg = cn.cfg
    peak = cfg.macs_per_cycle
    layers = []
    npu_cycles = 0
    macs = issued = 0
    host_bytes = 0
    for step in cn.net.steps:
        run = ex.runs[step.name]
        npu = step.where == NPU
        util = run.macs / (run.cycles * peak) if npu and run.cycles else 0.0
        ceiling = run.macs / run.issued_macs if npu and run.issued_macs else 0.0
        layers.append({
            "name": step.name, "op": step.op, "where": step.where, "cycles": run.cycles,
            "utilization": util, "padding_ceiling": ceiling, "dram_bytes": run.dram_bytes,
            "compulsory_bytes": run.compulsory_bytes, "macs": run.macs, "host_bytes": run.host_bytes,
            "programs": run.programs, "host_seconds": ex.host_seconds[step.name],
            "epilogue": "npu" if npu else "",
            "note": run.note or (step.reason if not npu else _npu_note(run)),
        })
        npu_cycles += run.cycles
        macs += run.macs
        issued += run.issued_macs
        host_bytes += run.host_bytes
    dram = sum(run.dram_bytes for run in ex.runs.values())
    # utilization / ceiling of a layer = issued MACs / (cycles * peak): weighted by the layer's useful MACs
    weighted = sum(run.macs * run.issued_macs / (run.cycles * peak) for run in ex.runs.values() if run.cycles)
    host_seconds = sum(ex.host_seconds.values())
    sim_seconds = sum(r.sim_seconds for r in ex.runs.values())
    clock_hz = cfg.clock_mhz * 1e6
    return {
        "model": cn.imported.source,
        "config": cfg.name,
        "verified": True,
        "cycles": npu_cycles,
        "clock_mhz": clock_hz / 1e6,
        "inferences_per_second": clock_hz / npu_cycles if npu_cycles else 0.0,
        "dram_bytes": dram,
        "host_bytes": host_bytes,
        "macs": macs,
        "issued_macs": issued,
        "utilization": macs / (npu_cycles * peak) if npu_cycles else 0.0,
        "padding_ceiling": macs / issued if issued else 0.0,
        "utilization_over_ceiling_mac_weighted": weighted / macs if macs else 0.0,
        "host_share_of_wall_time": host_seconds / (host_seconds + sim_seconds) if host_seconds + sim_seconds else 0,
        "npu_layers": sum(1 for s in cn.net.steps if s.where == NPU),
        "host_steps": sum(1 for s in cn.net.steps if s.where == HOST),
        "programs_compiled": len(cn.cache.programs),
        "memory": cn.memory.to_json() | cn.image.to_json(),
        "random_weights": cn.imported.random_weights,
        "quantized_by_tinynpu": cn.quantized_here,
        "import_notes": list(cn.imported.notes),
        "logits": {"tensor": cn.logits[0], "float_tensor": cn.logits[1]},
        "seconds": {**cn.timings, "simulate": sim_seconds, "host_steps": host_seconds, **times},
        "layers": layers,
    }


__all__ = ["CompiledNetwork", "NetworkVerificationError", "compile_onnx", "describe", "run_network"]
