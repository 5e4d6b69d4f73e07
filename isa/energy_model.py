"""A config's energy table: every per-action figure derived once from its sizes and the cited tables.

``isa/energy_tables.yaml`` holds the published figures (Horowitz's 45 nm
arithmetic and SRAM energies, DRAM interfaces, leakage per area and clock
energy per register bit) and the areas ``tinynpu synth`` measured; this module
turns them into the figures of one config (its tile edge, dtypes, scratchpad
sizes, DRAM interface and clock).  A config may override any figure under its
``energy:`` key; :class:`EnergyTable` remembers which figures were derived
(with the formula and its numbers) and which were given, and the run reports
say so.  docs/energy.md writes every formula out.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tinynpu.errors import SpecError
from tinynpu.isa.spec import ISA_DIR, Isa, _fail
from tinynpu.isa.yamlsrc import KeyPath, YamlSource, format_key_path, load_yaml

TABLES_PATH = ISA_DIR / "energy_tables.yaml"
SCOPE_KEYS = ("a_reg", "b_reg", "acc")
REQUANTIZE = "requantize"  # the pricing class of a store's requantize or clamp (per element)
DERIVED, GIVEN = "derived", "given"
_DTYPE_BITS = {"int8": 8, "int32": 32, "float32": 32}
# SRAM area model of `tinynpu synth` (rtl/synth.py, docs/area.md), restated here because the ISA package
# must not import the RTL package; tests/test_energy.py checks the two agree.
SRAM_BITCELL_UM2 = 0.346
SRAM_ARRAY_EFFICIENCY = 0.6

# What each figure means, for the messages: a dotted name's first part -> the meaning.
MEANINGS: dict[str, str] = {
    "mac_pj": "pJ of one multiply (input dtype) or accumulate add (accumulator dtype) of the MAC array",
    "alu_pj_per_element": "pJ of one ALU element, by timing class (or one number for every class)",
    "scratchpad_pj_per_byte": "pJ to read or write one byte of a scratchpad",
    "dram_pj_per_byte": "pJ to move one byte across the DRAM port (read or write)",
    "static_pj_per_cycle": "pJ of leakage per cycle of everything but the MAC array",
    "array_leakage_pj_per_cycle": "pJ of leakage per cycle of the MAC array",
    "clock_pj_per_cycle": "pJ per cycle of the clocked registers",
}
SWITCHES = ("clock_gating",)


@dataclass(frozen=True)
class Figure:
    """One per-action energy: its dotted name, value, and how it was obtained."""

    name: str   # e.g. ``scratchpad_pj_per_byte.acc.read``
    pj: float
    how: str    # DERIVED or GIVEN
    basis: str  # the formula with its numbers, or where the config gives it

    def to_json(self) -> dict[str, Any]:
        return {"pj": self.pj, "how": self.how, "basis": self.basis}


def _check_value(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise SpecError(f"{what} must be a finite number >= 0, not {value!r}.")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class EnergyTable:
    """Per-action energies in picojoules, each derived or given (docs/energy.md).

    Attributes:
        figures: every figure, by dotted name.
        clock_gating: the registers are clocked only while the MAC array computes (else every cycle).
        dram_interface: the DRAM interface (``DDR4``, ...) or ``""`` when the config gives the DRAM figure.
        dram_channels: channels of that interface the config's DRAM bandwidth needs (0 without interface).
    """

    figures: tuple[Figure, ...]
    clock_gating: bool = False
    dram_interface: str = ""
    dram_channels: int = 0

    def __post_init__(self) -> None:
        names = [f.name for f in self.figures]
        if len(set(names)) != len(names):
            raise SpecError(f"energy figures must be named once each, not {names}.")
        for f in self.figures:
            _check_value(f"energy {f.name}", f.pj)
        for key in SCOPE_KEYS:
            for rw in ("read", "write"):
                if f"scratchpad_pj_per_byte.{key}.{rw}" not in names:
                    raise SpecError(f"energy table must price the scratchpads {', '.join(SCOPE_KEYS)}: "
                                    f"scratchpad_pj_per_byte.{key}.{rw} is missing.")

    def pj(self, name: str) -> float:
        return self._by_name[name].pj

    @functools.cached_property
    def _by_name(self) -> dict[str, Figure]:
        return {f.name: f for f in self.figures}

    @property
    def mac_multiply_pj(self) -> float:
        return self.pj("mac_pj.multiply")

    @property
    def mac_add_pj(self) -> float:
        return self.pj("mac_pj.add")

    @property
    def mac_pj(self) -> float:
        """One multiply-accumulate: a multiply at the input dtype plus an add at the accumulator dtype."""
        return self.mac_multiply_pj + self.mac_add_pj

    def alu_pj(self, pricing_class: str) -> float:
        """pJ per element of an ALU timing class (or :data:`REQUANTIZE`)."""
        return self.pj(f"alu_pj_per_element.{pricing_class}")

    @property
    def alu_pj_per_element(self) -> float:
        """The ``alu`` timing class's figure (every ALU instruction of today's ISA)."""
        return self.alu_pj("alu")

    def scratchpad_read_pj(self, config_key: str) -> float:
        return self.pj(f"scratchpad_pj_per_byte.{config_key}.read")

    def scratchpad_write_pj(self, config_key: str) -> float:
        return self.pj(f"scratchpad_pj_per_byte.{config_key}.write")

    @property
    def dram_pj_per_byte(self) -> float:
        return self.pj("dram_pj_per_byte")

    @property
    def static_pj_per_cycle(self) -> float:
        return self.pj("static_pj_per_cycle")

    @property
    def array_leakage_pj_per_cycle(self) -> float:
        return self.pj("array_leakage_pj_per_cycle")

    @property
    def clock_pj_per_cycle(self) -> float:
        return self.pj("clock_pj_per_cycle")

    def to_json(self) -> dict[str, Any]:
        return {"figures": {f.name: f.to_json() for f in self.figures}, "clock_gating": self.clock_gating,
                "dram_interface": self.dram_interface, "dram_channels": self.dram_channels,
                "given": [f.name for f in self.figures if f.how == GIVEN]}


@functools.lru_cache(maxsize=1)
def tables() -> dict[str, Any]:
    """The cited tables (``isa/energy_tables.yaml``)."""
    data = load_yaml(TABLES_PATH).data
    assert isinstance(data, dict), TABLES_PATH
    return data


def dram_interfaces() -> tuple[str, ...]:
    return tuple(tables()["dram_interfaces"])


def _leakage_mw_per_um2() -> float:
    ref = tables()["leakage"]
    return float(ref["reference_mw"]) / float(ref["reference_um2"])


def _mw_to_pj_per_cycle(mw: float, clock_mhz: float) -> float:
    """Power in mW at ``clock_mhz`` as energy per cycle in pJ: mW * 1e-3 / (MHz * 1e6) * 1e12."""
    return mw * 1e3 / clock_mhz


def _sram_pj_per_byte(kib: float) -> float:
    sram = tables()["sram"]
    return float(sram["reference_pj_per_byte"]) * math.sqrt(kib / float(sram["reference_kib"]))


@dataclass(frozen=True)
class Sizes:
    """What the derivation reads from a config."""

    tile: int
    input_dtype: str
    acc_dtype: str
    scope_bytes: tuple[tuple[str, int], ...]
    dram_interface: str
    dram_bytes_per_cycle: int
    clock_mhz: float
    alu_classes: tuple[str, ...]  # timing classes of the ISA's ALU instructions, then REQUANTIZE


def _derive(s: Sizes) -> Iterator[tuple[str, float, str]]:
    """(name, pJ, formula) of every figure derivable for ``s``."""
    arith = tables()["arithmetic_pj"]
    yield "mac_pj.multiply", float(arith[s.input_dtype]["multiply"]), f"{s.input_dtype} multiply (Horowitz 2014)"
    yield "mac_pj.add", float(arith[s.acc_dtype]["add"]), f"{s.acc_dtype} add (Horowitz 2014)"
    ops_by_class = tables()["alu_element_ops"]
    for cls in s.alu_classes:
        ops = ops_by_class.get(cls, ops_by_class["default"])
        note = "" if cls in ops_by_class else f" (the default row: {cls!r} has no row in energy_tables.yaml)"
        yield (f"alu_pj_per_element.{cls}", sum(float(arith[s.acc_dtype][op]) for op in ops),
               f"{' + '.join(f'{s.acc_dtype} {op}' for op in ops)}{note}")
    sram = tables()["sram"]
    for key, nbytes in s.scope_bytes:
        kib = nbytes / 1024
        read = _sram_pj_per_byte(kib)
        formula = f"{sram['reference_pj_per_byte']} x sqrt({kib:g} KiB / {sram['reference_kib']} KiB)"
        yield f"scratchpad_pj_per_byte.{key}.read", read, formula
        yield (f"scratchpad_pj_per_byte.{key}.write", read * float(sram["write_over_read"]),
               f"{formula} x {sram['write_over_read']}")
    if s.dram_interface:
        bits = float(tables()["dram_interfaces"][s.dram_interface]["pj_per_bit"])
        yield "dram_pj_per_byte", 8 * bits, f"8 x {bits:g} pJ/bit ({s.dram_interface})"
    area = tables()["area"]
    density = _leakage_mw_per_um2()
    array_um2 = s.tile**2 * float(area["pe_um2"])
    sram_bits = sum(8 * nbytes for _, nbytes in s.scope_bytes) + int(area["imem_bits"])
    rest_um2 = s.tile * float(area["logic_um2_per_lane"]) + sram_bits * SRAM_BITCELL_UM2 / SRAM_ARRAY_EFFICIENCY
    per = f"{density * 1e6:.3f} nW/um^2 at {s.clock_mhz:g} MHz"
    yield ("array_leakage_pj_per_cycle", _mw_to_pj_per_cycle(density * array_um2, s.clock_mhz),
           f"{s.tile}^2 PEs x {area['pe_um2']:g} um^2 x {per}")
    yield ("static_pj_per_cycle", _mw_to_pj_per_cycle(density * rest_um2, s.clock_mhz),
           f"({s.tile} lanes x {area['logic_um2_per_lane']:g} um^2 logic + {sram_bits:,} SRAM bits x "
           f"{SRAM_BITCELL_UM2} / {SRAM_ARRAY_EFFICIENCY} um^2) x {per}")
    bits = s.tile * float(area["register_bits_per_lane"]) + float(area["register_bits_fixed"])
    fj = float(tables()["clock"]["register_fj_per_bit"])
    yield ("clock_pj_per_cycle", bits * fj / 1000,
           f"({area['register_bits_fixed']:g} + {s.tile} lanes x {area['register_bits_per_lane']:g}) flip-flops "
           f"x {fj:g} fJ")


def pricing_classes(isa: Isa) -> tuple[str, ...]:
    """What an ALU element is priced by: the timing classes of the ISA's ALU instructions, then a store's
    :data:`REQUANTIZE`.  A new instruction of an existing class gets its class's figure."""
    return (*sorted({i.timing for i in isa.instructions if i.unit == "alu"}), REQUANTIZE)


def figure_names(alu_classes: tuple[str, ...]) -> tuple[str, ...]:
    """Every figure a config's table has, in report order."""
    sizes = Sizes(tile=16, input_dtype="int8", acc_dtype="int32", scope_bytes=tuple((k, 1024) for k in SCOPE_KEYS),
                  dram_interface="DDR4", dram_bytes_per_cycle=16, clock_mhz=1000.0, alu_classes=alu_classes)
    return tuple(name for name, _, _ in _derive(sizes))


def _leaves(node: Any, at: KeyPath) -> Iterator[tuple[KeyPath, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*at, key))
    else:
        yield at, node


def _overrides(src: YamlSource, energy: Any, names: tuple[str, ...]) -> tuple[dict[str, float], bool]:
    """The figures ``energy:`` gives (a scalar ``alu_pj_per_element`` gives every class) and the clock switch."""
    if energy is None:
        return {}, False
    if not isinstance(energy, dict):
        raise _fail(src, ("energy",), "energy must be a mapping of figures to override (docs/energy.md), "
                                      f"not {energy!r}.")
    given: dict[str, float] = {}
    gating = energy.get("clock_gating", False)
    if not isinstance(gating, bool):
        raise _fail(src, ("energy", "clock_gating"), f"energy.clock_gating must be true or false, not {gating!r}.")
    for path, value in _leaves({k: v for k, v in energy.items() if k not in SWITCHES}, ()):
        name = ".".join(map(str, path))
        where = ("energy", *path)
        targets = [n for n in names if n.startswith(name + ".")] if path == ("alu_pj_per_element",) else [name]
        if not all(t in names for t in targets) or not targets:
            raise _fail(src, where, f"{format_key_path(where)} is not a figure of the energy table, so it cannot "
                                    f"be overridden; the figures are {', '.join(names)} (and the switch "
                                    "clock_gating); docs/energy.md derives each.")
        meaning = MEANINGS[name.split(".")[0]]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise _fail(src, where, f"{format_key_path(where)} must be {meaning}, a finite number >= 0, "
                                    f"not {value!r}.")
        given.update(dict.fromkeys(targets, float(value)))
    return given, gating


def energy_table(src: YamlSource, sizes: Sizes) -> EnergyTable:
    """The config's table: each figure derived from ``sizes`` unless ``energy:`` gives it.

    Raises:
        SpecError: with file:line:col: an unknown DRAM interface, an override of a figure that does not
            exist, a negative or non-finite figure, or no DRAM interface and no DRAM figure.
    """
    known = dram_interfaces()
    if sizes.dram_interface and sizes.dram_interface not in known:
        raise _fail(src, ("dram", "interface"), f"dram.interface {sizes.dram_interface!r} is not a DRAM interface "
                                                f"the energy model knows; it knows {', '.join(known)} "
                                                "(isa/energy_tables.yaml, docs/energy.md).")
    data = src.data if isinstance(src.data, dict) else {}
    names = figure_names(sizes.alu_classes)
    given, gating = _overrides(src, data.get("energy"), names)
    if not sizes.dram_interface and "dram_pj_per_byte" not in given:
        raise _fail(src, ("dram",), f"the config names no DRAM interface: set dram.interface to one of "
                                    f"{', '.join(known)}, or give energy.dram_pj_per_byte.")
    where = str(src.path)
    figures = []
    for name, pj, formula in _derive(sizes):
        if name in given:
            figures.append(Figure(name, given[name], GIVEN, f"energy.{name} in {where}"))
        else:
            figures.append(Figure(name, pj, DERIVED, formula))
    if "dram_pj_per_byte" in given and not sizes.dram_interface:
        figures.append(Figure("dram_pj_per_byte", given["dram_pj_per_byte"], GIVEN,
                              f"energy.dram_pj_per_byte in {where}"))
    channels = 0
    if sizes.dram_interface:
        per_channel = float(tables()["dram_interfaces"][sizes.dram_interface]["channel_gb_per_s"])
        channels = math.ceil(sizes.dram_bytes_per_cycle * sizes.clock_mhz / 1000 / per_channel)
    return EnergyTable(figures=tuple(figures), clock_gating=gating, dram_interface=sizes.dram_interface,
                       dram_channels=channels)


def scope_bytes_of(d: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """Bytes of each scratchpad of a config's data: rows x tile x element bytes."""
    def eb(key: str) -> int:
        return _DTYPE_BITS[d["dtypes"]["acc" if key == "acc" else "input"]] // 8
    return tuple((key, d["scopes"][key]["rows"] * d["tile"] * eb(key)) for key in SCOPE_KEYS)


__all__ = ["DERIVED", "GIVEN", "MEANINGS", "REQUANTIZE", "SCOPE_KEYS", "TABLES_PATH", "EnergyTable", "Figure",
           "Sizes", "dram_interfaces", "energy_table", "figure_names", "pricing_classes", "scope_bytes_of", "tables"]
