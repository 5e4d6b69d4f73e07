"""Nonlinear steps run: their program on the simulator, their integer reference, or their ONNX nodes on the host.

On the accelerator the program reads the step's int8 input and writes its
output at their planned places in the DRAM image, except a row operation on
a 4-D tensor, which the image holds NHWC while the rows run along W: the host
then lays it out row-major in the staging area and reads the result back
(both counted as host traffic).  Its identity tile and parameter rows are the
step's weights, written once.
"""

from __future__ import annotations

import numpy as np

from tinynpu.compiler.compiled import Compiled
from tinynpu.compiler.onnx.ir import NPU, MaskCodesStep, Network, NonlinearStep
from tinynpu.compiler.onnx.lower.nonlinear import b_rows, in_place, parameter_rows, program_key, reference, row_shape
from tinynpu.compiler.onnx.lower.programs import ProgramKey
from tinynpu.compiler.onnx.lower.rowwise import RowShape
from tinynpu.compiler.onnx.lower.runtime_mask import codes_of
from tinynpu.compiler.onnx.runtime.image import from_image_layout, image_layout
from tinynpu.compiler.onnx.runtime.layers import Accelerator, LayerRun, _simulate

_NOTES = {
    "lut": "one vlut per tile-row: the table is the host's float segment on the 256 input codes",
    "softmax": "vredmax, vsubb, vlut (exp), vredsum, vrecip, vmulb, vrequant per tile-row",
    "norm": "vredsum, vmul, vsubb (centred), vredsq, vrsqrt, vmulb, vrequant per column, vaddrow per tile-row",
    "rotary": "tmm by the signed permutation (rotate_half), vmulb by the cos and sin blocks, vadd, vrequant",
}


def host_chain(step: NonlinearStep, env: dict[str, np.ndarray], net: Network) -> list[np.ndarray]:
    """The step's ONNX nodes on the host, in order (``--nonlinear host``, or a lowering that does not apply)."""
    from tinynpu.compiler.onnx.runtime.host import onnx_operator

    local = dict(env)
    for s in step.chain:
        local.update(zip(s.outputs, onnx_operator(s, local, net), strict=False))
    return [local[step.outputs[0]]]


def mask_codes(step: MaskCodesStep, env: dict[str, np.ndarray], net: Network) -> np.ndarray:
    """A per-run mask's int8 codes (:mod:`~tinynpu.compiler.onnx.lower.runtime_mask`), from its input or, when
    the step took over the input's conversion, from the network inputs through its nodes; the host writes them
    to their place in the image as it does any step's output."""
    from tinynpu.compiler.onnx.runtime.host import onnx_operator

    local = dict(env)
    for s in step.chain:
        local.update(zip(s.outputs, onnx_operator(s, local, net), strict=False))
    return codes_of(step, local[step.source or step.inputs[0]])


def nonlinear_layer(step: NonlinearStep, x: np.ndarray, *, npu: Accelerator | None, run: LayerRun,
                    codes: np.ndarray | None = None) -> np.ndarray:
    """The step's int8 output on the simulator (``npu``), or by its integer reference (None); ``codes``: a
    softmax's per-run mask (its second input), read by the program where the image holds it."""
    if npu is None or step.where != NPU:
        return reference(step, x, codes)
    cache, image, shape = npu.cache, npu.image, x.shape

    def program() -> tuple[ProgramKey, Compiled, RowShape, dict[str, np.ndarray]]:
        key = program_key(cache, step, shape)
        rs = row_shape(step, shape, cache.cfg.tile)
        return key, cache.programs[key], rs, {"I": b_rows(step, rs), "P": parameter_rows(step, rs)}

    key, comp, rs, params = (image.derive((step.name, "nonlinear", shape), program, step) if image is not None
                             else program())
    run.note = f"{step.op} on the accelerator: {_NOTES[step.kind]}" + (
        "; the per-run mask: vmax, its codes by strided DMA, tmm by 2I" if codes is not None else "")
    flat = in_place(step, x.shape)
    device_x = (image_layout(x) if flat else x).reshape(rs.rows, rs.width)
    side = {"M": codes} if codes is not None else {}
    if image is None:
        y = _simulate(npu, comp, {"X": device_x} | params | side, "Y", None, run)
    else:
        bases = {name: image.weight((step.name, name), value) for name, value in params.items()}
        staged = {}
        if codes is not None:  # the codes step wrote them to their planned place
            addr = image.address(step.inputs[1], codes.nbytes)
            if addr is None:
                staged["M"] = codes
                run.host_bytes += codes.nbytes
            else:
                bases["M"] = addr
        if flat:
            for tensor, name in (("X", step.inputs[0]), ("Y", step.outputs[0])):
                addr = image.address(name, x.nbytes)
                if addr is None:  # never: the planner places every int8 activation
                    raise RuntimeError(f"{step.kind} step {step.name!r}: {name!r} has no place in the image")
                bases[tensor] = addr
            run.output_in_image = True
        else:
            staged["X"] = np.ascontiguousarray(device_x)
            run.host_bytes += 4 * x.nbytes  # the host's row-major copy in, and the result back
        y = _simulate(npu, comp, staged, "Y", None, run, key=(*key, flat, step.name), bases=bases)
    return from_image_layout(y.reshape(-1), x.shape) if flat else y.reshape(x.shape)


__all__ = ["host_chain", "mask_codes", "nonlinear_layer"]
