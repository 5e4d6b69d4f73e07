"""The decoder's one DRAM image across every step: weights placed once, the KV cache appended in place.

Layout (one :class:`~tinynpu.simulator.Machine` for the whole run)::

    [0, activations)          each step's activations at its own liveness plan's offsets; the
                              region is the largest step's peak (steps run one after another)
    [weights, + weight bytes) every weight layer's int8 weights and epilogue rows, written by the
                              first step that runs the layer and read by every later step
    [cache, + cache bytes)    per layer, keys then values: batch x kv_heads x capacity x head_dim
                              int8, head-major, so a head's positions are consecutive rows and a
                              step's new tokens are appended after the cached ones without moving them
    [staging, ...)            a layer operand the host re-lays for its program (attention's)

Each step shape has its own :class:`~tinynpu.compiler.onnx.runtime.image.DramImage`
view of that machine (its activation plan), sharing the weights table and the
relocated programs, so a layer's weights are written once for the run.

The cache is the step's own tensors, in place (:meth:`LlmImage.bind`): in each
view, a layer's int8 past (what its past input quantizes to) is an alias of
the cache's first ``past`` positions, resident, so no step feeds the past in
or quantizes it; the new keys and values (the Concat's last input) are an alias
of the next ``new`` positions, so the step that produces them stores them at
the step's position; and the present (the Concat's output) an alias of the
first ``past + new``, so the Concat moves nothing and the attention reads the
cache from its region.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.ir import NPU, ConcatStep, Network
from tinynpu.compiler.onnx.llm.interface import DecoderInterface
from tinynpu.compiler.onnx.llm.steps import StepNetwork, StepShape
from tinynpu.compiler.onnx.lower.memory import ALIGN
from tinynpu.compiler.onnx.lower.plan import reserve_weights
from tinynpu.compiler.onnx.lower.programs import ProgramCache
from tinynpu.compiler.onnx.runtime.image import DramImage, RowAlias
from tinynpu.errors import OnnxError
from tinynpu.intmath import round_up
from tinynpu.isa import ArchConfig

KEY, VALUE = 0, 1


@dataclass(frozen=True)
class LlmLayout:
    """Where the regions are (see the module docstring); ``capacity`` tokens of cache per layer and sequence."""

    activation_bytes: int
    weights_base: int
    weight_bytes: int
    cache_base: int
    capacity: int
    layers: int
    kv_heads: int
    head_dim: int
    batch: int = 1

    @property
    def cache_bytes(self) -> int:
        return self.layers * 2 * self.batch * self.kv_heads * self.capacity * self.head_dim

    @property
    def staging_base(self) -> int:
        return round_up(self.cache_base + self.cache_bytes, ALIGN)

    def row(self, layer: int, which: int, head: int, position: int, sequence: int = 0) -> int:
        """The address of one cached token's ``head_dim`` bytes (``which``: :data:`KEY` or :data:`VALUE`)."""
        block = ((layer * 2 + which) * self.batch + sequence) * self.kv_heads + head
        return self.cache_base + (block * self.capacity + position) * self.head_dim

    def to_json(self) -> dict[str, Any]:
        return {"activations": {"address": 0, "bytes": self.activation_bytes},
                "weights": {"address": self.weights_base, "bytes": self.weight_bytes},
                "kv_cache": {"address": self.cache_base, "bytes": self.cache_bytes, "capacity_tokens": self.capacity,
                             "layout": "per layer: keys then values, each batch x kv_heads x capacity x "
                                       "head_dim int8", "layers": self.layers, "batch": self.batch,
                             "kv_heads": self.kv_heads, "head_dim": self.head_dim},
                "staging": {"address": self.staging_base}}


class LlmImage:
    """The run's machine, its layout, a :class:`DramImage` view per step shape, and the KV cache's rows in it.

    Every step's weights are placed before any runs, in one table all the views share: a layer that
    runs on the accelerator at one step shape only (a residual add of one token) has its place too,
    so nothing is placed while the cache already holds tokens.
    """

    def __init__(self, cfg: ArchConfig, itf: DecoderInterface, steps: list[StepNetwork], cache: ProgramCache,
                 capacity: int, batch: int = 1) -> None:
        from tinynpu.simulator import Machine

        self.cfg = cfg
        self.machine = Machine(cfg)
        self.new_rows_bytes: dict[StepShape, int] = {}  # bytes a step stores into the cache
        activations = max(s.memory.activation_peak_bytes for s in steps)
        ledger = DramImage(cfg, replace(steps[0].memory, activation_peak_bytes=activations,
                                        weight_bytes=cfg.dram_bytes), machine=self.machine)
        for step in steps:
            reserve_weights(step.net, step.programs, cache, ledger)
        weights_base = ledger.weight_base
        self.layout = LlmLayout(activation_bytes=activations, weights_base=weights_base,
                                weight_bytes=ledger.weight_bytes,
                                cache_base=round_up(weights_base + ledger.weight_bytes, ALIGN), capacity=capacity,
                                layers=itf.layers, kv_heads=itf.kv_heads, head_dim=itf.head_dim, batch=batch)
        self.views: dict[StepShape, DramImage] = {}
        for step in steps:
            memory = replace(step.memory, activation_peak_bytes=activations,
                             weight_bytes=self.layout.staging_base - weights_base)
            view = DramImage(cfg, memory, machine=self.machine)
            # one table of weights and relocated programs for the run: placed and written once; and one
            # of loaded (decoded) programs, so a later step's program relocated to the same addresses is
            # not decoded again, and one relocated elsewhere decodes only its differing words
            view.reserved, view.weights, view.programs = ledger.reserved, ledger.weights, ledger.programs
            view.loaded, view.origin, view.shared = ledger.loaded, ledger.origin, ledger.shared
            view.weight_bytes = ledger.weight_bytes
            self.views[step.shape] = view
            self.new_rows_bytes[step.shape] = self.bind(view, step, itf)
        self.weights = ledger.reserved

    def bind(self, view: DramImage, step: StepNetwork, itf: DecoderInterface) -> int:
        """Alias each layer's int8 past, new rows and present of ``step`` to their rows of the cache (see the
        module docstring); returns the bytes of new rows the step stores.

        Raises:
            OnnxError: a layer's present is not a Concat of its quantized past and the new rows along the
                positions (the cache could not be appended in place).
        """
        new_bytes = 0
        for layer, (names, present) in enumerate(zip(itf.past, step.present, strict=True)):
            for which, (past_name, present_q) in enumerate(zip(names, present, strict=True)):
                past_q, new_q = _concat_parts(step.net, past_name, present_q, itf.source, layer)
                past, new = step.shape.past, step.shape.new
                # new rows a program stores are in its activation layout (the host's Concat copies them in)
                parts = ((past_q, 0, past), (present_q, 0, past + new)) + (((new_q, past, new),)
                                                                           if _host_made(step.net, new_q) else ())
                for name, start, length in parts:
                    place = RowAlias(self.layout.row(layer, which, 0, start), length * self.layout.head_dim,
                                     self.layout.capacity * self.layout.head_dim, resident=name == past_q)
                    view.alias(name, place, step.net.shapes[name], np.dtype(np.int8))
                new_bytes += int(np.prod(step.net.shapes[new_q]))
        return new_bytes

    def write_rows(self, layer: int, which: int, rows: np.ndarray, start: int) -> int:
        """Append ``rows`` (batch x kv_heads x n x head_dim int8) at position ``start``; returns the bytes
        written."""
        if start + rows.shape[2] > self.layout.capacity:
            raise OnnxError(f"the KV cache holds {self.layout.capacity} tokens; positions {start}.."
                            f"{start + rows.shape[2] - 1} do not fit (a bug of the decode loop).")
        for sequence in range(rows.shape[0]):
            for head in range(rows.shape[1]):
                self.machine.write_dram(self.layout.row(layer, which, head, start, sequence),
                                        np.ascontiguousarray(rows[sequence, head]).reshape(-1).view(np.uint8))
        return int(rows.nbytes)

    def read_rows(self, layer: int, which: int, length: int) -> np.ndarray:
        """The first ``length`` cached positions: batch x kv_heads x length x head_dim int8, read from DRAM."""
        lay = self.layout
        nbytes = length * lay.head_dim
        return np.stack([np.stack([np.frombuffer(self.machine.read_dram(lay.row(layer, which, h, 0, b), nbytes),
                                                 dtype=np.int8).reshape(length, lay.head_dim)
                                   for h in range(lay.kv_heads)]) for b in range(lay.batch)])

    def corrupt(self, layer: int, which: int, head: int, position: int, sequence: int = 0) -> None:
        """Flip every bit of one cached row (what the cache check must catch; the tests use it)."""
        addr = self.layout.row(layer, which, head, position, sequence)
        data = np.frombuffer(self.machine.read_dram(addr, self.layout.head_dim), dtype=np.uint8)
        self.machine.write_dram(addr, np.bitwise_not(data))


def _host_made(net: Network, name: str) -> bool:
    """Whether a host step produces ``name`` (so it writes it wherever the image says)."""
    return any(name in s.outputs and s.where != NPU for s in net.steps)


def _concat_parts(net: Network, past_name: str, present_q: str, source: str, layer: int) -> tuple[str, str]:
    """The int8 past and new rows the Concat producing ``present_q`` joins along the positions."""
    concat = next((s for s in net.steps if present_q in s.outputs), None)
    quantize = next((s for s in net.steps if s.op == "QuantizeLinear" and s.inputs[0] == past_name), None)
    if (not isinstance(concat, ConcatStep) or quantize is None or len(concat.inputs) != 2
            or concat.inputs[0] != quantize.outputs[0] or concat.axis not in (2, -2)):
        raise OnnxError(f"{source}: layer {layer}'s present output is not a Concat of its quantized "
                        f"{past_name} and the new rows along the positions (axis 2), so the int8 cache cannot be "
                        "appended in place in DRAM.")
    return concat.inputs[0], concat.inputs[1]


__all__ = ["KEY", "VALUE", "LlmImage", "LlmLayout"]
