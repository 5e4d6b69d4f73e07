"""Random valid, correctly synchronized tinynpu programs for differential testing.

Like riscv-dv against an ISS: every instruction gets random operands within
the config's ranges, and the generator adds exactly the synchronization the
ISA requires.  It tracks the footprint (scratchpad rows, DRAM bytes; read or
write) of every instruction since the last ``sync``; when a new instruction
conflicts with one of another unit, it makes the new one wait on a token
from the latest instruction of that unit (in-order retirement makes that
token cover the conflicting one), or inserts a ``sync`` when the channel's
oldest pending token is too old to give that order.  Pending tokens are
drained by the next instruction of the receiving unit, so no wait ever
depends on a later instruction and the program cannot deadlock.

The ALU instructions come from isa.yaml (every instruction of unit ``alu``):
their operands are chosen by field kind, a source row among those the
instruction's ``checks`` accept, and their footprints are evaluated from its
``accesses``, so a new ALU instruction needs no change here.  Sizes follow
the config (the tile edge, columns up to T as far as the ISA's fields reach).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

import numpy as np

from tinynpu.assembler.image import Program, Tensor
from tinynpu.isa import ArchConfig, Instruction, Isa, regions

MEM_BYTES = 1 << 15  # the DRAM window random programs use (one inout tensor)
ROWS_USED = 128  # scratchpad rows random programs touch in each scope


@dataclass
class _Instr:
    mnemonic: str
    fields: dict[str, int]
    unit: int
    reads: set[tuple[str, int]] = field(default_factory=set)   # (space, index): space is a scope or "dram"
    writes: set[tuple[str, int]] = field(default_factory=set)


def _rows(scope: str, first: int, count: int) -> set[tuple[str, int]]:
    return {(scope, r) for r in range(first, first + count)}


def _bytes(addr: int, rows: int, stride: int, nbytes: int) -> set[tuple[str, int]]:
    return {("dram", addr + r * stride + b) for r in range(rows) for b in range(nbytes)}


class _Generator:
    def __init__(self, isa: Isa, cfg: ArchConfig, rng: random.Random) -> None:
        self.isa, self.cfg, self.rng = isa, cfg, rng
        self.tile = cfg.tile
        # Columns per DMA row: up to the tile edge, as far as the ISA's `cols` field reaches.
        self.cols_max = {m: min(cfg.tile, isa.by_mnemonic[m].field_map["cols"].hi) for m in ("load", "store")}
        self.scopes = {s.name: s.id for s in isa.scopes}
        self.units = isa.unit_ids
        self.alu_ops = [i for i in isa.instructions if i.unit == "alu"]

    def _span(self, stride: int, rows: int, nbytes: int, align: int) -> tuple[int, int]:
        span = (rows - 1) * stride + nbytes
        addr = self.rng.randrange(0, (MEM_BYTES - span) // align + 1) * align
        return addr, stride

    def load(self) -> _Instr:
        rng = self.rng
        scope = rng.choice(list(self.scopes))
        eb = self.cfg.elem_bytes({s.name: s.config_key for s in self.isa.scopes}[scope])
        rows, cols = rng.randint(1, 24), rng.randint(1, self.cols_max["load"])
        stride = rng.choice([cols * eb, self.tile * eb, 64, 4 * rng.randint(0, 40)])
        stride -= stride % eb
        addr, stride = self._span(stride, rows, cols * eb, eb)
        sp = rng.randrange(0, ROWS_USED - rows + 1)
        f = {"scope": self.scopes[scope], "sp_row": sp, "dram": addr, "stride": stride, "rows": rows, "cols": cols}
        return _Instr("load", f, self.units["load"], _bytes(addr, rows, stride, cols * eb), _rows(scope, sp, rows))

    def zero(self) -> _Instr:
        scope = self.rng.choice(list(self.scopes))
        rows = self.rng.randint(1, 24)
        sp = self.rng.randrange(0, ROWS_USED - rows + 1)
        return _Instr("zero", {"scope": self.scopes[scope], "sp_row": sp, "rows": rows}, self.units["load"],
                      set(), _rows(scope, sp, rows))

    def store(self) -> _Instr:
        rng = self.rng
        narrow = rng.random() < 0.5
        ob = 1 if narrow else self.cfg.elem_bytes("acc")
        rows, cols = rng.randint(1, 24), rng.randint(1, self.cols_max["store"])
        stride = rng.choice([cols * ob, self.tile * ob, 4 * rng.randint(1, 40)])
        stride -= stride % ob
        addr, stride = self._span(stride, rows, cols * ob, ob)
        sp = rng.randrange(0, ROWS_USED - rows + 1)
        f = {"sp_row": sp, "dram": addr, "stride": stride, "rows": rows, "cols": cols, "narrow": int(narrow),
             "relu": rng.randint(0, 1), "shift": rng.randint(0, 31) if narrow else 0}
        return _Instr("store", f, self.units["store"], _rows("acc", sp, rows), _bytes(addr, rows, stride, cols * ob))

    def tmm(self) -> _Instr:
        rng, t = self.rng, self.tile
        tiles = ROWS_USED // t
        m, n, k = rng.randint(1, 2), rng.randint(1, 2), rng.randint(1, 2)
        acc = rng.randrange(0, tiles - m * n + 1)
        a = rng.randrange(0, tiles - m * k + 1)
        b = rng.randrange(0, tiles - n * k + 1)
        f = {"acc": acc, "a": a, "b": b, "m": m, "n": n, "k": k, "accumulate": rng.randint(0, 1)}
        reads = _rows("a", a * t, m * k * t) | _rows("b", b * t, n * k * t) | _rows("acc", acc * t, m * n * t)
        return _Instr("tmm", f, self.units["tensor"], reads, _rows("acc", acc * t, m * n * t))

    def alu(self) -> _Instr:
        """One of the YAML's ALU instructions, its operands chosen by field kind, its rows from its accesses."""
        ins = self.rng.choice(self.alu_ops)
        for _ in range(64):  # a destination that leaves no legal source (a long reduction span): choose again
            f = self._alu_fields(ins)
            if f is not None:
                break
        else:
            raise ValueError(f"random programs found no legal operands for {ins.mnemonic} in {ROWS_USED} rows")
        reads: set[tuple[str, int]] = set()
        writes: set[tuple[str, int]] = set()
        for acc in ins.accesses:
            if acc.unless is not None and self._eval(ins, acc.unless, f):
                continue
            lo, hi = (self._eval(ins, b, f) for b in acc.bounds)
            (writes if acc.write else reads).update(_rows(acc.space, lo, hi - lo))
        return _Instr(ins.mnemonic, f, self.units["alu"], reads, writes)

    def _alu_fields(self, ins: Instruction) -> dict[str, int] | None:
        """Random operands of ``ins`` passing its checks, or None when its source rows find no room."""
        rng = self.rng
        f: dict[str, int] = {}
        for fld in ins.fields:  # the values first: the rows and the source rows depend on them
            if fld.kind == "shift":
                f[fld.name] = rng.randint(fld.lo, fld.hi)
            elif fld.kind == "imm":
                edge_cases = [0, 1, -1, 3, -7, 127, -128, 65535, fld.hi, fld.lo]
                f[fld.name] = rng.choice([*edge_cases, rng.randint(fld.lo, fld.hi)])
            elif fld.kind == "count" and fld.name != "rows":  # segments (n), columns: small, inside the rows used
                f[fld.name] = rng.randint(max(fld.lo, 1), min(fld.hi_at(self.tile), 3 if fld.name == "n" else 1 << 30))
            elif fld.kind not in ("sp_row", "units", "count"):
                raise ValueError(f"random programs cannot choose {ins.mnemonic}'s {fld.kind} field {fld.name!r}")
        rows_checks = [c for c in ins.checks if c.at == "rows"]  # on the row count alone: a reduction has rows <= T
        f["rows"] = rng.choice([r for r in range(1, 25)
                                if not any(self._eval(ins, c.fault, {**f, "rows": r}) for c in rows_checks)])
        f["dst"] = rng.randrange(0, ROWS_USED - f["rows"] + 1)
        for fld in ins.fields:
            if fld.kind == "sp_row" and fld.name not in f:
                row = self._source_row(ins, f, fld.name)
                if row is None:
                    return None
                f[fld.name] = row
        return f

    def _eval(self, ins: Instruction, text: str, values: dict[str, int]) -> int:
        """An expression of the YAML's accesses or checks for these operand values."""
        cfg = self.cfg
        return int(regions.evaluate(self.isa.region_expr(ins, text), self.isa.scope_ids, values, tile=cfg.tile,
                                    elem_bytes=self.isa.per_scope(lambda s: cfg.elem_bytes(s.config_key)),
                                    scope_rows=self.isa.per_scope(lambda s: cfg.rows(s.config_key))))

    def _source_row(self, ins: Instruction, values: dict[str, int], name: str) -> int | None:
        """A source row whose rows lie outside the destination's (always legal), accepted by the
        instruction's checks, within the rows programs use; None if there is none."""
        def ok(row: int) -> bool:
            trial = {**values, name: row}
            if any(self._eval(ins, chk.fault, trial) for chk in ins.checks):
                return False
            for acc in ins.accesses:
                if acc.write or acc.dram or not re.search(rf"\b{name}\b", acc.bounds[0]):
                    continue
                lo, hi = (self._eval(ins, b, trial) for b in acc.bounds)
                if hi > ROWS_USED or (lo < values["dst"] + values["rows"] and values["dst"] < hi):
                    return False
            return True

        legal = [row for row in range(ROWS_USED) if ok(row)]
        return self.rng.choice(legal) if legal else None


def random_program(isa: Isa, cfg: ArchConfig, seed: int, length: int = 40) -> tuple[Program, dict[str, np.ndarray]]:
    """A random program of about ``length`` instructions and its DRAM input."""
    rng = random.Random(seed)
    gen = _Generator(isa, cfg, rng)
    nq = len(isa.queued_units)
    body: list[_Instr | None] = []          # None = sync
    since_sync: list[int] = []              # indices into body of instructions since the last sync
    last_of_unit: dict[int, int] = {}       # latest body index of each unit
    pending: list[list[list[int]]] = [[[] for _ in range(nq)] for _ in range(nq)]  # [src][dst] -> source indices
    # Clear every scratchpad row the program may read, then order everything after it.
    for scope_id in (s.id for s in isa.scopes):
        body.append(_Instr("zero", {"scope": scope_id, "sp_row": 0, "rows": ROWS_USED}, gen.units["load"]))
    body.append(None)
    kinds = [gen.load, gen.load, gen.zero, gen.store, gen.store, gen.tmm, gen.tmm, gen.alu, gen.alu]
    for _ in range(length):
        if rng.random() < 0.04:
            body.append(None)
            since_sync.clear()
            continue
        ins = rng.choice(kinds)()
        u = ins.unit
        waits: set[int] = set()
        need_sync = False
        for j in since_sync:
            other = body[j]
            assert other is not None
            if other.unit == u:
                continue
            if (ins.writes & (other.reads | other.writes)) or (ins.reads & other.writes):
                v = other.unit
                queue = pending[v][u]
                src = last_of_unit[v]
                src_ins = body[src]
                assert src_ins is not None
                if queue and queue[0] < j:
                    need_sync = True  # the oldest token on v -> u does not cover j
                elif not queue and src_ins.fields.get("signal", 0) >> u & 1:
                    need_sync = True  # the latest v instruction already signalled u once
                elif not queue:
                    src_ins.fields["signal"] = src_ins.fields.get("signal", 0) | (1 << u)
                    queue.append(src)
                waits.add(v)
        if need_sync:
            body.append(None)
            since_sync.clear()
            waits.clear()
        # Drain one pending token of every channel into u (harmless extra order).
        for v in range(nq):
            if pending[v][u]:
                waits.add(v)
        for v in waits:
            pending[v][u].pop(0)
        if waits:
            ins.fields["wait"] = sum(1 << v for v in waits)
        body.append(ins)
        last_of_unit[u] = len(body) - 1
        since_sync.append(len(body) - 1)
    body.append(None)  # halt is ordered anyway; a sync first leaves leftover tokens harmless
    words = [isa.encode("sync", {}) if ins is None else isa.encode(ins.mnemonic, ins.fields) for ins in body]
    words.append(isa.encode("halt", {}))
    program = Program.build(isa, cfg, words, [Tensor("mem", 0, (MEM_BYTES,), "int8", "inout")])
    data = np.random.default_rng(seed).integers(-128, 128, MEM_BYTES, dtype=np.int8)
    return program, {"mem": data}
