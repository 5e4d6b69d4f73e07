"""Run the network's steps in order: accelerator layers on the simulator (or numpy), host steps in numpy.

The same code runs both ways; only where an accelerator layer's int32
accumulators come from differs (the simulator, or
:mod:`~tinynpu.compiler.onnx.intops`), so the reference is the same integer
network and the comparison is bit for bit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from tinynpu.compiler.onnx.ir import (
    NPU,
    AddStep,
    AvgPoolStep,
    ConcatStep,
    ConvStep,
    GemmStep,
    MaskCodesStep,
    MaskStep,
    MatmulStep,
    MaxPoolStep,
    MoveStep,
    Network,
    NonlinearStep,
    OnnxStep,
    ProductStep,
    Step,
)
from tinynpu.compiler.onnx.lower.programs import ProgramCache
from tinynpu.compiler.onnx.runtime import host
from tinynpu.compiler.onnx.runtime.image import DramImage
from tinynpu.compiler.onnx.runtime.layers import Accelerator, LayerRun, add_layer, conv_layer, gemm_in_place, gemm_layer
from tinynpu.compiler.onnx.runtime.nonlinear import host_chain, mask_codes, nonlinear_layer


@dataclass
class Execution:
    """Every tensor a run produced, and what each step cost."""

    values: dict[str, np.ndarray]
    runs: dict[str, LayerRun] = field(default_factory=dict)
    host_seconds: dict[str, float] = field(default_factory=dict)


def execute(net: Network, feeds: dict[str, np.ndarray], *, cache: ProgramCache | None,
            image: DramImage | None = None, check_races: bool = False, link_only: bool = False) -> Execution:
    """Run ``net`` on ``feeds`` (float inputs by name); ``cache`` None = the numpy reference.

    With an ``image`` the accelerator layers run in the network's one DRAM image: the host
    writes its steps' outputs (and the network's inputs) to their planned places, the layers
    read and write theirs there, and every step reads its inputs back from the image (a
    host step as well as the host's re-layout for a staged layer operand), so what a step
    sees is what is at the planned address, never a copy the host kept.  ``check_races``
    runs every program under the simulator's data-race sanitizer (slower; the tests do).  A step
    whose outputs are resident in the image (:meth:`~.image.DramImage.alias`: a KV cache's past) is
    not run: its outputs are read from DRAM.  ``link_only``: the programs are relocated and checked, not
    run (:mod:`.link`).
    """
    npu = Accelerator(cache, image, check_races, link_only) if cache is not None else None
    env: dict[str, np.ndarray] = dict(net.constants)
    env.update(feeds)
    ex = Execution(values=env)
    if image is not None:
        image.forget()
        for name, value in feeds.items():
            image.publish(name, value)
    for step in net.steps:
        run = LayerRun()
        t0 = time.perf_counter()
        if image is not None and any(step.outputs) and all(image.resident(name) for name in step.outputs if name):
            env.update({name: image.read(name) for name in step.outputs if name})  # in DRAM before the run
            ex.runs[step.name], ex.host_seconds[step.name] = run, 0.0
            continue
        hidden: dict[str, np.ndarray | None] = {}
        if image is not None:
            image.reset_staging()
            hidden = _overlay(env, {name: v for name in step.inputs if name and (v := image.fetch(name)) is not None})
        try:
            outs = _run_step(step, env, npu, run, net)
        finally:
            _restore(env, hidden)
        for i, (name, value) in enumerate(zip(step.outputs, outs, strict=False)):
            if name:
                if image is not None and i == 0 and run.output_in_image:
                    image.hold(name, value.shape, value.dtype)
                    value = image.read(name)  # what the program stored at the planned place
                elif image is not None:
                    image.publish(name, value)
                env[name] = value
        if step.where != NPU and not run.output_in_image:  # else the step counted what it moved
            run.host_bytes += _host_bytes(step, env, outs)
        ex.runs[step.name] = run
        ex.host_seconds[step.name] = time.perf_counter() - t0 - run.sim_seconds - run.load_seconds
    return ex


def _overlay(env: dict[str, np.ndarray], read: dict[str, np.ndarray]) -> dict[str, np.ndarray | None]:
    """Put the inputs ``read`` back from the image in place of the host's copies in ``env`` for one step (in
    place: copying ``env``, every constant of the network, for each of a decode step's hundreds of steps cost
    more than the step's own host work); the host's copies (None: none), for :func:`_restore`."""
    hidden = {name: env.get(name) for name in read}
    env.update(read)
    return hidden


def _restore(env: dict[str, np.ndarray], hidden: dict[str, np.ndarray | None]) -> None:
    for name, value in hidden.items():
        if value is None:
            del env[name]
        else:
            env[name] = value


def reference_step(step: Step, env: dict[str, np.ndarray], net: Network) -> list[np.ndarray]:
    """One step's outputs from the values in ``env``, by the numpy integer reference."""
    return _run_step(step, env, None, LayerRun(), net)


def _run_step(step: Step, env: dict[str, np.ndarray], npu: Accelerator | None, run: LayerRun,
              net: Network) -> list[np.ndarray]:
    if isinstance(step, ConvStep):
        y = conv_layer(step, env[step.inputs[0]], npu=npu, run=run)  # N x P x Q x K int8
        if not run.output_in_image:  # the host lays it back to NCHW; in the image the next layer reads it as is
            run.host_bytes += 2 * y.nbytes
        return [np.ascontiguousarray(y.transpose(0, 3, 1, 2))]
    if isinstance(step, GemmStep):
        return [_gemm(step, env, npu, run)]
    if isinstance(step, MatmulStep):
        return [_matmul(step, env, npu, run)]
    if isinstance(step, ProductStep):
        return [add_layer(step, [env[name] for name in step.inputs], npu=npu, run=run)]
    if isinstance(step, AddStep):
        if step.where == NPU:
            return [add_layer(step, [env[name] for name in step.inputs], npu=npu, run=run)]
        return [host.fixed_point_add(step, env)]
    if isinstance(step, ConcatStep):
        return [host.concat(step, env, npu.image if npu is not None else None, run)]
    if isinstance(step, MoveStep):
        return host.move(step, env, net)
    if isinstance(step, MaskStep):
        return [host.mask_select(step, env)]
    if isinstance(step, MaskCodesStep):
        return [mask_codes(step, env, net)]
    if isinstance(step, MaxPoolStep):
        return [host.max_pool(step, env)]
    if isinstance(step, AvgPoolStep):
        return [host.average_pool(step, env)]
    if isinstance(step, NonlinearStep):
        if step.where != NPU:
            return host_chain(step, env, net)
        return [nonlinear_layer(step, env[step.inputs[0]], npu=npu, run=run,
                                codes=env[step.inputs[1]] if step.side_inputs() else None)]
    if isinstance(step, OnnxStep):
        return host.onnx_operator(step, env, net)
    raise TypeError(f"step {step.name!r}: no runtime for a {type(step).__name__}")


#: Host operators that read only part of their first input, as much of it as they write (a Gather's rows
#: of an embedding table, a Slice's window).
_PARTIAL_READERS = frozenset({"Gather", "GatherElements", "GatherND", "Slice"})


def _host_bytes(step: Step, env: dict[str, np.ndarray], outs: list[np.ndarray]) -> int:
    """What a host step read and wrote: its inputs and outputs, of a partial reader's first input only the
    part it reads (GPT-2-small's token lookup reads one row, not the 154 MB table)."""
    written = sum(int(np.asarray(v).nbytes) for v in outs)
    read = [int(np.asarray(env[name]).nbytes) if name in env else 0 for name in step.inputs]
    if read and step.op in _PARTIAL_READERS:
        read[0] = min(read[0], written)
    return sum(read) + written


def _gemm(step: GemmStep, env: dict[str, np.ndarray], npu: Accelerator | None, run: LayerRun) -> np.ndarray:
    x = env[step.inputs[0]]
    if step.trans_a:  # Gemm's A arrives K x M: the host transposes it (a staged operand, counted)
        x = np.ascontiguousarray(x.T)
        run.host_bytes += 2 * x.nbytes
    x2 = x.reshape(-1, x.shape[-1])
    a_in, c_in = gemm_in_place(step, x.shape)
    names = (step.name, step.inputs[0] if a_in else "", step.outputs[0] if c_in else "")
    y = gemm_layer(x2, step.weight, step.epilogue, npu=npu, run=run, names=names)
    return y.reshape(*x.shape[:-1], y.shape[-1])


def _matmul(step: MatmulStep, env: dict[str, np.ndarray], npu: Accelerator | None, run: LayerRun) -> np.ndarray:
    from tinynpu.compiler.onnx.runtime.attention import matmul_layer

    return matmul_layer(step, env, npu, run)


__all__ = ["Execution", "execute", "reference_step"]
