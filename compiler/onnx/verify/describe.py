"""The compiled network as JSON (``tinynpu compile onnx``): steps, placement, programs, DRAM image."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tinynpu.compiler.onnx.ir import (
    HOST,
    NPU,
    AddStep,
    ConvStep,
    GemmStep,
    LayerStep,
    NonlinearStep,
    ProductStep,
    Step,
)
from tinynpu.compiler.onnx.lower.nonlinear import in_place
from tinynpu.compiler.onnx.lower.programs import ProgramKey
from tinynpu.compiler.onnx.runtime.layers import conv_places, gemm_in_place

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.network import CompiledNetwork


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
        if step.name in cn.programs:
            entry["program"] = names[cn.programs[step.name][0]]
            entry["image"] = _step_image(cn, step, names)
        if isinstance(step, LayerStep):
            epi = step.epilogue
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


def _step_image(cn: CompiledNetwork, step: Step, names: dict[ProgramKey, str]) -> list[dict[str, Any]]:
    """Each program of an accelerator step, with where its DRAM tensors are in the image.

    A tensor is at its planned activation place, at its placed weights, or ``staged``: the
    host writes it into the staging area for that program (a re-laid operand).  A tensor
    read or written as channels of wider pixels (a group's, or a concatenation's slice) gives
    the pitch between its rows.
    """
    programs = cn.programs[step.name]
    out = []
    for i, key in enumerate(programs):
        comp = cn.cache.programs[key]
        places = _places(cn, step, comp, i, len(programs))
        suffix = str(i) if isinstance(step, ConvStep) else ""
        tensors: dict[str, Any] = {}
        for t in comp.program.tensors:
            if t.name in places or step.kind == "matmul":
                place = places.get(t.name)
            else:
                place = (cn.image.reserved[(step.name, f"{t.name}{suffix}")][0], None)
            if place is None:
                tensors[t.name] = {"staged": True, "bytes": t.nbytes}
                continue
            tensors[t.name] = {"address": place[0], "bytes": t.nbytes}
            if place[1] is not None:  # a channel slice of every pixel: its rows this many bytes apart
                tensors[t.name]["pitch"] = place[1]
        out.append({"program": names[key], "instructions": len(comp.program.words),
                    "program_bytes": len(comp.program.to_bytes()), "tensors": tensors})
    return out


def _places(cn: CompiledNetwork, step: Step, comp: Any, index: int,
            programs: int) -> dict[str, tuple[int, int | None] | None]:
    """Program ``index``'s activation tensors: (address, pitch) in the image, or None when staged."""
    image = cn.image
    places: dict[str, tuple[int, int | None] | None] = {}
    if isinstance(step, ConvStep):
        places["X"], places["Y"] = conv_places(image, step, comp, index, programs)
    elif isinstance(step, (AddStep, ProductStep)):
        for role, name in [*((f"X{j}", n) for j, n in enumerate(step.inputs)), ("Y", step.outputs[0])]:
            addr = image.address(name, 0)
            places[role] = (addr, None) if addr is not None else None
    elif isinstance(step, NonlinearStep):  # in place, or both staged (a row operation on an NHWC tensor)
        flat = in_place(step, cn.net.shapes[step.inputs[0]])
        for role, name in (("X", step.inputs[0]), ("Y", step.outputs[0])):
            addr = image.address(name, comp.program.tensor(role).nbytes) if flat else None
            places[role] = (addr, None) if addr is not None else None
    elif isinstance(step, GemmStep):
        for role, name, used in zip("AC", (step.inputs[0], step.outputs[0]),
                                    gemm_in_place(step, cn.net.shapes[step.inputs[0]]), strict=True):
            addr = image.address(name, comp.program.tensor(role).nbytes) if used else None
            places[role] = (addr, None) if addr is not None else None
    return places


__all__ = ["describe"]
