"""``compile_onnx``: an ONNX model through the front end and the lowering to a runnable network.

The pipeline, one stage per sub-package:

1. front end (:mod:`.frontend`): import and fold the float model, quantize it
   (QDQ int8, or take it quantized), and turn the QDQ graph into typed steps
   (:mod:`.ir`);
2. lowering (:mod:`.lower`): move to the host what the accelerator cannot
   take, plan DRAM by liveness, compile every accelerator step's programs
   (per-layer programs, cached by shape) and reserve their weights in the
   network's DRAM image;
3. runtime (:mod:`.runtime`) and verification (:mod:`.verify`):
   :func:`~tinynpu.compiler.onnx.verify.run.run_network` runs it on the
   simulator and checks it three ways.

Per-layer programs, not one program: every accelerator layer is a workload
the existing compiler already tiles, schedules and checks (conv2d by implicit
im2col, GEMM); host steps run between them.  One program for the whole
network would need the host steps (pooling, softmax, residual rescaling) on
the accelerator, which has no unit for them, so the network would still be
cut at every host step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource
from tinynpu.compiler.onnx.frontend.heads import fold_head_moves
from tinynpu.compiler.onnx.frontend.hostops import check_supported
from tinynpu.compiler.onnx.frontend.importer import Imported, import_model, seeded_inputs
from tinynpu.compiler.onnx.frontend.qdq import build_network
from tinynpu.compiler.onnx.ir import HOST, NPU, Network
from tinynpu.compiler.onnx.lower.memory import MemoryPlan
from tinynpu.compiler.onnx.lower.plan import place, plan, reserve_weights
from tinynpu.compiler.onnx.lower.programs import ProgramCache, ProgramKey, compile_programs
from tinynpu.compiler.onnx.runtime.image import DramImage
from tinynpu.compiler.onnx.runtime.link import link_programs
from tinynpu.compiler.onnx.verify.checks import NetworkVerificationError
from tinynpu.compiler.onnx.verify.describe import describe
from tinynpu.compiler.onnx.verify.run import run_network
from tinynpu.errors import OnnxError, UsageError
from tinynpu.isa import ArchConfig, load_config
from tinynpu.isa.config import CONFIG_DIR

DEFAULT_CALIBRATION = 8


@dataclass
class CompiledNetwork:
    """An imported, quantized and planned network with its accelerator programs.

    Attributes:
        imported: The float model after import.
        qmodel: The QDQ int8 model (``onnx.ModelProto``).
        net: The steps.
        cfg: The architecture config.
        cache: The accelerator programs by shape.
        programs: Each accelerator step's program keys in ``cache``, by step name.
        memory: The DRAM plan.
        logits: ``(int8 tensor in the network, float tensor in the float model)`` compared against
            onnxruntime (the input of a final Softmax, else the first output).
        image: The DRAM image: activations planned, every layer's weights placed (written on the first run),
            every program of a run relocated to its places and checked (:mod:`.runtime.link`).
        timings: Seconds per phase (import, quantize, plan, compile, program_decode, link).
        quantized_here: Whether tinynpu quantized the model (False: it came quantized).
    """

    imported: Imported
    qmodel: Any
    net: Network
    cfg: ArchConfig
    cache: ProgramCache
    programs: dict[str, tuple[ProgramKey, ...]]
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
                 calibrate: int = DEFAULT_CALIBRATION, cfg: ArchConfig | None = None,
                 nonlinear: str = NPU, calibration: CalibrationSource | None = None) -> CompiledNetwork:
    """Import, quantize, plan and compile an ONNX model for the accelerator.

    Args:
        path: The ``.onnx`` file (float, or already QDQ-quantized).
        batch: Size of a dynamic batch dimension.
        random_weights: Seed of random weights replacing constant ones (default: only when every
            weight is a constant, seed 0).
        calibrate: Number of seeded calibration inputs for quantization.
        calibration: Samples to calibrate on instead (``--calibration`` files, ``--input`` values).
        cfg: Architecture config (default: ``default``).
        nonlinear: ``npu``: softmax, norms, unary activations and the affine ops after matmuls as
            accelerator programs (:mod:`.frontend.nonlinear`); ``host``: the ONNX operators in float on the host.

    Raises:
        OnnxError: not ONNX, truncated, unsupported op, dynamic shape without ``batch``, too big for DRAM.
    """
    from tinynpu.compiler.onnx.frontend.quantize import calibration_inputs, is_quantized, quantize

    cfg = cfg or load_config("default")
    if nonlinear not in (NPU, HOST):
        raise UsageError(f"nonlinear must be {NPU!r} or {HOST!r}, not {nonlinear!r}.")
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
        qmodel = quantize(imported.model, calibration_inputs(lambda s: seeded_inputs(imported.model, s), calibrate,
                                                                calibration))
    else:
        qmodel = imported.model
    timings["quantize"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    import onnx

    qmodel = onnx.shape_inference.infer_shapes(qmodel)
    net = fold_head_moves(build_network(qmodel, nonlinear=nonlinear))
    place(net, cfg)
    memory = plan(net, cfg.tile)
    if memory.total_bytes > cfg.dram_bytes:
        raise OnnxError(f"{path}: the network needs {memory.total_bytes} bytes of DRAM ({memory.weight_bytes} of "
                        f"weights, {memory.activation_peak_bytes} of activations at the peak), more than the "
                        f"{cfg.dram_bytes} bytes of config {cfg.name!r}.")
    logits = _logits(net, qmodel, imported.model)
    timings["plan"] = time.perf_counter() - t0
    cache = ProgramCache(cfg)
    programs = compile_programs(net, cache)
    image = DramImage(cfg, memory)
    reserve_weights(net, programs, cache, image)
    timings["compile"] = cache.compile_seconds
    timings["program_decode"] = cache.decode_seconds  # each compiled program decoded once (ProgramCache)
    # every program of a run relocated to its places and checked once, here (a run only loads them)
    timings["link"] = link_programs(net, cache, image, seeded_inputs(imported.model, 0))
    return CompiledNetwork(imported=imported, qmodel=qmodel, net=net, cfg=cfg, cache=cache, programs=programs,
                           memory=memory, logits=logits, timings=timings, quantized_here=quantized_here,
                           image=image)


def _logits(net: Network, qmodel: Any, float_model: Any) -> tuple[str, str]:
    """The int8 tensor compared against onnxruntime and its float-model counterpart."""
    producer = {o: s for s in net.steps for o in s.outputs}
    quantized = {n.output[0] for n in qmodel.graph.node if n.op_type == "QuantizeLinear"}  # not a float output's
    softmax = next((s for s in reversed(net.steps) if s.op == "Softmax"), None)                # table codes
    # the last softmax's input, else (a masked softmax on the host reads float scores) the first output
    for target in ([softmax.inputs[0]] if softmax is not None else []) + [net.outputs[0]]:
        # walk back through DequantizeLinear (and an attention mask's select) to the int8 tensor
        s = producer.get(target)
        while s is not None and (s.op in ("DequantizeLinear",) or s.kind == "mask"):
            target = s.inputs[0]
            s = producer.get(target)
        if target in net.qparams and target in quantized:
            break
    else:
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


#: run_network, describe and NetworkVerificationError live in .verify (which needs nothing of this module at
#: import time); they stay importable from here, where tinynpu.report and older callers look them up.
__all__ = ["CompiledNetwork", "NetworkVerificationError", "compile_onnx", "describe", "run_network"]
