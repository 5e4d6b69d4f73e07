"""Decode a whole program once, vectorized, and check every static fault up front.

All operands of a tinynpu instruction are immediates, so the scratchpad and
DRAM extents, alignment, and the timing-class occupancy and latency of every
instruction are known before the run.  :func:`decode_program` computes them
for all instructions at once with numpy (one column per quantity) and
raises the fault of the *first* offending instruction that would be
dispatched (instructions after the first ``halt`` are never dispatched, so
they are decoded but not checked).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tinynpu.errors import SpecError
from tinynpu.isa import ArchConfig, Instruction, Isa, regions
from tinynpu.isa.encoding import field_column, split
from tinynpu.isa.spec import Access, Check, Field
from tinynpu.simulator.faults import SimFault, where
from tinynpu.simulator.semantics import SEMANTICS

_MASK64 = (1 << 64) - 1


#: Per opcode index, the ``(operand column, field)`` of each operand field.
Plan = tuple[tuple[int, tuple[tuple[int, Field], ...]], ...]


@dataclass(frozen=True)
class Decoded:
    """Per-instruction columns (numpy arrays of length ``n``).

    Attributes:
        n: number of words in the program.
        n_exec: instructions that will be dispatched (up to and including the first halt).
        op: index into ``isa.instructions``.
        unit: unit id.
        wait, signal: token masks (0 for control instructions).
        lo, hi: the words' low and high 64 bits (operands are extracted from them per slice by
            :meth:`values`: two uint64 columns are smaller than a column per operand).
        occ, lat: timing-class occupancy and latency.
        beats: DRAM-port beats (0 for instructions that do not use the port).
        dram_read, dram_write: DRAM bytes moved.
        plan: per opcode, the ``(operand column, field)`` of each operand field.
        width: operand columns (the most operands any instruction has).
        derived: facts its users derive from the columns once per decoding instead of once per run (the
            native core's fixed run fields); a decoding made by ``replace`` starts with none.
    """

    n: int
    n_exec: int
    op: np.ndarray
    unit: np.ndarray
    wait: np.ndarray
    signal: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    occ: np.ndarray
    lat: np.ndarray
    beats: np.ndarray
    dram_read: np.ndarray
    dram_write: np.ndarray
    plan: Plan
    width: int
    derived: dict[Any, Any] = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    def values(self, sl: slice) -> np.ndarray:
        """Operands of instructions ``sl`` as ``(len, width)`` int64, in each instruction's operand order.

        Signed fields are sign-extended; instructions that do not decode get zeros.
        """
        op = self.op[sl]
        lo, hi = self.lo[sl], self.hi[sl]
        x = np.zeros((len(op), self.width), dtype=np.int64)
        for index, fields in self.plan:
            sel = np.flatnonzero(op == index)
            if not len(sel):
                continue
            slo, shi = lo[sel], hi[sel]
            for col, field in fields:
                x[sel, col] = field_column(slo, shi, field)
        return x


def _ceil_div(a: np.ndarray, b: int) -> np.ndarray:
    """intmath.ceil_div over a column of non-negative counts."""
    return (a + (b - 1)) // b


_DECODE_CHUNK = 1 << 14  # instructions decoded per numpy pass: small temporaries keep the heap compact


@dataclass(frozen=True)
class _IsaTables:
    """What decoding needs of an ISA that no program changes (built once per ISA, not per program: a
    relocated program's few changed words are decoded per load, and these were most of that)."""

    opcode: np.ndarray  # the low byte of a word -> its instruction's index (-1: none)
    unit_of: np.ndarray  # instruction index -> unit id
    halt: int
    plan: Plan
    #: per instruction index, the operands each of its ``checks`` and each of its ``accesses`` reads
    rule_operands: tuple[tuple[frozenset[str], ...], ...]
    access_operands: tuple[tuple[frozenset[str], ...], ...]


@functools.cache
def _tables(isa: Isa) -> _IsaTables:
    """``isa``'s decoding tables.

    Raises:
        SpecError: an instruction of a queued unit has no semantics in the simulator.
    """
    units = {u.name: u for u in isa.units}
    missing = [i.mnemonic for i in isa.instructions if units[i.unit].queue and i.mnemonic not in SEMANTICS]
    if missing:
        raise SpecError(f"{isa.source}: the simulator has no semantics for instruction(s) {', '.join(missing)} "
                        "(a @semantics method of simulator/semantics.py's State).")
    opcode = np.full(256, -1, dtype=np.int64)
    for instr in isa.instructions:
        opcode[instr.match & 0xFF] = instr.index
    plan = tuple((ins.index, tuple((ins.operands.index(f.name), f) for f in ins.fields if f.name in ins.operands))
                 for ins in isa.instructions)

    def reads(ins: Instruction, texts: Sequence[str]) -> frozenset[str]:
        return frozenset(name for text in texts for name in regions.names(isa.region_expr(ins, text)))

    rules = tuple(tuple(reads(ins, (rule.fault,)) for rule in ins.checks) for ins in isa.instructions)
    accesses = tuple(tuple(reads(ins, a.bounds) | ({a.space} if a.space_operand else frozenset())
                           for a in ins.accesses) for ins in isa.instructions)
    return _IsaTables(opcode=opcode, unit_of=np.array([isa.unit_ids[i.unit] for i in isa.instructions],
                                                      dtype=np.int64),
                      halt=isa.by_mnemonic["halt"].index, plan=plan, rule_operands=rules, access_operands=accesses)


def operand_plan(isa: Isa) -> Plan:
    """``isa``'s :attr:`Decoded.plan` (one object per ISA: every decoding of its programs shares it)."""
    return _tables(isa).plan


#: Per instruction index, the fields that may differ from a decoding whose checks they passed (see
#: :func:`decode_like`); None: every field is new.
ChangedFields = dict[int, frozenset[str]] | None


def decode_program(isa: Isa, cfg: ArchConfig, words: Sequence[int],
                   columns: tuple[np.ndarray, np.ndarray] | None = None, changed: ChangedFields = None) -> Decoded:
    """Decode ``words`` and check them statically, in chunks so temporaries stay small.

    ``columns``: the words' low and high 64-bit columns (:attr:`Program.columns
    <tinynpu.assembler.image.Program.columns>`), when the caller has them: then ``words`` is not read, and
    the decoding keeps them as its own ``lo`` and ``hi`` (not copied: they must not change afterwards).
    ``changed``: only these fields of each instruction are range-checked, and only the static checks that
    read one of them are evaluated (the others passed before, on the same values: :func:`decode_like`).

    Raises:
        SimFault: an undecodable word, or an instruction whose operands are out
            of range, misaligned or not allowed in this config.
    """
    tables = _tables(isa)
    n = len(columns[0]) if columns is not None else len(words)
    # Narrow columns keep a 786K-instruction program small (occupancy <= latency, checked below to
    # fit int32); sums are taken in int64 by numpy.
    out: dict[str, np.ndarray] = {
        "op": np.zeros(n, np.int16), "unit": np.zeros(n, np.int8), "wait": np.zeros(n, np.int8),
        "signal": np.zeros(n, np.int8), "occ": np.zeros(n, np.int32), "lat": np.zeros(n, np.int32),
        "beats": np.zeros(n, np.int32), "dram_read": np.zeros(n, np.int32), "dram_write": np.zeros(n, np.int32),
    }
    # The words' columns are the decoding's own, shared with the caller, not copied (a program keeps its
    # columns: a copy was 16 bytes a word, 13 MB of a naive 1024^3 program's peak memory).
    lo_all, hi_all = columns if columns is not None else split(words)
    out["lo"], out["hi"] = np.ascontiguousarray(lo_all, np.uint64), np.ascontiguousarray(hi_all, np.uint64)
    n_exec = n
    for base in range(0, n, _DECODE_CHUNK):
        end = min(base + _DECODE_CHUNK, n)
        lo, hi = out["lo"][base:end], out["hi"][base:end]
        checked = n_exec == n  # chunks after the first halt are never dispatched: not checked
        part, halt_at = _decode_chunk(isa, cfg, tables, lo, hi, base, checked, changed)
        if end > base and int(part["lat"].max()) > np.iinfo(out["lat"].dtype).max:
            raise SpecError(f"{isa.source}: config {cfg.name!r} gives an instruction of this program a latency "
                            f"of {int(part['lat'].max())} cycles, beyond the simulator's int32 columns.")
        for key, arr in part.items():
            out[key][base:end] = arr
        if checked and halt_at >= 0:
            n_exec = base + halt_at + 1
    return Decoded(n=n, n_exec=n_exec, plan=tables.plan, width=isa.max_operands, **out)


#: The per-instruction columns of :class:`Decoded` (the rest describes the whole program).
_COLUMNS = ("op", "unit", "wait", "signal", "lo", "hi", "occ", "lat", "beats", "dram_read", "dram_write")


def decode_like(isa: Isa, cfg: ArchConfig, words: Sequence[int], prior: Decoded,
                columns: tuple[np.ndarray, np.ndarray] | None = None) -> Decoded:
    """:func:`decode_program` of ``words``, computed from ``prior``, the decoding of a program of the same
    length that differs from ``words`` in few words (a copy relocated to other DRAM addresses).

    Only the words that differ are decoded and checked; every other column entry is ``prior``'s, which a
    word's decoding alone determines.  Where that does not hold (a changed word is or was a ``halt``, which
    moves the end of the checked instructions) or a changed word faults (the fault's index and whether it is
    reached need the whole program), the whole program is decoded, so the result and every fault are exactly
    :func:`decode_program`'s.  ``columns``: as :func:`decode_program`'s.
    """
    lo, hi = columns if columns is not None else split(words)
    if len(lo) != prior.n:
        return decode_program(isa, cfg, words, (lo, hi))
    changed = np.flatnonzero((lo != prior.lo) | (hi != prior.hi))
    if not len(changed):
        return prior
    tables = _tables(isa)
    halt = tables.halt
    clo, chi = lo[changed], hi[changed]
    fields = _changed_fields(isa, tables, clo, chi, prior.op[changed], prior.lo[changed], prior.hi[changed])
    try:
        part = decode_program(isa, cfg, (), (clo, chi), fields)
    except SimFault:
        return decode_program(isa, cfg, words, (lo, hi))
    if bool((part.op == halt).any()) or bool((prior.op[changed] == halt).any()):
        return decode_program(isa, cfg, words, (lo, hi))
    merged = {name: getattr(prior, name).copy() for name in _COLUMNS}
    for name, column in merged.items():
        column[changed] = getattr(part, name)
    return replace(prior, **merged)


def _changed_fields(isa: Isa, tables: _IsaTables, lo: np.ndarray, hi: np.ndarray, prior_op: np.ndarray,
                    prior_lo: np.ndarray, prior_hi: np.ndarray) -> ChangedFields:
    """Per instruction, the fields whose bits differ in some of words ``lo``/``hi`` from their prior
    versions; None where a word's opcode changed (it is decoded as new).

    A word whose opcode is the same keeps every other field's value, and the prior decoding checked
    those values (the same ISA and config): a relocation changes a load's or store's address and stride,
    so only the static checks that read them are evaluated again, not every access and rule of the opcode.
    """
    op = tables.opcode[(lo & np.uint64(0xFF)).astype(np.int64)]
    if not np.array_equal(op, prior_op):
        return None
    out: dict[int, frozenset[str]] = {}
    for instr in _present(isa, op):
        sel = op == instr.index
        bits = (int(np.bitwise_or.reduce(hi[sel] ^ prior_hi[sel])) << 64) | int(
            np.bitwise_or.reduce(lo[sel] ^ prior_lo[sel]))
        out[instr.index] = frozenset(f.name for f in instr.fields if bits >> f.lsb & ((1 << f.width) - 1))
    return out


def _present(isa: Isa, op: np.ndarray) -> list[Instruction]:
    """The instructions whose opcodes occur in ``op`` (-1: no opcode): the per-opcode passes below visit only
    these, so decoding a short program (or a relocated program's changed words) does not pay for every opcode
    of the ISA."""
    counts = np.bincount(op[op >= 0].astype(np.int64), minlength=len(isa.instructions))  # not np.unique: it
    return [isa.instructions[int(i)] for i in np.flatnonzero(counts)]  # imports numpy.ma, 50 ms, on first use


def _decode_chunk(isa: Isa, cfg: ArchConfig, tables: _IsaTables, lo: np.ndarray, hi: np.ndarray, base: int,
                  checked: bool, changed: ChangedFields) -> tuple[dict[str, np.ndarray], int]:
    """Columns of one chunk (its words' low and high halves) and the chunk-local index of its first halt
    (-1 if none)."""
    n = len(lo)
    wb = isa.word_bytes
    op = tables.opcode[(lo & np.uint64(0xFF)).astype(np.int64)]
    ok = op >= 0
    present = _present(isa, op)
    for instr in present:
        sel = op == instr.index
        mlo, mhi = np.uint64(instr.mask & _MASK64), np.uint64(instr.mask >> 64)
        tlo, thi = np.uint64(instr.match & _MASK64), np.uint64(instr.match >> 64)
        ok &= ~sel | (((lo & mlo) == tlo) & ((hi & mhi) == thi))
    halts = np.flatnonzero(op == tables.halt)
    halt_at = int(halts[0]) if len(halts) else -1
    n_check = (halt_at + 1 if halt_at >= 0 else n) if checked else 0
    operands = np.zeros((n, isa.max_operands), dtype=np.int64)
    wait = np.zeros(n, dtype=np.int64)
    signal = np.zeros(n, dtype=np.int64)
    for instr in present:
        sel = np.flatnonzero(op == instr.index)
        new = changed[instr.index] if changed is not None else None
        for field in instr.fields:
            vals = field_column(lo[sel], hi[sel], field)
            if new is None or field.name in new:
                ok[sel] &= (vals >= field.lo) & (vals <= field.hi_at(cfg.tile))
            if field.name == "wait":
                wait[sel] = vals
            elif field.name == "signal":
                signal[sel] = vals
            else:
                operands[sel, instr.operands.index(field.name)] = vals
    bad = np.flatnonzero(~ok[:n_check])
    if len(bad):
        i = int(bad[0])
        try:
            instr, values = isa.decode((int(hi[i]) << 64) | int(lo[i]))
            reason = "the word does not decode"
            for field in instr.fields:
                if values[field.name] > field.hi_at(cfg.tile):
                    reason = (f"{instr.mnemonic} field {field.name!r} holds {values[field.name]}, above the tile "
                              f"edge {cfg.tile} of config {cfg.name!r}")
        except SpecError as exc:
            reason = exc.message
        raise SimFault(f"instruction {base + i} (pc 0x{(base + i) * wb:x}): undecodable word: {reason}",
                       index=base + i)
    unit = tables.unit_of[np.maximum(op, 0)]
    cols = _Columns(isa, cfg, op, operands, n)
    _static_checks(isa, cfg, cols, unit, wait, signal, n_check, base, (tables, changed))
    part = {"op": op, "unit": unit, "wait": wait, "signal": signal,
            "occ": cols.occ, "lat": cols.lat, "beats": cols.beats, "dram_read": cols.dram_read,
            "dram_write": cols.dram_write}
    return part, halt_at


def _alu_cycles(isa: Isa, cfg: ArchConfig, instr: Instruction, v: dict[str, np.ndarray]) -> np.ndarray:
    """Occupancy (= latency) of the ALU's row-per-cycle classes: the rows it steps through, then its latency."""
    steps = v["rows"]
    if instr.timing == "alu_reduce":  # one source row (a segment of a logical row) per cycle
        steps = v["rows"] * v["n"]
    elif instr.timing == "alu_lut":  # the table's rows (its source rows in `accesses`) into the lookup register first
        read = next(a for a in instr.accesses if not a.write)
        lo, hi = (regions.evaluate(isa.region_expr(instr, b), isa.scope_ids, v, tile=cfg.tile, vector=True,
                                   elem_bytes=isa.per_scope(lambda s: cfg.elem_bytes(s.config_key)),
                                   scope_rows=isa.per_scope(lambda s: cfg.rows(s.config_key)))
                  for b in read.bounds)
        steps = v["rows"] + (hi - lo)
    return _ceil_div(steps, cfg.alu_rows_per_cycle) + cfg.alu_latency_cycles


class _Columns:
    """Timing and traffic columns, computed per instruction class."""

    def __init__(self, isa: Isa, cfg: ArchConfig, op: np.ndarray, x: np.ndarray, n: int) -> None:
        self.op, self.x, self.isa, self.cfg = op, x, isa, cfg
        self.occ = np.zeros(n, dtype=np.int64)
        self.lat = np.zeros(n, dtype=np.int64)
        self.beats = np.zeros(n, dtype=np.int32)
        self.dram_read = np.zeros(n, dtype=np.int32)
        self.dram_write = np.zeros(n, dtype=np.int32)
        bpc, dlat = cfg.dram_bytes_per_cycle, cfg.dram_latency_cycles
        scope_eb = np.array([cfg.elem_bytes(isa.scope_by_id[i].config_key) for i in sorted(isa.scope_by_id)])
        acc_eb = cfg.elem_bytes("acc")
        for instr in _present(isa, op):
            sel = op == instr.index
            v = self.args(instr.mnemonic, sel)
            cls = instr.timing
            if cls == "dma_load":
                eb = scope_eb[v["scope"]]
                beats = v["rows"] * _ceil_div(v["cols"] * eb, bpc)
                self.occ[sel], self.lat[sel], self.beats[sel] = beats, beats + dlat, beats
                self.dram_read[sel] = v["rows"] * v["cols"] * eb
            elif cls == "dma_zero":
                self.occ[sel] = self.lat[sel] = v["rows"]
            elif cls == "dma_store":
                ob = np.where(v["narrow"] != 0, 1, acc_eb)
                beats = v["rows"] * _ceil_div(v["cols"] * ob, bpc)
                self.occ[sel], self.lat[sel], self.beats[sel] = beats, beats + dlat, beats
                self.dram_write[sel] = v["rows"] * v["cols"] * ob
            elif cls == "tmm":
                steps = v["m"] * v["n"] * v["k"]
                self.occ[sel] = steps * cfg.tmm_interval_cycles
                self.lat[sel] = steps * cfg.tmm_interval_cycles + cfg.tmm_latency_cycles
            elif cls in ("alu", "alu_reduce", "alu_lut"):
                self.occ[sel] = self.lat[sel] = _alu_cycles(isa, cfg, instr, v)
            elif cls in ("alu_recip", "alu_rsqrt"):  # a sequential unit: a fixed count per row, in isa.yaml
                per_row = isa.timing_class[cls].cycles_per_row
                if per_row is None:
                    raise SpecError(f"{isa.source}: timing class {cls!r} needs its cycles_per_row.")
                self.occ[sel] = self.lat[sel] = v["rows"] * per_row + cfg.alu_latency_cycles
            elif cls != "control":
                raise SpecError(f"{isa.source}: the simulator does not implement timing class {cls!r}.")

    def args(self, mnemonic: str, sel: np.ndarray) -> dict[str, np.ndarray]:
        return {name: self.x[sel, j] for j, name in enumerate(self.isa.by_mnemonic[mnemonic].operands)}


def _static_checks(isa: Isa, cfg: ArchConfig, cols: _Columns, unit: np.ndarray, wait: np.ndarray,
                   signal: np.ndarray, n_exec: int, base: int, known: tuple[_IsaTables, ChangedFields]) -> None:
    """Raise the fault of the lowest-index instruction (below ``n_exec``) that breaks a static rule.

    Indices are chunk-local; ``base`` turns them into program indices for the message.  ``known``: the
    ISA's tables and the fields that changed since a checked decoding (None: all), so a rule or access
    that reads none of them is not evaluated again.
    """
    tables, changed = known
    first: list[tuple[int, str]] = []
    tile = cfg.tile

    def check(sel_idx: np.ndarray, bad: np.ndarray, message: Callable[[int], str]) -> None:
        hits = sel_idx[bad & (sel_idx < n_exec)]
        if len(hits):
            first.append((int(hits[0]), message(int(hits[0]))))

    elem_bytes = isa.per_scope(lambda s: cfg.elem_bytes(s.config_key))
    scope_rows = isa.per_scope(lambda s: cfg.rows(s.config_key))

    def expr(ins: Instruction, text: str, values: dict[str, Any], vector: bool = False) -> Any:
        return regions.evaluate(isa.region_expr(ins, text), isa.scope_ids, values, tile=tile, vector=vector,
                                elem_bytes=elem_bytes, scope_rows=scope_rows)

    x = cols.x
    for instr in _present(isa, cols.op[:n_exec]):
        idx = np.flatnonzero(cols.op[:n_exec] == instr.index)
        v = {name: x[idx, j] for j, name in enumerate(instr.operands)}
        new = changed[instr.index] if changed is not None else None

        def fresh(names: Iterable[str], _new: frozenset[str] | None = new) -> bool:
            return _new is None or not _new.isdisjoint(names)

        if "wait" in instr.field_map and fresh(("wait", "signal")):
            me = 1 << unit[idx]
            check(idx, ((wait[idx] | signal[idx]) & me) != 0,
                  lambda i: f"a unit may neither wait on nor signal itself (wait=0b{int(wait[i]):b}, "
                            f"signal=0b{int(signal[i]):b}, unit {isa.units[int(unit[i])].name})")
        if instr.integer_only and not cfg.is_integer and new is None:
            check(idx, np.ones(len(idx), dtype=bool),
                  lambda i: f"{isa.instructions[int(cols.op[i])].mnemonic} is for integer configs only "
                            f"(config {cfg.name!r} is {cfg.acc_dtype})")
        for rule, reads in zip(instr.checks, tables.rule_operands[instr.index], strict=True):  # isa.yaml `checks`
            if (rule.integer_only and cfg.is_integer) or not fresh(reads):
                continue

            def message(i: int, _rule: Check = rule, _ins: Instruction = instr) -> str:
                values = {n: int(x[i, j]) for j, n in enumerate(_ins.operands)}
                return _rule.explain({f: expr(_ins, f, values) for f in _rule.fields}, config=cfg.name,
                                     acc_dtype=cfg.acc_dtype)

            check(idx, np.asarray(expr(instr, rule.fault, v, vector=True), dtype=bool), message)
        # isa.yaml `accesses`: each region lies inside its scratchpad or DRAM
        for access, reads in zip(instr.accesses, tables.access_operands[instr.index], strict=True):
            if not fresh(reads):
                continue
            bounds = [np.broadcast_to(np.asarray(expr(instr, b, v, vector=True), dtype=np.int64), idx.shape)
                      for b in access.bounds]
            if access.dram:  # a row of one element (cols=1) is the element size
                one = {**v, "cols": np.ones(len(idx), dtype=np.int64)}
                elem = np.broadcast_to(np.asarray(expr(instr, access.bounds[3], one, vector=True)), idx.shape)
                _dram_checks(check, cfg, idx, bounds, elem, "writes" if access.write else "reads")
            else:
                _scratchpad_checks(check, isa, cfg, instr, access, idx, v, bounds)
    if first:  # the lowest index; for one instruction, the first check above
        i, reason = min(first, key=lambda hit: hit[0])
        mnem = isa.instructions[int(cols.op[i])].mnemonic
        raise SimFault(f"{where(base + i, mnem, isa.word_bytes)}: {reason}.", index=base + i)


def _scratchpad_checks(check: Callable[..., None], isa: Isa, cfg: ArchConfig, instr: Instruction, access: Access,
                       idx: np.ndarray, v: dict[str, np.ndarray], bounds: list[np.ndarray]) -> None:
    """Rows ``[lo, hi)`` of ``access`` lie inside its scope; the message names the operand that places them."""
    lo, hi = bounds
    rows_of = isa.per_scope(lambda s: cfg.rows(s.config_key))
    scope_id = v[access.space] if access.space_operand else np.full(len(idx), isa.scope_ids[access.space])
    capacity = np.asarray(rows_of)[scope_id]
    base = regions.names(isa.region_expr(instr, access.bounds[0]))
    where_from = instr.field_map[base[0]] if base else None
    tiles = where_from is not None and where_from.kind == "sp_tile"

    def message(i: int) -> str:
        at = np.searchsorted(idx, i)
        first, end, scope = int(lo[at]), int(hi[at]), isa.scope_by_id[int(scope_id[at])].name
        rows = f"row {first} is" if end - first == 1 else f"rows {first}..{end - 1} are"
        if tiles:
            rows = f"tiles {first // cfg.tile}..{end // cfg.tile - 1} (rows {first}..{end - 1}) are"
        who = f"{where_from.operand or where_from.name}: " if where_from is not None else ""
        return f"{who}{scope} {rows} out of range ({scope} has {int(capacity[at])} rows)"

    check(idx, hi > capacity, message)


def _dram_checks(check: Callable[..., None], cfg: ArchConfig, idx: np.ndarray, bounds: list[np.ndarray],
                 eb: np.ndarray, verb: str) -> None:
    """The footprint ``(addr, stride, rows, row_bytes)`` is aligned to its element size ``eb`` and inside DRAM."""
    addr, stride, rows, row_bytes = bounds
    check(idx, (addr % eb) != 0,
          lambda i: f"DRAM address 0x{int(addr[np.searchsorted(idx, i)]):x} is not aligned to the "
                    f"{int(eb[np.searchsorted(idx, i)])}-byte element size")
    check(idx, (rows > 1) & ((stride % eb) != 0),
          lambda i: f"DRAM stride {int(stride[np.searchsorted(idx, i)])} is not a multiple of the "
                    f"{int(eb[np.searchsorted(idx, i)])}-byte element size")
    end = addr + (rows - 1) * stride + row_bytes
    check(idx, end > cfg.dram_bytes,
          lambda i: f"it {verb} DRAM bytes 0x{int(addr[np.searchsorted(idx, i)]):x}.."
                    f"0x{int(end[np.searchsorted(idx, i)]) - 1:x}, "
                    f"beyond the {cfg.dram_bytes} bytes of DRAM")


__all__ = ["Decoded", "Plan", "decode_like", "decode_program", "operand_plan"]
