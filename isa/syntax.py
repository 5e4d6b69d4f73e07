"""How each instruction is written, derived from the YAML ``assembly`` template.

A template such as ``load {dst}, [{dram}], rows={rows}, cols={cols}`` gives the
positional operands (``{dst}``, ``[{dram}]``) and the order of the options
(``rows=``, ``cols=``).  A placeholder names either an operand shared by
several fields (``operand: dst`` joins the scope and row fields of ``load``)
or a single field.  Fields the template leaves out (``wait``, ``signal``) are
options too, written after the template's options.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from tinynpu.errors import SpecError
from tinynpu.isa import Field, Instruction, Isa

SP_KINDS = ("sp_row", "sp_tile")
UNITS_NONE = "none"  # how assembly writes an empty wait/signal mask

_POSITIONAL = re.compile(r"^(\[)?\{(\w+)\}(\])?$")
_OPTION = re.compile(r"^(\w+)=\{(\w+)\}$")


@dataclass(frozen=True)
class Operand:
    """A positional operand and the fields it fills.

    ``address`` is the scratchpad address field of a ``scope[row]`` operand
    (``None`` for a plain expression); ``scope_field`` is the field that
    encodes the scratchpad it names, if the scope is not fixed by the field.
    """

    name: str
    bracket: bool
    fields: tuple[Field, ...]
    address: Field | None
    scope_field: Field | None

    @property
    def value_field(self) -> Field:
        """The field that holds the operand's number (row, address or immediate)."""
        return self.address or self.fields[0]

    def allowed_scopes(self, isa: Isa) -> tuple[str, ...]:
        """Scratchpad names this operand may name, in scope-id order."""
        if self.address is not None and self.address.scope is not None:
            return (self.address.scope,)
        if self.scope_field is None:
            return ()
        field = self.scope_field
        return tuple(s.name for s in isa.scopes if field.lo <= s.id <= field.hi)

    def render(self) -> str:
        return f"[{self.name}]" if self.bracket else self.name


@dataclass(frozen=True)
class Syntax:
    """Positional operands (template order) and option fields (template order, then the rest)."""

    instruction: Instruction
    operands: tuple[Operand, ...]
    options: tuple[Field, ...]

    @functools.cached_property
    def option_map(self) -> dict[str, Field]:
        return {f.name: f for f in self.options}

    def usage(self) -> str:
        """``load dst, [dram], rows=..., ...``: the shape of the instruction, for messages."""
        parts = [op.render() for op in self.operands] + [f"{f.name}=..." for f in self.options]
        return f"{self.instruction.mnemonic} {', '.join(parts)}".rstrip()


def _build(instr: Instruction) -> Syntax:
    head, _, rest = instr.assembly.partition(" ")
    if head != instr.mnemonic:
        raise SpecError(f"{instr.mnemonic}: assembly template {instr.assembly!r} must start with "
                        "the mnemonic.")
    operands: list[Operand] = []
    option_names: list[str] = []
    used: set[str] = set()
    for part in (p.strip() for p in rest.split(",") if p.strip()):
        if m := _OPTION.match(part):
            if m.group(1) != m.group(2) or m.group(2) not in instr.field_map:
                raise SpecError(f"{instr.mnemonic}: template option {part!r} must be name={{name}} "
                                "of a field.")
            option_names.append(m.group(2))
            used.add(m.group(2))
            continue
        m = _POSITIONAL.match(part)
        if m is None or bool(m.group(1)) != bool(m.group(3)):
            raise SpecError(f"{instr.mnemonic}: cannot read template part {part!r} of {instr.assembly!r}.")
        name = m.group(2)
        fields = tuple(f for f in instr.fields if f.operand == name)
        if not fields and name in instr.field_map:
            fields = (instr.field_map[name],)
        if not fields:
            raise SpecError(f"{instr.mnemonic}: template operand {{{name}}} names no field or operand.")
        address = next((f for f in fields if f.kind in SP_KINDS), None)
        scope_field = next((f for f in fields if f.kind == "scope"), None)
        operands.append(Operand(name, bool(m.group(1)), fields, address, scope_field))
        used.update(f.name for f in fields)
    option_names += [f.name for f in instr.fields if f.name not in used]
    return Syntax(instr, tuple(operands), tuple(instr.field_map[n] for n in option_names))


@functools.lru_cache(maxsize=16)
def syntax_table(isa: Isa) -> dict[str, Syntax]:
    """The syntax of every instruction of ``isa``, by mnemonic."""
    return {instr.mnemonic: _build(instr) for instr in isa.instructions}


__all__ = ["SP_KINDS", "UNITS_NONE", "Operand", "Syntax", "syntax_table"]
