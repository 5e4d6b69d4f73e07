"""Integer expressions over a token cursor: literals, symbols, + - * / // % << >> ~ and parentheses.

Precedence (loosest first), as in Python: ``<< >>``, then ``+ -``, then
``* / // %``, then unary ``- + ~``.  ``/`` and ``//`` both divide with floor
rounding; dividing by zero is an error at the divisor's position.

Evaluation is bounded so that no source can make the assembler hang or run
out of memory: every value, including intermediate ones, must fit in
``bits`` bits (the assembler passes its widest instruction field), a shift
count is checked before shifting, and parentheses nest at most
:data:`MAX_NESTING` deep.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tinynpu.assembler.lexer import Pos, Token
from tinynpu.errors import AsmError


class Cursor:
    """Reads the tokens of one line, with positions for error messages."""

    def __init__(self, tokens: list[Token], file: str, line: int) -> None:
        self.tokens = tokens
        self.i = 0
        self.tok = tokens[0]  # the current token; kept as an attribute because it is read constantly
        self.file = file
        self.line = line
        self.depth = 0  # open parentheses, bounded by MAX_NESTING

    def pos(self, tok: Token | None = None) -> Pos:
        return Pos(self.file, self.line, (tok or self.tok).col)

    def peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.i + offset, len(self.tokens) - 1)]

    def next(self) -> Token:
        tok = self.tok
        if tok.kind != "end":
            self.i += 1
            self.tok = self.tokens[self.i]
        return tok

    def at(self, text: str) -> bool:
        return self.tok.text == text and self.tok.kind == "op"

    def accept(self, text: str) -> bool:
        if self.tok.text == text and self.tok.kind == "op":
            self.next()
            return True
        return False

    def expect(self, text: str, what: str) -> Token:
        if not self.at(text):
            raise AsmError(f"{self.pos()}: expected {what}, found {describe(self.tok)}.")
        return self.next()

    def expect_ident(self, what: str) -> Token:
        if self.tok.kind != "ident":
            raise AsmError(f"{self.pos()}: expected {what}, found {describe(self.tok)}.")
        return self.next()

    def expect_end(self) -> None:
        if self.tok.kind != "end":
            raise AsmError(f"{self.pos()}: unexpected {describe(self.tok)} after the end of the statement.")


def describe(tok: Token) -> str:
    """How a token is named in messages."""
    if tok.kind == "end":
        return "the end of the line"
    if tok.kind == "str":
        return f'string "{tok.text}"'
    return repr(tok.text)


Lookup = Callable[[str, Pos], int]


def symbol_lookup(symbols: Mapping[str, int], kinds: str = "symbol") -> Lookup:
    """A lookup over a symbol table that reports undefined names with their position."""

    def lookup(name: str, where: Pos) -> int:
        if name not in symbols:
            raise AsmError(f"{where}: undefined {kinds} {name!r}.")
        return symbols[name]

    return lookup


_SHIFT_OPS = frozenset({"<<", ">>"})
_SUM_OPS = frozenset({"+", "-"})
_PRODUCT_OPS = frozenset({"*", "/", "//", "%"})
_PREFIX_OPS = frozenset({"-", "+", "~"})
# Deepest parenthesis nesting accepted: far beyond any real expression, far below Python's recursion limit.
MAX_NESTING = 64


def parse_expr(cur: Cursor, lookup: Lookup, *, bits: int) -> int:
    """Parse and evaluate one expression starting at the cursor.

    Args:
        cur: The tokens, at the expression's first.
        lookup: The value of a symbol.
        bits: Every value must have a magnitude below ``2**bits``.

    Raises:
        AsmError: bad syntax, an undefined symbol, a division by zero, or a value beyond ``bits``.
    """
    return _shift(cur, lookup, bits)


def _fit(cur: Cursor, tok: Token, value: int, bits: int) -> int:
    if value.bit_length() > bits:
        raise AsmError(f"{cur.pos(tok)}: the value here has {value.bit_length():,} bits; values in "
                       f"expressions must fit in {bits} bits (the widest instruction field).")
    return value


def _shift(cur: Cursor, lookup: Lookup, bits: int) -> int:
    start = cur.tok
    value = _sum(cur, lookup, bits)
    while cur.tok.kind == "op" and cur.tok.text in _SHIFT_OPS:
        op = cur.next()
        rhs_tok = cur.tok
        rhs = _sum(cur, lookup, bits)
        if rhs < 0:
            raise AsmError(f"{cur.pos(rhs_tok)}: shift count must be >= 0, not {rhs}.")
        if op.text == "<<":
            value = _fit(cur, start, value << min(rhs, bits + 1), bits) if value else 0
        else:
            value >>= rhs
    return value


def _sum(cur: Cursor, lookup: Lookup, bits: int) -> int:
    start = cur.tok
    value = _product(cur, lookup, bits)
    while cur.tok.kind == "op" and cur.tok.text in _SUM_OPS:
        op = cur.next()
        rhs = _product(cur, lookup, bits)
        value = _fit(cur, start, value + rhs if op.text == "+" else value - rhs, bits)
    return value


def _product(cur: Cursor, lookup: Lookup, bits: int) -> int:
    start = cur.tok
    value = _unary(cur, lookup, bits)
    while cur.tok.kind == "op" and cur.tok.text in _PRODUCT_OPS:
        op = cur.next()
        rhs_tok = cur.tok
        rhs = _unary(cur, lookup, bits)
        if op.text == "*":
            value = _fit(cur, start, value * rhs, bits)
        elif rhs == 0:
            raise AsmError(f"{cur.pos(rhs_tok)}: division by zero.")
        else:
            value = value % rhs if op.text == "%" else value // rhs
    return value


def _unary(cur: Cursor, lookup: Lookup, bits: int) -> int:
    tok = cur.tok
    if tok.kind == "num":  # the common case first
        cur.next()
        return _fit(cur, tok, tok.value, bits)
    prefixes = []  # read in a loop, not by recursion: a thousand '-' in a row is an answer, not a crash
    while cur.tok.kind == "op" and cur.tok.text in _PREFIX_OPS:
        prefixes.append(cur.next().text)
    value = _atom(cur, lookup, bits)
    for op in reversed(prefixes):
        value = -value if op == "-" else ~value if op == "~" else value
    return _fit(cur, tok, value, bits)


def _atom(cur: Cursor, lookup: Lookup, bits: int) -> int:
    tok = cur.tok
    if tok.kind == "num":
        cur.next()
        return _fit(cur, tok, tok.value, bits)
    if tok.kind == "ident":
        cur.next()
        return _fit(cur, tok, lookup(tok.text, cur.pos(tok)), bits)
    if cur.accept("("):
        cur.depth += 1
        if cur.depth > MAX_NESTING:
            raise AsmError(f"{cur.pos(tok)}: parentheses nest more than {MAX_NESTING} deep.")
        value = _shift(cur, lookup, bits)
        cur.expect(")", "')' to close the parenthesis")
        cur.depth -= 1
        return value
    raise AsmError(f"{cur.pos()}: expected a number, symbol or '(', found {describe(tok)}.")


__all__ = ["MAX_NESTING", "Cursor", "Lookup", "describe", "parse_expr", "symbol_lookup"]
