"""A layer's epilogue on the accelerator: int32 accumulators to int8 outputs, per output channel.

After a conv or GEMM layer's ``tmm`` steps, a quantized network applies, per
output column (channel) ``c``::

    y = clamp(requantize(acc + bias[c]) + zero_point, lo, hi)     -> int8

with one of two requantizers (:attr:`Epilogue.requantizer`):

``"binary32"``: ``vrequantf`` with one binary32 scale per channel,
    ``rint(float32(float32(x) * scale[c]))``, every rounding half to even: the
    arithmetic of onnxruntime's integer kernels, so an ONNX network agrees with
    them bit for bit.
``"q31"``: ``vrequant`` with a Q31 multiplier ``M[c]`` and shift ``S[c]``,
    ``round(x * M * 2^-(31+S))``, one exact rounding, ties toward +infinity
    (fixed-point, TFLite-style models; :func:`quantize_multiplier`).

:class:`Epilogue` is that record; :meth:`Epilogue.reference` its numpy
reference (the simulator's own arithmetic, so the comparison is bit for bit);
:meth:`Epilogue.param_table` the accumulator parameter rows the program loads
into ``acc`` (``load acc[...]``) once per output block.  Per output column tile
the table holds :attr:`Epilogue.param_rows` rows: the bias row (if any), the
requantizer's rows (the scale row; or the multiplier row ``M`` and the shift
row ``S``, adjacent, as ``vrequant`` reads them) and the zero-point row (if
nonzero).  The lowering then emits, per output column tile,
:attr:`Epilogue.alu_ops` vector-ALU instructions: ``vaddrow`` bias, the
requantizer, ``vaddrow`` zero point, ``vmax``/``vmin`` for a clamp the store
cannot do, and stores with ``narrow=1`` (saturating to int8; ``relu=1`` when
the clamp is relu at zero).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tinynpu.errors import UsageError
from tinynpu.intmath import ceil_div
from tinynpu.simulator.semantics import requantize, requantize_float

INT8_MIN = -128
INT8_MAX = 127
MAX_SHIFT = 31  # vrequant reads the low 5 bits of the shift row
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
#: requantizer -> (its instruction, its parameter rows per column tile)
REQUANTIZERS = {"binary32": ("vrequantf", 1), "q31": ("vrequant", 2)}


@dataclass(frozen=True)
class AluStep:
    """One vector-ALU instruction of an epilogue, on an output column tile's accumulator rows.

    Attributes:
        mnemonic: The ALU instruction.
        param_row: Its ``src``: this parameter row of the column tile (None: it takes no row).
        imm: Its immediate (None: none).
        comment: The listing's comment.
    """

    mnemonic: str
    param_row: int | None
    imm: int | None
    comment: str


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


def _scale_vector(value: object) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype != np.float32:
        raise UsageError(f"epilogue: scale must be a non-empty 1-D float32 array (one binary32 scale per output "
                         f"channel), not {arr.dtype} of shape {arr.shape}.")
    bad = np.flatnonzero(~(np.isfinite(arr) & (arr > 0)))
    if bad.size:
        i = int(bad[0])
        raise UsageError(f"epilogue: scale[{i}] must be a positive finite binary32 value, not {float(arr[i])!r}.")
    return arr


@dataclass(frozen=True, init=False, eq=False)
class Epilogue:
    """Bias, per-channel requantization, zero point and clamp of a layer, run on the accelerator.

    Attributes:
        requantizer: ``"binary32"`` (``vrequantf``, :attr:`scale`) or ``"q31"`` (``vrequant``,
            :attr:`multiplier` and :attr:`shift`).
        scale: float32 per output channel (binary32 requantizer), else None.
        multiplier: int32 ``M`` per output channel (Q31 requantizer), else None.
        shift: ``S`` per output channel, 0..31 (Q31 requantizer), else None.
        bias: int32 per output channel, or None.
        zero_point: The output's zero point, -128..127.
        lo, hi: The clamp in the output's integers (relu: ``lo = zero_point``), -128 <= lo <= hi <= 127.
    """

    requantizer: str
    scale: np.ndarray | None
    multiplier: np.ndarray | None
    shift: np.ndarray | None
    bias: np.ndarray | None
    zero_point: int
    lo: int
    hi: int

    def __init__(self, *, requantizer: str = "q31", scale: object | None = None, multiplier: object | None = None,
                 shift: object | None = None, bias: object | None = None, zero_point: int = 0,
                 lo: int = INT8_MIN, hi: int = INT8_MAX) -> None:
        sc = m = s = None
        if requantizer == "binary32":
            if scale is None or multiplier is not None or shift is not None:
                raise UsageError("epilogue: the binary32 requantizer takes scale (one float32 per output "
                                 "channel), not multiplier or shift.")
            sc = _scale_vector(scale)
            n = sc.size
        elif requantizer == "q31":
            if multiplier is None or shift is None or scale is not None:
                raise UsageError("epilogue: the q31 requantizer takes multiplier and shift (one each per output "
                                 "channel), not scale.")
            m = _vector("multiplier", multiplier, INT32_MIN, INT32_MAX)
            s = _vector("shift", shift, 0, MAX_SHIFT)
            if s.size != m.size:
                raise UsageError(f"epilogue: shift has {s.size} channels, multiplier {m.size}; one each per "
                                 "output channel.")
            n = m.size
        else:
            raise UsageError(f"epilogue: requantizer must be one of {', '.join(map(repr, REQUANTIZERS))}, not "
                             f"{requantizer!r}.")
        b = None if bias is None else _vector("bias", bias, INT32_MIN, INT32_MAX)
        if b is not None and b.size != n:
            raise UsageError(f"epilogue: bias has {b.size} channels, the requantization {n}; one each per "
                             "output channel.")
        if not INT8_MIN <= zero_point <= INT8_MAX:
            raise UsageError(f"epilogue: zero_point must be in {INT8_MIN}..{INT8_MAX}, not {zero_point}.")
        if not INT8_MIN <= lo <= hi <= INT8_MAX:
            raise UsageError(f"epilogue: the clamp must satisfy {INT8_MIN} <= lo <= hi <= {INT8_MAX}, not "
                             f"lo={lo}, hi={hi}.")
        for name, value in (("requantizer", requantizer), ("scale", sc), ("multiplier", m), ("shift", s),
                            ("bias", b), ("zero_point", int(zero_point)), ("lo", int(lo)), ("hi", int(hi))):
            object.__setattr__(self, name, value)

    @property
    def channels(self) -> int:
        """Output channels (columns of the layer's GEMM)."""
        return int(self._requant_table_rows()[0].size)

    @property
    def requant_mnemonic(self) -> str:
        """The requantizer's instruction: ``vrequantf`` or ``vrequant``."""
        return REQUANTIZERS[self.requantizer][0]

    @property
    def requant_rows(self) -> int:
        """The requantizer's parameter rows per output column tile (scale; or M and S)."""
        return REQUANTIZERS[self.requantizer][1]

    def _requant_table_rows(self) -> list[np.ndarray]:
        """The requantizer's parameter rows as int32 (a binary32 scale as its bit pattern)."""
        if self.scale is not None:
            return [self.scale.view(np.int32)]
        assert self.multiplier is not None and self.shift is not None
        return [self.multiplier, self.shift]

    @property
    def param_rows(self) -> int:
        """Accumulator rows per output column tile: bias, the requantizer's, zero point."""
        return (self.bias is not None) + self.requant_rows + (self.zero_point != 0)

    @property
    def store_relu(self) -> bool:
        """Whether the clamp's lower bound is the store's relu (0), so no ``vmax``."""
        return self.lo == 0

    @property
    def alu_ops(self) -> int:
        """Vector-ALU instructions per output column tile."""
        return len(self.alu_steps())

    def alu_steps(self) -> tuple[AluStep, ...]:
        """The vector-ALU instructions per output column tile, in program order (their parameter rows
        counted from the column tile's first)."""
        steps: list[AluStep] = []
        row = 0
        if self.bias is not None:
            steps.append(AluStep("vaddrow", row, None, "+ bias"))
            row += 1
        steps.append(AluStep(self.requant_mnemonic, row, None, "requantize per channel"))
        if self.zero_point:
            steps.append(AluStep("vaddrow", row + self.requant_rows, None, "+ zero point"))
        if self.lo not in (INT8_MIN, 0):  # 0 is the store's relu, -128 its saturation
            steps.append(AluStep("vmax", None, self.lo, f"clamp >= {self.lo}"))
        if self.hi != INT8_MAX:
            steps.append(AluStep("vmin", None, self.hi, f"clamp <= {self.hi}"))
        return tuple(steps)

    def reference(self, acc: np.ndarray) -> np.ndarray:
        """int32 accumulators (channels last) -> int8, as the accelerator computes them."""
        x = np.asarray(acc, dtype=np.int64)
        if self.bias is not None:  # vaddrow: int32 wraparound
            x = (x + self.bias.astype(np.int64)).astype(np.uint32).view(np.int32)
        if self.scale is not None:
            y = requantize_float(x, self.scale).astype(np.int64)
        else:
            y = requantize(x, *self._requant_table_rows()).astype(np.int64)
        y += self.zero_point
        return np.clip(y, self.lo, self.hi).astype(np.int8)

    def param_table(self, tile: int) -> np.ndarray:
        """The parameter rows in DRAM: ``param_rows`` rows of ``tile`` int32 per output column tile.

        Columns past the last channel are zero (scale or ``M`` 0: their outputs are never stored).
        """
        tiles = ceil_div(self.channels, tile)
        rows = ([] if self.bias is None else [self.bias]) + self._requant_table_rows()
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
        return {"channels": self.channels, "requantizer": self.requantizer, "bias": self.bias is not None,
                "zero_point": self.zero_point,
                "clamp": [self.lo, self.hi], "param_rows": self.param_rows, "alu_ops": self.alu_ops}


def quantize_multiplier(real: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The q31 requantizer's ``(M, S)`` with ``M * 2^-(31+S)`` closest to each positive ``real`` scale below 1.

    ``M`` is in [2^30, 2^31) unless the scale is below ``2^-32`` (then ``S`` is 31 and ``M``
    smaller).

    Raises:
        UsageError: a scale that is not positive and finite, or not below 1 (``S`` would be negative).
    """
    r = np.atleast_1d(np.asarray(real, dtype=np.float64))
    ms = np.zeros(r.shape, dtype=np.int64)
    ss = np.zeros(r.shape, dtype=np.int64)
    for i, v in enumerate(r.flat):
        if not (math.isfinite(v) and 0.0 < v < 1.0):
            raise UsageError(f"epilogue: a q31 requantization scale must be positive and below 1, not {float(v)!r} "
                             f"(channel {i}).")
        _, exp = math.frexp(v)  # v = mant * 2^exp, mant in [0.5, 1)
        s = min(-exp, MAX_SHIFT)
        m = round(v * 2.0 ** (31 + s))
        if m == 2**31:  # mant rounded up to 1.0
            if s > 0:
                s -= 1
                m = round(v * 2.0 ** (31 + s))
            else:  # a scale within 2^-32 of 1
                m = 2**31 - 1
        ms.flat[i], ss.flat[i] = m, s
    return ms.astype(np.int32), ss.astype(np.int32)


__all__ = ["REQUANTIZERS", "AluStep", "Epilogue", "quantize_multiplier"]
