"""A tensorized TensorIR function -> a tinynpu program, through the :class:`~tinynpu.compiler.emitter.Emitter`.

TVM's passes flatten the schedule into a loop nest (:mod:`.passes`); its
leaves (:mod:`.nest`) become columns of instructions (:mod:`.copies`,
:mod:`.calls`), each evaluated for every iteration of the loops around it at
once, and ordered by their program-order slots.  The emitter derives every
token, as for any program.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinynpu.assembler.image import Program, Tensor
from tinynpu.compiler.comments import Comments
from tinynpu.compiler.emitter import Columns, Emitter
from tinynpu.compiler.tvm.buffers import dram_tensors, place_scratchpads
from tinynpu.compiler.tvm.calls import intrinsic_call, lower_call
from tinynpu.compiler.tvm.copies import lower_store
from tinynpu.compiler.tvm.fold import FOLD_INIT, fold_inits
from tinynpu.compiler.tvm.intrinsics import intrinsic_for
from tinynpu.compiler.tvm.nest import Nest, loaded, walk
from tinynpu.compiler.tvm.parts import Context, Part
from tinynpu.compiler.tvm.passes import DOUBLE_BUFFER, annotated, lower_blocks, prim_func
from tinynpu.compiler.tvm.require import require_tvm
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, load_isa


@dataclass(frozen=True)
class Lowered:
    """A lowered function: the program, its listing comments, its DRAM tensors and the TIR it came from.

    Attributes:
        program: The binary image.
        comments: Per-instruction comments.
        tensors: The DRAM tensors (the function's parameters), in parameter order.
        tir: The loop nest after TVM's passes, as TVMScript.
        tmm_steps: T x T x T steps the ``tmm`` instructions issue.
        seconds: Wall time of the lowering (TVM's passes included).
    """

    program: Program
    comments: Comments
    tensors: tuple[Tensor, ...]
    tir: str
    tmm_steps: int
    seconds: float


def _written(nest: Nest) -> set[Any]:
    return {leaf.stmt.buffer for leaf in nest.leaves if type(leaf.stmt).__name__ == "BufferStore"}


def _accessed(nest: Nest) -> list[Any]:
    bufs = []
    for leaf in nest.leaves:
        if type(leaf.stmt).__name__ == "BufferStore":
            bufs.append(leaf.stmt.buffer)
            source = loaded(leaf.stmt.value)
            if source is not None:
                bufs.append(source[0])
    return bufs


def _columns(parts: list[Part]) -> list[Columns]:
    """The parts as the emitter's columns, ordered by slot."""
    slots = np.concatenate([p.slots for p in parts]) if parts else np.zeros(0, np.int64)
    if len(np.unique(slots)) != len(slots):  # the slots are affine and disjoint by construction
        raise AssertionError("two instructions of the lowered TIR share a program-order slot")
    rank = np.empty(len(slots), dtype=np.int64)
    rank[np.argsort(slots, kind="stable")] = np.arange(len(slots), dtype=np.int64)
    out, at = [], 0
    for p in parts:
        n = len(p.slots)
        if n:
            out.append(Columns(p.mnemonic, rank[at:at + n], p.fields, comment=p.comment,
                               comment_args=p.comment_args))
        at += n
    return out


def lower(schedule: Any, cfg: ArchConfig) -> Lowered:
    """Lower a tensorized schedule (``tvm.s_tir.Schedule``, IRModule or PrimFunc) to a program for ``cfg``.

    Raises:
        UsageError: TVM is missing, the schedule has no call of the config's intrinsic, or a statement cannot
            be mapped (one paragraph naming the TIR statement and why).
    """
    require_tvm("lowering a TVM schedule")
    t0 = time.perf_counter()
    isa = load_isa()
    spec = intrinsic_for(cfg)
    scheduled = prim_func(schedule)
    double, fold = annotated(scheduled, DOUBLE_BUFFER), annotated(scheduled, FOLD_INIT)
    func = lower_blocks(schedule)
    nest = walk(func)
    calls = [leaf for leaf in nest.leaves if intrinsic_call(leaf) is not None]
    if not calls:
        raise UsageError(f"the function has no tensorized block: no statement calls {spec.name} (or any "
                         f"intrinsic). Register it with register_intrinsics(config) and map the T x T x T block "
                         f"onto it with sch.tensorize(loop, {spec.name!r}) (docs/tvm.md shows the schedule).")
    placed = place_scratchpads(nest.allocations, isa, cfg, double)
    params = [b for b in _accessed(nest) if any(b.same_as(p) for p in func.params)]
    tensors = dram_tensors(func, params, cfg, _written(nest))
    ctx = Context(func, isa, cfg, spec, placed, tensors)
    parts: list[Part] = []
    folded: set[int] = set()
    for leaf in nest.leaves:
        is_store = type(leaf.stmt).__name__ == "BufferStore"
        new = lower_store(leaf, ctx) if is_store else lower_call(leaf, ctx)
        if is_store and leaf.stmt.buffer.name in fold:
            folded.update(len(parts) + i for i, p in enumerate(new) if p.mnemonic == "zero")
        parts += new
    parts = fold_inits(parts, folded, isa.scope_by_name["acc"].id, cfg.tile)
    emit = Emitter(isa, cfg)
    emit.extend(_columns(parts))
    words, comments = emit.finish()
    program = Program.build(isa, cfg, words, tuple(tensors.values()))
    steps = sum(len(p.slots) for p in parts if p.mnemonic == "tmm")
    return Lowered(program, comments, tuple(tensors.values()), func.script(), steps, time.perf_counter() - t0)


__all__ = ["Lowered", "lower"]
