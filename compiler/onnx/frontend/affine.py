"""Folding per-channel affine steps into the Conv before them: a BatchNormalization, or a Mul and Add by
per-channel constants (how DenseNet-121 and Inception-v2 write their batch norms), become new Conv weights
and bias, so the accelerator's conv runs them at no cost."""

from __future__ import annotations

from typing import Any

import numpy as np


def _attr(node: Any, name: str, default: Any) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def fold_batchnorm(graph: Any) -> int:
    """``Conv -> BatchNormalization`` (the conv's only consumer) becomes one Conv with new weights."""
    from onnx import numpy_helper

    inits = {t.name: t for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    use = consumers(graph)
    drop: list[Any] = []
    for bn in list(graph.node):
        if bn.op_type != "BatchNormalization" or len(bn.output) != 1:
            continue
        conv = producer.get(bn.input[0])
        if conv is None or conv.op_type != "Conv" or len(use.get(bn.input[0], [])) != 1:
            continue
        if not all(i in inits for i in bn.input[1:5]) or conv.input[1] not in inits:
            continue
        scale, bias, mean, var = (numpy_helper.to_array(inits[i]).astype(np.float64) for i in bn.input[1:5])
        eps = float(_attr(bn, "epsilon", 1e-5))
        w, b = _conv_weights(conv, inits)
        g = scale / np.sqrt(var + eps)
        _replace_conv_weights(graph, conv, w * g.reshape(-1, *([1] * (w.ndim - 1))), (b - mean) * g + bias,
                              writes=bn.output[0], tag="bnfold")
        drop.append(bn)
    for bn in drop:
        graph.node.remove(bn)
    prune_initializers(graph)
    return len(drop)


def _conv_weights(conv: Any, inits: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """A Conv's weight and bias (zeros when it has none), float64."""
    from onnx import numpy_helper

    w = numpy_helper.to_array(inits[conv.input[1]]).astype(np.float64)
    b = (numpy_helper.to_array(inits[conv.input[2]]).astype(np.float64)
         if len(conv.input) > 2 and conv.input[2] else np.zeros(w.shape[0]))
    return w, b


def _replace_conv_weights(graph: Any, conv: Any, w: np.ndarray, b: np.ndarray, *, writes: str, tag: str) -> None:
    """Give ``conv`` new float32 weight and bias initializers and make it write the tensor ``writes``
    (that of the node folded into it)."""
    from onnx import numpy_helper

    w_name, b_name = f"{writes}_weight_{tag}", f"{writes}_bias_{tag}"  # per output: a weight may be shared
    graph.initializer.extend([numpy_helper.from_array(w.astype(np.float32), w_name),
                              numpy_helper.from_array(b.astype(np.float32), b_name)])
    del conv.input[1:]
    conv.input.extend([w_name, b_name])
    conv.output[0] = writes


def _per_channel(value: np.ndarray, channels: int) -> np.ndarray | None:
    """``value`` as one number per channel of an NCHW tensor it broadcasts against, or None."""
    if value.ndim > 4:
        return None
    shape = (1,) * (4 - value.ndim) + value.shape
    if shape[0] != 1 or shape[2] != 1 or shape[3] != 1 or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(value.reshape(-1).astype(np.float64), (channels,))


def fold_channel_affine(graph: Any) -> int:
    """``Conv | BatchNormalization -> Mul | Add`` by a per-channel constant (the only consumer) becomes
    one Conv (new weights and bias) or one BatchNormalization (new scale and shift).

    Repeated until nothing folds, so a ``Mul`` then ``Add`` chain (a batch norm written out) folds whole.
    """
    from onnx import numpy_helper

    folded = 0
    while True:
        inits = {t.name: t for t in graph.initializer}
        producer = {o: n for n in graph.node for o in n.output}
        use = consumers(graph)
        outputs = {o.name for o in graph.output}
        hit = None
        for node in graph.node:
            if node.op_type not in ("Mul", "Add") or len(node.input) != 2:
                continue
            for side in (0, 1):
                prod, const = producer.get(node.input[side]), node.input[1 - side]
                if (prod is None or const not in inits or len(use.get(node.input[side], [])) != 1
                        or node.input[side] in outputs):
                    continue
                if prod.op_type == "Conv" and prod.input[1] in inits:
                    w, b = _conv_weights(prod, inits)
                elif (prod.op_type == "BatchNormalization" and len(prod.output) == 1
                      and all(i in inits for i in prod.input[1:5])):
                    w, b = (numpy_helper.to_array(inits[i]).astype(np.float64) for i in prod.input[1:3])
                else:
                    continue
                per = _per_channel(numpy_helper.to_array(inits[const]), w.shape[0])
                if per is not None:
                    hit = (node, prod, w, b, per)
                    break
            if hit:
                break
        if hit is None:
            break
        node, prod, w, b, per = hit
        if node.op_type == "Mul":  # a batch norm's output is scale * normalized + shift: the same algebra
            w, b = w * per.reshape(-1, *([1] * (w.ndim - 1))), b * per
        else:
            b = b + per
        if prod.op_type == "Conv":
            _replace_conv_weights(graph, prod, w, b, writes=node.output[0], tag="affinefold")
        else:
            names = [f"{node.output[0]}_bn_scale_affinefold", f"{node.output[0]}_bn_shift_affinefold"]
            graph.initializer.extend(numpy_helper.from_array(v.astype(np.float32), n) for v, n in zip((w, b), names,
                                                                                                   strict=True))
            prod.input[1], prod.input[2] = names
            prod.output[0] = node.output[0]
        graph.node.remove(node)
        folded += 1
    if folded:
        prune_initializers(graph)
    return folded


def consumers(graph: Any) -> dict[str, list[tuple[Any, int]]]:
    use: dict[str, list[tuple[Any, int]]] = {}
    for node in graph.node:
        for idx, name in enumerate(node.input):
            use.setdefault(name, []).append((node, idx))
    return use


def prune_initializers(graph: Any) -> None:
    used = {i for n in graph.node for i in n.input}
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)

__all__ = ["consumers", "fold_batchnorm", "fold_channel_affine", "prune_initializers"]
