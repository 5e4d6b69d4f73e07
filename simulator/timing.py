"""The scheduler: dispatch, unit queues, tokens, the shared DRAM port, and the cycle rules of isa.yaml.

The rules (``timing`` in isa.yaml) are implemented as written:

* ``d(i) >= d(i-1) + 1``; a queued instruction that is the n-th of its unit
  also needs ``d >= s(n - depth) + 1``; ``sync``/``halt`` need
  ``d >= max e(j)`` over every earlier j; cycles = ``d(halt) + 1``.
* ``s(i) >= d(i) + 1``, ``>= s(prev) + occ(prev)``, ``>= e(producer)`` of each
  consumed token, ``zero`` also ``>= e(previous instruction of its unit)``,
  and DRAM-port users ``>= port_free``, after which ``port_free = s + beats``.
* ``e(i) = max(s(i) + lat(i), e(prev))``.

The schedule is computed event by event rather than in program order,
because a token may come from an instruction later in program order and the
port is granted by readiness, not by program order.  Each unit's oldest
pending instruction is started once every quantity it depends on is known;
functional execution happens at that moment, so the execution order always
respects program order within a unit and every token and sync (race-free
programs therefore compute the same values in any such order).

``core.c`` implements this module again in C (the native core); keep the
two in step.

Readings of the rules the ISA text leaves open (chosen as the simplest
synchronous hardware would do it):

* Port arbitration: among the DRAM-port users whose oldest instruction is
  ready (all constraints but the port), the one ready first gets the port;
  equal readiness goes to the lower unit id (load = 0 wins over store = 3).
  An instruction waiting for the port keeps its place: the port is granted
  at ``max(ready, port_free)``.
* Token overflow: a channel's count in a cycle is the tokens signalled with
  ``e <= t`` minus those consumed with ``s <= t``; a token signalled and
  consumed in the same cycle nets out.  A signal that makes the count exceed
  ``tokens.max_count`` faults; so does ending the run with more than that
  many unconsumed.  Without timing the count is taken in execution order.
* "Ready" for the port means every other start constraint holds: dispatched
  (``d + 1``), its unit free (``s(prev) + occ(prev)``), its tokens' producers
  complete; the grant is final, so a user that becomes ready later waits
  behind one granted earlier even if the port was still busy then.
* Dispatcher stalls (waiting for a full queue, or for completion before a
  ``sync``/``halt``) are reported as stall cycles of the ``control`` unit
  (``queue_full`` and ``barrier``: a program without ``sync`` still waits once, at ``halt``).
  A queued unit's stall is ``s - max(d + 1, s(prev) + occ(prev))``, split in
  that order into ``token`` (waiting for producers), ``in_flight_loads``
  (``zero`` behind loads) and ``dram_port``; its own occupancy is busy time.
* ``sync`` and ``halt`` appear in the timeline with dispatch = start = end = d.
"""

from __future__ import annotations

import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tinynpu.isa import ArchConfig, Isa
from tinynpu.simulator.decode import Decoded
from tinynpu.simulator.entries import CHUNK, Entry, EntryChunks
from tinynpu.simulator.faults import SimFault
from tinynpu.simulator.hazards import RaceChecker
from tinynpu.simulator.messages import Messages
from tinynpu.simulator.semantics import State
from tinynpu.simulator.tokens import NO_CLOCK, Channel, TokenLedger, token_channels


@dataclass
class RunResult:
    """What the scheduler measured; :mod:`stats` turns it into :class:`Stats`."""

    cycles: int
    executed: int
    dispatch: array.array
    start: array.array
    end: array.array
    stalls: dict[str, dict[str, int]] = field(default_factory=dict)


UNIT_CAUSES = ("token", "in_flight_loads", "dram_port")  # a queued unit's stall causes, in attribution order
CONTROL_CAUSES = ("barrier", "queue_full")  # the dispatcher's: at a sync or halt for all to complete; for queue room


def unit_roles(dec: Decoded, nq: int) -> tuple[list[int], list[int]]:
    """The units that use the DRAM port, and the queued units that hold instructions not using it."""
    ex = slice(0, dec.n_exec)
    # one count of the (unit, uses the port) pairs; np.bincount, not np.unique: the first np.unique of a
    # process imports numpy.ma (about 10 ms, most of a short run's time)
    pairs = np.flatnonzero(np.bincount(dec.unit[ex].astype(np.intp) * 2 + (dec.beats[ex] > 0))).tolist()
    port_units = [p // 2 for p in pairs if p % 2]
    free_units = [p // 2 for p in pairs if not p % 2 and p // 2 < nq]
    return port_units, free_units


def timeline_columns(n: int, limit: int) -> tuple[array.array, array.array, array.array]:
    """Zeroed dispatch, start and end columns for ``n`` instructions.

    Every recorded cycle is at most limit + 1 (a later one faults first), so 4-byte columns do
    whenever the limit allows: the timeline is the run's largest per-instruction record.
    """
    code = "I" if array.array("I").itemsize == 4 and limit + 1 < 1 << 32 else "q"
    return array.array(code, [0]) * n, array.array(code, [0]) * n, array.array(code, [0]) * n


def _bits(mask: int) -> tuple[int, ...]:
    return tuple(b for b in range(mask.bit_length()) if mask >> b & 1)


def schedule(isa: Isa, cfg: ArchConfig, dec: Decoded, state: State, *, timing: bool, limit: int,
             races: RaceChecker | None, accesses: Callable[[RaceChecker, Entry], None]) -> RunResult:
    """Run the program: functional execution interleaved with the cycle schedule.

    Raises:
        SimFault: deadlock, token overflow, no halt, cycle limit, or a data race.
    """
    handlers = [state.handlers.get(ins.mnemonic) for ins in isa.instructions]
    halt_op = isa.by_mnemonic["halt"].index
    waits_prev = [ins.timing == "dma_zero" for ins in isa.instructions]
    nq = _queued_units(isa)
    names = {u.id: u.name for u in isa.units}
    control_name = next(u.name for u in isa.units if not u.queue)
    bits = [_bits(m) for m in range(1 << nq)]
    depth, max_tok = cfg.queue_depth, cfg.token_max_count
    n_exec = dec.n_exec
    port_units, free_units = unit_roles(dec, nq)
    dispatch, start, end = timeline_columns(n_exec, limit)
    stalls: dict[str, dict[str, int]] = {names[u]: {} for u in range(nq)}
    stalls[control_name] = {}

    pend: list[deque[Entry]] = [deque() for _ in range(nq)]
    starts: list[deque[int]] = [deque(maxlen=depth) for _ in range(nq)]
    n_disp = [0] * nq
    n_sched = [0] * nq
    free_at = [0] * nq
    last_e = [0] * nq
    chan, ledger, wait_bits, sig_bits = token_channels(nq, max_tok, bits)
    head_ready = [-1] * nq  # each unit's head's earliest start ignoring the port, once known (-1: not yet)
    free_queues = [(u, pend[u]) for u in free_units]
    several_ports = len(port_units) > 1
    rows = EntryChunks(dec)
    chunk_base = -CHUNK
    chunk: list[Entry] = []
    pc = 0
    d_prev = -1
    max_e = 0
    port_free = 0
    halted = False
    cycles = 0

    msg = Messages(isa, cfg, dec, limit)

    # The per-instruction work below is the simulator's hot path: state lives in locals and lists
    # indexed by unit, optional features are bound once, and the stall attribution and the race
    # checker's clock updates are inlined (each is a few list operations).
    stall_of = [stalls[names[u]] for u in range(nq)]
    control_stalls = stalls[control_name]
    rc_clock: list[list[int]] = races.clock if races is not None else []
    rc_remaining: list[int] = races.remaining if races is not None else []
    rc_join = races.join if races is not None else None
    rc_token = races.token if races is not None else None

    def ready(entry: Entry) -> int:
        """Earliest start of a unit's head ignoring the port, or -1 if a token is missing.

        Cached in ``head_ready`` (the caller reads it first): once a head has all its tokens, nothing it
        depends on changes until it starts.
        """
        u = entry.unit
        t = dispatch[entry.index] + 1
        f = free_at[u]
        if f > t:
            t = f
        for v in bits[entry.wait]:
            ch = chan[v][u]
            if not ch:
                return -1
            if timing:
                signalled, _, _ = ch[0]  # the oldest token's end cycle
                if signalled > t:
                    t = signalled
        if waits_prev[entry.op] and last_e[u] > t:
            t = last_e[u]
        head_ready[u] = t
        return t

    def overflow(v: int, u: int, j: int, i: int | None = None) -> SimFault:
        return msg.overflow(v, u, j, ledger[v][u].producer(j) if i is None else i)

    def start_timed(entry: Entry, s: int) -> None:
        """Start ``entry`` at cycle ``s``: consume its tokens, attribute its stall, fix its end, execute it, signal."""
        nonlocal max_e, port_free
        u = entry.unit
        i = entry.index
        head_ready[u] = -1  # its successor heads the queue now
        if races is not None:
            rc_clock[u][u] += 1  # a new epoch of unit u (its own clock component; see hazards)
            rc_remaining[u] -= 1
        base = dispatch[i] + 1
        f = free_at[u]
        if f > base:
            base = f
        tok = 0
        wait = entry.wait
        if wait:
            for v, ch, led in wait_bits[u << nq | wait]:
                e_p, clock, _ = ch.popleft()
                if e_p > tok:
                    tok = e_p
                j = led.consume(s)
                if j >= 0:
                    raise overflow(v, u, j)
                if rc_join is not None:
                    rc_join(u, clock)
        beats = entry.beats
        if s > base:  # attribute the wait: tokens first, then loads in flight, then the port
            st = stall_of[u]
            if tok > base:
                st["token"] = st.get("token", 0) + tok - base
                hi = tok
            else:
                hi = base
            if waits_prev[entry.op]:
                le = last_e[u]
                if le > hi:
                    st["in_flight_loads"] = st.get("in_flight_loads", 0) + le - hi
                    hi = le
            if beats and s > hi:
                st["dram_port"] = st.get("dram_port", 0) + s - hi
        if beats:
            port_free = s + beats
        e = s + entry.lat
        le = last_e[u]
        if le > e:
            e = le
        if e > limit:
            raise msg.limit_start(i, e)
        last_e[u] = e
        free_at[u] = s + entry.occ
        starts[u].append(s)
        start[i] = s
        end[i] = e
        if e > max_e:
            max_e = e
        # Then what every start does (as in start_untimed, written out: a call per instruction costs).
        n_sched[u] += 1
        if races is not None:
            accesses(races, entry)
        h = handlers[entry.op]
        if h is not None:
            h(entry.operands)
        sig = entry.signal
        if sig:
            clock = rc_token(u) if rc_token is not None else NO_CLOCK
            for w, ch, led in sig_bits[u << nq | sig]:
                ch.append((e, clock, i))
                j = led.signal(e, i)
                if j >= 0:
                    raise overflow(u, w, j)

    def start_untimed(entry: Entry, _: int) -> None:
        """Start ``entry`` without timing: consume its tokens in execution order, execute it, signal.

        Without timing a channel's count is taken in execution order: a signal that makes it exceed
        ``tokens.max_count`` faults.
        """
        u = entry.unit
        head_ready[u] = -1  # its successor heads the queue now
        if races is not None:
            rc_clock[u][u] += 1  # a new epoch of unit u (its own clock component; see hazards)
            rc_remaining[u] -= 1
        wait = entry.wait
        if wait:
            for _v, ch, _led in wait_bits[u << nq | wait]:
                _, clock, _ = ch.popleft()
                if rc_join is not None:
                    rc_join(u, clock)
        n_sched[u] += 1
        if races is not None:
            accesses(races, entry)
        h = handlers[entry.op]
        if h is not None:
            h(entry.operands)
        sig = entry.signal
        if sig:
            i = entry.index
            clock = rc_token(u) if rc_token is not None else NO_CLOCK
            for w, ch, _led in sig_bits[u << nq | sig]:
                ch.append((0, clock, i))
                if len(ch) > max_tok:
                    raise overflow(u, w, len(ch) - 1, i)

    start_instr = start_timed if timing else start_untimed

    def dispatch_in_order() -> bool:
        """Dispatch in program order as far as the rules allow; whether anything was dispatched."""
        nonlocal chunk_base, chunk, pc, d_prev
        progress = False
        while pc < n_exec and not halted:
            if pc - chunk_base >= CHUNK:
                chunk_base = pc
                chunk = rows.get(pc)
            row = chunk[pc - chunk_base]
            u = row.unit
            if u >= nq:  # sync or halt: once every queue is empty
                if any(pend):
                    break
                dispatch_barrier(row.op)
                progress = True
                continue
            if len(pend[u]) >= depth:
                break
            d = d_prev + 1
            if timing:
                k = n_disp[u] - depth
                if k >= 0:
                    sk = starts[u][k - (n_sched[u] - len(starts[u]))] + 1
                    if sk > d:
                        control_stalls["queue_full"] = control_stalls.get("queue_full", 0) + sk - d
                        d = sk
                if d > limit:
                    raise msg.limit_dispatch(pc, d)
                dispatch[pc] = d  # what the head's ready() reads (untimed it reads 0 and is not used)
            pend[u].append(row)
            n_disp[u] += 1
            d_prev = d
            pc += 1
            progress = True
        return progress

    def dispatch_barrier(op: int) -> None:
        """Dispatch the ``sync`` or ``halt`` at ``pc``: at the completion of every instruction before it."""
        nonlocal pc, d_prev, halted, cycles
        d = d_prev + 1
        if timing and max_e > d:
            control_stalls["barrier"] = control_stalls.get("barrier", 0) + max_e - d
            d = max_e
        if races is not None:
            races.sync()
        dispatch[pc] = start[pc] = end[pc] = d
        d_prev = d
        pc += 1
        if op == halt_op:
            halted = True
            cycles = d + 1
            if timing and cycles > limit:
                raise msg.limit_halt(pc - 1, d)

    def start_ready(progress: bool) -> bool:
        """Start what is ready; whether anything did (or ``progress``: whether anything was dispatched).

        Units that do not use the DRAM port start whenever they are ready; then the port goes to the
        user ready first.
        """
        for u, q in free_queues:
            while q:
                head = q[0]
                if head.beats:
                    break
                r = head_ready[u]
                if r < 0:
                    r = ready(head)
                    if r < 0:
                        break
                start_instr(q.popleft(), r)
                progress = True
        best_r = best_u = -1
        blocked = False
        for u in port_units:
            q = pend[u]
            if not q:
                continue
            head = q[0]
            if not head.beats:
                blocked = True
                continue
            r = head_ready[u]
            if r < 0:
                r = ready(head)
            if r < 0:
                blocked = True
            elif not timing:
                start_instr(q.popleft(), 0)
                progress = True
            elif best_u < 0 or r < best_r:
                best_r, best_u = r, u
        if best_u >= 0:
            r, u = best_r, best_u
            # Safe when nothing else could claim the port earlier: an unknown head could, and so
            # could an instruction not dispatched yet (ready no earlier than d_prev + 2).
            unknown_future = False
            if several_ports and pc < n_exec and not halted:
                for v in port_units:
                    if v != u and not pend[v]:
                        unknown_future = True
            safe = not blocked and (not unknown_future or r < d_prev + 2)
            if safe or not progress:
                start_instr(pend[u].popleft(), r if r > port_free else port_free)
                progress = True
        return progress

    while start_ready(dispatch_in_order()):  # round after round, until nothing dispatches or starts
        pass
    if not halted or any(pend):
        if pc >= n_exec and not halted and not any(pend):
            raise msg.never_halts()
        raise _deadlock(pend, chan, bits, msg, pc)

    if timing:
        _check_leftovers(ledger, overflow)
    return RunResult(cycles=cycles if timing else 0, executed=pc, dispatch=dispatch, start=start, end=end,
                     stalls=_in_cause_order(stalls, control_name))


def _queued_units(isa: Isa) -> int:
    """How many queued units the ISA has; the scheduler indexes its lists by their ids, 0 to that number - 1."""
    queued = sorted(u.id for u in isa.queued_units)
    nq = len(queued)
    if queued != list(range(nq)):
        raise SimFault(f"{isa.source}: the simulator needs the queued units to have ids 0..{nq - 1}.")
    return nq


def _check_leftovers(ledger: list[list[TokenLedger]], overflow: Callable[[int, int, int], SimFault]) -> None:
    """At the end of a timed run: a channel left holding more tokens than it may is an overflow."""
    for v, row in enumerate(ledger):
        for u, led in enumerate(row):
            j = led.leftover()
            if j >= 0:
                raise overflow(v, u, j)


def _in_cause_order(stalls: dict[str, dict[str, int]], control_name: str) -> dict[str, dict[str, int]]:
    """Each unit's stall causes in one order, whichever stalled first."""
    return {name: {c: causes[c] for c in (CONTROL_CAUSES if name == control_name else UNIT_CAUSES) if c in causes}
            for name, causes in stalls.items()}


def _deadlock(pend: list[deque[Entry]], chan: list[list[Channel]], bits: list[tuple[int, ...]], msg: Messages,
              pc: int) -> SimFault:
    """The first unit head that waits on an empty channel names the deadlock."""
    for u, q in enumerate(pend):
        if not q:
            continue
        head = q[0]
        for v in bits[head.wait]:
            if not chan[v][u]:
                return msg.deadlock(head.index, u, v, pc)
    return msg.no_progress(pc)


__all__ = ["CONTROL_CAUSES", "UNIT_CAUSES", "Entry", "RunResult", "schedule", "timeline_columns", "unit_roles"]
