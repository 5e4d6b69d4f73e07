"""The seam between workloads and the GEMM lowering: an instruction emitter and operand protocols.

The lowering (:mod:`tinynpu.compiler.lower`) sees every workload as a GEMM
``C[M x N] = A[M x K] @ B[N x K]^T`` and never touches DRAM layouts itself: it
asks an :class:`OperandA` / :class:`OperandB` to bring a block of GEMM rows at
one reduction tile into a scratchpad, and an :class:`OutputC` to write a block
of accumulator rows back.  Dense matmul uses :class:`DenseOperand` and
:class:`DenseOutput`; conv2d implements the same protocols with implicit
im2col (strided DMA plus zero rows for halos).

The :class:`Emitter` records instructions with the scratchpad rows they read
and write, derives every cross-unit dependency (read-after-write,
write-after-read, write-after-write) and turns them into the ISA's tokens
(``wait``/``signal`` masks) when the program is finished.  Producers therefore
never reason about tokens: they only emit in a sensible program order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from tinynpu.errors import SpecError, UsageError
from tinynpu.intmath import ceil_div
from tinynpu.isa import ArchConfig, Instruction, Isa, encoding


@dataclass
class Op:
    """One emitted instruction before token assignment.

    Attributes:
        mnemonic: ISA mnemonic.
        fields: Field values except ``wait``/``signal``.
        unit: Unit name that executes it.
        comment: Text shown next to it in the assembly listing.
        wait: Token wait mask (filled in by :meth:`Emitter.finish`).
        signal: Token signal mask (filled in by :meth:`Emitter.finish`).
    """

    mnemonic: str
    fields: dict[str, int]
    unit: str
    comment: str = ""
    wait: int = 0
    signal: int = 0
    deps: set[int] = field(default_factory=set)


def _encode_error(instr: Instruction, op: Op, tile: int) -> str | None:
    """Why ``op`` does not encode (the one-word encoder's message), or None."""
    fields = op.fields if instr.unit == "control" else {**op.fields, "wait": op.wait, "signal": op.signal}
    try:
        encoding.encode(instr, fields, tile)
    except SpecError as exc:
        return exc.message
    return None


class Emitter:
    """Collects instructions and derives their synchronization tokens.

    Dependencies are tracked per scratchpad granule of ``cfg.tile`` rows (an
    access touching part of a granule counts as touching all of it, which is
    conservative and therefore safe), and in DRAM per byte span of each
    ``load``/``store`` (first to last byte touched): a load of bytes an earlier
    store wrote waits for it (a layer boundary), and a store over bytes an
    earlier load read waits for that load.

    Args:
        isa: The loaded ISA (encodings, unit ids).
        cfg: The architecture config (scratchpad sizes, tile edge).
    """

    def __init__(self, isa: Isa, cfg: ArchConfig) -> None:
        self.isa = isa
        self.cfg = cfg
        self.ops: list[Op] = []
        self._gran = cfg.tile
        self._units = [u.name for u in isa.queued_units]
        self._reset_tracking()

    # -- dependency tracking -------------------------------------------------
    def _reset_tracking(self) -> None:
        self._writer: dict[str, list[int]] = {}
        self._wunit: dict[str, list[str | None]] = {}
        self._readers: dict[str, dict[str, list[int]]] = {}
        keys = {s.name: s.config_key for s in self.isa.scopes}
        self._limit = {scope: self.cfg.rows(key) for scope, key in keys.items()}
        # DRAM spans (first byte, end byte, op index) of stores and loads so far, with their
        # bounding boxes: a matmul never loads what it stores, so the box test is O(1) there.
        self._dram: dict[str, list[tuple[int, int, int]]] = {"load": [], "store": []}
        self._box: dict[str, list[int]] = {"load": [1 << 62, -1], "store": [1 << 62, -1]}
        for scope, key in keys.items():
            n = ceil_div(self.cfg.rows(key), self._gran)
            self._writer[scope] = [-1] * n
            self._wunit[scope] = [None] * n
            self._readers[scope] = {u: [-1] * n for u in self._units}

    def _granules(self, scope: str, row: int, rows: int, what: str) -> range:
        limit = self._limit[scope]
        if row < 0 or rows < 1 or row + rows > limit:
            raise UsageError(
                f"instruction {len(self.ops)} ({what}): rows {row}..{row + rows - 1} of scratchpad {scope!r} "
                f"fall outside its {limit} rows (config {self.cfg.name!r})."
            )
        return range(row // self._gran, (row + rows - 1) // self._gran + 1)

    def _dram_access(self, op: Op, lo: int, hi: int) -> None:
        """Order a load after the latest store overlapping its bytes, and a store after such a load."""
        other = "store" if op.unit == "load" else "load"
        box = self._box[other]
        if lo < box[1] and box[0] < hi:
            # The latest overlapping one suffices: its unit retires in order.
            for s_lo, s_hi, s_idx in reversed(self._dram[other]):
                if lo < s_hi and s_lo < hi:
                    op.deps.add(s_idx)
                    break
        self._dram[op.unit].append((lo, hi, len(self.ops)))
        mine = self._box[op.unit]
        mine[0], mine[1] = min(mine[0], lo), max(mine[1], hi)

    def _access(self, op: Op, reads: list[tuple[str, int, int]], writes: list[tuple[str, int, int]]) -> None:
        idx = len(self.ops)
        unit = op.unit
        deps = op.deps
        for scope, row, rows in reads:
            writer = self._writer[scope]
            wunit = self._wunit[scope]
            mine = self._readers[scope][unit]
            for g in self._granules(scope, row, rows, op.mnemonic):
                if wunit[g] is not None and wunit[g] != unit:
                    deps.add(writer[g])
                mine[g] = idx
        for scope, row, rows in writes:
            writer = self._writer[scope]
            wunit = self._wunit[scope]
            readers = self._readers[scope]
            for g in self._granules(scope, row, rows, op.mnemonic):
                if wunit[g] is not None and wunit[g] != unit:
                    deps.add(writer[g])
                for u, lst in readers.items():
                    r = lst[g]
                    if r >= 0:
                        if u != unit:
                            deps.add(r)
                        lst[g] = -1
                writer[g] = idx
                wunit[g] = unit
        self.ops.append(op)

    # -- instructions --------------------------------------------------------
    def load(self, scope: str, sp_row: int, dram: int, *, rows: int, cols: int, stride: int,
             comment: str = "") -> None:
        """DMA ``rows`` x ``cols`` elements from DRAM into ``scope`` rows ``sp_row..`` (rest zeroed)."""
        op = Op("load", {"scope": self.isa.scope_by_name[scope].id, "sp_row": sp_row, "dram": dram,
                         "stride": stride, "rows": rows, "cols": cols}, "load", comment)
        key = self.isa.scope_by_name[scope].config_key
        self._dram_access(op, dram, dram + (rows - 1) * stride + cols * self.cfg.elem_bytes(key))
        self._access(op, [], [(scope, sp_row, rows)])

    def zero(self, scope: str, sp_row: int, *, rows: int, comment: str = "") -> None:
        """Zero scratchpad rows (padding rows, halos, fill-zero)."""
        op = Op("zero", {"scope": self.isa.scope_by_name[scope].id, "sp_row": sp_row, "rows": rows},
                "load", comment)
        self._access(op, [], [(scope, sp_row, rows)])

    def store(self, sp_row: int, dram: int, *, rows: int, cols: int, stride: int, narrow: bool = False,
              relu: bool = False, shift: int = 0, comment: str = "") -> None:
        """DMA accumulator rows to DRAM, optionally requantized (narrow/shift/relu)."""
        op = Op("store", {"sp_row": sp_row, "dram": dram, "stride": stride, "rows": rows, "cols": cols,
                          "narrow": int(narrow), "relu": int(relu), "shift": shift}, "store", comment)
        out_bytes = 1 if narrow else self.cfg.elem_bytes("acc")
        self._dram_access(op, dram, dram + (rows - 1) * stride + cols * out_bytes)
        self._access(op, [("acc", sp_row, rows)], [])

    def tmm(self, acc: int, a: int, b: int, *, m: int, n: int, k: int, accumulate: bool,
            comment: str = "") -> None:
        """A block of tmm16 steps; ``acc``, ``a`` and ``b`` are scratchpad *rows* (multiples of the tile)."""
        t = self.cfg.tile
        for name, row in (("acc", acc), ("a", a), ("b", b)):
            if row % t:
                raise UsageError(
                    f"instruction {len(self.ops)} (tmm): {name} row {row} is not a multiple of {t}.")
        op = Op("tmm", {"acc": acc // t, "a": a // t, "b": b // t, "m": m, "n": n, "k": k,
                        "accumulate": int(accumulate)}, "tensor", comment)
        reads = [("a", a, m * k * t), ("b", b, n * k * t)]
        if accumulate:
            reads.append(("acc", acc, m * n * t))
        self._access(op, reads, [("acc", acc, m * n * t)])

    def alu(self, mnemonic: str, dst: int, *, rows: int, src: int | None = None, imm: int | None = None,
            shift: int | None = None, comment: str = "") -> None:
        """A vector ALU op on accumulator rows (vadd, vaddrow, vmax, vmin, vmul, vshr, vrequant)."""
        fields: dict[str, int] = {"dst": dst, "rows": rows}
        reads = [("acc", dst, rows)]
        if src is not None:
            fields["src"] = src
            reads.append(("acc", src, {"vaddrow": 1, "vrequant": 2}.get(mnemonic, rows)))
        if imm is not None:
            fields["imm"] = imm
        if shift is not None:
            fields["shift"] = shift
        self._access(Op(mnemonic, fields, "alu", comment), reads, [("acc", dst, rows)])

    def barrier(self, comment: str = "") -> None:
        """``sync``: everything before completes before anything after is dispatched."""
        self.ops.append(Op("sync", {}, "control", comment))
        self._reset_tracking()

    # -- finishing -----------------------------------------------------------
    def finish(self) -> tuple[list[int], dict[int, str]]:
        """Append ``halt``, assign tokens and encode.

        Returns:
            The instruction words and the per-index comments for the listing.
        """
        self.ops.append(Op("halt", {}, "control", "end of program"))
        uid = self.isa.unit_ids
        covered: dict[tuple[str, str], int] = {}
        ops = self.ops
        for op in ops:
            if not op.deps:
                continue
            latest: dict[str, int] = {}
            for d in op.deps:
                u = ops[d].unit
                if d > latest.get(u, -1):
                    latest[u] = d
            for u, p in latest.items():
                # Units start in order, so an earlier wait on a token from p' >= p already covers p.
                if covered.get((u, op.unit), -1) >= p:
                    continue
                op.wait |= 1 << uid[u]
                ops[p].signal |= 1 << uid[op.unit]
                covered[(u, op.unit)] = p
        comments = {i: op.comment for i, op in enumerate(ops) if op.comment}
        return self._encode(), comments

    def _encode(self) -> list[int]:
        """The words of every op: one vectorized encode per mnemonic (:func:`encoding.encode_columns`)."""
        ops = self.ops
        members: dict[str, list[int]] = {}
        for i, op in enumerate(ops):
            members.setdefault(op.mnemonic, []).append(i)
        lo = np.zeros(len(ops), dtype=np.uint64)
        hi = np.zeros(len(ops), dtype=np.uint64)
        for mnemonic, idx in members.items():
            instr = self.isa.by_mnemonic[mnemonic]
            columns: dict[str, list[int]] = {}
            for f in instr.fields:
                if f.kind == "units":
                    values = [getattr(ops[i], f.name) for i in idx]
                else:
                    values = [ops[i].fields.get(f.name, f.default_at(self.cfg.tile)) for i in idx]
                if None in values:
                    i = idx[values.index(None)]
                    raise UsageError(f"instruction {i} ({mnemonic}): field {f.name} has no value and no default.")
                columns[f.name] = values
            try:
                arrays = {name: np.array(v, dtype=np.int64) for name, v in columns.items()}
                lo[idx], hi[idx] = encoding.encode_columns(instr, arrays, len(idx), self.cfg.tile)
            except (SpecError, OverflowError):  # a value beyond int64 fits no field: _encode_error says which
                bad, why = next((i, w) for i in idx if (w := _encode_error(instr, ops[i], self.cfg.tile)) is not None)
                raise UsageError(f"instruction {bad} ({mnemonic}): {why}") from None
        return encoding.to_ints(lo, hi)

    def count(self, mnemonic: str) -> int:
        return sum(1 for op in self.ops if op.mnemonic == mnemonic)


class OperandA(Protocol):
    """How to bring a block of GEMM rows (of A, or of B in its N x K form) into a scratchpad."""

    @property
    def rows_total(self) -> int:  # GEMM rows (M for A, N for B)
        ...

    @property
    def k_total(self) -> int:  # reduction length K
        ...

    def load(self, emit: Emitter, *, scope: str, sp_row: int, row0: int, rows: int, k0: int) -> None:
        """Load GEMM rows ``row0..row0+rows-1``, reduction columns ``k0..k0+tile-1`` (zeros past K)
        into ``scope`` rows ``sp_row..sp_row+rows-1`` with one or more ``load``/``zero`` instructions."""
        ...


OperandB = OperandA


class OutputC(Protocol):
    """How to write a block of accumulator rows back to DRAM."""

    def store(self, emit: Emitter, *, sp_row: int, row0: int, rows: int, col0: int, cols: int) -> None:
        """Store accumulator rows ``sp_row..`` holding output rows ``row0..row0+rows-1``, output columns
        ``col0..col0+cols-1`` (``cols`` <= tile)."""
        ...


@dataclass(frozen=True)
class DenseOperand:
    """A row-major ``rows_total x k_total`` DRAM matrix at ``addr`` (elements of ``elem_bytes``)."""

    addr: int
    rows_total: int
    k_total: int
    elem_bytes: int
    name: str = "A"

    def load(self, emit: Emitter, *, scope: str, sp_row: int, row0: int, rows: int, k0: int) -> None:
        cols = min(emit.cfg.tile, self.k_total - k0)
        stride = self.k_total * self.elem_bytes
        emit.load(scope, sp_row, self.addr + row0 * stride + k0 * self.elem_bytes, rows=rows, cols=cols,
                  stride=stride, comment=f"{self.name}[{row0}:{row0 + rows}, {k0}:{k0 + cols}]")


@dataclass(frozen=True)
class DenseOutput:
    """A row-major ``m x n`` DRAM output at ``addr``; int8 outputs are requantized on store."""

    addr: int
    n: int
    elem_bytes: int
    narrow: bool = False
    shift: int = 0
    relu: bool = False
    name: str = "C"

    def store(self, emit: Emitter, *, sp_row: int, row0: int, rows: int, col0: int, cols: int) -> None:
        stride = self.n * self.elem_bytes
        emit.store(sp_row, self.addr + row0 * stride + col0 * self.elem_bytes, rows=rows, cols=cols,
                   stride=stride, narrow=self.narrow, relu=self.relu, shift=self.shift,
                   comment=f"{self.name}[{row0}:{row0 + rows}, {col0}:{col0 + cols}]")


__all__ = ["DenseOperand", "DenseOutput", "Emitter", "Op", "OperandA", "OperandB", "OutputC"]
