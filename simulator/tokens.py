"""The token channels between queued units: FIFOs of signalled tokens, and the ledger of the overflow rule.

``chan[v][u]`` holds the tokens unit ``v`` signalled to unit ``u`` and not yet
consumed, oldest first; ``ledger[v][u]`` keeps the cycles the exact overflow
rule of :mod:`tinynpu.simulator.timing` compares.  The scheduler's hot path
reaches both through one table per direction, indexed by unit and bit mask.
"""

from __future__ import annotations

from collections import deque

Token = tuple[int, list[int], int]  # (end cycle of the signal, the race checker's clock, instruction)
NO_CLOCK: list[int] = []  # the clock of a token signalled without the race checker (never read)
Channel = deque[Token]


class TokenLedger:
    """One channel's signal completions and consume starts, for the exact overflow rule.

    Token j overflows the channel iff token j - max_count was not consumed by
    cycle e(j).  Only the window those checks can still reach is kept.
    """

    __slots__ = ("con_base", "con_s", "max", "n_con", "n_sig", "sig_base", "sig_e", "sig_i")

    def __init__(self, max_count: int) -> None:
        self.max = max_count
        self.sig_e: list[int] = []
        self.sig_i: list[int] = []
        self.con_s: list[int] = []
        self.sig_base = self.con_base = self.n_sig = self.n_con = 0

    def signal(self, e: int, i: int) -> int:
        """Record token n_sig completing at ``e`` from instruction ``i``; the overflowing token or -1."""
        j = self.n_sig
        self.n_sig += 1
        self.sig_e.append(e)
        self.sig_i.append(i)
        k = j - self.max
        if 0 <= k < self.n_con and self.con_s[k - self.con_base] > e:
            return j
        cut = self.n_sig - self.max - self.con_base  # consumes a later signal can still ask about
        if cut > 64 + self.max:
            del self.con_s[:cut]
            self.con_base += cut
        return -1

    def consume(self, s: int) -> int:
        """Record the consume of token n_con at ``s``; the overflowing token or -1."""
        k = self.n_con
        self.n_con += 1
        self.con_s.append(s)
        j = k + self.max
        if j < self.n_sig and self.sig_e[j - self.sig_base] < s:
            return j
        cut = self.n_con - self.sig_base  # signals no check can reach any more
        if cut > 64 + self.max:
            del self.sig_e[:cut]
            del self.sig_i[:cut]
            self.sig_base += cut
        return -1

    def producer(self, j: int) -> int:
        return self.sig_i[j - self.sig_base]

    def leftover(self) -> int:
        """At the end: the first token that overflowed because it was never consumed, or -1."""
        return self.n_con + self.max if self.n_sig - self.n_con > self.max else -1


def token_channels(nq: int, max_count: int, bits: list[tuple[int, ...]]) -> tuple[
        list[list[Channel]], list[list[TokenLedger]], list[list[tuple[int, Channel, TokenLedger]]],
        list[list[tuple[int, Channel, TokenLedger]]]]:
    """The channels and ledgers of ``nq`` queued units, and the tables the scheduler reads them through.

    ``bits[m]`` lists the units of bit mask ``m``.  Returns ``(chan, ledger, wait_bits, sig_bits)``:
    ``wait_bits[u << nq | m]`` is ``(v, chan[v][u], ledger[v][u])`` for each unit ``v`` of ``m`` (the
    channels an instruction of ``u`` waiting on ``m`` consumes from), ``sig_bits[u << nq | m]`` is
    ``(w, chan[u][w], ledger[u][w])`` for each ``w`` of ``m`` (those it signals).
    """
    units = range(nq)
    chan: list[list[Channel]] = [[deque() for _ in units] for _ in units]
    ledger = [[TokenLedger(max_count) for _ in units] for _ in units]
    wait_bits = [[(v, chan[v][u], ledger[v][u]) for v in bits[m]] for u in units for m in range(1 << nq)]
    sig_bits = [[(w, chan[u][w], ledger[u][w]) for w in bits[m]] for u in units for m in range(1 << nq)]
    return chan, ledger, wait_bits, sig_bits


__all__ = ["NO_CLOCK", "Channel", "Token", "TokenLedger", "token_channels"]
