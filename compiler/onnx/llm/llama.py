"""A Llama-style decoder with past keys and values, built with ``onnx.helper``, and its numpy float reference.

The same interface and cache as the GPT-2-style one (:mod:`.decoder`), with
Llama's block: RMSNorm as the exporters write it
(``x * Reciprocal(Sqrt(ReduceMean(x^2) + eps)) * gamma``), separate query,
key and value projections without biases, rotary positions (``q cos +
rotate_half(q) sin``, the tables gathered at the positions the graph computes
from the shapes), grouped-query attention, and the SiLU-gated MLP
(``down(silu(gate(h)) * up(h))``).  The keys are rotated before they enter the
cache, as in Hugging Face's Llama, so a cached key is never rotated again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinynpu.compiler.onnx.llm.decoder import MASKED, DecoderShape, _Graph, attend, finish, heads, positions_and_mask

EPS = 1e-5
#: Rotary base (Llama's ``rope_theta``).
THETA = 10000.0


def llama_weights(shape: DecoderShape, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded float32 weights by name (normal, standard deviation 0.02; the norms' gammas around 1)."""
    rng = np.random.default_rng(seed)
    h, f, kv = shape.hidden, shape.ffn, shape.kv_width

    def normal(*dims: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(dims) * std).astype(np.float32)

    def gamma() -> np.ndarray:
        return (1.0 + normal(h, std=0.1)).astype(np.float32)

    w = {"embed": normal(shape.vocab, h), "norm.g": gamma(), "lm_head": normal(h, shape.vocab)}
    for i in range(shape.layers):
        p = f"l{i}."
        w |= {p + "attn_norm.g": gamma(), p + "q.w": normal(h, h), p + "k.w": normal(h, kv), p + "v.w": normal(h, kv),
              p + "o.w": normal(h, h), p + "mlp_norm.g": gamma(), p + "gate.w": normal(h, f),
              p + "up.w": normal(h, f), p + "down.w": normal(f, h)}
    return w


def rotary_tables(shape: DecoderShape) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin (positions x head_dim), each frequency repeated over the two halves (Hugging Face's layout)."""
    half = shape.head_dim // 2
    freq = 1.0 / THETA ** (np.arange(half, dtype=np.float64) / half)
    angles = np.outer(np.arange(shape.positions, dtype=np.float64), freq)
    angles = np.concatenate([angles, angles], axis=1)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def build_llama(shape: DecoderShape, seed: int = 0) -> Any:
    """The Llama-style decoder as an ``onnx.ModelProto`` (dynamic batch, sequence and past dimensions)."""
    g = _Graph()
    for name, value in llama_weights(shape, seed).items():
        g.const(name, value)
    cos, sin = rotary_tables(shape)
    g.const("rope_cos", cos)
    g.const("rope_sin", sin)
    g.const("two", np.asarray(2.0, np.float32))
    g.const("eps", np.asarray(EPS, np.float32))
    g.const("last_axis", np.asarray([-1], np.int64))
    g.const("halves", np.asarray([shape.head_dim // 2] * 2, np.int64))
    query_pos, causal, expand = positions_and_mask(g, shape)
    # 1 x 1 x S x hd: broadcast over the batch and the heads
    rope = tuple(g.op("Unsqueeze", [g.op("Gather", [table, query_pos]), g.const(f"{table}_axes",
                                                                                np.asarray([0, 1], np.int64))])
                 for table in ("rope_cos", "rope_sin"))
    x = g.op("Gather", ["embed", "input_ids"])
    for i in range(shape.layers):
        x = _block(g, x, f"l{i}.", i, (causal, expand), rope)
    return finish(g, shape, _rms_norm(g, x, "norm.g"), "tinynpu_llama")


def _rms_norm(g: _Graph, x: str, gamma: str) -> str:
    mean = g.op("ReduceMean", [g.op("Pow", [x, "two"]), "last_axis"], keepdims=1)
    return g.op("Mul", [g.op("Mul", [x, g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [mean, "eps"])])])]), gamma])


def _rotate(g: _Graph, t: str, rope: tuple[str, str]) -> str:
    """``t cos + rotate_half(t) sin``, ``rotate_half(t) = [-t2, t1]`` of its two halves."""
    first, second = g.op("Split", [t, "halves"], 2, axis=-1)
    rotated = g.op("Concat", [g.op("Neg", [second]), first], axis=-1)
    return g.op("Add", [g.op("Mul", [t, rope[0]]), g.op("Mul", [rotated, rope[1]])])


def _block(g: _Graph, x: str, p: str, index: int, mask: tuple[str, str], rope: tuple[str, str]) -> str:
    """One Llama block: attention with the cache (rotary on queries and keys), then the SiLU-gated MLP."""
    h = _rms_norm(g, x, p + "attn_norm.g")
    q = _rotate(g, heads(g, g.op("MatMul", [h, p + "q.w"]), "heads_shape"), rope)
    k = _rotate(g, heads(g, g.op("MatMul", [h, p + "k.w"]), "kv_heads_shape"), rope)
    v = heads(g, g.op("MatMul", [h, p + "v.w"]), "kv_heads_shape")
    x = g.op("Add", [x, g.op("MatMul", [attend(g, q, k, v, index, *mask), p + "o.w"])])
    h = _rms_norm(g, x, p + "mlp_norm.g")
    gate = g.op("MatMul", [h, p + "gate.w"])
    act = g.op("Mul", [gate, g.op("Sigmoid", [gate])])
    return g.op("Add", [x, g.op("MatMul", [g.op("Mul", [act, g.op("MatMul", [h, p + "up.w"])]), p + "down.w"])])


def llama_float_greedy(shape: DecoderShape, prompt: np.ndarray, generate: int, seed: int = 0) -> list[int]:
    """Greedy decoding in numpy float64 with :func:`llama_weights`, recomputing the whole sequence each step."""
    w = {k: v.astype(np.float64) for k, v in llama_weights(shape, seed).items()}
    cos, sin = (t.astype(np.float64) for t in rotary_tables(shape))
    hd, nh, half = shape.head_dim, shape.heads, shape.head_dim // 2

    def norm(t: np.ndarray, gamma: np.ndarray) -> np.ndarray:
        return t / np.sqrt((t * t).mean(-1, keepdims=True) + EPS) * gamma

    def rotate(t: np.ndarray, s: int) -> np.ndarray:  # heads x s x hd
        return t * cos[:s] + np.concatenate([-t[..., half:], t[..., :half]], axis=-1) * sin[:s]

    ids, out = [int(t) for t in prompt], []
    for _ in range(generate):
        s = len(ids)
        x = w["embed"][ids]
        mask = np.tril(np.ones((s, s), bool))
        for i in range(shape.layers):
            p = f"l{i}."
            h = norm(x, w[p + "attn_norm.g"])
            q = rotate((h @ w[p + "q.w"]).reshape(s, nh, hd).transpose(1, 0, 2), s)
            k, v = ((h @ w[p + n]).reshape(s, shape.kv, hd).transpose(1, 0, 2) for n in ("k.w", "v.w"))
            k, v = np.repeat(rotate(k, s), nh // shape.kv, axis=0), np.repeat(v, nh // shape.kv, axis=0)
            scores = np.where(mask, q @ k.transpose(0, 2, 1) / np.sqrt(hd), MASKED)
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            x = x + (probs @ v).transpose(1, 0, 2).reshape(s, shape.hidden) @ w[p + "o.w"]
            h = norm(x, w[p + "mlp_norm.g"])
            gate = h @ w[p + "gate.w"]
            x = x + (gate / (1 + np.exp(-gate)) * (h @ w[p + "up.w"])) @ w[p + "down.w"]
        out.append(int(np.argmax(norm(x[-1], w["norm.g"]) @ w["lm_head"])))
        ids.append(out[-1])
    return out


__all__ = ["build_llama", "llama_float_greedy", "llama_weights", "rotary_tables"]
