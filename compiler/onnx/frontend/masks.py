"""Additive attention masks, kept out of int8: the scores are quantized at their own scale, the mask added in float.

An attention mask is often added to the scores: ``scores + mask`` with the
masked positions at ``-inf``, at the dtype's most negative number, or at
``-1e4``, then a Softmax.  Quantized as a whole, that sum's calibrated range
reaches the mask value: its per-tensor int8 scale becomes ``|mask| / 127``
(about 2.7e36 for float32's minimum, infinite for ``-inf``), every real score
rounds to 0 at that scale, and each softmax row comes out uniform over the
kept positions, or NaN where the scale is infinite.  onnxruntime's int8 run of
the same model does exactly the same.

The mask holds two values that matter, "keep" and "drop", and no resolution
in between; the scores hold all of theirs in a few units.  So the ``Add`` of a
mask and the ``Softmax`` reading it are left in float
(:func:`mask_nodes`, given to the quantizer as nodes to exclude): the scores
keep the int8 scale the matmul before them calibrates, the host adds the mask
and takes the softmax in float (both are host operators anyway: the
accelerator has no exp), and the softmax output, in [0, 1], is quantized for
the matmul with the values.  onnxruntime runs the same QDQ model the same way,
so the int8 comparison stays like for like.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: A constant element at or below this is a mask value (-1e4 is the oldest convention, then finfo.min, -inf).
MASK_THRESHOLD = -1e4


def _is_mask(value: np.ndarray) -> bool:
    return value.dtype.kind == "f" and value.size > 1 and bool(np.any(value <= MASK_THRESHOLD))


def mask_nodes(model: Any) -> list[str]:
    """Names of each ``Add`` of a constant additive mask and of the ``Softmax`` that reads its sum."""
    from onnx import numpy_helper

    graph = model.graph
    consts = {t.name: t for t in graph.initializer}
    readers: dict[str, list[Any]] = {}
    for n in graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    names: list[str] = []
    for node in graph.node:
        if node.op_type != "Add" or not node.name:
            continue
        if not any(i in consts and _is_mask(numpy_helper.to_array(consts[i])) for i in node.input):
            continue
        softmax = [r for r in readers.get(node.output[0], []) if r.op_type == "Softmax" and r.name]
        if softmax:
            names += [node.name] + [s.name for s in softmax]
    return names


__all__ = ["MASK_THRESHOLD", "mask_nodes"]
