"""The scheduler's fault messages, one paragraph each, shared by both simulator cores.

The Python core (:mod:`.timing`) raises them where it finds the fault; the
native core (:mod:`.native`) reports a fault's kind and numbers and Python
formats the same message from them.
"""

from __future__ import annotations

from tinynpu.isa import ArchConfig, Isa
from tinynpu.simulator.decode import Decoded
from tinynpu.simulator.faults import SimFault, where


class Messages:
    """The scheduler's fault messages for one run (program, config and cycle limit)."""

    def __init__(self, isa: Isa, cfg: ArchConfig, dec: Decoded, limit: int) -> None:
        self.isa, self.cfg, self.dec, self.limit = isa, cfg, dec, limit
        self.names = {u.id: u.name for u in isa.units}
        self._mnemonics = [ins.mnemonic for ins in isa.instructions]

    def describe(self, i: int) -> str:
        return where(i, self._mnemonics[int(self.dec.op[i])], self.isa.word_bytes)

    def overflow(self, v: int, u: int, j: int, i: int) -> SimFault:
        """Token ``j`` of channel v->u, signalled by instruction ``i``, overflows the channel."""
        names = self.names
        return SimFault(
            f"token channel {names[v]}->{names[u]} overflows: {self.describe(i)} signals its token "
            f"#{j} while the channel already holds tokens.max_count = {self.cfg.token_max_count} unconsumed "
            f"tokens (config {self.cfg.name!r}); make {names[u]} consume them sooner or signal less.", index=i)

    def limit_start(self, i: int, e: int) -> SimFault:
        return SimFault(f"the program did not halt within the cycle limit of {self.limit} cycles: "
                        f"{self.describe(i)} would complete at cycle {e} (raise --max-cycles or "
                        "limits.max_cycles if the program is meant to run this long).", index=i)

    def limit_halt(self, i: int, d: int) -> SimFault:
        return SimFault(f"the program did not halt within the cycle limit of {self.limit} cycles "
                        f"({self.describe(i)} at cycle {d}).", index=i)

    def limit_dispatch(self, i: int, d: int) -> SimFault:
        return SimFault(f"the program did not halt within the cycle limit of {self.limit} cycles "
                        f"(dispatching {self.describe(i)} at cycle {d}).", index=i)

    def never_halts(self) -> SimFault:
        last = self.dec.n_exec - 1
        return SimFault(f"the program never halts: it ran past its last instruction "
                        f"({self.describe(last) if last >= 0 else 'an empty program'}) without reaching a "
                        "halt; end it with `halt`.", index=max(last, 0))

    def deadlock(self, i: int, u: int, v: int, pc: int) -> SimFault:
        """Instruction ``i``, the head of unit ``u``, waits on the empty channel v->u."""
        names = self.names
        disp = (f"the dispatcher is stuck before {self.describe(pc)} (it waits for a queue slot or for "
                f"completion, queue depth {self.cfg.queue_depth})" if pc < self.dec.n_exec
                else "every instruction is dispatched")
        return SimFault(
            f"deadlock: {self.describe(i)} on unit {names[u]} waits on token channel "
            f"{names[v]}->{names[u]}, which holds no token, and no instruction that can still run "
            f"will signal it; {disp}.", index=i)

    def no_progress(self, pc: int) -> SimFault:
        return SimFault(f"deadlock: no unit can make progress at {self.describe(pc)}.", index=pc)


__all__ = ["Messages"]
