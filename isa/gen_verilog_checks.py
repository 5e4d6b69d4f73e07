"""The RTL dispatcher's static checks of every queued instruction, generated from isa.yaml.

Each instruction of the load, tensor, store and ALU units gets a function ``tnpu_<mnemonic>_checks(word)``
in the generated package returning ``{dram, spad, field}``, one bit per error cause the dispatcher
reports, and :func:`checks_lines` a selector ``tnpu_checks(word)`` over the instructions.  The rules are
the ones the simulator's decoder applies (``simulator/decode.py``), read from the same YAML:

* field: every field's ``min`` and ``max`` (``max: tile`` is T) and every static ``check`` that is not
  ``integer_only`` (the RTL is integer only, where those never fault) and is not about a scratchpad row;
* spad: every scratchpad ``access`` ends inside its scratchpad (``hi <= scope_rows``, unless its
  ``unless`` holds), and every static check whose ``at`` is a scratchpad-row field (an ALU source
  overlapping its destination rows: the row is wrong, not the field's encoding);
* dram: every DRAM footprint ``[addr, stride, rows, row_bytes]`` ends inside DRAM, and its address (and
  its stride, when a second row uses it) is a multiple of the element size, the row bytes of one column.

Each rule is computed unsigned, as wide as its largest intermediate value
(:func:`tinynpu.isa.regions.upper_bound`), so instructions that share a rule (the ALU's common fields sit
at one position) produce the same expression, which synthesis builds once.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from tinynpu.isa import regions
from tinynpu.isa.config import ArchConfig
from tinynpu.isa.records import Access, Check, Field, Instruction
from tinynpu.isa.spec import Isa


def _ident(text: str) -> str:
    return text.upper()


def _bits(value: int) -> int:
    return max(1, value.bit_length())


@dataclass(frozen=True)
class _Target:
    """How one instruction's names and calls become SystemVerilog, and how large they can be."""

    isa: Isa
    cfg: ArchConfig
    instr: Instruction

    def parse(self, text: str) -> ast.expr:
        return self.isa.region_expr(self.instr, text)

    def name_bound(self, name: str) -> int:
        return self.cfg.tile if name == regions.TILE else self.instr.field_map[name].hi

    def call_bound(self, function: str, _arg: ast.expr) -> int:
        per_scope = self.cfg.elem_bytes if function == "elem_bytes" else self.cfg.rows
        return max(per_scope(s.config_key) for s in self.isa.scopes)

    def width(self, *nodes: ast.expr, at_least: int = 0) -> int:
        """Bits of the widest value any of ``nodes`` reaches (and of ``at_least``)."""
        bound = max([at_least] + [regions.upper_bound(n, self.name_bound, self.call_bound) for n in nodes])
        return _bits(bound)

    def sv(self, node: ast.expr, width: int, *, boolean: bool = False) -> str:
        def name(n: str) -> str:
            if n == regions.TILE:
                return f"{width}'(TNPU_TILE)"
            field = self.instr.field_map[n]
            return f"{width}'(word[{field.lsb} +: {field.width}])"

        def call(function: str, arg: ast.expr) -> str:
            if isinstance(arg, ast.Constant):  # a scope named in quotes: its config constant
                key = _ident(self.isa.scopes[self.isa.scope_ids[str(arg.value)]].config_key)
                return f"{width}'(TNPU_{key}_{'ELEM_BYTES' if function == 'elem_bytes' else 'ROWS'})"
            field = self.instr.field_map[str(arg.id)]  # type: ignore[attr-defined]
            return f"{width}'(tnpu_{function}(int'(word[{field.lsb} +: {field.width}])))"

        return regions.to_sv(node, name, call, width, boolean=boolean)


def _field_rules(target: _Target, field: Field) -> list[str]:
    """The field's ``min`` and ``max`` as faults (none when the bits allow nothing else)."""
    value = f"word[{field.lsb} +: {field.width}]"
    rules = []
    if field.min is not None and field.min > 0:
        rules.append(f"{value} < {field.width}'d{field.min}" if field.min > 1 else f"{value} == '0")
    if field.max_is_tile:
        rules.append(f"int'({value}) > TNPU_TILE")
    elif field.max is not None and field.max < (1 << field.width) - 1:
        rules.append(f"{value} > {field.width}'d{field.max}")
    return rules


def _spad_rule(target: _Target, access: Access) -> str:
    """The access's end row beyond its scratchpad (not checked when its ``unless`` holds)."""
    hi = target.parse(access.bounds[1])
    cap = ast.Call(func=ast.Name(id="scope_rows"), args=[ast.Name(id=access.space) if access.space_operand
                                                        else ast.Constant(value=access.space)], keywords=[])
    width = target.width(hi, cap)
    rule = f"{target.sv(hi, width)} > {target.sv(cap, width)}"
    if access.unless is not None:
        unless = target.parse(access.unless)
        rule = f"!({target.sv(unless, target.width(unless), boolean=True)}) && {rule}"
    return rule


class _OneColumn(ast.NodeTransformer):
    """``cols`` set to 1: a footprint's row bytes become its element size.

    A transformer rewrites the tree it visits, and :func:`regions.parse` hands every caller the same cached
    tree, so visit a copy: rewriting the cached one made the simulator and the C header read ``cols`` as 1 in
    the rest of the process (a store's DRAM overrun by less than its row went unnoticed).
    """

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return ast.Constant(value=1) if node.id == "cols" else node


def _dram_rules(target: _Target, access: Access) -> list[str]:
    """The footprint inside DRAM, its address and (for two rows or more) its stride aligned."""
    addr, stride, rows, row_bytes = access.bounds
    end = target.parse(f"({addr}) + (({rows}) - 1) * ({stride}) + ({row_bytes})")
    elem = _OneColumn().visit(copy.deepcopy(target.parse(str(row_bytes))))
    width = target.width(end, elem, at_least=target.cfg.dram_bytes)
    parts = [target.parse(str(x)) for x in (addr, stride, rows)] + [elem]
    narrow = target.width(*parts)  # the alignment's remainders need only the operands' own width
    addr_sv, stride_sv, rows_sv, elem_sv = (target.sv(x, narrow) for x in parts)
    return [f"{target.sv(end, width)} > {width}'(TNPU_DRAM_BYTES)",
            f"({addr_sv} % {elem_sv}) != '0",
            f"({rows_sv} > {narrow}'d1 && ({stride_sv} % {elem_sv}) != '0)"]


def _join(rules: list[str]) -> str:
    return " || ".join(f"({r})" for r in rules) if rules else "1'b0"


def _is_spad_check(instr: Instruction, check: Check) -> bool:
    """A static check about a scratchpad row (its ``at`` field names one): reported as a scratchpad fault."""
    return check.at is not None and instr.field_map[check.at].kind == "sp_row"


def _check_rule(target: _Target, check: Check) -> str:
    node = target.parse(check.fault)
    return target.sv(node, target.width(node), boolean=True)


def _instruction_checks(isa: Isa, cfg: ArchConfig, instr: Instruction) -> list[str]:
    target = _Target(isa, cfg, instr)
    checks = [c for c in instr.checks if not c.integer_only]
    field = [r for f in instr.fields for r in _field_rules(target, f)]
    field += [_check_rule(target, c) for c in checks if not _is_spad_check(instr, c)]
    spad = [_spad_rule(target, a) for a in instr.accesses if not a.dram]
    spad += [_check_rule(target, c) for c in checks if _is_spad_check(instr, c)]
    dram = [r for a in instr.accesses if a.dram for r in _dram_rules(target, a)]
    name = instr.mnemonic
    return [f"// {name}: {{dram, spad, field}} faults",
            f"function automatic logic [2:0] tnpu_{name}_checks(input logic [{isa.word_bits - 1}:0] word);",
            # one line: the synthesis flow hands Yosys 0.23 a function's single return as one assignment
            f"  return {{{_join(dram)}, {_join(spad)}, {_join(field)}}};",
            "endfunction"]


def checked_instructions(isa: Isa) -> list[Instruction]:
    """The instructions whose checks are generated: those of the queued units (sync and halt have none)."""
    queued = {u.name for u in isa.queued_units}
    return [i for i in isa.instructions if i.unit in queued]


def checks_lines(isa: Isa, cfg: ArchConfig) -> list[str]:
    """The package's check functions: per scope, per instruction, and the selector ``tnpu_checks``."""
    scopes = sorted(isa.scopes, key=lambda s: s.id)
    last = scopes[-1]
    out = ["", "// The dispatcher's checks of the queued instructions (isa/gen_verilog_checks.py): each field's",
           "// min and max, the static checks, the scratchpad rows and DRAM footprint of each access.",
           "// A scope id beyond the last scope counts as the last (its own field check refuses it).",
           "/* verilator lint_off UNUSEDSIGNAL */  // a function sees the whole word"]
    for function, what in (("scope_rows", "ROWS"), ("elem_bytes", "ELEM_BYTES")):
        out.append(f"function automatic int tnpu_{function}(input int scope);")
        out += [f"  if (scope == {s.id}) return TNPU_{_ident(s.config_key)}_{what};"
                for s in scopes[:-1]]
        out += [f"  return TNPU_{_ident(last.config_key)}_{what};", "endfunction"]
    instrs = checked_instructions(isa)
    for instr in instrs:
        out += _instruction_checks(isa, cfg, instr)
    out += ["// The checks of the instruction ``word`` decodes as ('0 for the other instructions).",
            f"function automatic logic [2:0] tnpu_checks(input logic [{isa.word_bits - 1}:0] word);"]
    for instr in instrs:
        name = _ident(instr.mnemonic)
        out.append(f"  if ((word & TNPU_{name}_MASK) == TNPU_{name}_MATCH) return tnpu_{instr.mnemonic}_checks(word);")
    out += ["  return '0;", "endfunction", "/* verilator lint_on UNUSEDSIGNAL */"]
    return out


__all__ = ["checked_instructions", "checks_lines"]
