"""The instances of a leaf statement: its loops' iteration space as numpy columns, and their slots."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinynpu.compiler.tvm.exprs import evaluate, uses
from tinynpu.compiler.tvm.nest import Leaf, Loop, describe
from tinynpu.errors import UsageError


@dataclass(frozen=True)
class Grid:
    """Every instance of a leaf over ``loops`` (the loops around it that are not its own copy loops).

    Attributes:
        env: Each loop variable's value per instance (the leaf's own copy loops at their start).
        slots: Each instance's program-order slot.
        size: Instances (after the ``if`` guards).
    """

    env: dict[Any, np.ndarray]
    slots: np.ndarray
    size: int

    def at(self, var: Any, value: int) -> dict[Any, np.ndarray]:
        """The environment with ``var`` (a copy loop's variable) at ``value`` instead."""
        env = dict(self.env)
        env[var] = np.full(self.size, value, dtype=np.int64)
        return env


def grid(leaf: Leaf, own: tuple[Loop, ...] = ()) -> Grid:
    """The instances of ``leaf`` over its loops but ``own`` (which stay at their start), guards applied.

    Raises:
        UsageError: a guard that depends on one of ``own`` (a copy only partly executed).
    """
    own_vars = tuple(loop.var for loop in own)
    outer = [(loop, coef) for loop, coef in zip(leaf.loops, leaf.coefs, strict=True)
             if not any(loop.var.same_as(v) for v in own_vars)]
    extents = [loop.extent for loop, _ in outer]
    n = math.prod(extents)
    idx = np.indices(extents, dtype=np.int64).reshape(len(extents), n) if extents else np.zeros((0, 1), np.int64)
    env: dict[Any, np.ndarray] = {}
    slots = np.full(n, leaf.offset, dtype=np.int64)
    for row, (loop, coef) in zip(idx, outer, strict=True):
        env[loop.var] = row + loop.start
        slots += coef * row
    for loop in own:
        env[loop.var] = np.full(n, loop.start, dtype=np.int64)
    where = f"TIR statement `{describe(leaf.stmt)}`"
    keep = np.ones(n, dtype=bool)
    for guard in leaf.guards:
        if uses(guard, own_vars):
            raise UsageError(f"{where}: the condition `{guard}` guards part of a copy's rows or columns; the "
                             "lowering maps whole copies (split the loops so that the copy is not partial).")
        keep &= np.broadcast_to(evaluate(guard, env, where).astype(bool), (n,))
    if not keep.all():
        env = {var: values[keep] for var, values in env.items()}
        slots = slots[keep]
    return Grid(env, slots, int(keep.sum()))


__all__ = ["Grid", "grid"]
