"""Intrinsic calls: ``T.call_extern("tmm<T>", ...)`` becomes ``tmm``, after checking it is tinynpu's.

A name alone proves nothing (any extern call can be called ``tmm16``): each
call must also have the shape of :func:`~tinynpu.compiler.tvm.intrinsics.register_intrinsics`'s
implementation for this config: three ``tvm_access_ptr`` operands (accumulator
written, A and B read), each in its scope with its element type, a T x T tile
whose rows are ``stride`` elements apart, and those three strides.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tinynpu.compiler.tvm.exprs import evaluate
from tinynpu.compiler.tvm.grid import Grid, grid
from tinynpu.compiler.tvm.nest import Leaf, describe
from tinynpu.compiler.tvm.parts import Context, Part
from tinynpu.errors import UsageError

_ACCESS = ("the accumulator", "A", "B")


def _bad(leaf: Leaf, why: str) -> UsageError:
    return UsageError(f"TIR statement `{describe(leaf.stmt)}`: {why}")


def _op(expr: Any) -> str:
    op = getattr(expr, "op", None)
    return str(getattr(op, "name", "")) if type(expr).__name__ == "Call" else ""


def intrinsic_call(leaf: Leaf) -> str | None:
    """The extern function a leaf calls, or None when it is no ``Evaluate`` of an extern call."""
    value: Any = getattr(leaf.stmt, "value", None)
    if type(leaf.stmt).__name__ != "Evaluate" or _op(value) != "tirx.call_extern" or not value.args:
        return None
    return str(getattr(value.args[0], "value", ""))


def _operand(leaf: Leaf, ctx: Context, g: Grid, ptr: Any, stride_arg: Any, n: int) -> np.ndarray:
    """The scratchpad tile (row / T) of operand ``n`` (0 acc, 1 A, 2 B) per instance."""
    spec, tile, what = ctx.intrinsic, ctx.cfg.tile, _ACCESS[n]
    where = f"TIR statement `{describe(leaf.stmt)}`"
    if _op(ptr) != "tirx.tvm_access_ptr" or len(ptr.args) != 5 or _op(ptr.args[1]) != "tirx.buffer_data":
        raise _bad(leaf, f"operand {n + 1} ({what}) is {ptr}, not T.tvm_access_ptr of a buffer: not the call "
                         f"{spec.name} lowers to.")
    dtype = str(getattr(ptr.args[0], "ty", ""))
    buf = ptr.args[1].args[0]
    want_dtype = spec.acc_dtype if n == 0 else spec.input_dtype
    placed = ctx.placed.get(buf)
    if placed is None or buf.scope() != spec.scopes[n] or dtype != want_dtype:
        raise _bad(leaf, f"operand {n + 1} ({what}) is {buf.name} in {buf.scope() or 'global'} as {dtype}; "
                         f"{spec.name} of config {spec.config!r} takes {want_dtype} in {spec.scopes[n]}.")
    offset = np.broadcast_to(evaluate(ptr.args[2], g.env, where), (g.size,))
    extent = np.broadcast_to(evaluate(ptr.args[3], g.env, where), (g.size,))
    stride = np.broadcast_to(evaluate(stride_arg, g.env, where), (g.size,))
    if np.any(stride != placed.cols) or np.any(extent != placed.cols * tile):
        raise _bad(leaf, f"operand {n + 1} ({what}) is {int(extent[0])} elements of {placed.name} with rows "
                         f"{int(stride[0])} apart, not a {tile} x {tile} tile of its {placed.cols}-column rows: the "
                         f"intrinsic is not {spec.name} for tile edge {tile}.")
    plane_size = placed.rows * placed.cols
    plane, rest = offset // plane_size, offset % plane_size
    r, c = rest // placed.cols, rest % placed.cols
    if np.any(r % tile) or np.any(c % tile) or np.any(r + tile > placed.rows) or np.any(c + tile > placed.cols):
        k = int(np.argmax((r % tile != 0) | (c % tile != 0) | (r + tile > placed.rows) | (c + tile > placed.cols)))
        raise _bad(leaf, f"operand {n + 1} ({what}) starts at row {int(r[k])}, column {int(c[k])} of {placed.name}; "
                         f"tmm operands are whole {tile} x {tile} tiles at multiples of {tile}.")
    version = placed.version(g.env, g.size) * placed.version_rows(tile)
    return (placed.base + version + plane * placed.plane_rows(tile) + (c // tile) * placed.rows + r) // tile


def lower_call(leaf: Leaf, ctx: Context) -> list[Part]:
    """The ``tmm`` instructions of an intrinsic-call leaf.

    Raises:
        UsageError: the call is not tinynpu's intrinsic for this config (another name, another tile edge,
            operands in other scopes, types or shapes), naming the statement.
    """
    spec = ctx.intrinsic
    name = intrinsic_call(leaf)
    if name is None:
        raise _bad(leaf, f"evaluates an expression tinynpu cannot run; only calls of the {spec.name} intrinsic "
                         "lower to instructions.")
    other = re.fullmatch(r"tmm(\d+)", name)
    if name != spec.name and other:
        raise _bad(leaf, f"calls {name}, a tmm intrinsic for {other.group(1)} x {other.group(1)} tiles, but config "
                         f"{spec.config!r} has tile edge {spec.tile} ({spec.name}); register the config's "
                         "intrinsic with register_intrinsics(config) and tensorize with its name.")
    if name != spec.name:
        raise _bad(leaf, f"calls the extern function {name!r}, which is not tinynpu's intrinsic ({spec.name}).")
    args = leaf.stmt.value.args
    if len(args) != 7:
        raise _bad(leaf, f"calls {name} with {len(args) - 1} arguments; {spec.name} takes 6 (three operands, three "
                         "row strides).")
    g = grid(leaf)
    acc, a, b = (_operand(leaf, ctx, g, args[1 + n], args[4 + (n + 2) % 3], n) for n in range(3))
    return [Part("tmm", g.slots, {"acc": acc, "a": a, "b": b, "m": 1, "n": 1, "k": 1, "accumulate": 1},
                 comment=f"{spec.name}: acc tile {{}} += a tile {{}} @ b tile {{}}^T", comment_args=(acc, a, b))]


__all__ = ["intrinsic_call", "lower_call"]
