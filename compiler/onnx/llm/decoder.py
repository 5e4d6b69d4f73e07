"""A GPT-2-style decoder with past keys and values, built with ``onnx.helper``, and its numpy float reference.

The model the LLM runtime is tested and benchmarked on, at any shape (the
tiny one of the tests, GPT-2-small's for the benchmark) without torch: the
committed PyTorch exports (``tests/models/gpt2_past.onnx``) have every
dimension fixed at export (8 cached tokens, one new), so they cannot run a
prompt and then a growing cache.  The interface is the Hugging Face one:
``input_ids`` (batch x S, int64) and ``past_key_values.L.key``/``.value``
(batch x heads x past x head_dim, float) in; ``logits`` (batch x S x vocab)
and ``present.L.key``/``.value`` (batch x heads x past+S x head_dim) out.  As in the
exports, positions and the causal mask are computed in the graph from the
shapes (``Shape -> Gather -> Range``), so once a step's dimensions are fixed
they fold into constants.

Weights are seeded, GPT-2's initialization (normal, standard deviation 0.02;
the projections into the residual scaled by ``1/sqrt(2 layers)``), and
:func:`float_greedy` decodes with the same weights in numpy, independent of
ONNX, so the exported graph is itself checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

OPSET = 18
#: The additive stand-in for a masked score (GPT-2's eager attention uses the dtype's minimum;
#: ``Where`` then ``Softmax`` on the host take either).
MASKED = -1e4


@dataclass(frozen=True)
class DecoderShape:
    """The decoder's dimensions (GPT-2 naming)."""

    layers: int = 2
    hidden: int = 64
    heads: int = 2
    vocab: int = 100
    positions: int = 64
    ffn: int = 256
    kv_heads: int = 0  # grouped-query attention: fewer key/value heads than query heads (0: as many)
    family: str = "gpt2"  # "llama": RMSNorm, rotary positions, SiLU-gated MLP, no biases (see :mod:`.llama`)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv(self) -> int:
        """Key/value heads (each shared by ``heads / kv`` query heads)."""
        return self.kv_heads or self.heads

    @property
    def kv_width(self) -> int:
        return self.kv * self.head_dim


TINY = DecoderShape()
#: The tiny decoder with grouped-query attention: 4 query heads sharing 2 key/value heads.
TINY_GQA = DecoderShape(heads=4, kv_heads=2)
#: A Llama-style tiny decoder: RMSNorm, rotary positions, SiLU-gated MLP, 4 query heads sharing 2 key/value heads.
TINY_LLAMA = DecoderShape(heads=4, kv_heads=2, ffn=128, family="llama")
GPT2_SMALL = DecoderShape(layers=12, hidden=768, heads=12, vocab=50257, positions=1024, ffn=3072)


def decoder_weights(shape: DecoderShape, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded GPT-2-initialized float32 weights by name."""
    rng = np.random.default_rng(seed)
    h, f, qkv = shape.hidden, shape.ffn, shape.hidden + 2 * shape.kv_width

    def normal(*dims: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(dims) * std).astype(np.float32)

    w = {"wte": normal(shape.vocab, h), "wpe": normal(shape.positions, h, std=0.01),
         "ln_f.g": np.ones(h, np.float32), "ln_f.b": np.zeros(h, np.float32), "lm_head": normal(h, shape.vocab)}
    resid = 0.02 / np.sqrt(2 * shape.layers)
    for i in range(shape.layers):
        p = f"h{i}."
        w |= {p + "ln1.g": np.ones(h, np.float32), p + "ln1.b": np.zeros(h, np.float32),
              p + "qkv.w": normal(h, qkv), p + "qkv.b": normal(qkv, std=0.01),
              p + "proj.w": normal(h, h, std=resid), p + "proj.b": np.zeros(h, np.float32),
              p + "ln2.g": np.ones(h, np.float32), p + "ln2.b": np.zeros(h, np.float32),
              p + "fc.w": normal(h, f), p + "fc.b": normal(f, std=0.01),
              p + "out.w": normal(f, h, std=resid), p + "out.b": np.zeros(h, np.float32)}
    return w


class _Graph:
    """Nodes and initializers under construction, with fresh tensor names."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def op(self, op_type: str, inputs: list[str], outputs: int | list[str] = 1, **attrs: Any) -> Any:
        from onnx import helper

        names = outputs if isinstance(outputs, list) else [f"{op_type.lower()}_{self._n}_{i}" for i in range(outputs)]
        self._n += 1
        self.nodes.append(helper.make_node(op_type, inputs, names, name=f"{op_type}_{self._n}", **attrs))
        return names[0] if len(names) == 1 else names

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name


def build_decoder(shape: DecoderShape = TINY, seed: int = 0) -> Any:
    """The decoder as an ``onnx.ModelProto`` with dynamic ``batch``, ``sequence`` and ``past_sequence`` dimensions
    (a Llama-style one for ``shape.family == "llama"``: :func:`~.llama.build_llama`)."""
    if shape.family == "llama":
        from tinynpu.compiler.onnx.llm.llama import build_llama

        return build_llama(shape, seed)
    g = _Graph()
    for name, value in decoder_weights(shape, seed).items():
        g.const(name, value)
    g.const("qkv_split", np.asarray([shape.hidden, shape.kv_width, shape.kv_width], np.int64))
    query_pos, causal, expand = positions_and_mask(g, shape)
    x = g.op("Add", [g.op("Gather", ["wte", "input_ids"]), g.op("Gather", ["wpe", query_pos])])
    for i in range(shape.layers):
        x = _block(g, x, f"h{i}.", i, causal, expand)
    x = g.op("LayerNormalization", [x, "ln_f.g", "ln_f.b"], epsilon=1e-5)
    return finish(g, shape, x, "tinynpu_decoder")


def positions_and_mask(g: _Graph, shape: DecoderShape) -> tuple[str, str, str]:
    """The shared constants, and from the shapes (as the exports compute them) the new tokens' positions
    ``past .. past+S-1``, the causal mask (S x total) and the shape repeating each key/value head for its
    query heads ("" without grouped-query attention)."""
    hd, nh = shape.head_dim, shape.heads
    g.const("kv_heads_shape", np.asarray([0, -1, shape.kv, hd], np.int64))  # 0: the batch, as it is
    g.const("zero", np.asarray([0], np.int64))
    g.const("one", np.asarray(1, np.int64))
    g.const("axis2", np.asarray([2], np.int64))
    g.const("heads_shape", np.asarray([0, -1, nh, hd], np.int64))
    g.const("merged_shape", np.asarray([0, -1, shape.hidden], np.int64))
    g.const("all_heads_shape", np.asarray([0, nh, -1, hd], np.int64))
    g.const("masked", np.asarray(MASKED, np.float32))
    g.const("scale", np.asarray(1.0 / np.sqrt(hd), np.float32))
    # positions past .. past+S-1 from the shapes: past = past_key_values.0.key's dim 2, S = input_ids' dim 1
    past = g.op("Squeeze", [g.op("Gather", [g.op("Shape", ["past_key_values.0.key"]), "axis2"], axis=0), "zero"])
    seq = g.op("Squeeze", [g.op("Gather", [g.op("Shape", ["input_ids"]), g.const("axis1", np.asarray([1], np.int64))],
                                axis=0), "zero"])
    total = g.op("Add", [past, seq])
    query_pos = g.op("Range", [past, total, "one"])
    key_pos = g.op("Range", [g.const("zero_scalar", np.asarray(0, np.int64)), total, "one"])
    causal = g.op("LessOrEqual", [g.op("Unsqueeze", [key_pos, "zero"]),
                                  g.op("Unsqueeze", [query_pos, g.const("last", np.asarray([1], np.int64))])])
    # grouped-query attention: each key/value head repeated for its query heads (1 x kv x group x T x hd)
    group = nh // shape.kv
    expand = g.op("Concat", [g.const("expand_head", np.asarray([1, shape.kv, group], np.int64)),
                             g.op("Unsqueeze", [total, "zero"]), g.const("expand_dim", np.asarray([hd], np.int64))],
                  axis=0) if group > 1 else ""
    return query_pos, causal, expand


def finish(g: _Graph, shape: DecoderShape, x: str, name: str) -> Any:
    """The model: ``x`` (the final norm's output) through the LM head to ``logits``, the Hugging Face inputs
    and outputs declared."""
    from onnx import TensorProto, helper

    g.op("MatMul", [x, "lm_head"], ["logits"])
    hd = shape.head_dim
    cache_dims: list[str | int | None] = ["batch", shape.kv, "past_sequence", hd]
    present_dims: list[str | int | None] = ["batch", shape.kv, "total_sequence", hd]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])]
    outputs = []
    for i in range(shape.layers):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kv}", TensorProto.FLOAT, cache_dims))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kv}", TensorProto.FLOAT, present_dims))
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", shape.vocab])]
    graph = helper.make_graph(g.nodes, name, inputs, outs + outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tinynpu")
    model.ir_version = 9
    return model


def attend(g: _Graph, q: str, k: str, v: str, index: int, causal: str, expand: str) -> str:
    """Attention of layer ``index`` with its cache: ``q`` (1 x heads x S x hd), ``k`` and ``v`` (1 x kv x S x hd)
    appended to the past into the present outputs; the heads merged back (1 x S x hidden)."""
    def shared(t: str) -> str:  # 1 x kv x T x hd -> 1 x heads x T x hd, each kv head repeated for its group
        if not expand:
            return t
        return g.op("Reshape", [g.op("Expand", [g.op("Unsqueeze", [t, "axis2"]), expand]), "all_heads_shape"])

    key = shared(g.op("Concat", [f"past_key_values.{index}.key", k], [f"present.{index}.key"], axis=2))
    value = shared(g.op("Concat", [f"past_key_values.{index}.value", v], [f"present.{index}.value"], axis=2))
    scores = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [key], perm=[0, 1, 3, 2])]), "scale"])
    probs = g.op("Softmax", [g.op("Where", [causal, scores, "masked"])], axis=-1)
    return g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [probs, value])], perm=[0, 2, 1, 3]), "merged_shape"])


def heads(g: _Graph, t: str, shape: str) -> str:
    """1 x S x width -> 1 x heads x S x head_dim (``shape``: the Reshape's target)."""
    return g.op("Transpose", [g.op("Reshape", [t, shape])], perm=[0, 2, 1, 3])


def _block(g: _Graph, x: str, p: str, index: int, causal: str, expand: str) -> str:
    """One pre-norm transformer block (attention with the cache, then the MLP); ``expand``: the shape
    repeating each key/value head for its query heads ("" without grouped-query attention)."""
    h = g.op("LayerNormalization", [x, p + "ln1.g", p + "ln1.b"], epsilon=1e-5)
    qkv = g.op("Add", [g.op("MatMul", [h, p + "qkv.w"]), p + "qkv.b"])
    q, k, v = g.op("Split", [qkv, "qkv_split"], 3, axis=2)
    attn = attend(g, heads(g, q, "heads_shape"), heads(g, k, "kv_heads_shape"), heads(g, v, "kv_heads_shape"),
                  index, causal, expand)
    x = g.op("Add", [x, g.op("Add", [g.op("MatMul", [attn, p + "proj.w"]), p + "proj.b"])])
    h = g.op("LayerNormalization", [x, p + "ln2.g", p + "ln2.b"], epsilon=1e-5)
    f = g.op("Relu", [g.op("Add", [g.op("MatMul", [h, p + "fc.w"]), p + "fc.b"])])
    return g.op("Add", [x, g.op("Add", [g.op("MatMul", [f, p + "out.w"]), p + "out.b"])])


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b


def float_greedy(shape: DecoderShape, prompt: np.ndarray, generate: int, seed: int = 0) -> list[int]:
    """Greedy decoding in numpy float64 with :func:`decoder_weights`: the ``generate`` token ids after ``prompt``.

    Each step recomputes the whole sequence (no cache): an independent check of the ONNX graph's
    cache arithmetic as well as its layers.
    """
    if shape.family == "llama":
        from tinynpu.compiler.onnx.llm.llama import llama_float_greedy

        return llama_float_greedy(shape, prompt, generate, seed)
    w = {k: v.astype(np.float64) for k, v in decoder_weights(shape, seed).items()}
    ids = [int(t) for t in prompt]
    hd, nh = shape.head_dim, shape.heads
    out = []
    for _ in range(generate):
        s = len(ids)
        x = w["wte"][ids] + w["wpe"][:s]
        mask = np.tril(np.ones((s, s), bool))
        for i in range(shape.layers):
            p = f"h{i}."
            qkv = _layer_norm(x, w[p + "ln1.g"], w[p + "ln1.b"]) @ w[p + "qkv.w"] + w[p + "qkv.b"]
            cut = (shape.hidden, shape.hidden + shape.kv_width)
            q = qkv[:, :cut[0]].reshape(s, nh, hd).transpose(1, 0, 2)
            k, v = (np.repeat(t.reshape(s, shape.kv, hd).transpose(1, 0, 2), nh // shape.kv, axis=0)
                    for t in (qkv[:, cut[0]:cut[1]], qkv[:, cut[1]:]))
            scores = np.where(mask, q @ k.transpose(0, 2, 1) / np.sqrt(hd), MASKED)
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            attn = (probs @ v).transpose(1, 0, 2).reshape(s, shape.hidden)
            x = x + attn @ w[p + "proj.w"] + w[p + "proj.b"]
            f = np.maximum(_layer_norm(x, w[p + "ln2.g"], w[p + "ln2.b"]) @ w[p + "fc.w"] + w[p + "fc.b"], 0)
            x = x + f @ w[p + "out.w"] + w[p + "out.b"]
        logits = _layer_norm(x[-1], w["ln_f.g"], w["ln_f.b"]) @ w["lm_head"]
        out.append(int(np.argmax(logits)))
        ids.append(out[-1])
    return out


__all__ = ["GPT2_SMALL", "OPSET", "TINY", "TINY_GQA", "TINY_LLAMA", "DecoderShape", "attend", "build_decoder",
           "decoder_weights", "finish", "float_greedy", "heads", "positions_and_mask"]
