"""Assembly source -> :class:`Program`, with every static check the ISA allows.

Two passes.  Pass 1 expands ``.include``, tokenizes every line and gives each
label the index of the next instruction (every instruction is one word, so
labels need no values).  Pass 2 runs the directives in order (``.equ`` and
``.tensor`` symbols must be defined before use; labels may be used anywhere)
and encodes each instruction after checking ranges, scratchpad extents, DRAM
bounds and alignment, and the wait/signal units.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import NamedTuple

import numpy as np

from tinynpu.assembler.expr import Cursor, describe, parse_expr
from tinynpu.assembler.fastline import FAST_LINE, eval_sum, split_line
from tinynpu.assembler.image import DTYPES, ROLES, Program, Tensor
from tinynpu.assembler.lexer import Pos, Token, tokenize
from tinynpu.assembler.syntax import SP_KINDS, Operand, Syntax, syntax_table
from tinynpu.errors import AsmError
from tinynpu.isa import ArchConfig, Field, Instruction, Isa, encoding, regions
from tinynpu.isa.spec import Check

# Scratchpad fields that address one row whatever `rows` says (isa.yaml:
# vaddrow's src is "the broadcast row"); every other sp_row field spans `rows` rows.
# tmm's tile operands span a block of tiles (isa.yaml tmm semantics):
# acc m*n tiles, a m*k tiles, b n*k tiles.
_TILE_EXTENT = {"acc": ("m", "n"), "a": ("m", "k"), "b": ("n", "k")}
_UNITS_NONE = "none"
_Checked = tuple[Instruction, list[int]]  # an instruction and its field values, in field order, checked


class Statement(NamedTuple):
    """One line that is not blank: a directive or an instruction.

    A named tuple rather than a frozen dataclass: a large program has one per
    line and tuple construction is several times faster.  ``tokens`` is
    ``None`` for an instruction line that matched the fast-path pattern
    (:data:`.fastline.FAST_LINE`); it is tokenized only if the fast path gives up.
    """

    file: str
    line: int
    tokens: list[Token] | None
    next_index: int  # index of the next instruction when this line is reached
    text: str

    def cursor(self) -> Cursor:
        tokens = self.tokens if self.tokens is not None else tokenize(self.text, self.file, self.line)
        return Cursor(tokens, self.file, self.line)


@dataclass
class _Symbol:
    value: int
    pos: Pos
    kind: str  # "label", "constant", "tensor"


@dataclass
class _State:
    isa: Isa
    cfg: ArchConfig
    labels: dict[str, _Symbol] = field(default_factory=dict)
    symbols: dict[str, _Symbol] = field(default_factory=dict)
    later: dict[str, Pos] = field(default_factory=dict)  # .equ/.tensor names defined further down
    tensors: list[Tensor] = field(default_factory=list)
    checked: list[_Checked] = field(default_factory=list)  # each instruction with its checked field values
    plans: dict[str, _EncodePlan] = field(init=False)
    capacity: dict[str, tuple[str, int]] = field(init=False)  # scope name -> (config key, rows)
    elem_bytes: list[int] = field(init=False)  # by scope id, for isa.yaml expressions
    scope_rows: list[int] = field(init=False)
    fast_items: dict[tuple[str, int, str], _Filled] = field(default_factory=dict)  # see _fast_instruction

    def __post_init__(self) -> None:
        self.plans = _encode_plans(self.isa)
        # Every scratchpad operand is checked against its capacity: look each up once.
        self.capacity = {s.name: (s.config_key, self.cfg.rows(s.config_key)) for s in self.isa.scopes}
        self.elem_bytes = self.isa.per_scope(lambda s: self.cfg.elem_bytes(s.config_key))
        self.scope_rows = self.isa.per_scope(lambda s: self.cfg.rows(s.config_key))

    def lookup(self, name: str, where: Pos) -> int:
        sym = self.symbols.get(name) or self.labels.get(name)
        if sym is not None:
            return sym.value
        if name in self.later:
            raise AsmError(f"{where}: symbol {name!r} is used before its definition at {self.later[name]}; "
                           "define .equ and .tensor names before using them.")
        raise AsmError(f"{where}: undefined symbol {name!r}.")


def assemble(source: str, *, filename: str = "<source>", isa: Isa, cfg: ArchConfig, fast: bool = True) -> Program:
    """Assemble ``source`` for ``(isa, cfg)``.

    Args:
        source: The assembly text.
        filename: Name used in messages and as the base of relative ``.include`` paths.
        isa: The loaded ISA.
        cfg: The architecture config the program is built for.
        fast: Read plain instruction lines without the tokenizer (see :mod:`.fastline`).  The result
            and every message are the same either way; ``False`` (the full parser for every line)
            is there for the tests and ``tinynpu bench asm`` that compare the two.

    Returns:
        The program image (words, tensor manifest, build hash).

    Raises:
        AsmError: the first problem, as ``file:line:col: what was expected``.
    """
    state = _State(isa, cfg)
    statements = _pass1(source, filename, state, fast)
    table = syntax_table(isa)
    fast_table = _fast_table(isa)
    checked = state.checked
    for stmt in statements:
        if stmt.tokens is None:
            entry = _fast_instruction(stmt, fast_table, state)
            checked.append(entry if entry is not None else _instruction(stmt.cursor(), table, state))
            continue
        cur = stmt.cursor()
        if cur.tok.kind == "directive":
            _directive(cur, state)
        else:
            checked.append(_instruction(cur, table, state))
    try:
        return Program.build(isa, cfg, _words(isa, checked), state.tensors)
    except AsmError as exc:
        raise AsmError(f"{filename}: {exc.message}") from None


# ---------------------------------------------------------------- pass 1

def _words(isa: Isa, checked: list[_Checked]) -> list[int]:
    """Encode every checked instruction: one vectorized :func:`encoding.encode_columns` per mnemonic."""
    lo = np.zeros(len(checked), dtype=np.uint64)
    hi = np.zeros(len(checked), dtype=np.uint64)
    members: dict[int, list[int]] = {}
    for i, (instr, _) in enumerate(checked):
        members.setdefault(instr.index, []).append(i)
    for index, idx in members.items():
        instr = isa.instructions[index]
        nf = len(instr.fields)
        rows = np.fromiter(chain.from_iterable(checked[i][1] for i in idx), dtype=np.int64,
                           count=len(idx) * nf).reshape(len(idx), nf)
        columns = {f.name: rows[:, j] for j, f in enumerate(instr.fields)}
        lo[idx], hi[idx] = encoding.encode_columns(instr, columns, len(idx))
    return encoding.to_ints(lo, hi)


def _read_lines(source: str, filename: str, stack: tuple[Path, ...]) -> list[tuple[str, int, str]]:
    """(file, line, text) for every line, with ``.include`` expanded in place."""
    out: list[tuple[str, int, str]] = []
    for number, text in enumerate(source.splitlines(), start=1):
        stripped = text.lstrip()
        if not stripped.startswith(".include"):
            out.append((filename, number, text))
            continue
        tokens = tokenize(text, filename, number)
        cur = Cursor(tokens, filename, number)
        head = cur.next()
        if head.text != ".include":
            out.append((filename, number, text))
            continue
        if cur.tok.kind != "str":
            raise AsmError(f"{cur.pos()}: .include expects a quoted file name, found {describe(cur.tok)}.")
        name_tok = cur.next()
        cur.expect_end()
        where = cur.pos(name_tok)
        base = Path(filename).parent if not filename.startswith("<") else Path.cwd()
        path = (base / name_tok.text).resolve()
        if path in stack:
            chain = " -> ".join(str(p) for p in (*stack, path))
            raise AsmError(f"{where}: .include cycle: {chain}.")
        try:
            text_in = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise AsmError(f"{where}: cannot include {name_tok.text!r} ({path}): {exc.strerror}.") from None
        shown = str(base / name_tok.text) if not filename.startswith("<") else name_tok.text
        out.extend(_read_lines(text_in, shown, (*stack, path)))
    return out


def _pass1(source: str, filename: str, state: _State, fast: bool) -> list[Statement]:
    stack: tuple[Path, ...] = ()
    if not filename.startswith("<"):
        stack = (Path(filename).resolve(),)
    statements: list[Statement] = []
    index = 0
    for file, line, text in _read_lines(source, filename, stack):
        if fast and FAST_LINE.fullmatch(text):  # an instruction line without labels: tokens only if needed
            statements.append(Statement(file, line, None, index, text))
            index += 1
            continue
        tokens = tokenize(text, file, line)
        # Leading labels: `name:` (several may share a line, an instruction may follow).
        while (len(tokens) >= 2 and tokens[0].kind == "ident" and tokens[1].kind == "op"
               and tokens[1].text == ":"):
            name = tokens[0].text
            pos = Pos(file, line, tokens[0].col)
            if name in state.labels:
                first = state.labels[name].pos
                raise AsmError(f"{pos}: duplicate label {name!r} (first defined at {first}).")
            state.labels[name] = _Symbol(index, pos, "label")
            tokens = tokens[2:]
        if tokens[0].kind == "end":
            continue
        stmt = Statement(file, line, tokens, index, text)
        if tokens[0].kind == "directive":
            if tokens[0].text in (".equ", ".tensor") and tokens[1].kind == "ident":
                state.later.setdefault(tokens[1].text, Pos(file, line, tokens[1].col))
        elif tokens[0].kind == "ident":
            index += 1
        else:
            raise AsmError(f"{file}:{line}:{tokens[0].col}: expected a mnemonic, directive or label, "
                           f"found {describe(tokens[0])}.")
        statements.append(stmt)
    return statements


# ---------------------------------------------------------------- directives

def _define(state: _State, name_tok: Token, cur: Cursor, value: int, kind: str) -> None:
    pos = cur.pos(name_tok)
    name = name_tok.text
    first = state.symbols.get(name) or state.labels.get(name)
    if first is not None:
        raise AsmError(f"{pos}: duplicate symbol {name!r} (first defined as a {first.kind} at {first.pos}).")
    state.symbols[name] = _Symbol(value, pos, kind)


def _directive(cur: Cursor, state: _State) -> None:
    head = cur.next()
    name = head.text
    if name == ".config":
        tok = cur.tok
        if tok.kind not in ("ident", "str", "num"):
            raise AsmError(f"{cur.pos()}: .config expects a config name, found {describe(tok)}.")
        cur.next()
        cur.expect_end()
        if tok.text != state.cfg.name:
            raise AsmError(f"{cur.pos(tok)}: the source is written for config {tok.text!r}, but it is "
                           f"being assembled for config {state.cfg.name!r}; pass --config {tok.text} "
                           "or fix .config.")
    elif name == ".equ":
        sym = cur.expect_ident("a constant name after .equ")
        cur.expect(",", "',' after the constant name")
        value = parse_expr(cur, state.lookup)
        cur.expect_end()
        _define(state, sym, cur, value, "constant")
    elif name == ".tensor":
        _tensor(cur, state)
    elif name == ".include":  # only reached for a malformed one; _read_lines handles the rest
        raise AsmError(f"{cur.pos(head)}: .include expects a quoted file name.")
    else:
        raise AsmError(f"{cur.pos(head)}: unknown directive {name!r}; "
                       "known: .config, .equ, .tensor, .include.")


def _tensor(cur: Cursor, state: _State) -> None:
    name_tok = cur.expect_ident("a tensor name after .tensor")
    cur.expect(",", "',' after the tensor name")
    addr_tok = cur.tok
    addr = parse_expr(cur, state.lookup)
    cur.expect(",", "',' after the tensor address")
    dtype_tok = cur.expect_ident(f"a dtype ({', '.join(DTYPES)})")
    if dtype_tok.text not in DTYPES:
        raise AsmError(f"{cur.pos(dtype_tok)}: tensor dtype must be one of {', '.join(DTYPES)}, "
                       f"not {dtype_tok.text!r}.")
    cur.expect(",", "',' after the dtype")
    shape_tok = cur.expect("[", "a shape such as [32, 32]")
    shape: list[int] = []
    while True:
        dim_tok = cur.tok
        dim = parse_expr(cur, state.lookup)
        if dim <= 0:
            raise AsmError(f"{cur.pos(dim_tok)}: tensor dimensions must be positive, not {dim}.")
        shape.append(dim)
        if cur.accept("]"):
            break
        cur.expect(",", "',' or ']' in the shape")
    role = "input"
    if cur.accept(","):
        role_tok = cur.expect_ident(f"a role ({', '.join(ROLES)})")
        if role_tok.text not in ROLES:
            raise AsmError(f"{cur.pos(role_tok)}: tensor role must be one of {', '.join(ROLES)}, "
                           f"not {role_tok.text!r}.")
        role = role_tok.text
    cur.expect_end()
    if addr < 0:
        raise AsmError(f"{cur.pos(addr_tok)}: tensor address must be >= 0, not {addr}.")
    tensor = Tensor(name=name_tok.text, addr=addr, shape=tuple(shape), dtype=dtype_tok.text, role=role)
    if tensor.addr + tensor.nbytes > state.cfg.dram_bytes:
        raise AsmError(f"{cur.pos(shape_tok)}: tensor {tensor.name} (0x{addr:x} + {tensor.nbytes} bytes) "
                       f"ends beyond the {state.cfg.dram_bytes} bytes of DRAM in config {state.cfg.name!r}.")
    for other in state.tensors:
        if addr < other.addr + other.nbytes and other.addr < addr + tensor.nbytes:
            end, other_end = addr + tensor.nbytes, other.addr + other.nbytes
            raise AsmError(f"{cur.pos(addr_tok)}: tensor {tensor.name} (0x{addr:x}..0x{end:x}) overlaps "
                           f"tensor {other.name} (0x{other.addr:x}..0x{other_end:x}).")
    _define(state, name_tok, cur, addr, "tensor")
    state.tensors.append(tensor)


# ---------------------------------------------------------------- instructions

class _Value(NamedTuple):
    value: int
    pos: Pos
    scope: str | None = None  # for scratchpad operands: the scope named by the prefix


def _instruction(cur: Cursor, table: dict[str, Syntax], state: _State) -> _Checked:
    mnem_tok = cur.next()
    syntax = table.get(mnem_tok.text)
    if syntax is None:
        known = ", ".join(sorted(table))
        raise AsmError(f"{cur.pos(mnem_tok)}: unknown mnemonic {mnem_tok.text!r}; the ISA has {known}.")
    instr = syntax.instruction
    values: dict[str, _Value] = {}
    nops = len(syntax.operands)
    for i, operand in enumerate(syntax.operands):
        if i and not cur.accept(","):
            if cur.tok.kind != "end":
                raise AsmError(f"{cur.pos()}: expected ',' between operands, found {describe(cur.tok)}.")
            break
        if cur.tok.kind == "end" or _at_option(cur):
            break
        _operand(cur, operand, state, values)
    given = sum(1 for op in syntax.operands if op.value_field.name in values)
    if given < nops:
        raise AsmError(f"{cur.pos()}: wrong operand count: {instr.mnemonic} takes {nops} operand"
                       f"{'s' if nops != 1 else ''} before its options ({syntax.usage()}), got {given}.")
    while cur.tok.kind != "end":
        if (nops or values) and not cur.accept(","):
            raise AsmError(f"{cur.pos()}: expected ',' before {describe(cur.tok)}.")
        if not _at_option(cur):
            what = "an option name=value" if syntax.options else "the end of the line"
            extra = f"; {instr.mnemonic} takes {nops} operand{'s' if nops != 1 else ''} ({syntax.usage()})"
            raise AsmError(f"{cur.pos()}: wrong operand count or kind: expected {what}, "
                           f"found {describe(cur.tok)}{extra}.")
        _option(cur, syntax, state, values)
        nops = max(nops, 1)  # a comma is needed between options from here on
    return _encode(instr, values, state, cur.pos(mnem_tok))


def _at_option(cur: Cursor) -> bool:
    nxt = cur.peek()
    return cur.tok.kind == "ident" and nxt.kind == "op" and nxt.text == "="


def _operand(cur: Cursor, operand: Operand, state: _State, values: dict[str, _Value]) -> None:
    start = cur.pos()
    if operand.address is not None:
        scope_tok = cur.tok
        allowed = operand.allowed_scopes(state.isa)
        shown = " or ".join(f"{s}[row]" for s in allowed)
        if scope_tok.kind != "ident" or cur.peek().text != "[":
            raise AsmError(f"{start}: operand {operand.name} must be a scratchpad address {shown}, "
                           f"found {describe(scope_tok)}.")
        if scope_tok.text not in allowed:
            raise AsmError(f"{start}: operand {operand.name} must be {shown}, not scratchpad "
                           f"{scope_tok.text!r}.")
        cur.next()
        cur.expect("[", "'['")
        row = parse_expr(cur, state.lookup)
        cur.expect("]", "']' to close the scratchpad address")
        values[operand.address.name] = _Value(row, start, scope_tok.text)
        if operand.scope_field is not None:
            values[operand.scope_field.name] = _Value(state.isa.scope_by_name[scope_tok.text].id, start)
        return
    if operand.bracket:
        if not cur.accept("["):
            raise AsmError(f"{start}: operand {operand.name} must be a DRAM address in brackets, "
                           f"[expr], found {describe(cur.tok)}.")
        values[operand.value_field.name] = _Value(parse_expr(cur, state.lookup), start)
        cur.expect("]", "']' to close the DRAM address")
        return
    if cur.tok.kind == "ident" and cur.peek().text == "[":
        raise AsmError(f"{start}: operand {operand.name} is a number, not a scratchpad address.")
    if cur.at("["):
        raise AsmError(f"{start}: operand {operand.name} is a number, not a bracketed address.")
    values[operand.value_field.name] = _Value(parse_expr(cur, state.lookup), start)


def _option(cur: Cursor, syntax: Syntax, state: _State, values: dict[str, _Value]) -> None:
    key = cur.next()
    pos = cur.pos(key)
    cur.expect("=", "'='")
    fld = syntax.option_map.get(key.text)
    if fld is None:
        known = ", ".join(f.name for f in syntax.options) or "none"
        raise AsmError(f"{pos}: unknown option {key.text!r} for {syntax.instruction.mnemonic}; "
                       f"its options are {known}.")
    if fld.name in values:
        raise AsmError(f"{pos}: option {key.text!r} is given twice.")
    if fld.kind == "units":
        values[fld.name] = _Value(_units(cur, state, syntax.instruction, fld), pos)
    else:
        value_pos = cur.pos()
        values[fld.name] = _Value(parse_expr(cur, state.lookup), value_pos)


def _units(cur: Cursor, state: _State, instr: Instruction, fld: Field) -> int:
    mask = 0
    names = [u.name for u in state.isa.units if u.id < fld.width]
    while True:
        tok = cur.tok
        if tok.kind == "num" and tok.value == 0:
            cur.next()
        elif tok.kind != "ident" or (tok.text not in state.isa.unit_ids and tok.text != _UNITS_NONE):
            raise AsmError(f"{cur.pos()}: {fld.name}= takes unit names joined by '|' ({', '.join(names)}) "
                           f"or {_UNITS_NONE}, not {describe(tok)}.")
        else:
            cur.next()
            if tok.text != _UNITS_NONE:
                uid = state.isa.unit_ids[tok.text]
                if tok.text == instr.unit:
                    verb = "wait on" if fld.name == "wait" else "signal"
                    raise AsmError(f"{cur.pos(tok)}: {instr.mnemonic} runs on unit {instr.unit} and may not "
                                   f"{verb} its own unit; name another unit ({fld.name}=...).")
                if uid >= fld.width:
                    raise AsmError(f"{cur.pos(tok)}: unit {tok.text} has no token channel ({fld.name} holds "
                                   f"units {', '.join(names)}).")
                mask |= 1 << uid
        if not cur.accept("|"):
            return mask


# ---------------------------------------------------------------- fast path

@dataclass(frozen=True)
class _FastOperand:
    """What the fast path needs of one positional operand."""

    field: str  # the field that takes the operand's number
    bracket: bool
    scopes: dict[str, int] | None  # a scratchpad operand: the scope names it allows -> scope id
    scope_field: str | None  # the field that encodes the named scope, if not fixed


@dataclass(frozen=True)
class _FastSyntax:
    """Per-mnemonic layout for the fast path, computed once per ISA."""

    instruction: Instruction
    operands: tuple[_FastOperand, ...]
    options: dict[str, Field]


@functools.lru_cache(maxsize=16)
def _fast_table(isa: Isa) -> dict[str, _FastSyntax]:
    table: dict[str, _FastSyntax] = {}
    for mnemonic, syntax in syntax_table(isa).items():
        operands = tuple(
            _FastOperand(
                field=op.value_field.name,
                bracket=op.bracket,
                scopes=({s: isa.scope_by_name[s].id for s in op.allowed_scopes(isa)}
                        if op.address is not None else None),
                scope_field=op.scope_field.name if op.scope_field is not None else None,
            )
            for op in syntax.operands
        )
        table[mnemonic] = _FastSyntax(syntax.instruction, operands, syntax.option_map)
    return table


# Items (``rows=16``, ``acc[0]``, ``wait=load|tensor``) repeat on most lines of a generated program,
# so their values are remembered; bounded because DRAM operands (``[A + 0x1230]``) rarely repeat.
_ITEM_CACHE_SIZE = 4096

_Filled = tuple[tuple[str, _Value], ...]  # the (field, value) pairs one item fills


def _fast_instruction(stmt: Statement, table: dict[str, _FastSyntax], state: _State) -> _Checked | None:
    """Encode a line :data:`FAST_LINE` matched, or ``None`` to leave it to the full parser.

    The values and the checks in :func:`_encode` are the full parser's; only
    the reading differs.  Any doubt (a shape the layout does not expect, an
    unknown name) and any error returns ``None``: the full parser then reads
    the line again and reports the problem with its exact column, so this path
    never makes a message.  That is why the positions in its values are
    placeholders (the mnemonic of the line where the item was first read) and
    why an item's values may be reused: a symbol, once defined, keeps its value.
    """
    mnemonic, col, items = split_line(stmt.text)
    fast = table.get(mnemonic)
    nops = len(fast.operands) if fast is not None else 0
    if fast is None or len(items) < nops:
        return None
    at = Pos(stmt.file, stmt.line, col)
    cache = state.fast_items
    values: dict[str, _Value] = {}
    try:
        for slot, item in enumerate(items):
            key = (mnemonic, min(slot, nops), item)  # every option shares the slot after the operands
            filled = cache.get(key)
            if filled is None:
                filled = _fast_item(fast, slot, item, state, at)
                if filled is None:
                    return None
                if len(cache) < _ITEM_CACHE_SIZE:
                    cache[key] = filled
            for name, value in filled:
                if name in values:  # an option given twice
                    return None
                values[name] = value
        return _encode(fast.instruction, values, state, at)
    except AsmError:
        return None


def _fast_item(fast: _FastSyntax, slot: int, item: str, state: _State, at: Pos) -> _Filled | None:
    """What item ``slot`` of a fast line fills, or ``None`` if the full parser must read the line.

    Raises:
        AsmError: an undefined symbol (the caller then leaves the line to the full parser).
    """

    def lookup(name: str) -> int:
        return state.lookup(name, at)

    if slot < len(fast.operands):
        op = fast.operands[slot]
        if op.scopes is not None:  # scope[row]
            scope, bracket, row = item.partition("[")
            scope = scope.rstrip()
            sid = op.scopes.get(scope)
            if sid is None or not bracket:
                return None
            value = _Value(eval_sum(row[:-1].strip(), lookup), at, scope)
            if op.scope_field is None:
                return ((op.field, value),)
            return ((op.field, value), (op.scope_field, _Value(sid, at)))
        if op.bracket:  # [sum]
            if item[0] != "[":
                return None
            return ((op.field, _Value(eval_sum(item[1:-1].strip(), lookup), at)),)
        if "[" in item or "=" in item:  # a plain sum is wanted
            return None
        return ((op.field, _Value(eval_sum(item, lookup), at)),)
    key, eq, text = item.partition("=")  # key=value
    fld = fast.options.get(key.rstrip())
    if not eq or fld is None:
        return None
    text = text.lstrip()
    if fld.kind == "units":
        mask = _fast_units(text, fld, fast.instruction, state.isa)
        return None if mask is None else ((fld.name, _Value(mask, at)),)
    if "|" in text:
        return None
    return ((fld.name, _Value(eval_sum(text, lookup), at)),)


def _fast_units(text: str, fld: Field, instr: Instruction, isa: Isa) -> int | None:
    """The mask of ``load|tensor``, or ``None`` for anything :func:`_units` would reject."""
    mask = 0
    for name in text.split("|"):
        name = name.strip()
        if name in (_UNITS_NONE, "0"):
            continue
        uid = isa.unit_ids.get(name)
        if uid is None or name == instr.unit or uid >= fld.width:
            return None
        mask |= 1 << uid
    return mask


class _FieldPlan(NamedTuple):
    """A field with the numbers :func:`_encode` needs, computed once (``Field.lo``/``hi`` are properties)."""

    field: Field
    name: str
    default: int | None
    lo: int
    hi: int
    tile: bool  # written as a row, encoded as a tile index


@dataclass(frozen=True)
class _EncodePlan:
    """Per-mnemonic encoding layout: the word's fixed bits and every field's range, mask and shift."""

    fields: tuple[_FieldPlan, ...]
    scratchpad: tuple[Field, ...]  # fields checked against scratchpad capacity
    dram: Field | None  # the DRAM address field, if any
    dram_scratchpad: Field | None  # the scratchpad field that gives the DRAM element size
    row_extent: dict[str, regions.Scalar]  # sp_row field -> rows its access spans (isa.yaml accesses)
    rules: tuple[tuple[Check, regions.Scalar, tuple[tuple[str, regions.Scalar], ...]], ...]  # isa.yaml checks


@functools.lru_cache(maxsize=16)
def _encode_plans(isa: Isa) -> dict[str, _EncodePlan]:
    plans: dict[str, _EncodePlan] = {}
    for instr in isa.instructions:
        fields = tuple(_FieldPlan(f, f.name, f.default, f.lo, f.hi, f.kind == "sp_tile") for f in instr.fields)
        scratchpad = tuple(f for f in instr.fields if f.kind in SP_KINDS)
        dram = next((f for f in instr.fields if f.kind == "dram_addr"), None)

        def compiled(text: str, ins: Instruction = instr) -> regions.Scalar:
            return regions.scalar_function(isa.region_expr(ins, text), isa.scope_ids)

        extent = {a.bounds[0]: compiled(f"({a.bounds[1]}) - ({a.bounds[0]})")
                  for a in instr.accesses if not a.dram and a.bounds[0] in instr.operands}
        rules = tuple((c, compiled(c.fault), tuple((f, compiled(f)) for f in c.fields)) for c in instr.checks)
        plans[instr.mnemonic] = _EncodePlan(fields, scratchpad, dram,
                                            scratchpad[0] if dram is not None else None, extent, rules)
    return plans


def _encode(instr: Instruction, values: dict[str, _Value], state: _State, at: Pos) -> _Checked:
    """Check ``instr``'s values, with their source positions in every message (:func:`_words` encodes)."""
    cfg = state.cfg
    plan = state.plans[instr.mnemonic]
    # Defaults and missing fields first, so the checks below see every value.
    full: dict[str, int] = {}
    for fp in plan.fields:
        val = values.get(fp.name)
        if val is not None:
            full[fp.name] = val.value
        elif fp.default is not None:
            full[fp.name] = fp.default
        else:
            raise AsmError(f"{at}: {instr.mnemonic} needs {fp.name}=... ({fp.field.summary}); it has no default.")
    # Range checks in field order, with the source positions in the messages: the values the ISA's
    # encoder gets later are in range.
    encoded_values: list[int] = []
    keep = encoded_values.append
    tile = cfg.tile
    for fp in plan.fields:
        value = encoded = full[fp.name]
        if fp.tile:
            if value % tile:
                pos = values[fp.name].pos if fp.name in values else at
                raise AsmError(f"{pos}: {instr.mnemonic} {fp.name}: scratchpad row {value} is not "
                               f"aligned to a tile; tile addresses must be multiples of {tile}.")
            encoded = value // tile
        if not fp.lo <= encoded <= fp.hi:
            pos = values[fp.name].pos if fp.name in values else at
            fld = fp.field
            shown = f"{fld.lo}..{fld.hi}"
            if fld.kind == "sp_tile":
                shown = f"rows {fld.lo * tile}..{fld.hi * tile} (multiples of {tile})"
            raise AsmError(f"{pos}: {instr.mnemonic} {fld.name}={value} is out of range: the field "
                           f"({fld.width} bits, {fld.kind}) holds {shown}.")
        keep(encoded)
    for fld in plan.scratchpad:
        _check_scratchpad(instr, fld, values[fld.name], full, state)
    if plan.dram is not None:
        assert plan.dram_scratchpad is not None
        _check_dram(instr, plan.dram, plan.dram_scratchpad, values, full, state, at)
    _check_rules(instr, values, full, state, at)
    return instr, encoded_values


def _scope_of(fld: Field, val: _Value) -> str:
    assert val.scope is not None or fld.scope is not None
    return val.scope or fld.scope  # type: ignore[return-value]


def _check_scratchpad(instr: Instruction, fld: Field, val: _Value, full: dict[str, int],
                      state: _State) -> None:
    cfg = state.cfg
    scope = _scope_of(fld, val)
    key, capacity = state.capacity[scope]
    row = val.value
    if fld.kind == "sp_tile":
        dims = _TILE_EXTENT.get(fld.name, ())
        tiles = 1
        for d in dims:
            tiles *= full.get(d, 1)
        extent = tiles * cfg.tile
    else:
        span = state.plans[instr.mnemonic].row_extent.get(fld.name)
        extent = span(full, cfg.tile, state.elem_bytes, state.scope_rows) if span is not None else full.get("rows", 1)
    if row < 0 or row + extent > capacity:
        # The description is built only here: this check runs for every scratchpad operand.
        if fld.kind == "sp_tile":
            dims_text = " * ".join(f"{d}={full.get(d, 1)}" for d in dims)
            what = f"{tiles} tile{'s' if tiles != 1 else ''} ({dims_text})"
        else:
            what = f"{extent} row{'s' if extent != 1 else ''}"
        raise AsmError(f"{val.pos}: {instr.mnemonic} {fld.operand or fld.name}: {scope}[{row}] spanning "
                       f"{what} reaches row {row + extent - 1}, beyond the {capacity} rows "
                       f"(0..{capacity - 1}) of scratchpad {scope} ({key}) in config {cfg.name!r}.")


def _check_dram(instr: Instruction, dram_field: Field, sp: Field, values: dict[str, _Value],
                full: dict[str, int], state: _State, at: Pos) -> None:
    cfg = state.cfg
    key = state.isa.scope_by_name[_scope_of(sp, values[sp.name])].config_key
    elem = 1 if full.get("narrow") else cfg.elem_bytes(key)
    addr, rows = full[dram_field.name], full.get("rows", 1)
    stride, cols = full.get("stride", 0), full.get("cols", 1)
    pos = values[dram_field.name].pos if dram_field.name in values else at
    if addr % elem:
        raise AsmError(f"{pos}: {instr.mnemonic}: DRAM address 0x{addr:x} is not aligned to the "
                       f"{elem}-byte elements it {'reads' if instr.unit == 'load' else 'writes'}.")
    if rows > 1 and stride % elem:
        spos = values["stride"].pos if "stride" in values else at
        raise AsmError(f"{spos}: {instr.mnemonic}: stride {stride} is not a multiple of the {elem}-byte "
                       "element size, so rows after the first would be misaligned.")
    end = addr + (rows - 1) * stride + cols * elem
    if end > cfg.dram_bytes:
        raise AsmError(f"{pos}: {instr.mnemonic}: DRAM bytes 0x{addr:x}..0x{end - 1:x} (rows={rows}, "
                       f"stride={stride}, cols={cols} x {elem} bytes) reach beyond the {cfg.dram_bytes} "
                       f"bytes (0x0..0x{cfg.dram_bytes - 1:x}) of DRAM in config {cfg.name!r}.")


def _check_rules(instr: Instruction, values: dict[str, _Value], full: dict[str, int], state: _State,
                 at: Pos) -> None:
    """Constraints the ISA states in prose (isa.yaml descriptions), checked where they are static."""
    cfg = state.cfg

    def pos(name: str) -> Pos:
        return values[name].pos if name in values else at

    if instr.mnemonic == "store":
        if full["narrow"] and not cfg.is_integer:
            raise AsmError(f"{pos('narrow')}: store narrow=1 requantizes to int8, which only integer configs "
                           f"support; config {cfg.name!r} accumulates in {cfg.acc_dtype}.")
        if not full["narrow"] and full["shift"]:
            raise AsmError(f"{pos('shift')}: store shift={full['shift']} needs narrow=1; without narrowing "
                           "the shift must be 0.")
    elif instr.mnemonic == "vshr" and not cfg.is_integer:
        raise AsmError(f"{at}: vshr is for integer configs only; config {cfg.name!r} accumulates in "
                       f"{cfg.acc_dtype}.")
    elif instr.mnemonic == "vadd":
        dst, src, rows = full["dst"], full["src"], full["rows"]
        if dst != src and dst < src + rows and src < dst + rows:
            raise AsmError(f"{pos('src')}: vadd source rows {src}..{src + rows - 1} partly overlap "
                           f"destination rows {dst}..{dst + rows - 1}; they must be identical or disjoint.")
    elif instr.mnemonic == "vaddrow":
        dst, src, rows = full["dst"], full["src"], full["rows"]
        if dst <= src < dst + rows:
            raise AsmError(f"{pos('src')}: vaddrow broadcast row {src} lies inside the destination rows "
                           f"{dst}..{dst + rows - 1}; it must lie outside them.")
    if instr.integer_only and not cfg.is_integer:
        raise AsmError(f"{at}: {instr.mnemonic} is for integer configs only; config {cfg.name!r} accumulates in "
                       f"{cfg.acc_dtype}.")
    tables = (cfg.tile, state.elem_bytes, state.scope_rows)
    for rule, fault, fields in state.plans[instr.mnemonic].rules:  # isa.yaml `checks`
        if fault(full, *tables):
            text = rule.message.format_map({name: f(full, *tables) for name, f in fields})
            raise AsmError(f"{at}: {instr.mnemonic}: {text}.")


__all__ = ["assemble"]
