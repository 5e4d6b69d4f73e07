"""Timelines: Chrome/Perfetto trace-event JSON and a plain per-instruction log.

The trace has one track (``tid``) per unit, named after it, and one
complete event (``ph: "X"``) per instruction spanning the cycles it occupies
its unit (start to start + occupancy: slices of one unit never overlap,
which the trace viewers require, although a pipelined DMA's data is still in
flight afterwards), with its index, pc, dispatch, start and completion
cycles and operand fields as ``args``; one cycle is shown as one microsecond.  It opens in ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from tinynpu.fsio import write_output
from tinynpu.isa import Isa
from tinynpu.simulator.decode import Decoded
from tinynpu.simulator.stats import Stats


def _fields(isa: Isa, dec: Decoded, i: int, mnem: str) -> dict[str, int]:
    vals = dict(zip(isa.by_mnemonic[mnem].operands, dec.values(slice(i, i + 1))[0].tolist(), strict=False))
    if "wait" in isa.by_mnemonic[mnem].field_map:
        vals["wait"], vals["signal"] = int(dec.wait[i]), int(dec.signal[i])
    return vals


def write_trace(path: Path, isa: Isa, dec: Decoded, stats: Stats) -> None:
    """Write the trace; refuses to overwrite an existing file that is not a trace (no --force here)."""
    events: list[dict[str, object]] = [
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": u.id, "args": {"name": u.name}} for u in isa.units
    ]
    events.append({"name": "process_name", "ph": "M", "pid": 0,
                   "args": {"name": f"tinynpu ({stats.config})"}})
    uid = isa.unit_ids
    wb = isa.word_bytes
    occ = dec.occ.tolist()
    for i, unit, mnem, d, s, e in stats.timeline:
        events.append({"name": mnem, "ph": "X", "pid": 0, "tid": uid[unit], "ts": s, "dur": occ[i],
                       "args": {"index": i, "pc": f"0x{i * wb:x}", "dispatch": d, "start": s, "complete": e,
                                "fields": _fields(isa, dec, i, mnem)}})
    data = json.dumps({"traceEvents": events, "displayTimeUnit": "ns",
                       "otherData": {"cycles": stats.cycles, "config": stats.config}})
    write_output(path, data, overwrite=False, magic=b'{"traceEvents"')


def write_log(out: TextIO, isa: Isa, dec: Decoded, stats: Stats) -> None:
    """One line per executed instruction: index, pc, unit, mnemonic, dispatch/start/end cycles."""
    wb = isa.word_bytes
    if not stats.timing:
        mn = [ins.mnemonic for ins in isa.instructions]
        for i, op in enumerate(dec.op[: stats.instructions_total].tolist()):
            out.write(f"{i:7d} pc=0x{i * wb:06x} {mn[op]:8s}\n")
        return
    out.write(f"{'index':>7} {'pc':>10} {'unit':8} {'mnemonic':8} {'dispatch':>10} {'start':>10} "
              f"{'end':>10}\n")
    for i, unit, mnem, d, s, e in stats.timeline:
        out.write(f"{i:7d} 0x{i * wb:08x} {unit:8} {mnem:8} {d:10d} {s:10d} {e:10d}\n")


__all__ = ["write_log", "write_trace"]
