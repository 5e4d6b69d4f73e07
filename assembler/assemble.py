"""Assembly source -> :class:`Program`, with every static check the ISA allows.

Two passes.  Pass 1 expands ``.include``, tokenizes every line and gives each
label the index of the next instruction (every instruction is one word, so
labels need no values).  Pass 2 runs the directives in order (``.equ`` and
``.tensor`` symbols must be defined before use; labels may be used anywhere)
and checks each instruction (ranges, scratchpad extents, DRAM bounds and
alignment, the wait/signal units: :mod:`.values`); plain generated lines take
the fast path (:mod:`.fastpath`).  The checked instructions are encoded at the
end, one vectorized pass per mnemonic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from tinynpu import fsio
from tinynpu.assembler.expr import Cursor, describe, parse_expr
from tinynpu.assembler.fastline import FAST_LINE
from tinynpu.assembler.fastpath import fast_instruction, fast_table
from tinynpu.assembler.image import DTYPES, ROLES, Program, Tensor
from tinynpu.assembler.lexer import Pos, Token, tokenize
from tinynpu.assembler.values import Checked, Limits, Value, check_values, encode_checked
from tinynpu.errors import AsmError
from tinynpu.isa import ArchConfig, Field, Instruction, Isa
from tinynpu.isa.syntax import UNITS_NONE, Operand, Syntax, syntax_table


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
    checked: list[Checked] = field(default_factory=list)  # each instruction with its checked field values
    limits: Limits = field(init=False)
    value_bits: int = field(init=False)
    fast_items: dict[tuple[str, int, str], tuple[tuple[str, Value], ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.limits = Limits(self.isa, self.cfg)
        # Bound of every value in an expression: nothing wider can be encoded (see expr.parse_expr).
        self.value_bits = max(f.width for instr in self.isa.instructions for f in instr.fields)

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
    fast_syntax = fast_table(isa)
    checked = state.checked
    for stmt in statements:
        if stmt.tokens is None:
            entry = fast_instruction(stmt.text, (stmt.file, stmt.line), fast_syntax, state.limits, state.lookup,
                                     state.fast_items)
            checked.append(entry if entry is not None else _instruction(stmt.cursor(), table, state))
            continue
        cur = stmt.cursor()
        if cur.tok.kind == "directive":
            _directive(cur, state)
        else:
            checked.append(_instruction(cur, table, state))
    try:
        return Program.build(isa, cfg, encode_checked(isa, checked), state.tensors)
    except AsmError as exc:
        raise AsmError(f"{filename}: {exc.message}") from None


# ---------------------------------------------------------------- pass 1

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
            text_in = fsio.read_text(path, what="the included file", error=AsmError)
        except AsmError as exc:
            raise AsmError(f"{where}: cannot include {name_tok.text!r}: {exc.message}") from None
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
        value = parse_expr(cur, state.lookup, bits=state.value_bits)
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
    addr = parse_expr(cur, state.lookup, bits=state.value_bits)
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
        dim = parse_expr(cur, state.lookup, bits=state.value_bits)
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

def _instruction(cur: Cursor, table: dict[str, Syntax], state: _State) -> Checked:
    mnem_tok = cur.next()
    syntax = table.get(mnem_tok.text)
    if syntax is None:
        known = ", ".join(sorted(table))
        raise AsmError(f"{cur.pos(mnem_tok)}: unknown mnemonic {mnem_tok.text!r}; the ISA has {known}.")
    instr = syntax.instruction
    values: dict[str, Value] = {}
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
    return check_values(instr, values, state.limits, cur.pos(mnem_tok))


def _at_option(cur: Cursor) -> bool:
    nxt = cur.peek()
    return cur.tok.kind == "ident" and nxt.kind == "op" and nxt.text == "="


def _operand(cur: Cursor, operand: Operand, state: _State, values: dict[str, Value]) -> None:
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
        row = parse_expr(cur, state.lookup, bits=state.value_bits)
        cur.expect("]", "']' to close the scratchpad address")
        values[operand.address.name] = Value(row, start, scope_tok.text)
        if operand.scope_field is not None:
            values[operand.scope_field.name] = Value(state.isa.scope_by_name[scope_tok.text].id, start)
        return
    if operand.bracket:
        if not cur.accept("["):
            raise AsmError(f"{start}: operand {operand.name} must be a DRAM address in brackets, "
                           f"[expr], found {describe(cur.tok)}.")
        values[operand.value_field.name] = Value(parse_expr(cur, state.lookup, bits=state.value_bits), start)
        cur.expect("]", "']' to close the DRAM address")
        return
    if cur.tok.kind == "ident" and cur.peek().text == "[":
        raise AsmError(f"{start}: operand {operand.name} is a number, not a scratchpad address.")
    if cur.at("["):
        raise AsmError(f"{start}: operand {operand.name} is a number, not a bracketed address.")
    values[operand.value_field.name] = Value(parse_expr(cur, state.lookup, bits=state.value_bits), start)


def _option(cur: Cursor, syntax: Syntax, state: _State, values: dict[str, Value]) -> None:
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
        values[fld.name] = Value(_units(cur, state, syntax.instruction, fld), pos)
    else:
        value_pos = cur.pos()
        values[fld.name] = Value(parse_expr(cur, state.lookup, bits=state.value_bits), value_pos)


def _units(cur: Cursor, state: _State, instr: Instruction, fld: Field) -> int:
    mask = 0
    names = [u.name for u in state.isa.units if u.id < fld.width]
    while True:
        tok = cur.tok
        if tok.kind == "num" and tok.value == 0:
            cur.next()
        elif tok.kind != "ident" or (tok.text not in state.isa.unit_ids and tok.text != UNITS_NONE):
            raise AsmError(f"{cur.pos()}: {fld.name}= takes unit names joined by '|' ({', '.join(names)}) "
                           f"or {UNITS_NONE}, not {describe(tok)}.")
        else:
            cur.next()
            if tok.text != UNITS_NONE:
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


__all__ = ["assemble"]
