"""The instruction emitter every lowering writes programs through.

The :class:`Emitter` records instructions with the scratchpad rows and DRAM
bytes they read and write (each instruction's ``accesses`` in ``isa.yaml``,
evaluated by :mod:`tinynpu.isa.footprints`, the expressions the race checker
uses), derives every cross-unit dependency (read-after-write,
write-after-read, write-after-write) and turns them into the ISA's tokens
(``wait``/``signal`` masks) when the program is finished.  Producers
therefore never reason about tokens: they only emit in a sensible program
order.  :class:`Columns` is the same for a whole loop nest at once, as numpy
columns (:mod:`tinynpu.compiler.lower_columns`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynpu.compiler.comments import Comments
from tinynpu.compiler.tokens import Accesses, tokens
from tinynpu.errors import SpecError, UsageError
from tinynpu.intmath import ceil_div
from tinynpu.isa import ArchConfig, Instruction, Isa, encoding
from tinynpu.isa.footprints import Footprints, RegionColumns
from tinynpu.isa.records import DRAM_SPACE


@dataclass
class Op:
    """One instruction emitted by a call (:meth:`Emitter.load` and its siblings).

    Attributes:
        mnemonic: ISA mnemonic.
        fields: Field values except ``wait``/``signal``.
        unit: Unit name that executes it.
        comment: Text shown next to it in the assembly listing.
        deps: Instructions it must wait for beyond those its accesses imply.
        access: Scratchpad accesses: (scope, first row, rows, whether it writes).
        dram: The DRAM byte span (first, end) it reads or writes, if any.
        dram_write: Whether it writes that span (a ``store``) rather than reads it (a ``load``).
    """

    mnemonic: str
    fields: dict[str, int]
    unit: str
    comment: str = ""
    deps: set[int] = field(default_factory=set)
    access: tuple[tuple[str, int, int, bool], ...] = ()
    dram: tuple[int, int] | None = None
    dram_write: bool = False




@dataclass(frozen=True)
class Columns:
    """Instructions of one mnemonic given as columns, for :meth:`Emitter.extend`.

    Attributes:
        mnemonic: ISA mnemonic.
        order: Each instruction's position among all instructions of the same ``extend`` call.
        fields: Field name -> one value per instruction, or one value for all (not ``wait``/``signal``).
            What the instructions read and write is derived from these and the ISA's ``accesses``
            (the caller does not repeat it).
        comment: The listing comment, a ``str.format`` template ...
        comment_args: ... filled with these integers, one array per placeholder.
    """

    mnemonic: str
    order: np.ndarray
    fields: Mapping[str, np.ndarray | int]
    comment: str = ""
    comment_args: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class _Run:
    base: int  # index of the run's first instruction
    segment: int
    columns: tuple[Columns, ...]
    regions: tuple[tuple[RegionColumns, ...], ...]  # per column: its isa.yaml accesses, evaluated


def _encode_error(instr: Instruction, fields: dict[str, int], tile: int) -> str | None:
    """Why an instruction with ``fields`` does not encode (the one-word encoder's message), or None."""
    try:
        encoding.encode(instr, fields, tile)
    except SpecError as exc:
        return exc.message
    return None


class Emitter:
    """Collects instructions and derives their synchronization tokens.

    Instructions come one call at a time (:meth:`load`, :meth:`tmm`, ...) or
    as columns of many at once (:meth:`extend`); either way the emitter
    records what each reads and writes, and :meth:`finish` derives every
    token from those records in one vectorized pass
    (:mod:`tinynpu.compiler.tokens`): scratchpads per granule of
    ``cfg.tile`` rows, DRAM per byte span of each ``load``/``store``.

    Args:
        isa: The loaded ISA (encodings, unit ids).
        cfg: The architecture config (scratchpad sizes, tile edge).
    """

    def __init__(self, isa: Isa, cfg: ArchConfig) -> None:
        self.isa = isa
        self.cfg = cfg
        self.ops: list[Op] = []  # the instructions emitted one call at a time, in order
        self.size = 0  # instructions so far, of both kinds
        self._gran = cfg.tile
        self._units = [u.name for u in isa.queued_units]
        self._scopes = [s.name for s in isa.scopes]
        self._limit = {s.name: cfg.rows(s.config_key) for s in isa.scopes}
        self._op_index: list[int] = []  # program index of each of self.ops
        self._op_segment: list[int] = []
        self._runs: list[_Run] = []
        self._segment = 0  # barriers so far
        self._extra: list[tuple[int, int]] = []
        self._footprints = Footprints(isa, cfg)
        self._scope_rows = np.asarray(isa.per_scope(lambda s: cfg.rows(s.config_key)), dtype=np.int64)

    def _check_rows(self, index: int, what: str, scope: str, row: int, rows: int) -> None:
        limit = self._limit[scope]
        if row < 0 or rows < 1 or row + rows > limit:
            raise UsageError(
                f"instruction {index} ({what}): rows {row}..{row + rows - 1} of scratchpad {scope!r} "
                f"fall outside its {limit} rows (config {self.cfg.name!r})."
            )

    def _add(self, op: Op) -> None:
        for scope, row, rows, _ in op.access:
            self._check_rows(self.size, op.mnemonic, scope, row, rows)
        self.ops.append(op)
        self._op_index.append(self.size)
        self._op_segment.append(self._segment)
        self.size += 1

    def depend(self, index: int, *, on: int) -> None:
        """Make instruction ``index`` wait for instruction ``on`` (an order its accesses do not imply)."""
        self._extra.append((index, on))

    def last(self, mnemonic: str) -> int:
        """The index of the latest ``mnemonic`` instruction so far.

        Raises:
            UsageError: there is none.
        """
        found = [i for op, i in zip(self.ops, self._op_index, strict=True) if op.mnemonic == mnemonic]
        for run in self._runs:
            found += [run.base + int(c.order.max()) for c in run.columns if c.mnemonic == mnemonic and len(c.order)]
        if not found:
            raise UsageError(f"no {mnemonic} instruction has been emitted yet.")
        return max(found)

    # -- instructions --------------------------------------------------------
    def emit(self, mnemonic: str, fields: Mapping[str, int], *, comment: str = "") -> None:
        """Any instruction of the ISA with operand ``fields`` (not ``wait``/``signal``; defaults fill the rest).

        What it reads and writes comes from its isa.yaml ``accesses`` (:mod:`tinynpu.isa.footprints`),
        the expressions the simulator's race checker evaluates, so the tokens derived from them are
        the ones the program needs.

        Raises:
            UsageError: a region falls outside its scratchpad (naming the instruction).
        """
        access: list[tuple[str, int, int, bool]] = []
        dram: tuple[int, int] | None = None
        dram_write = False
        for region in self._footprints.one(mnemonic, fields):
            if region.space == DRAM_SPACE:
                dram, dram_write = (region.first, region.end), region.write
            else:
                access.append((region.space, region.first, region.end - region.first, region.write))
        self._add(Op(mnemonic, dict(fields), self.isa.by_mnemonic[mnemonic].unit, comment, access=tuple(access),
                     dram=dram, dram_write=dram_write))

    def load(self, scope: str, sp_row: int, dram: int, *, rows: int, cols: int, stride: int,
             comment: str = "") -> None:
        """DMA ``rows`` x ``cols`` elements from DRAM into ``scope`` rows ``sp_row..`` (rest zeroed)."""
        self.emit("load", {"scope": self.isa.scope_by_name[scope].id, "sp_row": sp_row, "dram": dram,
                           "stride": stride, "rows": rows, "cols": cols}, comment=comment)

    def zero(self, scope: str, sp_row: int, *, rows: int, comment: str = "") -> None:
        """Zero scratchpad rows (padding rows, halos, fill-zero)."""
        self.emit("zero", {"scope": self.isa.scope_by_name[scope].id, "sp_row": sp_row, "rows": rows},
                  comment=comment)

    def store(self, sp_row: int, dram: int, *, rows: int, cols: int, stride: int, narrow: bool = False,
              relu: bool = False, shift: int = 0, comment: str = "") -> None:
        """DMA accumulator rows to DRAM, optionally requantized (narrow/shift/relu)."""
        self.emit("store", {"sp_row": sp_row, "dram": dram, "stride": stride, "rows": rows, "cols": cols,
                            "narrow": int(narrow), "relu": int(relu), "shift": shift}, comment=comment)

    def tmm(self, acc: int, a: int, b: int, *, m: int, n: int, k: int, accumulate: bool,
            comment: str = "") -> None:
        """A block of tmm16 steps; ``acc``, ``a`` and ``b`` are scratchpad *rows* (multiples of the tile)."""
        t = self.cfg.tile
        for name, row in (("acc", acc), ("a", a), ("b", b)):
            if row % t:
                raise UsageError(
                    f"instruction {self.size} (tmm): {name} row {row} is not a multiple of {t}.")
        self.emit("tmm", {"acc": acc // t, "a": a // t, "b": b // t, "m": m, "n": n, "k": k,
                          "accumulate": int(accumulate)}, comment=comment)

    def alu(self, mnemonic: str, dst: int, *, rows: int, src: int | None = None, imm: int | None = None,
            shift: int | None = None, comment: str = "") -> None:
        """A vector ALU op on accumulator rows (any ``alu`` instruction of the ISA: vadd, vaddrow, vmax, ...)."""
        if self.isa.by_mnemonic[mnemonic].unit != "alu":
            raise UsageError(f"instruction {self.size} ({mnemonic}): not a vector ALU instruction.")
        given = {"src": src, "imm": imm, "shift": shift}
        fields = {"dst": dst, "rows": rows} | {name: v for name, v in given.items() if v is not None}
        self.emit(mnemonic, fields, comment=comment)

    def barrier(self, comment: str = "") -> None:
        """``sync``: everything before completes before anything after is dispatched."""
        self._add(Op("sync", {}, "control", comment))
        self._segment += 1

    def extend(self, columns: Sequence[Columns]) -> None:
        """Append many instructions at once: the columns' instructions, ordered by their ``order``.

        Raises:
            UsageError: the orders are not a permutation of 0..n-1, or an instruction's rows fall
                outside its scratchpad (naming the instruction).
        """
        n = sum(len(c.order) for c in columns)
        seen = np.zeros(n, dtype=bool)
        for c in columns:
            if len(c.order) and (c.order.min() < 0 or c.order.max() >= n or seen[c.order].any()):
                raise UsageError(f"extend: the orders of the {c.mnemonic} columns are not distinct "
                                 f"positions in 0..{n - 1}.")
            seen[c.order] = True
        if not seen.all():
            raise UsageError(f"extend: the orders of the columns are not distinct positions in 0..{n - 1}.")
        # Every field as int64 columns first: a value no 64-bit field holds is refused here, naming the
        # instruction, as the encoder would (before the accesses are evaluated from the columns).
        derived = tuple(self._footprints.columns(c.mnemonic, self._columns(
            c.mnemonic, self.size + c.order, {name: c.fields.get(name) for name in self._value_fields(c.mnemonic)}),
            len(c.order)) for c in columns)
        for c, regions in zip(columns, derived, strict=True):
            self._check_column_rows(c, regions)
        self._runs.append(_Run(self.size, self._segment, tuple(columns), derived))
        self.size += n

    def _check_column_rows(self, c: Columns, regions: tuple[RegionColumns, ...]) -> None:
        """Every scratchpad region of ``c``'s instructions lies inside its scratchpad.

        Raises:
            UsageError: naming the first instruction (in the column) whose rows do not.
        """
        for r in regions:
            if r.dram:
                continue
            limit = self._scope_rows[r.scope]
            bad = np.flatnonzero(r.made & ((r.first < 0) | (r.end <= r.first) | (r.end > limit)))
            if len(bad):
                i = int(bad[0])
                self._check_rows(self.size + int(c.order[i]), c.mnemonic, self.isa.scope_by_id[int(r.scope[i])].name,
                                 int(r.first[i]), int(r.end[i] - r.first[i]))

    # -- finishing -----------------------------------------------------------
    def finish(self) -> tuple[list[int], Comments]:
        """Append ``halt``, assign tokens and encode.

        Returns:
            The instruction words and the per-index comments for the listing.
        """
        self._add(Op("halt", {}, "control", "end of program"))
        acc = self._accesses()
        wait, signal = tokens(acc, scope_granules=[ceil_div(self._limit[s], self._gran) for s in self._scopes],
                              unit_bits=[1 << self.isa.unit_ids[u] for u in self._units])
        literal = {i: op.comment for op, i in zip(self.ops, self._op_index, strict=True) if op.comment}
        templated = [(run.base + c.order, c.comment, c.comment_args)
                     for run in self._runs for c in run.columns if c.comment]
        return self._encode(wait, signal), Comments(literal, templated)

    def _accesses(self) -> Accesses:
        """Every recorded access as arrays (:class:`~tinynpu.compiler.tokens.Accesses`)."""
        n = self.size
        unit_code = {u: i for i, u in enumerate(self._units)}
        scope_code = {s: i for i, s in enumerate(self._scopes)}
        unit = np.full(n, -1, dtype=np.int64)
        segment = np.zeros(n, dtype=np.int64)
        idx = np.asarray(self._op_index, dtype=np.int64)
        unit[idx] = [unit_code.get(op.unit, -1) for op in self.ops]
        segment[idx] = self._op_segment
        r_op: list[np.ndarray] = []
        r_scope: list[np.ndarray] = []
        r_row: list[np.ndarray] = []
        r_rows: list[np.ndarray] = []
        r_write: list[np.ndarray] = []
        flat = [(i, scope_code[s], row, rows, int(w)) for op, i in zip(self.ops, self._op_index, strict=True)
                for s, row, rows, w in op.access]
        if flat:
            cols = np.array(flat, dtype=np.int64).T
            for parts, column in zip((r_op, r_scope, r_row, r_rows, r_write), cols, strict=True):
                parts.append(column)
        spans = [(i, lo, hi, int(op.dram_write)) for op, i in zip(self.ops, self._op_index, strict=True)
                 if op.dram is not None for lo, hi in (op.dram,)]
        d_cols = [list(x) for x in zip(*spans, strict=True)] if spans else [[], [], [], []]
        d_op, d_lo, d_hi, d_store = ([np.asarray(c, dtype=np.int64)] for c in d_cols)
        for run in self._runs:
            for c in run.columns:
                ops = run.base + c.order
                instr = self.isa.by_mnemonic[c.mnemonic]
                unit[ops] = unit_code.get(instr.unit, -1)
                segment[ops] = run.segment
        scope_index = np.zeros(max(self.isa.scope_ids.values()) + 1, dtype=np.int64)  # scope id -> scope_code
        for s in self.isa.scopes:
            scope_index[s.id] = scope_code[s.name]
        for run in self._runs:
            for c, regions in zip(run.columns, run.regions, strict=True):
                ops = run.base + c.order
                for r in regions:
                    made = ops[r.made]
                    if r.dram:
                        d_op.append(made)
                        d_lo.append(r.first[r.made])
                        d_hi.append(r.end[r.made])
                        d_store.append(np.full(len(made), int(r.write), dtype=np.int64))
                    else:
                        r_op.append(made)
                        r_scope.append(np.asarray(scope_index[r.scope[r.made]], dtype=np.int64))
                        r_row.append(r.first[r.made])
                        r_rows.append(r.end[r.made] - r.first[r.made])
                        r_write.append(np.full(len(made), int(r.write), dtype=np.int64))
        row = np.concatenate(r_row) if r_row else np.zeros(0, np.int64)
        rows = np.concatenate(r_rows) if r_rows else np.zeros(0, np.int64)
        extra = [(i, p) for op, i in zip(self.ops, self._op_index, strict=True) for p in op.deps] + self._extra
        extra_cols = np.array(extra, dtype=np.int64).reshape(-1, 2).T

        def cat(parts: list[np.ndarray]) -> np.ndarray:
            return np.concatenate(parts) if parts else np.zeros(0, np.int64)

        return Accesses(unit=unit, segment=segment, range_op=cat(r_op), range_scope=cat(r_scope),
                        range_first=row // self._gran, range_last=(row + rows - 1) // self._gran,
                        range_write=cat(r_write), dram_op=cat(d_op), dram_lo=cat(d_lo), dram_hi=cat(d_hi),
                        dram_store=cat(d_store), extra_consumer=extra_cols[0], extra_producer=extra_cols[1])

    def _encode(self, wait: np.ndarray, signal: np.ndarray) -> list[int]:
        """The words of every instruction: one vectorized encode per mnemonic (:func:`encoding.encode_columns`)."""
        tile = self.cfg.tile
        groups = self._groups()
        lo = np.zeros(self.size, dtype=np.uint64)
        hi = np.zeros(self.size, dtype=np.uint64)
        for mnemonic, parts in groups.items():
            instr = self.isa.by_mnemonic[mnemonic]
            idx = np.concatenate([i for i, _ in parts])
            arrays = {name: np.concatenate([cols[name] for _, cols in parts]) for name in parts[0][1]}
            for f in instr.fields:
                if f.kind == "units":
                    arrays[f.name] = wait[idx] if f.name == "wait" else signal[idx]
            try:
                lo[idx], hi[idx] = encoding.encode_columns(instr, arrays, len(idx), tile)
            except SpecError:  # name the first instruction in program order that does not encode
                for j in np.argsort(idx).tolist():
                    why = _encode_error(instr, {name: int(v[j]) for name, v in arrays.items()}, tile)
                    if why is not None:
                        raise UsageError(f"instruction {int(idx[j])} ({mnemonic}): {why}") from None
                raise
        return encoding.to_ints(lo, hi)

    def _groups(self) -> dict[str, list[tuple[np.ndarray, dict[str, np.ndarray]]]]:
        """mnemonic -> parts of (program indices, field -> value per instruction, wait/signal excluded).

        Raises:
            UsageError: a column names a field its instruction lacks.
        """
        groups: dict[str, list[tuple[np.ndarray, dict[str, np.ndarray]]]] = {}
        scalar: dict[str, list[int]] = {}
        for k, op in enumerate(self.ops):
            scalar.setdefault(op.mnemonic, []).append(k)
        for mnemonic, members in scalar.items():
            idx = np.asarray([self._op_index[k] for k in members], dtype=np.int64)
            values = {name: [self.ops[k].fields.get(name) for k in members] for name in self._value_fields(mnemonic)}
            groups.setdefault(mnemonic, []).append((idx, self._columns(mnemonic, idx, values)))
        for run in self._runs:
            for c in run.columns:
                idx = run.base + c.order
                unknown = sorted(set(c.fields) - set(self._value_fields(c.mnemonic)))
                if unknown:
                    raise UsageError(f"extend: {c.mnemonic} has no field {unknown[0]!r}.")
                given = {name: c.fields.get(name) for name in self._value_fields(c.mnemonic)}
                groups.setdefault(c.mnemonic, []).append((idx, self._columns(c.mnemonic, idx, given)))
        return groups

    def fields_of(self, mnemonic: str) -> dict[str, np.ndarray]:
        """Every ``mnemonic`` instruction emitted so far, of both kinds (calls and columns), in program order:
        field name -> one value per instruction (defaults filled in; not ``wait``/``signal``)."""
        parts = self._groups().get(mnemonic, [])
        names = self._value_fields(mnemonic)
        if not parts:
            return {name: np.zeros(0, np.int64) for name in names}
        order = np.argsort(np.concatenate([idx for idx, _ in parts]), kind="stable")
        return {name: np.concatenate([cols[name] for _, cols in parts])[order] for name in names}

    def _value_fields(self, mnemonic: str) -> list[str]:
        """The fields of ``mnemonic`` an emitter sets (all but the token masks)."""
        return [f.name for f in self.isa.by_mnemonic[mnemonic].fields if f.kind != "units"]

    def _columns(self, mnemonic: str, idx: np.ndarray,
                 values: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """int64 columns of ``values`` (one value, or one per instruction), missing ones at their defaults.

        Raises:
            UsageError: a field without value and default, or a value no field of 64 bits holds.
        """
        instr = self.isa.by_mnemonic[mnemonic]
        out: dict[str, np.ndarray] = {}
        for name, given in values.items():
            f = instr.field_map[name]
            default = f.default_at(self.cfg.tile)
            if isinstance(given, list):
                given = [default if v is None else v for v in given]
                missing = [j for j, v in enumerate(given) if v is None]
            else:
                given = default if given is None else given
                missing = [0] if given is None else []
            if missing:
                raise UsageError(f"instruction {int(idx[missing[0]])} ({mnemonic}): field {name} has no value "
                                 "and no default.")
            try:
                out[name] = np.broadcast_to(np.asarray(given, dtype=np.int64), (len(idx),))
            except OverflowError:
                big = next(j for j, v in enumerate(np.atleast_1d(np.asarray(given, dtype=object)).tolist())
                           if not -(1 << 63) <= v < 1 << 63)
                hi = f.hi_at(self.cfg.tile)
                raise UsageError(f"instruction {int(idx[min(big, len(idx) - 1)])} ({mnemonic}): encode: "
                                 f"{mnemonic} field {name!r} must be in {f.lo}..{hi}, not "
                                 f"{np.atleast_1d(np.asarray(given, dtype=object))[big]}.") from None
        return out

    def count(self, mnemonic: str) -> int:
        """How many ``mnemonic`` instructions have been emitted so far."""
        return (sum(1 for op in self.ops if op.mnemonic == mnemonic)
                + sum(len(c.order) for run in self._runs for c in run.columns if c.mnemonic == mnemonic))


__all__ = ["Columns", "Emitter", "Op"]
