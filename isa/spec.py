"""The loaded ISA: :func:`load_isa` and the :class:`Isa` it returns.

:func:`load_isa` reads ``isa.yaml``, validates it against ``isa.schema.json``
and then checks what a schema cannot express: every encoding bit covered once,
no two encodings overlapping, defaults and fixed values within their fields.
Everything else in tinynpu (assembler, simulator, RTL package, reference
manual) is derived from the :class:`Isa` returned here.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from tinynpu.errors import SpecError
from tinynpu.isa import encoding, regions
from tinynpu.isa.records import (
    DRAM_SPACE,
    STATS_CLASSES,
    STATS_OPERANDS,
    Access,
    Check,
    Field,
    FixedBits,
    Instruction,
    Scope,
    TimingClass,
    Unit,
)
from tinynpu.isa.yamlsrc import KeyPath, YamlSource, format_key_path, load_yaml

ISA_DIR = Path(__file__).resolve().parent
DEFAULT_ISA_PATH = ISA_DIR / "isa.yaml"
TILES = tuple(1 << e for e in range(2, 8))  # every supported tile edge: powers of two from 4 to 128


@dataclass(frozen=True)
class Isa:
    """The whole instruction set, as loaded and checked from YAML."""

    name: str
    version: int
    word_bits: int
    units: tuple[Unit, ...]
    scopes: tuple[Scope, ...]
    instructions: tuple[Instruction, ...]
    timing_classes: tuple[TimingClass, ...]
    synchronization: str
    timing: str
    source: Path
    digest: str  # sha256 of the canonical JSON of the YAML's data

    def __hash__(self) -> int:
        # equal ISAs have equal digests; the generated hash walked every instruction (0.2 ms), and the
        # simulator hashes the ISA per program run (functools caches keyed on it)
        return hash(self.digest)

    @functools.cached_property
    def by_mnemonic(self) -> dict[str, Instruction]:
        return {i.mnemonic: i for i in self.instructions}

    @functools.cached_property
    def unit_ids(self) -> dict[str, int]:
        return {u.name: u.id for u in self.units}

    @functools.cached_property
    def queued_units(self) -> tuple[Unit, ...]:
        return tuple(u for u in self.units if u.queue)

    @functools.cached_property
    def scope_by_name(self) -> dict[str, Scope]:
        return {s.name: s for s in self.scopes}

    @functools.cached_property
    def scope_by_id(self) -> dict[int, Scope]:
        return {s.id: s for s in self.scopes}

    @functools.cached_property
    def timing_class(self) -> dict[str, TimingClass]:
        return {t.name: t for t in self.timing_classes}

    @property
    def word_bytes(self) -> int:
        return self.word_bits // 8

    def region_expr(self, instr: Instruction, text: str) -> ast.expr:
        """One of ``instr``'s access expressions, parsed (:mod:`tinynpu.isa.regions`)."""
        return regions.parse(text, instr.operands, instr.scope_operands, tuple(s.name for s in self.scopes))

    @functools.cached_property
    def scope_ids(self) -> dict[str, int]:
        return {s.name: s.id for s in self.scopes}

    def per_scope(self, value: Callable[[Scope], int]) -> list[int]:
        """``value(scope)`` for every scope, indexed by scope id (0 for unused ids)."""
        out = [0] * (max(self.scope_ids.values()) + 1)
        for scope in self.scopes:
            out[scope.id] = value(scope)
        return out

    @functools.cached_property
    def max_operands(self) -> int:
        """The most operands any instruction has (the width of the simulator's operand rows)."""
        return max(len(i.operands) for i in self.instructions)

    def encode(self, mnemonic: str, values: Mapping[str, int], *, tile: int | None = None) -> int:
        """Encode one instruction; missing fields take their defaults (:func:`encoding.encode`).

        ``tile`` is the config's tile edge, for the fields whose default or
        range is a row (``cols``); without it, such a field takes the built-in
        default config's tile edge as its default and any encodable value.

        Raises:
            SpecError: unknown mnemonic or field, or a value outside its field.
        """
        instr = self.by_mnemonic.get(mnemonic)
        if instr is None:
            raise SpecError(f"encode: unknown mnemonic {mnemonic!r}.")
        if tile is None and any(f.default_is_tile and f.name not in values for f in instr.fields):
            from tinynpu.isa.config import load_config  # the config layer sits above this one

            return encoding.encode(instr, {**values, **{f.name: load_config("default", self).tile
                                                         for f in instr.fields
                                                         if f.default_is_tile and f.name not in values}})
        return encoding.encode(instr, values, tile)

    def decode(self, word: int) -> tuple[Instruction, dict[str, int]]:
        """Decode one word into its instruction and field values.

        Raises:
            SpecError: the word matches no instruction, or a field is out of range.
        """
        instr = self._decode_table.get(word & 0xFF)
        if instr is None or word & instr.mask != instr.match:
            raise SpecError(f"word 0x{word:0{self.word_bits // 4}x} matches no instruction of {self.name}.")
        values: dict[str, int] = {}
        for field in instr.fields:
            raw = encoding.field_value(word, field)
            if not field.lo <= raw <= field.hi:
                raise SpecError(
                    f"word 0x{word:0{self.word_bits // 4}x} ({instr.mnemonic}): field {field.name!r} "
                    f"holds {raw}, outside {field.lo}..{field.hi}."
                )
            values[field.name] = raw
        return instr, values

    @functools.cached_property
    def _decode_table(self) -> dict[int, Instruction]:
        # opcode and funct live in the low byte of every encoding (checked at load time).
        return {instr.match & 0xFF: instr for instr in self.instructions}


def _fail(src: YamlSource, key_path: KeyPath, what: str) -> SpecError:
    return SpecError(f"{src.where(key_path)}: {what}")


def _field(raw: Mapping[str, Any]) -> Field:
    """A field record; ``max: tile`` / ``default: tile`` become flags resolved against a config."""
    f = dict(raw)
    tile_max, tile_default = f.get("max") == "tile", f.get("default") == "tile"
    if tile_max:
        del f["max"]
    if tile_default:
        del f["default"]
    return Field(**f, max_is_tile=tile_max, default_is_tile=tile_default)


# JSON Schema counts 2048.0 as an integer; YAML's 2048.0 is a float, and every integer field must be written
# as one (a float reaches arithmetic that needs an int).
_StrictValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)),
)


def _schema_check(src: YamlSource, schema_name: str) -> None:
    schema = json.loads((ISA_DIR / schema_name).read_text(encoding="utf-8"))
    errors = sorted(
        _StrictValidator(schema).iter_errors(src.data), key=lambda e: list(map(str, e.path))
    )
    if errors:
        err = errors[0]
        key_path = tuple(err.absolute_path)
        raise _fail(src, key_path, f"schema violation ({schema_name}): {err.message}.")


@functools.lru_cache(maxsize=8)
def load_isa(path: Path = DEFAULT_ISA_PATH) -> Isa:
    """Load, validate and freeze the ISA at ``path``.

    Raises:
        SpecError: with file:line:col and key path of the first problem.
    """
    src = load_yaml(Path(path))
    if not isinstance(src.data, dict):
        raise _fail(src, (), "the ISA file must be a YAML mapping.")
    _schema_check(src, "isa.schema.json")
    data = src.data
    word_bits: int = data["word_bits"]
    units = tuple(Unit(**u) for u in data["units"])
    unit_names = {u.name for u in units}
    if len(unit_names) != len(units) or len({u.id for u in units}) != len(units):
        raise _fail(src, ("units",), "unit names and ids must be unique.")
    scopes = tuple(Scope(**s) for s in data["scopes"])
    scope_names = {s.name for s in scopes}
    timing_classes = tuple(
        TimingClass(name=k, occupancy=v["occupancy"], latency=v["latency"], note=v.get("note", ""),
                    cycles_per_row=v.get("cycles_per_row"))
        for k, v in data["timing_classes"].items()
    )
    instructions: list[Instruction] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(data["instructions"]):
        at: KeyPath = ("instructions", index)
        mnemonic = raw["mnemonic"]
        if mnemonic in seen:
            raise _fail(
                src, (*at, "mnemonic"), f"mnemonic {mnemonic!r} is defined twice (first at index {seen[mnemonic]})."
            )
        seen[mnemonic] = index
        if raw["unit"] not in unit_names:
            raise _fail(src, (*at, "unit"), f"unit must be one of {sorted(unit_names)}, not {raw['unit']!r}.")
        if raw["timing"] not in data["timing_classes"]:
            raise _fail(src, (*at, "timing"), f"timing class {raw['timing']!r} is not defined in timing_classes.")
        fields = tuple(_field(f) for f in raw["fields"])
        fixed = tuple(FixedBits(**f) for f in raw["fixed"])
        accesses = _accesses(src, at, raw, fields, scopes)
        missing = [o for o in STATS_OPERANDS.get(raw["stats"], ()) if o not in {f.name for f in fields}]
        if missing:
            raise _fail(src, (*at, "stats"), f"stats class {raw['stats']!r} needs operand(s) {', '.join(missing)}.")
        if raw["stats"] == "dma_in" and not any(a.write and not a.dram for a in accesses):
            raise _fail(src, (*at, "stats"), "stats class 'dma_in' needs a scratchpad write in `accesses`.")
        instructions.append(
            _check_instruction(src, at, word_bits, mnemonic, fields, fixed, accesses,
                               _checks(src, at, raw, fields, scopes), scope_names, raw))
    _check_overlaps(src, instructions)
    _check_scope_reach(src, instructions)
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    return Isa(
        name=data["name"],
        version=data["version"],
        word_bits=word_bits,
        units=units,
        scopes=scopes,
        instructions=tuple(instructions),
        timing_classes=timing_classes,
        synchronization=data["synchronization"],
        timing=data["timing"],
        source=src.path,
        digest=digest,
    )


def _check_bit_coverage(src: YamlSource, at: KeyPath, word_bits: int, mnemonic: str, fields: tuple[Field, ...],
                        fixed: tuple[FixedBits, ...]) -> None:
    """Every bit of the word belongs to exactly one field or fixed range, and their names are unique."""
    owner: list[str | None] = [None] * word_bits
    ranges: list[tuple[KeyPath, str, int, int]] = [
        ((*at, "fields", i), f.name, f.lsb, f.msb) for i, f in enumerate(fields)
    ] + [((*at, "fixed", i), f.name, f.lsb, f.msb) for i, f in enumerate(fixed)]
    for key_path, name, lsb, msb in ranges:
        if not lsb <= msb < word_bits:
            raise _fail(src, key_path, f"bits {lsb}..{msb} of {name!r} must satisfy lsb <= msb < {word_bits}.")
        for bit in range(lsb, msb + 1):
            if owner[bit] is not None:
                raise _fail(src, key_path, f"{mnemonic}: bit {bit} of {name!r} is already used by {owner[bit]!r}.")
            owner[bit] = name
    missing = [bit for bit, name in enumerate(owner) if name is None]
    if missing:
        raise _fail(
            src, at, f"{mnemonic}: encoding bit(s) {_bit_ranges(missing)} covered by no field or fixed range."
        )
    names = [f.name for f in fields] + [f.name for f in fixed]
    if len(set(names)) != len(names):
        raise _fail(src, at, f"{mnemonic}: field and fixed-range names must be unique, got {names}.")


def _check_fixed(src: YamlSource, at: KeyPath, mnemonic: str, fixed: tuple[FixedBits, ...]) -> None:
    """Fixed values fit their bits; opcode (and funct, or a reserved range) fill the decode byte's bits."""
    for i, fx in enumerate(fixed):
        if fx.value >= 1 << (fx.msb - fx.lsb + 1):
            raise _fail(src, (*at, "fixed", i, "value"), f"value {fx.value} does not fit in bits {fx.lsb}..{fx.msb}.")
    fixed_names = {f.name for f in fixed}
    if "opcode" not in fixed_names:
        raise _fail(src, (*at, "fixed"), f"{mnemonic}: every instruction needs a fixed 'opcode' range.")
    for fx in fixed:
        if fx.name in ("opcode", "funct") and fx.msb > 7:
            raise _fail(src, (*at, "fixed"), f"{mnemonic}: {fx.name} must lie in bits 0..7 (the decode byte).")
    if not any(fx.name == "funct" for fx in fixed) and not any(fx.lsb <= 4 <= fx.msb for fx in fixed):
        raise _fail(src, (*at, "fixed"), f"{mnemonic}: bits 4..7 must be fixed (funct or reserved).")


def _check_fields(src: YamlSource, at: KeyPath, fields: tuple[Field, ...], scope_names: set[str]) -> None:
    """Each field's default, bounds and scope make sense."""
    for i, f in enumerate(fields):
        fp: KeyPath = (*at, "fields", i)
        if f.default is not None and not f.lo <= f.default <= f.hi:
            raise _fail(src, (*fp, "default"), f"default {f.default} is outside {f.lo}..{f.hi}.")
        if f.min is not None and f.max is not None and f.min > f.max:
            raise _fail(src, fp, f"min {f.min} is above max {f.max}.")
        if f.scope is not None and f.scope not in scope_names:
            raise _fail(src, (*fp, "scope"), f"scope must be one of {sorted(scope_names)}, not {f.scope!r}.")
        if f.kind in ("sp_row", "sp_tile") and f.scope is None and f.operand is None:
            raise _fail(src, fp, "a scratchpad address needs a fixed `scope` or a shared `operand` with a scope field.")


def _check_instruction(
    src: YamlSource,
    at: KeyPath,
    word_bits: int,
    mnemonic: str,
    fields: tuple[Field, ...],
    fixed: tuple[FixedBits, ...],
    accesses: tuple[Access, ...],
    checks: tuple[Check, ...],
    scope_names: set[str],
    raw: dict[str, Any],
) -> Instruction:
    _check_bit_coverage(src, at, word_bits, mnemonic, fields, fixed)
    _check_fixed(src, at, mnemonic, fixed)
    _check_fields(src, at, fields, scope_names)
    mask = match = 0
    for fx in fixed:
        mask |= fx.mask
        match |= fx.value << fx.lsb
    if mask & 0xFF != 0xFF:
        raise _fail(src, (*at, "fixed"), f"{mnemonic}: bits 0..7 (opcode and funct) must all be fixed.")
    return Instruction(
        mnemonic=mnemonic,
        unit=raw["unit"],
        timing=raw["timing"],
        stats=raw["stats"],
        accesses=accesses,
        checks=checks,
        integer_only=raw.get("integer_only", False),
        summary=raw["summary"],
        description=raw["description"],
        semantics=raw["semantics"],
        assembly=raw["assembly"],
        fields=fields,
        fixed=fixed,
        mask=mask,
        match=match,
        index=int(at[1]),
    )


def _accesses(src: YamlSource, at: KeyPath, raw: dict[str, Any], fields: tuple[Field, ...],
              scopes: tuple[Scope, ...]) -> tuple[Access, ...]:
    """The instruction's ``accesses``, every expression parsed and checked."""
    operands = tuple(f.name for f in fields if f.kind != "units")
    scope_operands = tuple(f.name for f in fields if f.kind == "scope")
    scope_names = tuple(s.name for s in scopes)
    out: list[Access] = []
    for i, item in enumerate(raw.get("accesses", [])):
        ap: KeyPath = (*at, "accesses", i)
        write = "write" in item
        space = item["write" if write else "read"]
        space_operand = space in scope_operands
        if not space_operand and space not in (*scope_names, DRAM_SPACE):
            raise _fail(src, ap, f"an access is to {DRAM_SPACE}, a scope ({', '.join(scope_names)}) or a scope "
                                 f"operand ({', '.join(scope_operands) or 'none here'}), not {space!r}.")
        key, count = ("footprint", 4) if space == DRAM_SPACE else ("rows", 2)
        if key not in item or len(item[key]) != count:
            what = "[addr, stride, rows, row_bytes]" if count == 4 else "[first row, end row]"
            raise _fail(src, ap, f"an access to {space!r} gives `{key}: {what}` ({count} expressions).")
        exprs: list[tuple[str, int | None, Any]] = [(key, j, e) for j, e in enumerate(item[key])]
        if item.get("unless") is not None:
            exprs.append(("unless", None, item["unless"]))
        for name, j, text in exprs:
            try:
                regions.parse(text, operands, scope_operands, scope_names)
            except regions.ExprError as exc:
                raise _fail(src, (*ap, name) if j is None else (*ap, name, j), f"{exc}.") from None
        out.append(Access(write=write, space=space, space_operand=space_operand,
                          bounds=tuple(str(e) for e in item[key]), unless=item.get("unless")))
    return tuple(out)


def _checks(src: YamlSource, at: KeyPath, raw: dict[str, Any], fields: tuple[Field, ...],
            scopes: tuple[Scope, ...]) -> tuple[Check, ...]:
    """The instruction's static ``checks``, every expression parsed and checked."""
    operands = tuple(f.name for f in fields if f.kind != "units")
    scope_operands = tuple(f.name for f in fields if f.kind == "scope")
    out: list[Check] = []
    for i, item in enumerate(raw.get("checks", [])):
        check = Check(fault=item["fault"], message=item["message"], at=item.get("at"),
                      integer_only=item.get("integer_only", False))
        if check.at is not None and check.at not in operands:
            raise _fail(src, (*at, "checks", i, "at"), f"{check.at!r} is not an operand (the operands are "
                        f"{', '.join(operands)}).")
        try:
            texts = [("fault", check.fault), *(("message", f) for f in check.fields)]
        except ValueError as exc:
            raise _fail(src, (*at, "checks", i, "message"), f"{exc} in the message.") from None
        for key, text in texts:
            try:
                regions.parse(text, operands, scope_operands, tuple(s.name for s in scopes))
            except regions.ExprError as exc:
                raise _fail(src, (*at, "checks", i, key), f"{exc}.") from None
        out.append(check)
    return tuple(out)


def _check_overlaps(src: YamlSource, instructions: list[Instruction]) -> None:
    for i, first in enumerate(instructions):
        for second in instructions[i + 1 :]:
            common = first.mask & second.mask
            if (first.match ^ second.match) & common == 0:
                raise _fail(
                    src,
                    ("instructions", second.index),
                    f"the encodings of {first.mnemonic!r} and {second.mnemonic!r} overlap: some word "
                    "matches both (their fixed bits never differ where both are fixed).",
                )


def _check_scope_reach(src: YamlSource, instructions: list[Instruction]) -> None:
    """Row counts and tile addresses reach every row the widest ``sp_row`` field can address.

    The largest scratchpad a config may have is the one the ``sp_row`` fields address
    (the config loader refuses a larger one), so that is what every ``rows`` count must
    hold whole, and what every ``sp_tile`` field must address tile by tile at the
    smallest tile edge: a field narrower than that would refuse a config the rest of
    the ISA accepts.
    """
    row_fields = [f for instr in instructions for f in instr.fields if f.kind == "sp_row"]
    if not row_fields:
        return
    row_bits = max(f.width for f in row_fields)
    scope_rows = 1 << row_bits
    for instr in instructions:
        for j, f in enumerate(instr.fields):
            if f.kind == "count" and f.name == "rows":
                need, what = scope_rows, f"a whole scratchpad of {scope_rows} rows"
            elif f.kind == "sp_tile":
                need = scope_rows // TILES[0] - 1
                what = f"the last tile ({need}) of a {scope_rows}-row scratchpad at the smallest tile edge {TILES[0]}"
            else:
                continue
            if f.hi < need:
                fix = (f"widen it to {need.bit_length()} bits" if f.width < need.bit_length()
                       else f"raise its max ({f.max}) to {need}")
                raise _fail(
                    src, ("instructions", instr.index, "fields", j),
                    f"{instr.mnemonic}: field {f.name!r} (bits {f.lsb}..{f.msb}, {f.width} bits) holds at most "
                    f"{f.hi} but must hold {what} (the {row_bits}-bit sp_row fields address {scope_rows} rows): "
                    f"{fix}.",
                )


def _bit_ranges(bits: list[int]) -> str:
    out: list[str] = []
    start = prev = bits[0]
    for bit in [*bits[1:], -2]:
        if bit != prev + 1:
            out.append(f"{start}" if start == prev else f"{start}..{prev}")
            start = bit
        prev = bit
    return ", ".join(out)


__all__ = [
    "DEFAULT_ISA_PATH",
    "DRAM_SPACE",
    "STATS_CLASSES",
    "STATS_OPERANDS",
    "TILES",
    "Access",
    "Check",
    "FixedBits",
    "Field",
    "Instruction",
    "Isa",
    "Scope",
    "TimingClass",
    "Unit",
    "format_key_path",
    "load_isa",
]
