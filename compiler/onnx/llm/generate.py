"""The decode loop on the simulator, beside the integer reference's own, checked step by step.

Each step (the prompt's, then one per generated token) runs its network
twice: on the simulator in the run's DRAM image, and by the numpy integer
reference with a cache of its own on the host.  The simulator's step is fed
the token ids alone: its past keys and values are the KV cache region of DRAM
(:meth:`~.image.LlmImage.bind`: nothing on the host keeps them between steps or
feeds them back in), and the step stores its new tokens' keys and values there
itself, at the step's position.

Checked, each as it happens (:class:`GenerationMismatch` names the step):

- before a step, every cached row in DRAM equals the reference's cache (a row
  changed between steps is caught here, named by layer, key/value, head and
  position);
- after it, the step's int8 logits and present keys and values equal the
  reference's bit for bit, so the tokens (argmax of the last row) are equal.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from tinynpu.compiler.onnx.llm.compile import CompiledDecoder, feeds_for, token_feeds
from tinynpu.compiler.onnx.llm.image import KEY, VALUE, LlmImage
from tinynpu.compiler.onnx.llm.steps import StepNetwork, StepShape, step_shapes
from tinynpu.compiler.onnx.runtime.execute import Execution, execute
from tinynpu.errors import TinyNpuError


class GenerationMismatch(TinyNpuError):
    """The simulator's run differs from the integer reference (a cache row, logits, present keys/values)."""


@dataclass
class StepRecord:
    """What one step did on the simulator."""

    index: int
    new: int
    past: int
    tokens: list[int]  # one per sequence
    execution: Execution
    cache_bytes_written: int
    cache_bytes_read: int


@dataclass
class Generation:
    """The tokens per sequence and every step's record."""

    tokens: list[list[int]]
    reference_tokens: list[list[int]]
    steps: list[StepRecord] = field(default_factory=list)


def _dequantize(q: np.ndarray, step: StepNetwork, layer: int, which: int) -> np.ndarray:
    qp = step.scales[layer][which]
    return ((q.astype(np.float32) - np.float32(qp.z)) * np.float32(qp.s)).astype(np.float32)


def _past(step: StepNetwork, cache: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(_dequantize(k, step, i, KEY), _dequantize(v, step, i, VALUE)) for i, (k, v) in enumerate(cache)]


def _check_cache(image: LlmImage, reference: list[tuple[np.ndarray, np.ndarray]], index: int) -> None:
    """Every cached row in DRAM against the reference's cache."""
    for layer, pair in enumerate(reference):
        for which, want in enumerate(pair):
            got = image.read_rows(layer, which, want.shape[2])
            if not np.array_equal(got, want):
                seq, head, pos = (int(a[0]) for a in np.nonzero((got != want).any(axis=-1)))
                which_seq = f"sequence {seq}, " if image.layout.batch > 1 else ""
                raise GenerationMismatch(
                    f"step {index}: the KV cache in DRAM differs from the integer reference before the step "
                    f"reads it: layer {layer} {('key', 'value')[which]}, {which_seq}head {head}, position {pos} "
                    f"(address {image.layout.row(layer, which, head, pos, seq)}): the row was changed after it "
                    "was written (or "
                    "the model's present keys and values do not carry the past ones through unchanged).")


def _check_step(step: StepNetwork, got: Execution, want: Execution, index: int) -> None:
    names = [step.logits] + [n for pair in step.present for n in pair]
    for name in names:
        if not np.array_equal(got.values[name], want.values[name]):
            diff = int(np.count_nonzero(got.values[name] != want.values[name]))
            raise GenerationMismatch(f"step {index} (past {step.shape.past}, new {step.shape.new}): the simulator's "
                                     f"{name} differs from the integer reference in {diff} of "
                                     f"{got.values[name].size} values.")


def generate(cd: CompiledDecoder, *, between_steps: Callable[[int, LlmImage], None] | None = None,
             check_races: bool = False) -> Generation:
    """Prefill and greedy decode on the simulator, checked against the integer reference at every step.

    Args:
        between_steps: Called with the next step's index and the image before each step after the
            first (the tests corrupt a cache row there).
        check_races: Run every program under the simulator's data-race sanitizer.

    Raises:
        GenerationMismatch: see the module docstring.
    """
    itf = cd.itf
    empty = np.zeros((cd.batch, itf.kv_heads, 0, itf.head_dim), np.int8)
    ref_cache = [(empty, empty)] * itf.layers
    ids = cd.prompt
    out = Generation(tokens=[[] for _ in range(cd.batch)], reference_tokens=[[] for _ in range(cd.batch)])
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tinynpu-reference") as pool:
        for index, shape in enumerate(step_shapes(cd.prompt.shape[1], cd.generate)):
            ref_cache, ids = _step(cd, index, shape, ids, ref_cache, out, pool, between_steps, check_races)
    return out


def _step(cd: CompiledDecoder, index: int, shape: StepShape, ids: np.ndarray,
          ref_cache: list[tuple[np.ndarray, np.ndarray]], out: Generation, pool: ThreadPoolExecutor,
          between_steps: Callable[[int, LlmImage], None] | None,
          check_races: bool) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """One step on the simulator and the reference, checked and recorded in ``out``; the reference's cache
    and the next step's token ids."""
    itf, image = cd.itf, cd.image
    step = cd.step(shape)
    if between_steps is not None and index:
        between_steps(index, image)
    _check_cache(image, ref_cache, index)
    # The reference runs in a second thread while the simulator runs the step: both spend most of their
    # time outside the interpreter (numpy's BLAS, the native core), so on two cores they overlap.
    pending = pool.submit(execute, step.net, feeds_for(itf, ids, _past(step, ref_cache)), cache=None)
    # the simulator's step is fed the token ids alone: its past is the cache in DRAM (resident aliases)
    got = execute(step.net, token_feeds(itf, ids, shape.total), cache=cd.cache, image=image.views[shape],
                  check_races=check_races)
    want = pending.result()
    _check_step(step, got, want, index)
    ref_cache = [(want.values[k], want.values[v]) for k, v in step.present]
    tokens = np.argmax(got.values[step.logits][:, -1], axis=-1)
    reference = np.argmax(want.values[step.logits][:, -1], axis=-1)
    for b in range(cd.batch):
        out.tokens[b].append(int(tokens[b]))
        out.reference_tokens[b].append(int(reference[b]))
    out.steps.append(StepRecord(index=index, new=shape.new, past=shape.past, tokens=[int(t) for t in tokens],
                                execution=got, cache_bytes_written=image.new_rows_bytes[shape],
                                cache_bytes_read=cd.batch * itf.cache_bytes(shape.past)))
    return ref_cache, tokens.reshape(-1, 1)


__all__ = ["Generation", "GenerationMismatch", "StepRecord", "generate"]
