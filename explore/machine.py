"""How busy the machine is: the load average and the CPU time all its processes use.

A sweep records both over its Dask phase, so that a slow sweep (or a
benchmark's speed-up) can be read against the other work the machine did
meanwhile: CPU seconds the whole machine used minus those inside the sweep's
tasks are other jobs' work, plus Dask's and the client's own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
#: Fields of /proc/stat's ``cpu`` line that count as busy (``guest`` time is already inside ``user``).
_BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def busy_cpu_seconds() -> float | None:
    """CPU seconds all processes have used since boot, summed over cores (Linux), or None elsewhere."""
    try:
        first = PROC_STAT.read_text(encoding="ascii").splitlines()[0].split()
    except (OSError, IndexError, UnicodeDecodeError):
        return None
    if not first or first[0] != "cpu":
        return None
    ticks = dict(zip(_FIELDS, (int(v) for v in first[1:]), strict=False))
    return sum(ticks.get(name, 0) for name in _BUSY_FIELDS) / os.sysconf("SC_CLK_TCK")


def load_average() -> float | None:
    """The 1-minute load average, or None where the system has none."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


@dataclass(frozen=True)
class MachineSample:
    """The machine at one moment: see :func:`sample`."""

    busy_cpu_seconds: float | None
    load_average: float | None


def sample() -> MachineSample:
    return MachineSample(busy_cpu_seconds(), load_average())


def busy_between(start: MachineSample, end: MachineSample) -> float | None:
    """CPU seconds the whole machine used between two samples, or None if either lacks the figure."""
    if start.busy_cpu_seconds is None or end.busy_cpu_seconds is None:
        return None
    return end.busy_cpu_seconds - start.busy_cpu_seconds


__all__ = ["MachineSample", "busy_between", "busy_cpu_seconds", "load_average", "sample"]
