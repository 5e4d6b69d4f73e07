"""What the per-layer report calls a step, and the shapes it reads and writes, in the model's own terms.

A step is named after the ONNX node that produced it: for a fused layer the
main node (the ``Conv`` whose ``Relu`` and batch norm were folded in), not its
last one.  A node with a name keeps it.  A nameless node is ``Op_index``
(``Conv_12``), the index being the node's position in the model file's graph
(0-based, as the file lists its nodes, what Netron shows), so a user can find
it.  Found through its output tensor: the import renames a fused conv's output
to the batch norm's or activation's, so the search follows the producer chain
back (through first inputs) until it meets a node of the step's own op type.
A node the import made itself (an opset conversion's, or the quantizer's
``QuantizeLinear``/``DequantizeLinear``) is in no file: it keeps the name the
compiler gave it.

Shapes are the model's: NCHW for images, row-major as the graph states them,
for the activation tensors a step reads (its weights and quantization
parameters are constants, left out) and writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinynpu.compiler.onnx.ir import Step

if TYPE_CHECKING:
    from tinynpu.compiler.onnx.network import CompiledNetwork

#: How many producers back the search for a fused layer's main node goes: a Conv, its batch norm, a
#: per-channel Mul and Add, an activation: four hops and one to spare.
_CHAIN_HOPS = 5


@dataclass(frozen=True)
class LayerNaming:
    """A step as the report shows it: its label and its activation shapes (one tuple per tensor)."""

    label: str
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]


def _file_graph(cn: CompiledNetwork) -> Any | None:
    """The model file's graph as the user wrote it (without its weights' external data), or None."""
    import onnx

    try:
        return onnx.load(cn.imported.source, load_external_data=False).graph
    except Exception:  # noqa: BLE001 - a file gone since the run: steps keep the compiler's names
        return None


def _file_label(graph: Any, producer: dict[str, int], tensor: str, op: str) -> str | None:
    """The file's name for the ``op`` node whose (possibly renamed) output is ``tensor``, or None."""
    for _ in range(_CHAIN_HOPS):
        index = producer.get(tensor)
        if index is None:
            return None
        node = graph.node[index]
        if node.op_type == op:
            return str(node.name) if node.name else f"{op}_{index}"
        if not node.input:
            return None
        tensor = node.input[0]
    return None


def _qdq_node(cn: CompiledNetwork) -> dict[str, Any]:
    """The int8 model's nodes by the name a step takes from one (its own name, else its first output's)."""
    return {(n.name or n.output[0]): n for n in cn.qmodel.graph.node if n.output}


def layer_namings(cn: CompiledNetwork) -> dict[str, LayerNaming]:
    """Each step's label and shapes, by step name (see the module docstring)."""
    graph = _file_graph(cn)
    producer = ({o: i for i, n in enumerate(graph.node) for o in n.output} if graph is not None else {})
    nodes = _qdq_node(cn)
    out = {}
    for step in cn.net.steps:
        out[step.name] = LayerNaming(_label(step, nodes.get(step.name), graph, producer),
                                     _shapes(cn, step.inputs), _shapes(cn, step.outputs))
    return out


def _label(step: Step, node: Any | None, graph: Any | None, producer: dict[str, int]) -> str:
    if node is None or node.name or graph is None:  # named in the model, or no node to trace
        return step.name
    return _file_label(graph, producer, node.output[0], node.op_type) or step.name


def _shapes(cn: CompiledNetwork, tensors: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    shapes = cn.net.shapes
    return tuple(tuple(shapes[t]) for t in tensors if t and t in shapes and t not in cn.net.constants)


def shape_text(shapes: tuple[tuple[int, ...], ...]) -> str:
    """``1x64x56x56``, several tensors joined by `` + `` (a residual add's two inputs)."""
    return " + ".join("x".join(str(d) for d in s) for s in shapes) or "-"


__all__ = ["LayerNaming", "layer_namings", "shape_text"]
