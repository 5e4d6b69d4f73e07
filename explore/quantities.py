"""Objective values written for people: ``13,294,000`` cycles, ``3.33 MiB``, ``7.38 mJ``, ``1.792 mm^2``.

A sweep's figures span many orders of magnitude (a 32x32 array's energy is
billions of picojoules), and ``5.12025e+09`` makes a reader count digits.  Each
objective has one unit and is shown in it: counts with thousands separators,
bytes in binary multiples, energy and energy-delay in SI prefixes of their
unit, area in mm^2.  The JSON summary keeps the raw numbers.
"""

from __future__ import annotations

import math

_SI = ((1e-18, "a"), (1e-15, "f"), (1e-12, "p"), (1e-9, "n"), (1e-6, "µ"), (1e-3, "m"), (1.0, ""), (1e3, "k"),
       (1e6, "M"))
_BINARY = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def si(value: float, unit: str) -> str:
    """``value`` (in ``unit``, unscaled) with the SI prefix that leaves 1 to 999 before the point, 3 digits."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}"
    scale, prefix = next(((s, p) for s, p in reversed(_SI) if abs(value) >= s), _SI[0])
    return f"{value / scale:.3g} {prefix}{unit}"


def binary_bytes(value: float) -> str:
    """Bytes in GiB, MiB or KiB (two decimals) where they reach one of them, else whole bytes."""
    scale, unit = next(((s, u) for s, u in _BINARY if abs(value) >= s), (1, "B"))
    return f"{value / scale:.2f} {unit}" if scale > 1 else f"{value:,.0f} B"


def objective(name: str, value: float) -> str:
    """One objective's value in its unit: ``cycles``, ``dram_bytes``, ``energy_pj``, ``edp``, ``area_mm2`` and the
    LLM figures (times in seconds, ``tokens_per_second``, ``energy_per_token_pj``)."""
    if name == "cycles":
        return f"{value:,.0f}"
    if name == "dram_bytes":
        return binary_bytes(value)
    if name == "energy_pj":
        return si(value * 1e-12, "J")
    if name == "edp":  # the simulator's EDP is picojoule-seconds
        return si(value * 1e-12, "J*s")
    if name == "area_mm2":
        return f"{value:.3f} mm^2"
    if name.endswith("_s"):  # time to first token, time per output token
        return si(value, "s")
    if name == "tokens_per_second":
        return f"{value:,.0f} tokens/s"
    if name == "energy_per_token_pj":
        return si(value * 1e-12, "J")
    return f"{value:.4g}"


def ratio(value: float) -> str:
    """A ratio of two measurements, ``1.41x``."""
    return f"{value:.3g}x" if math.isfinite(value) else "inf"


__all__ = ["binary_bytes", "objective", "ratio", "si"]
