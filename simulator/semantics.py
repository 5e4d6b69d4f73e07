"""The functional state of the machine and each instruction's semantics (isa.yaml `semantics`).

Operands arrive already range-checked by :mod:`tinynpu.simulator.decode`.
Integer ``tmm`` blocks run as one BLAS matmul over all their tiles:
every product of two int8 values is at most 2^14 in magnitude and a block
sums at most k * tile of them, so every partial sum is an integer float32
holds exactly while 2^14 * k * tile <= 2^24 (k < 64 at tile 16), and float64
always (2^14 * 127 * 128 < 2^53 at the largest tile).  The block's sum (below 2^31) is then added
to the accumulator once in int32, wrapping (addition modulo 2^32 is
associative, so this equals wrapping after every step).  The fp32 config follows the
semantics' step order: one float32 product per k-step, added in order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tinynpu.isa import ArchConfig, Isa
from tinynpu.simulator import transformer_ops as tops

Handler = Callable[[list[int]], None]
SEMANTICS: dict[str, Callable[[State, list[int]], None]] = {}  # mnemonic -> State method, by @semantics


def semantics(method: Callable[[State, list[int]], None]) -> Callable[[State, list[int]], None]:
    """Register ``method`` as the Python semantics of the instruction it is named after."""
    SEMANTICS[method.__name__] = method
    return method


def requantize(x: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``vrequant``'s arithmetic: ``round(x * multiplier * 2^-(31 + shift))``, saturated to int32.

    Round to nearest, ties toward +infinity (as ``vshr`` and ``store ... shift=``).  ``x`` is any
    int32-valued array; ``multiplier`` (int32) and ``shift`` (low 5 bits used) broadcast against it,
    one per column (output channel).  The product is exact in int64 (``|x * M| <= 2^62``).  This is
    the one definition of the rule: the ONNX integer reference imports it.
    """
    s = np.asarray(shift, dtype=np.int64) & 31
    p = np.asarray(x, dtype=np.int64) * np.asarray(multiplier, dtype=np.int64)
    y = (p + (np.int64(1) << (30 + s))) >> (31 + s)
    return np.clip(y, -(1 << 31), (1 << 31) - 1).astype(np.int32)


def requantize_float(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``vrequantf``'s arithmetic: ``rint(float32(float32(x) * scale))``, saturated to int32.

    Every rounding is to nearest, ties to even (numpy's float32 conversion and product, and
    ``np.rint``), as onnxruntime's integer kernels requantize.  ``scale`` holds binary32 values
    (a float32 array, or the int32 bit patterns of a parameter row), one per column; an
    infinite or NaN scale is the infinity of its sign, and ``0 * inf`` is 0.  This is the one
    definition of the rule: the ONNX integer reference imports it.
    """
    s = np.asarray(scale)
    s = s.view(np.float32) if s.dtype == np.int32 else s.astype(np.float32)
    s = np.where(np.isnan(s), np.copysign(np.float32(np.inf), s), s)
    xi = np.asarray(x, dtype=np.int32)
    with np.errstate(over="ignore", invalid="ignore"):
        p = (xi.astype(np.float32) * s).astype(np.float64)
    p = np.where(xi == 0, 0.0, p)
    return np.clip(np.rint(p), -(2.0**31), 2.0**31 - 1).astype(np.int32)


class State:
    """Scratchpads and DRAM, plus one handler per mnemonic."""

    def __init__(self, isa: Isa, cfg: ArchConfig) -> None:
        self.isa, self.cfg = isa, cfg
        self.tile = cfg.tile
        # np.zeros maps untouched pages lazily, so a 64 MiB DRAM costs what a program touches.
        self.dram = np.zeros(cfg.dram_bytes, dtype=np.uint8)
        self.dram_bytes = cfg.dram_bytes
        self.sp: dict[int, np.ndarray] = {
            s.id: np.zeros((cfg.rows(s.config_key), cfg.tile), dtype=cfg.dtype(s.config_key))
            for s in isa.scopes
        }
        # byte views of the scratchpads (a DMA copies bytes) and element sizes, indexed by scope id
        self._sp_bytes = {sid: sp.view(np.uint8) for sid, sp in self.sp.items()}
        self._eb = {sid: sp.itemsize for sid, sp in self.sp.items()}
        self._grids: dict[int, np.ndarray] = {}
        self.acc = self.sp[isa.scope_by_name["acc"].id]
        self.a = self.sp[isa.scope_by_name["a"].id]
        self.b = self.sp[isa.scope_by_name["b"].id]
        self.integer = cfg.is_integer
        if self.integer:
            lo = int(np.iinfo(self.a.dtype).min)
            self.max_product = lo * lo  # the largest |int8 x int8| product
        # The instructions of queued units; the dispatcher's own (halt, sync) have no handler.
        self.handlers: dict[str, Handler] = {name: getattr(self, name) for name in SEMANTICS}

    def _dram_view(self, addr: int, stride: int, rows: int, row_bytes: int) -> np.ndarray:
        if stride >= row_bytes:
            # DRAM seen as rows of `stride` bytes (one cached view per stride): a 2-D slice of it
            # is the footprint whenever no row straddles the view's row boundary, and slicing a
            # ready view is several times cheaper than slice + reshape or as_strided.
            grid = self._grids.get(stride)
            if grid is None:
                grid = self._grids[stride] = self.dram[:self.dram_bytes // stride * stride].reshape(-1, stride)
            r0, c0 = divmod(addr, stride)
            if c0 + row_bytes <= stride and r0 + rows <= len(grid):
                return grid[r0:r0 + rows, c0:c0 + row_bytes]
            if addr + rows * stride <= self.dram_bytes:
                return self.dram[addr:addr + rows * stride].reshape(rows, stride)[:, :row_bytes]
        return as_strided(self.dram[addr:], shape=(rows, row_bytes), strides=(stride, 1))

    @semantics
    def load(self, x: list[int]) -> None:
        scope, sp_row, addr, stride, rows, cols = x[:6]
        rb = cols * self._eb[scope]
        self._sp_bytes[scope][sp_row:sp_row + rows, :rb] = self._dram_view(addr, stride, rows, rb)
        if cols < self.tile:
            self.sp[scope][sp_row:sp_row + rows, cols:] = 0

    @semantics
    def zero(self, x: list[int]) -> None:
        scope, sp_row, rows = x[:3]
        self.sp[scope][sp_row:sp_row + rows] = 0

    @semantics
    def store(self, x: list[int]) -> None:
        sp_row, addr, stride, rows, cols, narrow, relu, shift = x[:8]
        val = self.acc[sp_row:sp_row + rows, :cols]
        if narrow:
            wide = val.astype(np.int64)
            wide = (wide + ((1 << shift) >> 1)) >> shift
            if relu:
                np.maximum(wide, 0, out=wide)
            out = np.clip(wide, -128, 127).astype(np.int8)
        else:
            out = np.maximum(val, 0) if relu else val
        raw = np.ascontiguousarray(out).view(np.uint8)
        row_bytes = raw.shape[1]
        if stride >= row_bytes or rows == 1:
            self._dram_view(addr, stride, rows, row_bytes)[:] = raw
        else:  # overlapping rows: the semantics write them in order, the last one wins
            for r in range(rows):
                self.dram[addr + r * stride:addr + r * stride + row_bytes] = raw[r]

    def _panel(self, sp: np.ndarray, first: int, outer: int, k: int) -> np.ndarray:
        """Tiles (i, kk) stored row-major from tile ``first``, as one (outer*t, k*t) matrix."""
        t = self.tile
        return sp[first * t:(first + outer * k) * t].reshape(outer, k, t, t).transpose(0, 2, 1, 3).reshape(
            outer * t, k * t)

    @semantics
    def tmm(self, x: list[int]) -> None:
        acc_t, a_t, b_t, m, n, k, accumulate = x[:7]
        t = self.tile
        if self.integer:
            # Exact in float32 while every partial sum is an integer below 2^24, else float64.
            f = np.float32 if self.max_product * k * t <= 1 << 24 else np.float64
            if k == 1 and n == 1:  # the common column block: every view is contiguous rows
                a = self.a[a_t * t:(a_t + m) * t]
                b = self.b[b_t * t:(b_t + 1) * t]
                prod = (a.astype(f) @ b.astype(f).T).astype(np.int32)
                c = self.acc[acc_t * t:(acc_t + m) * t]
            else:
                a, b = self._panel(self.a, a_t, m, k), self._panel(self.b, b_t, n, k)
                prod = (a.astype(f) @ b.astype(f).T).astype(np.int32)
                prod = prod.reshape(m, t, n, t).transpose(0, 2, 1, 3)
                c = self.acc[acc_t * t:(acc_t + m * n) * t].reshape(m, n, t, t)
            if accumulate:
                c += prod  # int32 + int32 in numpy wraps modulo 2^32: the ISA's two's-complement wrap
            else:
                c[:] = prod
            return
        a, b = self._panel(self.a, a_t, m, k), self._panel(self.b, b_t, n, k)
        c = self.acc[acc_t * t:(acc_t + m * n) * t].reshape(m, n, t, t)
        for kk in range(k):
            ak, bk = a[:, kk * t:(kk + 1) * t], b[:, kk * t:(kk + 1) * t]
            prod = (ak @ bk.T).reshape(m, t, n, t).transpose(0, 2, 1, 3)
            if kk == 0 and not accumulate:
                c[:] = prod
            else:
                c += prod

    @semantics
    def vadd(self, x: list[int]) -> None:
        dst, src, rows = x[:3]
        self.acc[dst:dst + rows] += self.acc[src:src + rows]

    @semantics
    def vaddrow(self, x: list[int]) -> None:
        dst, src, rows = x[:3]
        self.acc[dst:dst + rows] += self.acc[src]

    @semantics
    def vmax(self, x: list[int]) -> None:
        dst, imm, rows = x[:3]
        rng = self.acc[dst:dst + rows]
        np.maximum(rng, rng.dtype.type(imm), out=rng)

    @semantics
    def vmin(self, x: list[int]) -> None:
        dst, imm, rows = x[:3]
        rng = self.acc[dst:dst + rows]
        np.minimum(rng, rng.dtype.type(imm), out=rng)

    @semantics
    def vmul(self, x: list[int]) -> None:
        dst, imm, rows = x[:3]
        rng = self.acc[dst:dst + rows]
        np.multiply(rng, rng.dtype.type(imm), out=rng)  # int32 x int32 keeps the low 32 bits

    @semantics
    def vshr(self, x: list[int]) -> None:
        dst, shift, rows = x[:3]
        rng = self.acc[dst:dst + rows]
        wide = rng.astype(np.int64)
        rng[:] = ((wide + ((1 << shift) >> 1)) >> shift).astype(np.int32)

    @semantics
    def vrequant(self, x: list[int]) -> None:
        dst, src, rows = x[:3]
        self.acc[dst:dst + rows] = requantize(self.acc[dst:dst + rows], self.acc[src], self.acc[src + 1])

    @semantics
    def vrequantf(self, x: list[int]) -> None:
        dst, src, rows = x[:3]
        self.acc[dst:dst + rows] = requantize_float(self.acc[dst:dst + rows], self.acc[src])

    # The transformer instructions: their arithmetic is in transformer_ops, exact on integers.
    @semantics
    def vredmax(self, x: list[int]) -> None:
        dst, src, n, rows, cols = x[:5]
        self.acc[dst:dst + rows] = tops.row_max(tops.segments(self.acc, src, rows, n), cols)[:, None]

    @semantics
    def vredsum(self, x: list[int]) -> None:
        dst, src, n, shift, rows, cols = x[:6]
        total = tops.row_sum(tops.segments(self.acc, src, rows, n), cols)
        self.acc[dst:dst + rows] = tops.saturate32(tops.round_shift(total, shift))[:, None]

    @semantics
    def vredsq(self, x: list[int]) -> None:
        dst, src, n, shift, rows, cols = x[:6]
        total = tops.row_sum_squares(tops.segments(self.acc, src, rows, n), cols)
        self.acc[dst:dst + rows] = tops.round_shift_saturate(total, shift)[:, None]

    def _block(self, src: int, rows: int) -> np.ndarray:
        """Row src + i % T for each destination row i (the block lies outside the destination rows)."""
        return self.acc[src + np.arange(rows) % self.tile]

    @semantics
    def vsubb(self, x: list[int]) -> None:
        dst, src, rows = x[:3]
        self.acc[dst:dst + rows] -= self._block(src, rows)  # int32 arrays wrap

    @semantics
    def vmulb(self, x: list[int]) -> None:
        dst, src, shift, rows = x[:4]
        prod = self.acc[dst:dst + rows].astype(np.int64) * self._block(src, rows)  # exact: |p| <= 2^62
        self.acc[dst:dst + rows] = tops.saturate32(tops.round_shift(prod, shift))

    @semantics
    def vlut(self, x: list[int]) -> None:
        dst, src, base, rows = x[:4]
        table = self.acc[src:src + -(-tops.LUT_ENTRIES // self.tile)].reshape(-1)[:tops.LUT_ENTRIES]
        self.acc[dst:dst + rows] = tops.lookup(self.acc[dst:dst + rows], table, base)

    @semantics
    def vrecip(self, x: list[int]) -> None:
        dst, src, shift, rows = x[:4]
        self.acc[dst:dst + rows] = tops.reciprocal(self.acc[src:src + rows, 0], shift)[:, None]

    @semantics
    def vrsqrt(self, x: list[int]) -> None:
        dst, src, shift, rows = x[:4]
        self.acc[dst:dst + rows] = tops.reciprocal_sqrt(self.acc[src:src + rows, 0], shift)[:, None]


__all__ = ["SEMANTICS", "Handler", "State", "requantize", "requantize_float", "semantics"]
