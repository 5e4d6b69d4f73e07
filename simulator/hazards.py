"""The data-race sanitizer: happens-before with vector clocks, not wall time.

Every queued unit has a vector clock.  Executing an instruction of unit U
increments U's own component (its *epoch*, the count of U's instructions so
far); consuming a token joins the clock the signalling instruction had (a
token also covers every earlier instruction of its unit, which the clock
says by construction); ``sync`` joins all clocks.  Two accesses to the same
location by different units, at least one a write, race unless the earlier
one's epoch is covered by the later one's clock.

Scratchpads are tracked per row (exact).  DRAM is tracked per page of
:data:`PAGE_BYTES` bytes (a coarse map keeps memory small); a page-level
conflict is confirmed byte-exactly against the conflicting instruction's
real 2-D footprint before it is reported, so two units touching different
bytes of one page never raise a false alarm.  The map keeps only the last
writer and each unit's last reader per page, so a race with an *older*
access to the same page that a newer unrelated access has shadowed can be
missed (a false negative, never a false positive).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from tinynpu.simulator.faults import SimFault

PAGE_BYTES = 64
_PAGE_SHIFT = PAGE_BYTES.bit_length() - 1

# (addr, stride, rows, row_bytes) of an instruction's DRAM footprint.
Footprint = tuple[int, int, int, int]


class _Map:
    """Last writer (unit, epoch) and each unit's last read epoch per location."""

    def __init__(self, units: int, size: int) -> None:
        self.w_unit = np.zeros(size, dtype=np.int8)
        self.w_epoch = np.zeros(size, dtype=np.int32)
        self.r_epoch = np.zeros((units, size), dtype=np.int32)

    def unordered_write(self, loc: slice | np.ndarray, clock: np.ndarray) -> int:
        """Position (in ``loc``) of a write the clock does not cover, or -1."""
        late = self.w_epoch[loc] > clock[self.w_unit[loc]]
        return int(np.argmax(late)) if late.any() else -1

    def unordered_reads(self, loc: slice | np.ndarray, clock: np.ndarray) -> tuple[int, int]:
        """(unit, position) of a read the clock does not cover, or (-1, -1)."""
        late = self.r_epoch[:, loc] > clock[:, None]
        if not late.any():
            return -1, -1
        unit, pos = np.unravel_index(int(np.argmax(late)), late.shape)
        return int(unit), int(pos)


class RaceChecker:
    """Vector clocks plus access maps for the scratchpads and DRAM.

    Args:
        units: number of queued units (ids 0..units-1).
        scope_rows: rows of each scratchpad, by scope id.
        dram_bytes: DRAM size.
        describe: instruction index -> ``instruction 5 (pc 0x50, tmm)``.
        footprint: instruction index -> its DRAM footprint (for exact confirmation).
    """

    def __init__(self, units: int, scope_rows: dict[int, int], scope_names: dict[int, str], dram_bytes: int,
                 describe: Callable[[int], str], footprint: Callable[[int], Footprint]) -> None:
        self.units = units
        self.clock = np.zeros((units, units), dtype=np.int64)  # row u: unit u's vector clock
        self.epoch_index: list[list[int]] = [[0] for _ in range(units)]  # epoch -> instruction index
        self.sp = {sid: _Map(units, rows) for sid, rows in scope_rows.items()}
        self.scope_names = scope_names
        self.dram = _Map(units, (dram_bytes + PAGE_BYTES - 1) >> _PAGE_SHIFT)
        self.describe = describe
        self.footprint = footprint

    # --- clocks -------------------------------------------------------------------------------------
    def begin(self, unit: int, index: int) -> None:
        """Instruction ``index`` of ``unit`` starts: a new epoch."""
        self.clock[unit, unit] += 1
        self.epoch_index[unit].append(index)

    def token(self, unit: int) -> np.ndarray:
        """The clock a signal from ``unit``'s current instruction carries."""
        return self.clock[unit].copy()

    def join(self, unit: int, clock: np.ndarray) -> None:
        np.maximum(self.clock[unit], clock, out=self.clock[unit])

    def sync(self) -> None:
        """A barrier: everything before happens before everything after."""
        self.clock[:] = self.clock.max(axis=0)

    # --- accesses -----------------------------------------------------------------------------------
    def sp_access(self, unit: int, index: int, scope: int, r0: int, r1: int, write: bool) -> None:
        m = self.sp[scope]
        loc = slice(r0, r1)
        clock = self.clock[unit]
        pos = m.unordered_write(loc, clock)
        if pos >= 0:
            self._race(index, int(m.w_unit[r0 + pos]), int(m.w_epoch[r0 + pos]), "wrote", write,
                       f"{self.scope_names[scope]} row {r0 + pos}")
        if write:
            other, pos = m.unordered_reads(loc, clock)
            if other >= 0:
                self._race(index, other, int(m.r_epoch[other, r0 + pos]), "read", write,
                           f"{self.scope_names[scope]} row {r0 + pos}")
            m.w_unit[loc] = unit
            m.w_epoch[loc] = clock[unit]
        else:
            m.r_epoch[unit, loc] = clock[unit]

    def dram_access(self, unit: int, index: int, fp: Footprint, write: bool) -> None:
        addr, stride, rows, rb = fp
        starts = addr + stride * np.arange(rows, dtype=np.int64)
        pages = np.unique(np.concatenate((starts >> _PAGE_SHIFT, (starts + rb - 1) >> _PAGE_SHIFT)))
        m = self.dram
        clock = self.clock[unit]
        late = m.w_epoch[pages] > clock[m.w_unit[pages]]
        for pos in np.flatnonzero(late):
            other, epoch = int(m.w_unit[pages[pos]]), int(m.w_epoch[pages[pos]])
            hit = _overlap(fp, self.footprint(self.epoch_index[other][epoch]))
            if hit is not None:
                self._race(index, other, epoch, "wrote", write, f"DRAM byte 0x{hit:x}")
        if write:
            late2 = m.r_epoch[:, pages] > clock[:, None]
            for other, pos in zip(*np.nonzero(late2), strict=False):
                epoch = int(m.r_epoch[other, pages[pos]])
                hit = _overlap(fp, self.footprint(self.epoch_index[int(other)][epoch]))
                if hit is not None:
                    self._race(index, int(other), epoch, "read", write, f"DRAM byte 0x{hit:x}")
            m.w_unit[pages] = unit
            m.w_epoch[pages] = clock[unit]
        else:
            m.r_epoch[unit, pages] = clock[unit]

    def _race(self, index: int, other_unit: int, other_epoch: int, other_did: str, write: bool,
              region: str) -> None:
        other = self.epoch_index[other_unit][other_epoch]
        did = "writes" if write else "reads"
        raise SimFault(
            f"data race: {self.describe(index)} {did} {region}, which {self.describe(other)} {other_did}, "
            "and no chain of tokens or sync orders the two; the result would depend on timing. Add a "
            "signal/wait pair (or a sync) between them.",
            index=index,
        )


def _overlap(a: Footprint, b: Footprint) -> int | None:
    """The lowest DRAM byte both 2-D footprints touch, or None."""

    def byte_set(fp: Footprint) -> np.ndarray:
        addr, stride, rows, rb = fp
        return (addr + stride * np.arange(rows, dtype=np.int64))[:, None] + np.arange(rb, dtype=np.int64)

    common = np.intersect1d(byte_set(a), byte_set(b))
    return int(common[0]) if len(common) else None


__all__ = ["PAGE_BYTES", "Footprint", "RaceChecker"]
