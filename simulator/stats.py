"""Run statistics: the stats contract (what each instruction adds is its isa.yaml ``stats`` class).

Everything that depends only on which instructions ran (instruction mix,
bytes moved, busy cycles, MACs) is computed from the decoded columns with
numpy after the run; cycles and stalls come from the scheduler.

Scratchpad traffic counts what the semantics touch: a load or zero writes
whole rows (zero fill included); a store reads ``cols`` elements per row; a
``tmm`` step reads one A tile and one B tile and writes one acc tile, and
reads it too unless it is the first, overwriting step of a non-accumulating
block; ALU ops read and write their destination rows and also read the rows
of their other accumulator accesses (``vaddrow`` one row); a row reduction
(stats class ``alu_reduce``) reads its rows * n source rows, combines
rows * n * T elements and writes its rows destination rows.  Energy prices
these events, plus MACs, ALU elements and cycles, with the config's energy
table (``energy.py``).
"""

from __future__ import annotations

import array
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.isa import ArchConfig, Instruction, Isa, regions
from tinynpu.isa.encoding import field_column
from tinynpu.isa.energy_model import REQUANTIZE
from tinynpu.simulator.decode import Decoded
from tinynpu.simulator.energy import Energy, Events, energy_of


@dataclass(frozen=True)
class Stats:
    """The result of one run.  ``to_json()`` is the machine-readable contract."""

    cycles: int
    instructions_total: int
    by_mnemonic: dict[str, int]
    busy_cycles: dict[str, int]
    stall_cycles: dict[str, dict[str, int]]
    dram_read_bytes: int
    dram_write_bytes: int
    tensor_traffic: dict[str, dict[str, int]]
    scratchpad: dict[str, dict[str, int]]
    macs: int
    macs_per_cycle: int
    config: str
    timing: bool
    races_checked: bool
    wall_seconds: float
    energy: Energy
    engine: str = "python"  # which simulator core ran: native (core.c) or python
    _mnemonics: tuple[str, ...] = field(default=(), repr=False)
    _units: tuple[str, ...] = field(default=(), repr=False)
    _op: np.ndarray | None = field(default=None, repr=False)
    _unit: np.ndarray | None = field(default=None, repr=False)
    _dispatch: array.array | None = field(default=None, repr=False)
    _start: array.array | None = field(default=None, repr=False)
    _end: array.array | None = field(default=None, repr=False)

    @property
    def utilization(self) -> float:
        return self.macs / (self.cycles * self.macs_per_cycle) if self.cycles else 0.0

    @property
    def timeline(self) -> list[tuple[int, str, str, int, int, int]]:
        """Per executed instruction: (index, unit, mnemonic, dispatch, start, end); empty without timing."""
        if not self.timing or self._op is None or self._dispatch is None:
            return []
        assert self._unit is not None and self._start is not None and self._end is not None
        cols = zip(self._unit.tolist(), self._op.tolist(), self._dispatch, self._start, self._end,
                   strict=True)
        return [(i, self._units[u], self._mnemonics[o], d, s, e) for i, (u, o, d, s, e) in enumerate(cols)]

    def to_json(self) -> dict[str, Any]:
        return {
            "cycles": self.cycles,
            "instructions": {"total": self.instructions_total, "by_mnemonic": dict(self.by_mnemonic)},
            "busy_cycles": dict(self.busy_cycles),
            "stall_cycles": {u: dict(c) for u, c in self.stall_cycles.items()},
            "dram_read_bytes": self.dram_read_bytes,
            "dram_write_bytes": self.dram_write_bytes,
            "tensor_traffic": {k: dict(v) for k, v in self.tensor_traffic.items()},
            "scratchpad": {k: dict(v) for k, v in self.scratchpad.items()},
            "macs": self.macs,
            "utilization": self.utilization,
            "config": self.config,
            "timing": self.timing,
            "races_checked": self.races_checked,
            "wall_seconds": self.wall_seconds,
            "engine": self.engine,
            **self.energy.to_json(),
        }


_STATS_CHUNK = 1 << 16


@dataclass(frozen=True)
class Counts:
    """What a run's stats take from the instructions it executed alone, not from their schedule: the same on
    every run of one loaded program (its instruction mix, bytes, busy cycles, MACs and ALU elements), so a
    machine computes them once per program (:meth:`Machine.run
    <tinynpu.simulator.machine.Machine.run>`); the dicts are copied into each run's :class:`Stats`."""

    executed: int
    by_mnemonic: dict[str, int]
    busy_cycles: dict[str, int]
    dram_read_bytes: int
    dram_write_bytes: int
    tensor_traffic: dict[str, dict[str, int]]
    scratchpad_read: dict[str, int]  # by scope name
    scratchpad_write: dict[str, int]
    macs: int
    alu_elements: dict[str, int]  # by pricing class: an ALU timing class, or requantize (a store's)
    array_busy_cycles: int


def count_program(isa: Isa, cfg: ArchConfig, program: Program, dec: Decoded, executed: int) -> Counts:
    """The :class:`Counts` of a run of ``program`` (decoded ``dec``) that executed its first ``executed``
    instructions."""
    sl = slice(0, executed)
    op = dec.op[sl]
    mnems = tuple(i.mnemonic for i in isa.instructions)
    counts = np.bincount(op, minlength=len(mnems))
    units = tuple(u.name for u in sorted(isa.units, key=lambda u: u.id))
    busy = np.zeros(len(units), dtype=np.int64)
    traffic = {t.name: {"read": 0, "write": 0} for t in program.tensors}
    ts = sorted(program.tensors, key=lambda t: t.addr)
    starts = np.array([t.addr for t in ts], dtype=np.int64)
    ends = np.array([t.addr + t.nbytes for t in ts], dtype=np.int64)
    macs = 0  # every tmm step is a tile x tile x tile MAC block
    alu_elements: dict[str, int] = {}
    rd = {sc.id: 0 for sc in isa.scopes}
    wr = dict(rd)
    plan = dict(dec.plan)
    # In chunks, one opcode at a time, decoding only that opcode's fields: every figure is an exact integer
    # sum, and small temporaries keep the peak memory of a long program's run at its columns.
    for base in range(0, executed, _STATS_CHUNK):
        ch = slice(base, min(base + _STATS_CHUNK, executed))
        busy += np.bincount(dec.unit[ch], weights=dec.occ[ch], minlength=len(units)).astype(np.int64)
        op_ch, lo, hi = dec.op[ch], dec.lo[ch], dec.hi[ch]
        present = np.bincount(op_ch, minlength=len(mnems))
        for ins in isa.instructions:
            if not present[ins.index]:
                continue
            sel = np.flatnonzero(op_ch == ins.index)
            slo, shi = lo[sel], hi[sel]
            v = dict.fromkeys(ins.operands, np.zeros(len(sel), np.int64))
            v.update({field.name: field_column(slo, shi, field) for _, field in plan[ins.index]})
            for acc in ins.accesses if ts else []:
                if not acc.dram:
                    continue
                kind, col = ("write", dec.dram_write[ch][sel]) if acc.write else ("read", dec.dram_read[ch][sel])
                moved = col > 0
                addr = _evaluate(isa, cfg, ins, acc.bounds[0], {name: c[moved] for name, c in v.items()})
                k = np.searchsorted(starts, addr, side="right") - 1
                ok = (k >= 0) & (addr < ends[np.maximum(k, 0)])
                per = np.bincount(k[ok], weights=col[moved][ok], minlength=len(ts))
                for t, value in zip(ts, per.tolist(), strict=False):
                    traffic[t.name][kind] += int(value)
            if ins.stats == "tmm":
                macs += int((v["m"] * v["n"] * v["k"]).sum()) * cfg.tile**3
            _count_alu(alu_elements, ins, _scratchpad(isa, cfg, ins, v, rd, wr))
    names = {sc.id: sc.name for sc in isa.scopes}
    return Counts(executed=executed,
                  by_mnemonic={m: int(c) for m, c in zip(mnems, counts.tolist(), strict=False) if c},
                  busy_cycles={u: int(b) for u, b in zip(units, busy.tolist(), strict=False)},
                  dram_read_bytes=int(dec.dram_read[sl].sum(dtype=np.int64)),
                  dram_write_bytes=int(dec.dram_write[sl].sum(dtype=np.int64)), tensor_traffic=traffic,
                  scratchpad_read={names[sid]: value for sid, value in rd.items()},
                  scratchpad_write={names[sid]: value for sid, value in wr.items()}, macs=macs,
                  alu_elements=alu_elements, array_busy_cycles=_array_busy(isa, units, busy))


def build_stats(isa: Isa, cfg: ArchConfig, program: Program, dec: Decoded, *, executed: int, cycles: int,
                stalls: dict[str, dict[str, int]], timing: bool, races: bool, wall: float, engine: str,
                dispatch: array.array, start: array.array, end: array.array, counts: Counts | None = None,
                energy: Energy | None = None) -> Stats:
    """A run's :class:`Stats`; ``counts``: this program's :func:`count_program` for ``executed``, when the
    caller kept it from an earlier run (else counted here); ``energy``: :func:`run_energy` of these counts and
    ``cycles``, likewise."""
    if counts is None or counts.executed != executed:
        counts, energy = count_program(isa, cfg, program, dec, executed), None
    sl = slice(0, executed)
    if energy is None or energy.events is None or energy.events.cycles != cycles:
        energy = run_energy(isa, cfg, counts, cycles)
    return Stats(
        cycles=cycles,
        instructions_total=executed,
        by_mnemonic=dict(counts.by_mnemonic),
        busy_cycles=dict(counts.busy_cycles),
        stall_cycles=stalls,
        dram_read_bytes=counts.dram_read_bytes,
        dram_write_bytes=counts.dram_write_bytes,
        tensor_traffic={name: dict(t) for name, t in counts.tensor_traffic.items()},
        scratchpad={name: {"read_bytes": counts.scratchpad_read[name], "write_bytes": counts.scratchpad_write[name]}
                    for name in counts.scratchpad_read},
        macs=counts.macs,
        macs_per_cycle=cfg.macs_per_cycle,
        config=cfg.name,
        timing=timing,
        races_checked=races,
        wall_seconds=wall,
        energy=energy,
        engine=engine,
        _mnemonics=_mnemonics(isa),
        _units=_unit_names(isa),
        _op=dec.op[sl],
        _unit=dec.unit[sl],
        _dispatch=dispatch,
        _start=start,
        _end=end,
    )


@functools.cache
def _mnemonics(isa: Isa) -> tuple[str, ...]:
    """The ISA's mnemonics by opcode (every run's stats name them)."""
    return tuple(i.mnemonic for i in isa.instructions)


@functools.cache
def _unit_names(isa: Isa) -> tuple[str, ...]:
    """The ISA's unit names by unit id."""
    return tuple(u.name for u in sorted(isa.units, key=lambda u: u.id))


def run_energy(isa: Isa, cfg: ArchConfig, counts: Counts, cycles: int) -> Energy:
    """The energy of a run that executed what ``counts`` counts in ``cycles``: the same for every run of a
    program that takes as many cycles, so a machine keeps its last one (:meth:`Machine.run
    <tinynpu.simulator.machine.Machine.run>`; pricing it took a tenth of a small program's run in Python)."""
    key = {s.name: s.config_key for s in isa.scopes}
    events = Events(macs=counts.macs, alu_elements=dict(counts.alu_elements),
                    dram_bytes=counts.dram_read_bytes + counts.dram_write_bytes, cycles=cycles,
                    array_busy_cycles=counts.array_busy_cycles,
                    scratchpad_read_bytes={key[n]: v for n, v in counts.scratchpad_read.items()},
                    scratchpad_write_bytes={key[n]: v for n, v in counts.scratchpad_write.items()})
    return energy_of(cfg, events)


def _count_alu(alu_elements: dict[str, int], ins: Instruction, elements: int) -> None:
    """Add the accumulator elements ``ins`` processed under its pricing class: a store's are requantized
    (``requantize``), an ALU instruction's are priced by its timing class (docs/energy.md)."""
    if elements:
        cls = REQUANTIZE if ins.stats == "dma_out" else ins.timing
        alu_elements[cls] = alu_elements.get(cls, 0) + elements


def _array_busy(isa: Isa, units: tuple[str, ...], busy: np.ndarray) -> int:
    """Cycles the MAC array computes: the occupancy of the unit(s) that run tmm."""
    return int(sum(busy[units.index(i.unit)] for i in {i.unit: i for i in isa.instructions
                                                         if i.stats == "tmm"}.values()))


def _evaluate(isa: Isa, cfg: ArchConfig, ins: Instruction, text: str, v: dict[str, np.ndarray]) -> np.ndarray:
    """One of ``ins``'s access expressions over its operand columns ``v`` (one value per instruction)."""
    value = regions.evaluate(isa.region_expr(ins, text), isa.scope_ids, v, tile=cfg.tile,
                             elem_bytes=isa.per_scope(lambda s: cfg.elem_bytes(s.config_key)),
                             scope_rows=isa.per_scope(lambda s: cfg.rows(s.config_key)), vector=True)
    return np.broadcast_to(value, (len(next(iter(v.values()))),)).astype(np.int64)


def _scratchpad(isa: Isa, cfg: ArchConfig, ins: Instruction, v: dict[str, np.ndarray], rd: dict[int, int],
                wr: dict[int, int]) -> int:
    """Add the scratchpad bytes instructions of kind ``ins`` (operand columns ``v``) read and write, by scope
    id, per its stats class (isa.yaml ``stats``), to ``rd`` and ``wr``; return the accumulator elements the
    ALU or a store's requantizer processed."""
    t = cfg.tile
    eb = {s.id: cfg.elem_bytes(s.config_key) for s in isa.scopes}
    row_bytes = {sid: t * b for sid, b in eb.items()}
    acc, a, b = (isa.scope_ids[name] for name in ("acc", "a", "b"))
    if ins.stats == "dma_in":  # whole rows written into the scratchpad its write access names
        n = len(next(iter(v.values())))
        for w in (w for w in ins.accesses if w.write and not w.dram):
            per = _evaluate(isa, cfg, ins, w.bounds[1], v) - _evaluate(isa, cfg, ins, w.bounds[0], v)
            scope = v[w.space] if w.space_operand else np.full(n, isa.scope_ids[w.space])
            for sid in eb:
                wr[sid] += int(per[scope == sid].sum()) * row_bytes[sid]
        return 0
    if ins.stats == "dma_out":
        elements = v["rows"] * v["cols"]
        rd[acc] += int(elements.sum()) * eb[acc]
        return int(elements[(v["narrow"] | v["relu"]) != 0].sum())
    if ins.stats == "tmm":
        steps = v["m"] * v["n"] * v["k"]
        first = np.where(v["accumulate"] != 0, 0, v["m"] * v["n"])
        total = int(steps.sum())
        rd[a] += total * t * row_bytes[a]
        rd[b] += total * t * row_bytes[b]
        wr[acc] += total * t * row_bytes[acc]
        rd[acc] += int((steps - first).sum()) * t * row_bytes[acc]
        return 0
    if ins.stats == "alu_reduce":
        # The unit steps through rows * n source rows, one per cycle (timing class alu_reduce), every one of
        # its T lanes through the adder / comparator tree (lanes past `cols` are masked, not idle), and writes
        # one row per logical row.  Not the access span: the rows between segments are not read.
        sources = int((v["rows"] * v["n"]).sum())
        rd[acc] += sources * row_bytes[acc]
        wr[acc] += int(v["rows"].sum()) * row_bytes[acc]
        return sources * t
    if ins.stats == "alu":  # its destination rows, plus the rows of its other reads
        rows = int(v["rows"].sum())
        extra = sum(int((_evaluate(isa, cfg, ins, r.bounds[1], v) - _evaluate(isa, cfg, ins, r.bounds[0], v)).sum())
                    for r in ins.accesses if not r.write)
        rd[acc] += (rows + extra) * row_bytes[acc]
        wr[acc] += rows * row_bytes[acc]
        return rows * t
    return 0


__all__ = ["Counts", "Stats", "build_stats", "count_program", "run_energy"]
