"""A layer's epilogue on the accelerator: int32 accumulators to int8 outputs, per output channel.

After a conv or GEMM layer's ``tmm`` steps, a quantized network applies, per
output column (channel) ``c``::

    y = clamp(vrequant(acc + bias[c], M[c], S[c]) + zero_point, lo, hi)     -> int8

:class:`Epilogue` is that record; :meth:`Epilogue.reference` its numpy
reference (the ``vrequant`` arithmetic of the simulator, so the comparison is
bit for bit); :meth:`Epilogue.param_table` the accumulator parameter rows the
program loads into ``acc`` (``load acc[...]``) once per output block.  Per
output column tile the table holds :attr:`Epilogue.param_rows` rows: the bias
row (if any), the multiplier row ``M``, the shift row ``S`` (adjacent, as
``vrequant`` reads them) and the zero-point row (if nonzero).  The lowering
then emits, per output column tile, :attr:`Epilogue.alu_ops` vector-ALU
instructions: ``vaddrow`` bias, ``vrequant``, ``vaddrow`` zero point,
``vmax``/``vmin`` for a clamp the store cannot do, and stores with
``narrow=1`` (saturating to int8; ``relu=1`` when the clamp is relu at zero).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynpu.errors import UsageError
from tinynpu.intmath import ceil_div
from tinynpu.simulator.semantics import requantize as vrequant

INT8_MIN = -128
INT8_MAX = 127
MAX_SHIFT = 31  # vrequant reads the low 5 bits of the shift row
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def _vector(name: str, value: object, lo: int, hi: int) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise UsageError(f"epilogue: {name} must be a non-empty 1-D integer array (one value per output "
                         f"channel), not {arr.dtype} of shape {arr.shape}.")
    bad = np.flatnonzero((arr < lo) | (arr > hi))
    if bad.size:
        i = int(bad[0])
        raise UsageError(f"epilogue: {name}[{i}] must be in {lo}..{hi}, not {int(arr[i])}.")
    return arr.astype(np.int32)


@dataclass(frozen=True, init=False, eq=False)
class Epilogue:
    """Bias, per-channel requantization, zero point and clamp of a layer, run on the accelerator.

    Attributes:
        multiplier: int32 ``M`` per output channel (``vrequant``'s Q31 multiplier).
        shift: ``S`` per output channel, 0..31.
        bias: int32 per output channel, or None.
        zero_point: The output's zero point, -128..127.
        lo, hi: The clamp in the output's integers (relu: ``lo = zero_point``), -128 <= lo <= hi <= 127.
    """

    multiplier: np.ndarray
    shift: np.ndarray
    bias: np.ndarray | None
    zero_point: int
    lo: int
    hi: int

    def __init__(self, *, multiplier: object, shift: object, bias: object | None = None, zero_point: int = 0,
                 lo: int = INT8_MIN, hi: int = INT8_MAX) -> None:
        m = _vector("multiplier", multiplier, INT32_MIN, INT32_MAX)
        s = _vector("shift", shift, 0, MAX_SHIFT)
        if s.size != m.size:
            raise UsageError(f"epilogue: shift has {s.size} channels, multiplier {m.size}; one each per "
                             "output channel.")
        b = None if bias is None else _vector("bias", bias, INT32_MIN, INT32_MAX)
        if b is not None and b.size != m.size:
            raise UsageError(f"epilogue: bias has {b.size} channels, multiplier {m.size}; one each per "
                             "output channel.")
        if not INT8_MIN <= zero_point <= INT8_MAX:
            raise UsageError(f"epilogue: zero_point must be in {INT8_MIN}..{INT8_MAX}, not {zero_point}.")
        if not INT8_MIN <= lo <= hi <= INT8_MAX:
            raise UsageError(f"epilogue: the clamp must satisfy {INT8_MIN} <= lo <= hi <= {INT8_MAX}, not "
                             f"lo={lo}, hi={hi}.")
        for name, value in (("multiplier", m), ("shift", s), ("bias", b), ("zero_point", int(zero_point)),
                            ("lo", int(lo)), ("hi", int(hi))):
            object.__setattr__(self, name, value)

    @property
    def channels(self) -> int:
        """Output channels (columns of the layer's GEMM)."""
        return int(self.multiplier.size)

    @property
    def param_rows(self) -> int:
        """Accumulator rows per output column tile: bias, M, S, zero point."""
        return (self.bias is not None) + 2 + (self.zero_point != 0)

    @property
    def store_relu(self) -> bool:
        """Whether the clamp's lower bound is the store's relu (0), so no ``vmax``."""
        return self.lo == 0

    @property
    def alu_ops(self) -> int:
        """Vector-ALU instructions per output column tile."""
        low = self.lo not in (INT8_MIN, 0)
        return (self.bias is not None) + 1 + (self.zero_point != 0) + low + (self.hi != INT8_MAX)

    def reference(self, acc: np.ndarray) -> np.ndarray:
        """int32 accumulators (channels last) -> int8, as the accelerator computes them."""
        x = np.asarray(acc, dtype=np.int64)
        if self.bias is not None:  # vaddrow: int32 wraparound
            x = (x + self.bias.astype(np.int64)).astype(np.uint32).view(np.int32)
        y = vrequant(x, self.multiplier, self.shift).astype(np.int64) + self.zero_point
        return np.clip(y, self.lo, self.hi).astype(np.int8)

    def param_table(self, tile: int) -> np.ndarray:
        """The parameter rows in DRAM: ``param_rows`` rows of ``tile`` int32 per output column tile.

        Columns past the last channel are zero (``M = 0``: their outputs are never stored).
        """
        tiles = ceil_div(self.channels, tile)
        rows = [r for r in (self.bias, self.multiplier, self.shift) if r is not None]
        if self.zero_point:
            rows.append(np.full(self.channels, self.zero_point, dtype=np.int32))
        table = np.zeros((len(rows), tiles * tile), dtype=np.int32)
        for i, r in enumerate(rows):
            table[i, :self.channels] = r
        # (rows, tiles, tile) -> (tiles, rows, tile): one tile's rows are consecutive
        return np.ascontiguousarray(table.reshape(len(rows), tiles, tile).transpose(1, 0, 2)
                                    .reshape(tiles * len(rows), tile))

    def describe(self) -> dict[str, object]:
        """JSON-ready summary (for a program's workload record)."""
        return {"channels": self.channels, "bias": self.bias is not None, "zero_point": self.zero_point,
                "clamp": [self.lo, self.hi], "param_rows": self.param_rows, "alu_ops": self.alu_ops}


__all__ = ["Epilogue"]
