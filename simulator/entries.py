"""What the scheduler holds per instruction: an :class:`Entry`, made a chunk of the program at a time."""

from __future__ import annotations

from tinynpu.simulator.decode import Decoded

CHUNK = 1 << 12  # instructions per chunk of entries


class Entry:
    """One instruction as the scheduler sees it: its decoded fields.

    A class with ``__slots__``: several hundred thousand are made per run, and a slot is read as fast as
    a list item (the timing model's hot path reads them per instruction).  What scheduling learns of an
    instruction lives in the scheduler (its dispatch cycle in the timeline's column, its ready cycle
    while it heads its unit's queue), so making one stores only what the decoder gave.
    """

    __slots__ = ("beats", "index", "lat", "occ", "op", "operands", "signal", "unit", "wait")

    def __init__(self, index: int, op: int, unit: int, wait: int, signal: int, occ: int, lat: int, beats: int,
                 operands: list[int]) -> None:
        self.index = index  # program position
        self.op = op  # opcode index (isa.instructions)
        self.unit = unit
        self.wait = wait  # bit mask of the units whose tokens it consumes
        self.signal = signal  # bit mask of the units it signals
        self.occ = occ  # cycles its unit stays busy
        self.lat = lat  # cycles from start to end
        self.beats = beats  # DRAM-port cycles (0: does not use the port)
        self.operands = operands  # in the instruction's operand order


class EntryChunks:
    """Per-instruction entries built in chunks, so the whole program is never held as Python objects."""

    def __init__(self, dec: Decoded) -> None:
        self.dec = dec

    def get(self, base: int) -> list[Entry]:
        """The entries of instructions ``base`` to ``base + CHUNK`` (or the last one)."""
        d = self.dec
        sl = slice(base, min(base + CHUNK, d.n))
        return list(map(Entry, range(base, sl.stop), d.op[sl].tolist(), d.unit[sl].tolist(), d.wait[sl].tolist(),
                        d.signal[sl].tolist(), d.occ[sl].tolist(), d.lat[sl].tolist(), d.beats[sl].tolist(),
                        d.values(sl).tolist()))


__all__ = ["CHUNK", "Entry", "EntryChunks"]
