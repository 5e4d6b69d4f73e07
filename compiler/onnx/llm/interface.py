"""What the LLM runtime needs of a decoder model, read from its graph, and the checks before any work.

A decoder with past keys and values has, as the Hugging Face exports name
them, an ``input_ids`` input, ``past_key_values.L.key``/``.value`` inputs
(1 x kv_heads x past x head_dim) and ``logits`` plus ``present.L.key``/
``.value`` outputs; an ``attention_mask`` input, when there is one, is fed
ones (greedy decoding of one sequence masks nothing).  The past length must be
a dynamic dimension: a step's programs are compiled for each length the run
needs, so a model exported with every dimension fixed (one cached length)
cannot grow its cache.

Everything a user can get wrong is refused here with one paragraph before
anything is quantized or compiled: no past keys and values, a fixed past
length, a prompt and generation longer than the model's learned positions,
``--generate 0``, a KV cache (with the weights) larger than the config's DRAM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tinynpu.errors import OnnxError, UsageError
from tinynpu.isa import ArchConfig

_PAST = re.compile(r"^past_key_values\.(\d+)\.(key|value)$")
#: Prompt and generation lengths a run may ask for: far above the positions of any model that fits DRAM.
TOKENS_MAX = 65536


@dataclass(frozen=True)
class DecoderInterface:
    """The decoder's inputs, outputs and sizes.

    Attributes:
        source: The model file, for messages.
        ids: The token-id input.
        mask: The ``attention_mask`` input (fed ones), or "".
        past, present: Per layer, the (key, value) input and output names.
        kv_heads, head_dim: The cache's dimensions per layer.
        vocab: The logits' last dimension.
        positions: Rows of the learned position table (None: no table, e.g. rotary positions).
        batch: The batch dimension when the model fixes it (None: dynamic).
    """

    source: str
    ids: str
    mask: str
    past: tuple[tuple[str, str], ...]
    present: tuple[tuple[str, str], ...]
    logits: str
    kv_heads: int
    head_dim: int
    vocab: int
    positions: int | None
    batch: int | None = None

    @property
    def layers(self) -> int:
        return len(self.past)

    def cache_bytes(self, capacity: int) -> int:
        """int8 keys and values of every layer for ``capacity`` tokens."""
        return self.layers * 2 * self.kv_heads * capacity * self.head_dim


def _dims(value_info: Any) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
            for d in value_info.type.tensor_type.shape.dim]


def read_interface(model: Any, source: str) -> DecoderInterface:
    """The decoder interface of ``model``.

    Raises:
        OnnxError: no past keys and values, no logits or present outputs, a fixed past length.
    """
    inputs = {i.name: i for i in model.graph.input}
    outputs = {o.name: o for o in model.graph.output}
    found: dict[int, dict[str, str]] = {}
    for name in inputs:
        if (m := _PAST.match(name)) is not None:
            found.setdefault(int(m.group(1)), {})[m.group(2)] = name
    if not found:
        raise OnnxError(f"{source}: this is not a decoder with past keys and values: its inputs are "
                        f"{', '.join(sorted(inputs)) or 'none'}, with no past_key_values.L.key/.value. "
                        "`tinynpu run llm` runs a decode loop and needs them (export the model with "
                        "use_cache=True); run a model without a cache with `tinynpu run onnx`.")
    layers = sorted(found)
    if layers != list(range(len(layers))) or any(set(found[i]) != {"key", "value"} for i in layers):
        raise OnnxError(f"{source}: past keys and values for layers {layers} are not a key and a value for "
                        f"each layer 0..{len(layers) - 1}.")
    present = tuple((f"present.{i}.key", f"present.{i}.value") for i in layers)
    missing = [n for pair in present for n in pair if n not in outputs] + (["logits"] if "logits" not in outputs
                                                                          else [])
    if missing:
        raise OnnxError(f"{source}: the decoder has past keys and values but no output {', '.join(missing)}; "
                        f"its outputs are {', '.join(outputs)}.")
    ids = "input_ids" if "input_ids" in inputs else ""
    mask = "attention_mask" if "attention_mask" in inputs else ""
    other = sorted(set(inputs) - {ids, mask} - {n for i in layers for n in found[i].values()})
    if not ids or other:
        why = "has no input_ids" if not ids else "also takes " + ", ".join(other)
        raise OnnxError(f"{source}: a decoder takes input_ids, past_key_values.L.key/.value and optionally "
                        f"attention_mask; this one {why}.")
    key = _dims(inputs[found[0]["key"]])
    if len(key) != 4 or not isinstance(key[1], int) or not isinstance(key[3], int):
        raise OnnxError(f"{source}: past_key_values.0.key has dimensions {key}, not batch x kv_heads x past x "
                        "head_dim with fixed heads and head size.")
    if isinstance(key[2], int):
        raise OnnxError(f"{source}: the past length of past_key_values.0.key is fixed at {key[2]} (dimensions "
                        f"{key}): the model was exported for one cache length, and a decode loop grows the "
                        "cache by one token per step. Export it with a dynamic past dimension (dynamic_axes "
                        "or dynamic_shapes naming past_sequence_length).")
    vocab = _dims(outputs["logits"])[-1]
    if not isinstance(vocab, int):
        raise OnnxError(f"{source}: the logits' last dimension (the vocabulary) is {vocab!r}, not fixed.")
    return DecoderInterface(source=source, ids=ids, mask=mask, past=tuple((found[i]["key"], found[i]["value"])
                            for i in layers), present=present, logits="logits", kv_heads=key[1],
                            head_dim=key[3], vocab=vocab, positions=_positions(model, ids),
                            batch=key[0] if isinstance(key[0], int) else None)


def _positions(model: Any, ids: str) -> int | None:
    """Rows of the smallest constant table a ``Gather`` indexes with something other than the token ids
    (the learned positions), or None."""
    from onnx import numpy_helper

    tables = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
    rows = [tables[n.input[0]][0] for n in model.graph.node
            if n.op_type == "Gather" and n.input[0] in tables and n.input[1] != ids and len(tables[n.input[0]]) == 2]
    return min(rows) if rows else None


def weight_floor(model: Any) -> int:
    """Bytes the int8 weights need at least: one per element of every MatMul/Gemm constant operand."""
    from onnx import numpy_helper

    sizes = {t.name: int(numpy_helper.to_array(t).size) for t in model.graph.initializer}
    names = {i for n in model.graph.node if n.op_type in ("MatMul", "Gemm") for i in n.input[:2] if i in sizes}
    return sum(sizes[n] for n in names)


def check_request(itf: DecoderInterface, model: Any, prompt: int, generate: int, cfg: ArchConfig,
                  batch: int = 1) -> None:
    """Refuse a run that cannot work, before any work: lengths, batch, positions, DRAM.

    Raises:
        UsageError: ``generate``, ``prompt`` or ``batch`` below 1 or above :data:`TOKENS_MAX`.
        OnnxError: more tokens than positions; a batch the model fixes otherwise; the cache and the
            weights larger than the DRAM.
    """
    if not 1 <= generate <= TOKENS_MAX:
        raise UsageError(f"--generate must be from 1 to {TOKENS_MAX} tokens, not {generate}: the run decodes "
                         "that many tokens after the prompt (the first comes from the prompt's own step).")
    if not 1 <= prompt <= TOKENS_MAX:
        raise UsageError(f"--prompt-tokens must be from 1 to {TOKENS_MAX}, not {prompt}.")
    if not 1 <= batch <= TOKENS_MAX:
        raise UsageError(f"--batch must be from 1 to {TOKENS_MAX} sequences, not {batch}.")
    if itf.batch is not None and batch != itf.batch:
        raise OnnxError(f"{itf.source}: the model's batch dimension is fixed at {itf.batch}, so it decodes "
                        f"{itf.batch} sequence(s) at a time, not --batch {batch}.")
    capacity = prompt + generate - 1  # the last generated token is never fed back
    if itf.positions is not None and capacity > itf.positions:
        raise OnnxError(f"{itf.source}: a prompt of {prompt} tokens and {generate} generated tokens need "
                        f"{capacity} positions, but the model's learned position table has {itf.positions} "
                        f"rows; at most {max(itf.positions - prompt + 1, 0)} tokens can follow this prompt.")
    cache, weights = batch * itf.cache_bytes(capacity), weight_floor(model)
    if cache + weights > cfg.dram_bytes:
        sequences = f"{batch} sequences x " if batch > 1 else ""
        raise OnnxError(f"{itf.source}: the KV cache for {capacity} tokens ({sequences}{itf.layers} layers x 2 x "
                        f"{itf.kv_heads} heads x {capacity} x {itf.head_dim} = {cache} bytes of int8) and the "
                        f"int8 weights ({weights} bytes at least) need {cache + weights} bytes, more than the "
                        f"{cfg.dram_bytes} bytes of DRAM of config {cfg.name!r}; give a config with more "
                        "dram.bytes, or fewer tokens.")


__all__ = ["TOKENS_MAX", "DecoderInterface", "check_request", "read_interface", "weight_floor"]
