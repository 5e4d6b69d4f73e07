"""The ISA's frozen records: units, scopes, fields, instructions and what they access.

:mod:`tinynpu.isa.spec` loads them from ``isa.yaml`` into an :class:`~tinynpu.isa.spec.Isa`;
:mod:`tinynpu.isa.encoding` turns field values into instruction words and back.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Unit:
    """A functional unit; ``id`` is its bit in the wait/signal masks."""

    name: str
    id: int
    queue: bool
    summary: str


@dataclass(frozen=True)
class Scope:
    """A scratchpad as named in assembly (``a``) and in the config (``a_reg``)."""

    name: str
    config_key: str
    id: int


@dataclass(frozen=True)
class Field:
    """An operand field of an instruction word.

    ``kind`` says how assembly writes it: ``sp_row`` and ``sp_tile`` are
    scratchpad addresses (rows; tiles are written as row numbers that must be
    multiples of the config's tile edge), ``scope`` selects the scratchpad of a combined operand,
    ``units`` is a wait/signal mask written as ``load|tensor``.
    """

    name: str
    lsb: int
    msb: int
    kind: str
    summary: str
    operand: str | None = None
    scope: str | None = None
    signed: bool = False
    min: int | None = None
    max: int | None = None
    default: int | None = None
    max_is_tile: bool = False  # YAML `max: tile`: at most the config's tile edge (a row's elements)
    default_is_tile: bool = False  # YAML `default: tile`: a whole row

    @property
    def width(self) -> int:
        return self.msb - self.lsb + 1

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb

    @property
    def lo(self) -> int:
        """Smallest encodable value, after the field's own ``min``."""
        base = -(1 << (self.width - 1)) if self.signed else 0
        return base if self.min is None else max(base, self.min)

    @property
    def hi(self) -> int:
        """Largest encodable value, after the field's own ``max``."""
        base = (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1
        return base if self.max is None else min(base, self.max)

    def hi_at(self, tile: int | None) -> int:
        """Largest value a config with tile edge ``tile`` accepts (``None``: any encodable value)."""
        return min(self.hi, tile) if self.max_is_tile and tile is not None else self.hi

    def default_at(self, tile: int | None) -> int | None:
        """The value assembly and encoding use when the field is omitted (``None``: no default)."""
        return tile if self.default_is_tile else self.default


@dataclass(frozen=True)
class FixedBits:
    """A bit range whose value is fixed for an instruction (opcode, funct, reserved zeros)."""

    name: str
    lsb: int
    msb: int
    value: int

    @property
    def mask(self) -> int:
        return ((1 << (self.msb - self.lsb + 1)) - 1) << self.lsb


@dataclass(frozen=True)
class TimingClass:
    """Occupancy and latency formulas (text; implemented by simulator and RTL).

    ``cycles_per_row`` is the class's one constant, when it has one: the fixed cycles a sequential
    unit spends per row (``vrecip``'s divider); the simulator's timing and the RTL read it from here.
    """

    name: str
    occupancy: str
    latency: str
    note: str
    cycles_per_row: int | None = None


@dataclass(frozen=True)
class Access:
    """A region an instruction reads or writes, as the race checker and the native core see it.

    ``space`` is ``dram``, a scope name, or (``space_operand``) an operand whose
    value is a scope id.  ``bounds`` are expressions over the operands
    (:mod:`tinynpu.isa.regions`): ``(lo, hi)`` rows of a scratchpad, half-open,
    or a DRAM footprint ``(addr, stride, rows, row_bytes)``.  ``unless`` is a
    condition under which the access is not made (``src == dst``: the write
    covers it).
    """

    write: bool
    space: str
    space_operand: bool
    bounds: tuple[str, ...]
    unless: str | None = None

    @property
    def dram(self) -> bool:
        return self.space == DRAM_SPACE


@dataclass(frozen=True)
class Check:
    """A static rule: a program whose instruction makes ``fault`` true is refused before it runs.

    ``message`` says why, with ``{expression}`` fields over the operands; the simulator prefixes
    the instruction's index, pc and mnemonic, the assembler the source position of operand ``at``
    (the instruction's when None).  An ``integer_only`` check is a fault on float configs only,
    and both add the config's name and accumulator type to its message.
    """

    fault: str
    message: str
    at: str | None = None
    integer_only: bool = False

    @property
    def fields(self) -> tuple[str, ...]:
        """The expressions of the message's ``{...}`` fields."""
        return tuple(f for _, f, _, _ in string.Formatter().parse(self.message) if f is not None)

    def explain(self, values: Mapping[str, Any], *, config: str, acc_dtype: str) -> str:
        """The message with its fields' ``values`` (keyed by expression), for a program on ``config``."""
        text = self.message.format_map(values)
        return f"{text} (config {config!r} is {acc_dtype})" if self.integer_only else text


DRAM_SPACE = "dram"
# What each stats class adds to the run's statistics (simulator/stats.py):
STATS_CLASSES = {
    "dma_in": "writes `rows` whole rows of the scratchpad its accesses name; DRAM reads counted per tensor",
    "dma_out": "reads rows * cols accumulator elements; DRAM writes counted per tensor",
    "tmm": "m * n * k tile steps: MACs, A and B tile reads, acc tile writes (and reads when accumulating)",
    "alu": "reads and writes its destination rows, and reads the rows of its other accumulator accesses",
    "alu_reduce": "reads the n segments of each of its rows logical rows (rows * n source rows), combines "
                  "rows * n * T elements, and writes its destination rows",
    "control": "nothing (executed by the dispatcher)",
}
STATS_OPERANDS = {"dma_out": ("rows", "cols"), "tmm": ("m", "n", "k", "accumulate"), "alu": ("rows",),
                   "alu_reduce": ("rows", "n")}


@dataclass(frozen=True)
class Instruction:
    """One instruction: its fields, fixed bits, unit, timing, accesses, stats class and documentation.

    ``operands`` is the order in which the simulator's semantics, the race
    checker and the native core take the operand values: the order of the
    fields in isa.yaml, without the ``units`` masks (wait, signal).
    """

    mnemonic: str
    unit: str
    timing: str
    stats: str
    accesses: tuple[Access, ...]
    checks: tuple[Check, ...]
    integer_only: bool
    summary: str
    description: str
    semantics: str
    assembly: str
    fields: tuple[Field, ...]
    fixed: tuple[FixedBits, ...]
    mask: int
    match: int
    index: int

    @functools.cached_property
    def field_map(self) -> dict[str, Field]:
        return {f.name: f for f in self.fields}

    @functools.cached_property
    def packing(self) -> tuple[tuple[int, int], ...]:
        """``(value mask, lsb)`` of each field, in field order (what :func:`encoding.pack` applies)."""
        return tuple(((1 << f.width) - 1, f.lsb) for f in self.fields)

    @functools.cached_property
    def operands(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields if f.kind != "units")

    @functools.cached_property
    def scope_operands(self) -> tuple[str, ...]:
        """The operands whose value is a scope id (``load``'s ``scope``)."""
        return tuple(f.name for f in self.fields if f.kind == "scope")

    def fixed_value(self, name: str) -> int:
        """Value of a fixed range such as ``opcode`` or ``funct``."""
        for fixed in self.fixed:
            if fixed.name == name:
                return fixed.value
        raise KeyError(name)


__all__ = ["DRAM_SPACE", "STATS_CLASSES", "STATS_OPERANDS", "Access", "Check", "Field", "FixedBits", "Instruction",
           "Scope", "TimingClass", "Unit"]
