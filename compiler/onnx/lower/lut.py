"""A unary elementwise segment (GELU, SiLU, sigmoid, tanh, HardSwish, scalar scalings...) as one ``vlut``.

Between one int8 input and one QuantizeLinear, a chain of elementwise float
operators with scalar constants is a function of the input's 256 codes, so
it is a 256-entry table of output codes: the front end evaluates the chain
on every code with the host's own evaluator and quantizes with the Q node's
scale and zero point (:mod:`~tinynpu.compiler.onnx.frontend.nonlinear`), so
the table is the host-float path's result, bit for bit, by construction.
The program (:mod:`.rowwise`) brings each tile-row into the accumulators,
``vlut`` with base -128 (code ``x`` reads entry ``x + 128``), and stores narrow
with shift 0 (every entry is an int8 code already).
"""

from __future__ import annotations

import numpy as np

from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.onnx.lower import fixed
from tinynpu.compiler.onnx.lower.rowwise import Body, RowShape, TileRow, alu
from tinynpu.intmath import ceil_div

#: ``vlut``'s base for int8 codes: code -128 reads entry 0.
CODE_BASE = -128


def lut_reference(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Each int8 code's table entry (the program's arithmetic)."""
    return fixed.store_narrow(fixed.lut(x, table, CODE_BASE)).reshape(np.shape(x))


def lut_rows(table: np.ndarray, tile: int) -> np.ndarray:
    """The table as ``ceil(256 / T)`` parameter rows (entry ``e`` at row ``e // T``, column ``e % T``)."""
    rows = np.zeros(ceil_div(fixed.LUT_ENTRIES, tile) * tile, dtype=np.int32)
    rows[:fixed.LUT_ENTRIES] = table
    return rows.reshape(-1, tile)


def lut_body() -> Body:
    def body(emit: Emitter, tr: TileRow, shape: RowShape) -> None:
        alu(emit, "vlut", tr.data, shape.segments * shape.tile, src=tr.params, base=CODE_BASE)

    return body


__all__ = ["CODE_BASE", "lut_body", "lut_reference", "lut_rows"]
