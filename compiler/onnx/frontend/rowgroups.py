"""Leading rows of the residual stream that are far smaller than the rest get tensors (and int8 scales) of their own.

A ViT's class token (DeiT's class and distillation tokens) starts as a learned
row initialized near zero (std 0.02 in HF's ViT, zeros in DeiT and
torchvision), while every patch row is a convolution of the image.  Measured in
float, the class row of the residual stream is 0.00-0.06 against about 0.95 for
the patch rows, and it stays that small through the layers at init.  With one
int8 scale per tensor (the patch rows set it) the class row holds a few codes,
and the classifier reads that row alone.

The residual stream is only ever read row by row until attention mixes the
rows, and attention reads it through a LayerNorm, which normalizes each row.  So
the stream can be carried as two tensors, the leading ``k`` rows and the rest,
each quantized per tensor with its own calibrated scale, without changing the
float function:

- every tensor a LayerNorm reads (a *stream* tensor) is built from its parts:
  a residual ``Add(y, f)`` of a split ``y`` becomes ``Add(y_lead, f[:k])`` and
  ``Add(y_rest, f[k:])`` (``f``, the branch output, is divided by one ``Split``:
  it comes from a normalized row and is of one size in every row); the
  embedding's ``Add`` of a position table and its ``Concat`` of the class
  token are split the same way, so the class row is never quantized at the
  patch rows' scale; any other tensor is divided by a ``Split``;
- every row-wise computation reading a stream tensor (``LayerNormalization``,
  or the same written out in ``ReduceMean``/``Sub``/``Pow``/...) is cloned for
  each part, and its results are concatenated along the rows (they are
  normalized, so one scale serves both parts, and the ``Concat`` is an int8
  copy: :func:`~.quantize.align_concat_scales`).

onnxruntime quantizes and runs the rewritten graph, so its int8 run and
tinynpu's stay comparable, and the accelerator needs nothing new: the parts are
smaller residual adds and norms.  A model whose leading rows are not small
(every BERT, GPT-2 and Llama export measured) is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: A leading row group is split off when its calibrated range is below this fraction of the other rows': it
#: would lose two bits or more of its resolution to the shared scale.
SMALL_ROW_RATIO = 0.25
#: Element-wise operators a row-wise computation (a LayerNorm, written out or not) is cloned through.
ROW_WISE_OPS = ("LayerNormalization", "ReduceMean", "Sub", "Add", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Cast")


@dataclass(frozen=True)
class RowSplit:
    """What :func:`split_small_rows` did: ``rows`` leading rows split off in ``streams`` stream tensors."""

    rows: int
    streams: tuple[str, ...]
    ratio: float  # the leading rows' calibrated range over the other rows', largest over the streams


def _constants(graph: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    out = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            out[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return out


def _last_axis_only(node: Any, consts: dict[str, np.ndarray], rank: int) -> bool:
    """Whether a ReduceMean or LayerNormalization works along the last axis alone."""
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "LayerNormalization":
        return int(attrs.get("axis", -1)) in (-1, rank - 1)
    axes = attrs.get("axes")
    if axes is None and len(node.input) > 1:
        axes = consts.get(node.input[1])
    return axes is not None and [int(a) for a in np.ravel(axes)] in ([-1], [rank - 1]) and attrs.get("keepdims", 1)


def stream_tensors(graph: Any) -> list[str]:
    """The tensors a LayerNorm normalizes: a ``LayerNormalization``'s input, or a tensor read by a last-axis
    ``ReduceMean`` and by a ``Sub`` of that mean (the written-out form), in graph order."""
    means = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "ReduceMean"}
    found = [n.input[0] for n in graph.node if n.op_type == "LayerNormalization"]
    found += [n.input[0] for n in graph.node if n.op_type == "Sub" and means.get(n.input[1]) == n.input[0]]
    return list(dict.fromkeys(found))


def leading_small_rows(rows_range: np.ndarray) -> tuple[int, float]:
    """How many leading rows of per-row ranges ``rows_range`` are each below :data:`SMALL_ROW_RATIO` of the
    other rows' range (at most half the rows), and their range over the others' (1.0 when none)."""
    n = len(rows_range)
    k = 0
    while k < n // 2 and rows_range[k] < SMALL_ROW_RATIO * rows_range[k + 1:].max(initial=0.0):
        k += 1
    if k == 0:
        return 0, 1.0
    return k, float(rows_range[:k].max() / rows_range[k:].max())


def _session(model: Any, extra: list[str]) -> Any:
    """An onnxruntime session of the float ``model`` that also returns the tensors ``extra``."""
    import onnx
    import onnxruntime

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    probe.graph.output.extend([onnx.ValueInfoProto(name=t) for t in extra if t not in known])
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _row_ranges(session: Any, names: list[str], samples: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Each of ``names``' largest magnitude per row (axis -2) over ``session``'s runs on ``samples``."""
    ranges: dict[str, np.ndarray] = {}
    for sample in samples:
        for name, value in zip(names, session.run(names, sample), strict=True):
            v = np.abs(np.asarray(value, dtype=np.float64))
            if v.ndim < 2:
                continue
            per_row = v.reshape(-1, v.shape[-2], v.shape[-1]).max(axis=(0, 2))
            ranges[name] = per_row if name not in ranges else np.maximum(ranges[name], per_row)
    return ranges


def _prepends_rows(graph: Any, stream: str) -> bool:
    """Whether a ``Concat`` along the rows lies upstream of ``stream``: tokens prepended to the sequence (a
    class token), where small leading rows come from.  Language models have none, so they are not run here."""
    from onnx import helper

    producer = {o: n for n in graph.node for o in n.output}
    todo, seen = [stream], set()
    while todo:
        p = producer.get(todo.pop())
        if p is None or id(p) in seen:
            continue
        seen.add(id(p))
        if p.op_type == "Concat" and len(p.input) > 1:
            axis = next((int(helper.get_attribute_value(a)) for a in p.attribute if a.name == "axis"), 0)
            if axis in (-2, 0, 1):  # the rows of a (rows, width) or (batch, rows, width) sequence
                return True
        todo.extend(p.input)
    return False


class _Rewriter:
    """The graph surgery of :func:`split_small_rows` for one row count ``k`` (see the module docstring)."""

    def __init__(self, graph: Any, k: int, consts: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]],
                 opset: int) -> None:
        self.graph, self.k, self.consts, self.shapes, self.opset = graph, k, consts, shapes, opset
        self.parts: dict[str, tuple[str, str]] = {}
        self.new: list[Any] = []
        self.replaced: set[int] = set()  # ids of original nodes the rewrite stands in for
        self.producer = {o: n for n in graph.node for o in n.output}
        self.uses: dict[str, list[Any]] = {}
        for n in graph.node:
            for i in n.input:
                self.uses.setdefault(i, []).append(n)

    def _node(self, op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        from onnx import helper

        self.new.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def _joined(self, inputs: list[str], output: str, axis: int) -> str:
        """``inputs`` concatenated along ``axis``; a single input is its own part (no copy)."""
        return inputs[0] if len(inputs) == 1 else self._node("Concat", inputs, output, axis=axis)

    def _const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        self.consts[name] = value
        return name

    def _has_rows(self, t: str) -> bool:
        rows = self._rows(t)
        return rows is not None and rows > 1

    def _slice(self, t: str) -> tuple[str, str]:
        if t not in self.parts:
            self.parts[t] = self._sliced(t)
        return self.parts[t]

    def _sliced(self, t: str) -> tuple[str, str]:
        if t in self.consts:
            v = self.consts[t]
            return self._const(f"{t}_rows_lead", v[..., : self.k, :]), self._const(f"{t}_rows_rest", v[..., self.k:, :])
        from onnx import helper

        rank, rows = len(self.shapes[t]), self.shapes[t][-2]
        lead, rest = f"{t}_rows_lead", f"{t}_rows_rest"
        sizes = np.array([self.k, rows - self.k], dtype=np.int64)
        if self.opset >= 13:  # one Split: one host step for both parts
            node = helper.make_node("Split", [t, self._const(f"{t}_rows_sizes", sizes)], [lead, rest],
                                    name=f"{t}_rows_split", axis=rank - 2)
        else:
            node = helper.make_node("Split", [t], [lead, rest], name=f"{t}_rows_split", axis=rank - 2,
                                    split=[int(v) for v in sizes])
        self.new.append(node)
        return lead, rest

    def split(self, t: str) -> tuple[str, str]:
        """``t``'s two parts, built from its producer's split inputs where the producer is a residual or
        position ``Add`` or a ``Concat`` of the leading rows, else sliced."""
        if t in self.parts:
            return self.parts[t]
        p = self.producer.get(t)
        parts = None
        if p is not None and p.op_type == "Add" and all(self._has_rows(i) for i in p.input):
            pieces = [self.split(i) if self._pulls(i) else self._slice(i) for i in p.input]
            parts = (self._node("Add", [x[0] for x in pieces], f"{t}_rows_lead"),
                     self._node("Add", [x[1] for x in pieces], f"{t}_rows_rest"))
            self.replaced.add(id(p))
        elif p is not None and p.op_type == "Concat" and self._concat_at_k(p):
            n, axis = self._lead_inputs(p), len(self.shapes[t]) - 2
            parts = (self._joined(list(p.input[:n]), f"{t}_rows_lead", axis),
                     self._joined(list(p.input[n:]), f"{t}_rows_rest", axis))
            self.replaced.add(id(p))
        if parts is None:
            return self._slice(t)
        self.parts[t] = parts
        return parts

    def _pulls(self, t: str) -> bool:
        """Whether ``t`` is split through its producer (a position ``Add`` or the class token's ``Concat``)."""
        p = self.producer.get(t)
        if p is None:
            return False
        if p.op_type == "Concat":
            return self._concat_at_k(p)
        return p.op_type == "Add" and any(i in self.consts and self._has_rows(i) for i in p.input)

    def _rows(self, t: str) -> int | None:
        shape = self.consts[t].shape if t in self.consts else self.shapes.get(t)
        return None if shape is None or len(shape) < 2 else int(shape[-2])

    def _lead_inputs(self, p: Any) -> int:
        """How many of Concat ``p``'s first inputs make up exactly the leading ``k`` rows (0: none do)."""
        total = 0
        for n, i in enumerate(p.input[:-1], start=1):
            rows = self._rows(i)
            if rows is None:
                return 0
            total += rows
            if total >= self.k:
                return n if total == self.k else 0
        return 0

    def _concat_at_k(self, p: Any) -> bool:
        """Whether ``p`` concatenates along the rows with its first inputs exactly the leading ``k`` rows."""
        from onnx import helper

        shape = self.shapes.get(p.output[0])
        if shape is None or len(shape) < 2:
            return False
        axis = int(next((helper.get_attribute_value(a) for a in p.attribute if a.name == "axis"), 0))
        return axis % len(shape) == len(shape) - 2 and self._lead_inputs(p) > 0

    def clone_row_wise(self, x: str) -> None:
        """Clone the row-wise computation reading ``x`` once per part and concatenate its results."""
        region = self._region(x)
        if not region:
            return
        ids = {id(n) for n in region}
        made = {o for n in region for o in n.output}
        ends = [o for o in made if o in {g.name for g in self.graph.output}
                or any(id(u) not in ids for u in self.uses.get(o, []))]
        from onnx import helper

        renamed: list[dict[str, str]] = []
        for tag, part in zip(("lead", "rest"), self.parts[x], strict=True):
            names = {x: part} | {o: f"{o}_rows_{tag}" for o in made}
            for n in region:
                clone = helper.make_node(n.op_type, [names.get(i, i) for i in n.input],
                                         [names[o] for o in n.output], name=f"{n.name or n.output[0]}_rows_{tag}")
                clone.attribute.extend(n.attribute)
                self.new.append(clone)
            renamed.append(names)
        rank = len(self.shapes[x])
        for e in ends:
            self._node("Concat", [renamed[0][e], renamed[1][e]], e, axis=rank - 2)
        self.replaced |= ids

    def _region(self, x: str) -> list[Any]:
        """The row-wise nodes reachable from ``x`` whose other inputs are constants without rows, in graph order."""
        inside: set[str] = {x}
        region: list[Any] = []
        rank = len(self.shapes[x])
        for n in self.graph.node:
            if n.op_type not in ROW_WISE_OPS or not any(i in inside for i in n.input):
                continue
            others = [i for i in n.input if i and i not in inside]
            if any(i not in self.consts or self._has_rows(i) for i in others):
                continue
            if n.op_type in ("ReduceMean", "LayerNormalization") and not _last_axis_only(n, self.consts, rank):
                continue
            region.append(n)
            inside.update(n.output)
        return region


def _rewrite(model: Any, k: int, streams: list[str], opset: int) -> Any:
    """``model`` with ``streams`` carried as their leading ``k`` rows and the rest (see the module docstring)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    shapes = {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim)
              for v in list(graph.value_info) + list(graph.input) + list(graph.output)
              if v.type.tensor_type.HasField("shape")}
    rw = _Rewriter(graph, k, _constants(graph), shapes, opset)
    for x in streams:
        rw.split(x)
        rw.clone_row_wise(x)
    kept = [n for n in graph.node if id(n) not in rw.replaced]
    produced = {o for n in kept + rw.new for o in n.output}
    read = {i for n in kept + rw.new for i in n.input} | {o.name for o in graph.output}
    for t, (lead, rest) in rw.parts.items():  # an original tensor still read keeps its name, as a Concat
        if t in read and t not in produced:
            kept.append(onnx.helper.make_node("Concat", [lead, rest], [t], name=f"{t}_rows_joined",
                                              axis=len(shapes[t]) - 2))
    del graph.node[:]
    graph.node.extend(_topological(kept + rw.new))
    _drop_unread(graph)
    del graph.value_info[:]
    return inferred


def _topological(nodes: list[Any]) -> list[Any]:
    producer = {o: n for n in nodes for o in n.output}
    done: set[int] = set()
    out: list[Any] = []

    def visit(n: Any) -> None:
        stack: list[tuple[Any, bool]] = [(n, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in done:
                continue
            if expanded:
                done.add(id(node))
                out.append(node)
                continue
            stack.append((node, True))
            stack.extend((producer[i], False) for i in node.input if i in producer and id(producer[i]) not in done)

    for n in nodes:
        visit(n)
    return out


def _drop_unread(graph: Any) -> None:
    """Remove nodes and initializers nothing reads any more (the replaced nodes' inputs)."""
    while True:
        read = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
        dead = [n for n in graph.node if not any(o in read for o in n.output)]
        if not dead:
            break
        for n in dead:
            graph.node.remove(n)
    read = {i for n in graph.node for i in n.input}
    for init in [i for i in graph.initializer if i.name not in read]:
        graph.initializer.remove(init)


def split_small_rows(model: Any, samples: list[dict[str, np.ndarray]], opset: int) -> tuple[Any, RowSplit | None]:
    """``model`` with its small leading stream rows carried apart (see the module docstring), and what was
    split; ``model`` itself and None when no stream tensor's leading rows are small on ``samples``.

    What becomes constant is folded (:func:`~.fold.fold_static`): a class row that is a learned token plus its
    position is a constant, and so is its first norm.  The rewritten graph is run on the first sample
    against the original before it is used: a graph this surgery gets wrong is left as it was.
    """
    from tinynpu.compiler.onnx.frontend.fold import fold_static

    streams = stream_tensors(model.graph)
    if not streams or not samples or not _prepends_rows(model.graph, streams[0]):
        return model, None
    outputs = [o.name for o in model.graph.output]
    try:
        session = _session(model, streams)
        ranges = _row_ranges(session, streams, samples)
        expected = session.run(outputs, samples[0])
    except Exception:  # onnxruntime cannot run the model: quantize_static then says so, in one paragraph
        return model, None
    found = {t: leading_small_rows(r) for t, r in ranges.items()}
    k = max((rows for rows, _ in found.values()), default=0)
    if k == 0:
        return model, None
    split = [t for t in streams if t in ranges and len(ranges[t]) >= 2 * k]
    rewritten, _ = fold_static(_rewrite(model, k, split, opset), opset)
    if not _same_function(rewritten, outputs, samples[0], expected):
        return model, None
    ratio = max(r for rows, r in found.values() if rows)
    return rewritten, RowSplit(rows=k, streams=tuple(split), ratio=ratio)


def _same_function(model: Any, outputs: list[str], sample: dict[str, np.ndarray], expected: list[Any]) -> bool:
    """Whether ``model`` computes ``expected`` on ``sample`` up to float32 rounding (the parts' sums and
    norms are the same arithmetic on fewer rows)."""
    try:
        got = _session(model, []).run(outputs, sample)
    except Exception:
        return False
    return all(np.allclose(g, e, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(e).max(initial=0.0))))
               for g, e in zip(got, expected, strict=True))


__all__ = ["ROW_WISE_OPS", "SMALL_ROW_RATIO", "RowSplit", "leading_small_rows", "split_small_rows", "stream_tensors"]
