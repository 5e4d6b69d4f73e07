"""SwiGLU's gate fused into its product: ``silu(gate) * up`` as one accelerator program.

Unfused, the SiLU is a table program (:class:`~tinynpu.compiler.onnx.ir.LutStep`) writing int8 codes to DRAM,
and the product program reads them back.  One program can do both: the product program brings the gate's
int8 rows into the accumulators anyway, and a ``vlut`` there maps each code to its SiLU before ``vmulb``.
Why fuse:

- **Accuracy.**  ``vlut``'s entries hold 16 bits, so the fused table holds the SiLU at
  ``s_t = max|silu| / (2^15 - 1)`` instead of the int8 output scale (256 times finer): the SiLU is no longer
  rounded to int8 between the two operators, and the product is rounded once, at the output.
- **Cycles and traffic.**  One program instead of two: the table program's loads, ``tmm``, store and the
  product's load of its output go (measured on ``llama``: see ``docs/onnx.md``).

The cost is agreement with onnxruntime's int8 run, which rounds the SiLU to int8 as the QDQ graph says; the
fused result is the closer one to float.  The fusion applies where the table's output is read by the product
alone (and is no graph output) and the ratio ``s_t s_u / s_y`` can be held (:func:`~tinynpu.compiler.onnx.
lower.eltwise.product_scale`); else both steps stay as they are.  With ``--nonlinear host`` the SiLU is no
table step, and nothing is fused.
"""

from __future__ import annotations

from dataclasses import replace

from tinynpu.compiler.onnx.frontend.segments import lut_values
from tinynpu.compiler.onnx.ir import NPU, LutStep, Network, ProductStep, Step
from tinynpu.compiler.onnx.lower.eltwise import GATED_PRODUCT_BITS, gate_table, product_scale


def _gated(net: Network, product: ProductStep, lut: LutStep, other: str) -> ProductStep | None:
    """``product`` reading ``lut``'s input through the table's float function in 16 bits, or None."""
    if lut.chain[-1].op != "QuantizeLinear" or other not in net.qparams or product.outputs[0] not in net.qparams:
        return None
    hit = gate_table(lut_values(lut.chain[:-1], lut.inputs[0], net.constants, net.opset))
    if hit is None:
        return None
    gate, s_t = hit
    scale = product_scale(s_t * net.qparams[other].s / net.qparams[product.outputs[0]].s, bits=GATED_PRODUCT_BITS)
    if scale is None:
        return None
    return replace(product, op=f"{lut.op}*Mul", inputs=(lut.inputs[0], other), scale=scale, gate=gate,
                   reason=f"product on the accelerator, its gate {lut.name!r} ({lut.op}) fused in as a 16-bit table")


def fuse_gated_products(net: Network) -> Network:
    """``net`` with each accelerator product whose input is an accelerator table read by it alone fused with that
    table (module docstring)."""
    producer: dict[str, Step] = {o: s for s in net.steps for o in s.outputs if o}
    readers: dict[str, int] = {}
    for s in net.steps:
        for name in s.inputs:
            readers[name] = readers.get(name, 0) + 1
    gone: set[int] = set()
    steps: list[Step] = []
    for step in net.steps:
        if isinstance(step, ProductStep) and step.gate is None:
            for i in (0, 1):
                lut = producer.get(step.inputs[i])
                if (isinstance(lut, LutStep) and lut.where == NPU and readers.get(step.inputs[i]) == 1
                        and step.inputs[i] not in net.outputs):
                    fused = _gated(net, step, lut, step.inputs[1 - i])
                    if fused is not None:
                        step = fused
                        gone.add(id(lut))
                        break
        steps.append(step)
    return replace(net, steps=[s for s in steps if id(s) not in gone])


__all__ = ["fuse_gated_products"]
