"""Energy of a run: the events it caused, priced by the config's energy table.

The simulator counts the events once, from the instructions that executed
(``simulator/stats.py``, shared by the Python and the native core, so both
give the same energy); this module only multiplies them by the per-action
energies of :class:`~tinynpu.isa.energy_model.EnergyTable`, which the config
derived from its sizes.  docs/energy.md gives the formulas and says what each
event counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tinynpu.isa import ArchConfig
from tinynpu.isa.energy_model import EnergyTable

SCRATCHPADS = ("a_reg", "b_reg", "acc")
# mac: the array computing; array_idle: its leakage while it waits; static: every other leakage (and the
# array's while it computes); clock: the clocked registers.  docs/energy.md has the table.
COMPONENTS = ("mac", "array_idle", "alu", *SCRATCHPADS, "dram", "static", "clock")
EDP_UNITS = "pJ*s"


@dataclass(frozen=True, kw_only=True)
class Events:
    """What a run did, counted from what each executed instruction really does.

    Attributes:
        macs: multiply-accumulates the MAC array issued, padding included
            (tile^3 per tmm step).
        alu_elements: accumulator elements processed, by pricing class: an ALU
            instruction's timing class (rows x tile each: the ALU works on
            whole rows; rows x n x tile for a row reduction, every segment it
            reads), and ``requantize`` for the elements a store requantizes
            or clamps (rows x cols, with narrow or relu).
        scratchpad_read_bytes: bytes read from each scratchpad, by config key.
        scratchpad_write_bytes: bytes written into each scratchpad, by config key.
        dram_bytes: bytes across the DRAM port, reads and writes.
        cycles: the run's cycle count (0 when timing was off).
        array_busy_cycles: cycles the MAC array computes (the tensor unit's
            occupancy); the rest of ``cycles`` it waits.
    """

    macs: int
    alu_elements: Mapping[str, int]
    scratchpad_read_bytes: Mapping[str, int]
    scratchpad_write_bytes: Mapping[str, int]
    dram_bytes: int
    cycles: int
    array_busy_cycles: int = 0

    def __post_init__(self) -> None:
        for name in ("macs", "dram_bytes", "cycles", "array_busy_cycles"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, not {value!r}")
        if any(not isinstance(v, int) or v < 0 for v in self.alu_elements.values()):
            raise ValueError(f"alu_elements must give elements >= 0 per pricing class, not {self.alu_elements!r}")
        for name in ("scratchpad_read_bytes", "scratchpad_write_bytes"):
            table = getattr(self, name)
            if sorted(table) != sorted(SCRATCHPADS) or any(v < 0 for v in table.values()):
                raise ValueError(f"{name} must give bytes >= 0 for exactly {', '.join(SCRATCHPADS)}, not {table!r}")

    def to_json(self) -> dict[str, Any]:
        return {"macs": self.macs, "alu_elements": dict(sorted(self.alu_elements.items())),
                "scratchpad_read_bytes": dict(self.scratchpad_read_bytes),
                "scratchpad_write_bytes": dict(self.scratchpad_write_bytes), "dram_bytes": self.dram_bytes,
                "cycles": self.cycles, "array_busy_cycles": self.array_busy_cycles}


@dataclass(frozen=True)
class Energy:
    """Energy of one run, by component, and its energy-delay product.

    Attributes:
        breakdown_pj: picojoules per component, in :data:`COMPONENTS` order.
        seconds: the run's duration, cycles / clock.
        table: the per-action figures that priced it (each derived or given).
        events: what was priced (``energy_events`` in the JSON): the counts docs/energy.md defines.
    """

    breakdown_pj: tuple[tuple[str, float], ...]
    seconds: float
    table: EnergyTable | None = None
    events: Events | None = None

    @property
    def total_pj(self) -> float:
        return sum(pj for _, pj in self.breakdown_pj)

    @property
    def edp(self) -> float:
        """Energy x delay in pJ*s (picojoules times seconds)."""
        return self.total_pj * self.seconds

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"energy_pj": self.total_pj, "energy_breakdown_pj": dict(self.breakdown_pj),
                               "edp": self.edp, "edp_units": EDP_UNITS}
        if self.table is not None:
            out["energy_figures"] = self.table.to_json()
        if self.events is not None:
            out["energy_events"] = self.events.to_json()
        return out


def energy_of(cfg: ArchConfig, events: Events) -> Energy:
    """Price ``events`` with ``cfg``'s energy table."""
    table = cfg.energy
    busy = min(events.array_busy_cycles, events.cycles)  # without timing there are no cycles to wait in
    idle = events.cycles - busy
    pj = {
        "mac": events.macs * table.mac_pj,
        "array_idle": idle * table.array_leakage_pj_per_cycle,
        "alu": sum(n * table.alu_pj(cls) for cls, n in sorted(events.alu_elements.items())),
        **{key: events.scratchpad_read_bytes[key] * table.scratchpad_read_pj(key)
           + events.scratchpad_write_bytes[key] * table.scratchpad_write_pj(key) for key in SCRATCHPADS},
        "dram": events.dram_bytes * table.dram_pj_per_byte,
        "static": events.cycles * table.static_pj_per_cycle + busy * table.array_leakage_pj_per_cycle,
        "clock": (busy if table.clock_gating else events.cycles) * table.clock_pj_per_cycle,
    }
    return Energy(breakdown_pj=tuple((name, pj[name]) for name in COMPONENTS),
                  seconds=events.cycles / (cfg.clock_mhz * 1e6), table=table, events=events)


__all__ = ["COMPONENTS", "EDP_UNITS", "SCRATCHPADS", "Energy", "Events", "energy_of"]
