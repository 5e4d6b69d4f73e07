"""The data-race sanitizer: happens-before with vector clocks, not wall time.

Every queued unit has a vector clock.  Executing an instruction of unit U
increments U's own component (its *epoch*: the count of U's instructions so
far); consuming a token joins the clock the signalling instruction had (a
token also covers every earlier instruction of its unit, which the clock
says by construction); ``sync`` and ``halt`` join all clocks.  Two accesses
to the same location by different units, at least one a write, race unless
the earlier one's epoch is covered by the later one's clock.

Accesses are kept per resource (each scratchpad, and DRAM) in a short log
per unit.  A new access is compared only with the log entries of other
units its clock does not cover (the newest ones, so the scan stops at the
first covered entry); an entry is dropped once every other unit that uses
the resource and still has instructions to run has a clock covering it, so
for synchronized programs the logs stay about a queue deep.  Scratchpad
accesses are row intervals (exact); DRAM accesses are 2-D strided
footprints, compared first by their bounding byte ranges and then byte for
byte, so a report always names a byte both really touch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from tinynpu.isa import ArchConfig, Instruction, Isa, regions
from tinynpu.isa.encoding import field_column
from tinynpu.simulator.decode import Decoded
from tinynpu.simulator.faults import SimFault

DRAM = -1  # resource id of DRAM; scratchpads use their scope ids
_PRUNE_AT = 16  # log length above which covered entries are dropped

# (addr, stride, rows, row_bytes) of an instruction's DRAM footprint.
Footprint = tuple[int, int, int, int]
# (epoch, lo, hi, write, instruction index, footprint or None)
_Entry = tuple[int, int, int, bool, int, Footprint | None]


class RaceChecker:
    """Vector clocks plus per-resource access logs.

    Args:
        units: number of queued units (ids 0..units-1).
        users: resource id -> the units whose instructions access it (static, from the program).
        remaining: instructions each unit will execute (a unit with none left no longer pins logs).
        names: resource id -> name used in messages (``a``, ``acc``, ``DRAM``).
        describe: instruction index -> ``instruction 5 (pc 0x50, tmm)``.
    """

    def __init__(self, units: int, users: dict[int, set[int]], remaining: list[int], names: dict[int, str],
                 describe: Callable[[int], str]) -> None:
        self.units = units
        self.clock: list[list[int]] = [[0] * units for _ in range(units)]
        self.remaining = list(remaining)
        # for each resource and unit: the other units using it (the only ones that can race with it)
        self.others = {r: [[v for v in sorted(u) if v != w] for w in range(units)] for r, u in users.items()}
        self.logs: dict[int, list[deque[_Entry]]] = {r: [deque() for _ in range(units)] for r in users}
        self.prune_at = {r: [_PRUNE_AT] * units for r in users}
        self._res = {r: (self.logs[r], self.others[r], self.prune_at[r]) for r in users}  # one lookup per access
        self.names = names
        self.describe = describe

    # --- clocks -------------------------------------------------------------------------------------
    def token(self, unit: int) -> list[int]:
        """The clock a signal from ``unit``'s current instruction carries."""
        return list(self.clock[unit])

    # Clocks are updated in place: the scheduler keeps references to these lists.
    def join(self, unit: int, clock: list[int]) -> None:
        mine = self.clock[unit]
        mine[:] = map(max, mine, clock)

    def sync(self) -> None:
        """A barrier: everything before happens before everything after."""
        joined = [max(col) for col in zip(*self.clock, strict=True)]
        for mine in self.clock:
            mine[:] = joined

    # --- accesses -----------------------------------------------------------------------------------
    def access(self, unit: int, index: int, res: int, lo: int, hi: int, write: bool,
               fp: Footprint | None = None) -> None:
        """Record an access to ``[lo, hi)`` of resource ``res`` (rows, or DRAM bytes bounding ``fp``)."""
        logs, others_of, limits = self._res[res]
        others = others_of[unit]
        if not others:  # no other unit ever touches res: nothing can race with this, nor read its log
            return
        clock = self.clock[unit]
        for v in others:
            log = logs[v]
            seen = clock[v]
            if not log or log[-1][0] <= seen:  # the common case: everything v did is ordered before
                continue
            for entry in reversed(log):
                if entry[0] <= seen:
                    break
                if (write or entry[3]) and lo < entry[2] and entry[1] < hi:
                    where = self._confirm(res, lo, fp, entry)
                    if where is not None:
                        self._race(index, entry, write, where)
        own = logs[unit]
        own.append((clock[unit], lo, hi, write, index, fp))
        if len(own) > limits[unit]:  # pruning in batches keeps the common path to one append
            bound = min((self.clock[w][unit] for w in others if self.remaining[w] > 0), default=clock[unit])
            while own and own[0][0] <= bound:
                own.popleft()
            # a log that stays long (its readers synchronize rarely) is pruned geometrically less often
            limits[unit] = max(_PRUNE_AT, 2 * len(own))

    def _confirm(self, res: int, lo: int, fp: Footprint | None, entry: _Entry) -> str | None:
        if res != DRAM:
            return self.place(res, max(lo, entry[1]))
        assert fp is not None and entry[5] is not None
        hit = _overlap(fp, entry[5])
        return None if hit is None else self.place(res, hit)

    def place(self, res: int, at: int) -> str:
        """How a message names row ``at`` of a scratchpad or byte ``at`` of DRAM."""
        return f"DRAM byte 0x{at:x}" if res == DRAM else f"{self.names[res]} row {at}"

    def _race(self, index: int, entry: _Entry, write: bool, where: str) -> None:
        raise race_fault(self.describe, index, write, entry[4], entry[3], where)


def race_fault(describe: Callable[[int], str], index: int, write: bool, other: int, other_wrote: bool,
               where: str) -> SimFault:
    """Instruction ``index`` accesses ``where`` (``acc row 5``, ``DRAM byte 0x40``), which ``other`` did."""
    did = "writes" if write else "reads"
    other_did = "wrote" if other_wrote else "read"
    return SimFault(
        f"data race: {describe(index)} {did} {where}, which {describe(other)} {other_did}, "
        "and no chain of tokens or sync orders the two; the result would depend on timing. Add a "
        "signal/wait pair (or a sync) between them.",
        index=index,
    )


def _overlap(a: Footprint, b: Footprint) -> int | None:
    """The lowest DRAM byte both 2-D footprints touch, or None."""

    def byte_set(fp: Footprint) -> np.ndarray:
        addr, stride, rows, rb = fp
        starts = addr + stride * np.arange(rows, dtype=np.int64)
        return (starts[:, None] + np.arange(rb, dtype=np.int64)).ravel()

    common = np.intersect1d(byte_set(a), byte_set(b))
    return int(common[0]) if len(common) else None


AccessFn = Callable[[Callable[..., None], int, int, list[int]], None]


def access_functions(isa: Isa, cfg: ArchConfig) -> list[AccessFn]:
    """Per opcode index, ``f(access, i, u, x)``: report instruction ``i``'s accesses (isa.yaml ``accesses``).

    Each is compiled from the YAML expressions into one small Python function (this runs for every
    executed instruction, so it must cost what a hand-written one would).  ``x`` holds the operands
    in the instruction's order; ``access`` is :meth:`RaceChecker.access`.
    """
    env: dict[str, Any] = {"DRAM": DRAM, "tile": cfg.tile, "eb": isa.per_scope(lambda s: cfg.elem_bytes(s.config_key)),
                           "srows": isa.per_scope(lambda s: cfg.rows(s.config_key))}
    table: list[AccessFn] = []
    for ins in sorted(isa.instructions, key=lambda ins: ins.index):
        table.append(_compile(isa, ins, env))
    return table


def _compile(isa: Isa, ins: Instruction, env: dict[str, Any]) -> AccessFn:
    def name(n: str) -> str:
        return "tile" if n == regions.TILE else f"v_{n}"

    def expr(text: str) -> str:
        return regions.to_python(isa.region_expr(ins, text), isa.scope_ids, name)

    lines = [f"def {ins.mnemonic.replace('.', '_')}(access, i, u, x):"]
    if not ins.accesses:
        lines.append("    pass")
    elif ins.operands:
        lines.append(f"    {', '.join(name(o) for o in ins.operands)}, = x[:{len(ins.operands)}]")
    for acc in ins.accesses:
        pad = "    "
        if acc.unless is not None:
            lines.append(f"    if not {expr(acc.unless)}:")
            pad += "    "
        if acc.dram:
            lines.append(f"{pad}fp = ({', '.join(expr(b) for b in acc.bounds)})")
            lines.append(f"{pad}last = fp[0] + (fp[2] - 1) * fp[1]")
            lines.append(f"{pad}access(u, i, DRAM, min(fp[0], last), max(fp[0], last) + fp[3], {acc.write}, fp)")
        else:
            res = name(acc.space) if acc.space_operand else str(isa.scope_ids[acc.space])
            lo, hi = (expr(b) for b in acc.bounds)
            lines.append(f"{pad}access(u, i, {res}, {lo}, {hi}, {acc.write})")
    scope = dict(env)
    exec(compile("\n".join(lines) + "\n", f"<accesses of {ins.mnemonic}>", "exec"), scope)  # noqa: S102
    return scope[ins.mnemonic.replace(".", "_")]


_USERS_CHUNK = 1 << 16  # instructions per counting pass: small temporaries next to the program's columns


def resource_users(isa: Isa, dec: Decoded) -> dict[int, set[int]]:
    """Resource id (scope ids, :data:`DRAM`) -> the units whose executed instructions access it.

    One counting pass over the (opcode, unit) pairs of each chunk; an access that names its scope by an
    operand (isa.yaml ``accesses``) decodes that one field, for its opcode's instructions only.
    """
    users: dict[int, set[int]] = {s.id: set() for s in isa.scopes}
    users[DRAM] = set()
    n_units = max(u.id for u in isa.units) + 1
    by_index = {ins.index: ins for ins in isa.instructions}
    plan = dict(dec.plan)
    by_operand = [(ins, next(f for c, f in plan[ins.index] if c == ins.operands.index(acc.space)))
                  for ins in isa.instructions for acc in ins.accesses if acc.space_operand]
    for base in range(0, dec.n_exec, _USERS_CHUNK):
        ch = slice(base, min(base + _USERS_CHUNK, dec.n_exec))
        op, unit = dec.op[ch].astype(np.intp), dec.unit[ch].astype(np.intp)
        for pair in np.flatnonzero(np.bincount(op * n_units + unit)).tolist():
            ins, u = by_index[pair // n_units], pair % n_units
            for acc in ins.accesses:
                if acc.dram or not acc.space_operand:
                    users[DRAM if acc.dram else isa.scope_ids[acc.space]].add(u)
        for ins, field in by_operand:
            sel = np.flatnonzero(op == ins.index)
            if len(sel):
                scope = field_column(dec.lo[ch][sel], dec.hi[ch][sel], field)
                for pair in np.flatnonzero(np.bincount(scope * n_units + unit[sel])).tolist():
                    users[pair // n_units].add(pair % n_units)
    return users


__all__ = ["DRAM", "AccessFn", "Footprint", "RaceChecker", "access_functions", "race_fault",
           "resource_users"]
