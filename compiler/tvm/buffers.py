"""Where a lowered function's buffers live: DRAM tensors, and rows of the scratchpads.

A buffer of shape ``(..., R, C)`` in a special scope is laid out tile-major:
element ``(p, r, c)`` (``p`` the row-major index of the leading dimensions) is
element ``c % T`` of scratchpad row ``base + p * R * ceil(C / T) + (c // T) * R + r``.
Each T-wide column strip of the buffer is then ``R`` consecutive rows, so a
``T x T`` sub-tile at a row that is a multiple of T is a ``tmm`` operand, and
a block of ``bm x bn`` tiles is the accumulator layout of tinynpu's own GEMM
lowering.  Buffers are placed one after another in their scope, each on a
tile boundary, for the whole program; a double-buffered one (TVM's
``double_buffer_scope`` annotation on the block that writes it) takes two
such regions and alternates between them.

The function's parameters are the DRAM tensors, placed in parameter order
(:class:`~tinynpu.compiler.workload.DramAllocator`); their shapes and types
come from the buffers that access them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinynpu.assembler.image import Tensor
from tinynpu.compiler.tvm.nest import Allocation, Loop
from tinynpu.compiler.tvm.scopes import DRAM_SCOPES, TVM_SCOPES, isa_scope_name
from tinynpu.compiler.workload import DramAllocator
from tinynpu.errors import UsageError
from tinynpu.intmath import ceil_div, round_up
from tinynpu.isa import ArchConfig, Isa


@dataclass(frozen=True)
class Placed:
    """A scratchpad buffer: its scope (ISA name), first row, leading dimensions, rows R and columns C."""

    name: str
    scope: str
    base: int
    lead: tuple[int, ...]
    rows: int
    cols: int
    dtype: str
    versions: int = 1
    loops: tuple[Loop, ...] = ()

    @property
    def planes(self) -> int:
        return math.prod(self.lead)

    def version_rows(self, tile: int) -> int:
        """Rows of one version of the buffer (a double-buffered one has two, used in turn)."""
        return round_up(self.planes * self.plane_rows(tile), tile)

    def version(self, env: Mapping[Any, np.ndarray], size: int) -> np.ndarray:
        """Which version each instance uses: the allocation's own iteration count (over ``loops``), mod 2."""
        count = np.zeros(size, dtype=np.int64)
        for loop in self.loops:
            count = count * loop.extent + (env[loop.var] - loop.start)
        return count % self.versions

    def plane_rows(self, tile: int) -> int:
        return self.rows * ceil_div(self.cols, tile)


def _shape(buf: Any) -> tuple[int, ...]:
    dims = []
    for d in buf.shape:
        if type(d).__name__ != "IntImm":
            raise UsageError(f"buffer {buf.name}: dimension {d} is not a constant; the lowering needs constant "
                             "shapes (specialize the function).")
        dims.append(int(d.value))
    return tuple(dims)


def place_scratchpads(allocations: tuple[Allocation, ...], isa: Isa, cfg: ArchConfig,
                      double: frozenset[str] = frozenset()) -> dict[Any, Placed]:
    """Rows for every buffer allocated in a special scope, keyed by the buffer (a TIR variable in TVM 0.27).

    A buffer named in ``double`` (``double_buffer_scope``) gets two versions: each new allocation of it (each
    iteration of the loops around its allocation) uses the other one, so a copy into the next one need not
    wait for the instructions still reading the current one.

    Raises:
        UsageError: a buffer in a scope that is neither DRAM nor a scratchpad, of an element type other than
            its scratchpad's, not 2-D or more, or the scratchpads' rows overflowed (naming the buffer).
    """
    used: dict[str, int] = {}
    out: dict[Any, Placed] = {}
    for allocation in allocations:
        buf = allocation.buffer
        tvm_scope = buf.scope()
        scope = isa_scope_name(isa, tvm_scope)
        if scope is None:
            what = "DRAM buffers inside the function" if tvm_scope in DRAM_SCOPES else f"scope {tvm_scope!r}"
            raise UsageError(f"buffer {buf.name} is allocated in {what}; tinynpu's scopes are "
                             f"{', '.join(TVM_SCOPES)} (cache_read/cache_write into them) and the function's "
                             "parameters in DRAM.")
        key = isa.scope_by_name[scope].config_key
        want = cfg.input_dtype if key != "acc" else cfg.acc_dtype
        if str(buf.dtype) != want:
            raise UsageError(f"buffer {buf.name} in {tvm_scope} holds {buf.dtype}, but that scratchpad holds "
                             f"{want} in config {cfg.name!r}.")
        shape = _shape(buf)
        if len(shape) < 2:
            raise UsageError(f"buffer {buf.name} in {tvm_scope} has shape {list(shape)}; scratchpad buffers are "
                             "2-D (rows x columns), with any leading dimensions (double buffers).")
        versions = 2 if buf.name in double else 1
        placed = Placed(buf.name, scope, used.get(scope, 0), shape[:-2], shape[-2], shape[-1], want, versions,
                        allocation.loops)
        need = versions * placed.version_rows(cfg.tile)
        used[scope] = placed.base + need
        limit = cfg.rows(key)
        if used[scope] > limit:
            raise UsageError(f"buffer {buf.name} ({list(shape)} {want}) needs scratchpad rows {placed.base}.."
                             f"{used[scope] - 1} of {tvm_scope}, which has {limit} rows in config {cfg.name!r}; "
                             "the buffers in that scope take "
                             f"{used[scope]} rows in all (smaller blocks, or fewer buffers, fit).")
        out[buf] = placed
    return out


def dram_tensors(func: Any, buffers: list[Any], cfg: ArchConfig, written: set[Any]) -> dict[Any, Tensor]:
    """The DRAM tensor of each parameter ``buffers`` access, keyed by its parameter, in parameter order.

    Raises:
        UsageError: one parameter accessed as buffers of different shapes or types, or a type tinynpu has no
            DRAM tensors of.
    """
    by_data: dict[Any, Any] = {}
    for buf in buffers:
        seen = by_data.setdefault(buf, buf)
        if _shape(seen) != _shape(buf) or str(seen.dtype) != str(buf.dtype):
            raise UsageError(f"parameter {buf.name} is accessed as {list(_shape(seen))} {seen.dtype} and as "
                             f"{list(_shape(buf))} {buf.dtype}; the lowering needs one shape per tensor.")
    alloc = DramAllocator(cfg, "the TVM function")
    out: dict[Any, Tensor] = {}
    for param in func.params:
        buf = by_data.get(param)
        if buf is not None:
            role = "output" if param in written else "input"
            out[param] = alloc.add(buf.name, _shape(buf), str(buf.dtype), role)
    return out


__all__ = ["Placed", "dram_tensors", "place_scratchpads"]
