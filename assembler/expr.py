"""Integer expressions over a token cursor: literals, symbols, + - * / // % << >> ~ and parentheses.

Precedence (loosest first), as in Python: ``<< >>``, then ``+ -``, then
``* / // %``, then unary ``- + ~``.  ``/`` and ``//`` both divide with floor
rounding; dividing by zero is an error at the divisor's position.
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


def parse_expr(cur: Cursor, lookup: Lookup) -> int:
    """Parse and evaluate one expression starting at the cursor."""
    return _shift(cur, lookup)


def _shift(cur: Cursor, lookup: Lookup) -> int:
    value = _sum(cur, lookup)
    while cur.tok.kind == "op" and cur.tok.text in _SHIFT_OPS:
        op = cur.next()
        rhs_tok = cur.tok
        rhs = _sum(cur, lookup)
        if rhs < 0:
            raise AsmError(f"{cur.pos(rhs_tok)}: shift count must be >= 0, not {rhs}.")
        value = value << rhs if op.text == "<<" else value >> rhs
    return value


def _sum(cur: Cursor, lookup: Lookup) -> int:
    value = _product(cur, lookup)
    while cur.tok.kind == "op" and cur.tok.text in _SUM_OPS:
        op = cur.next()
        rhs = _product(cur, lookup)
        value = value + rhs if op.text == "+" else value - rhs
    return value


def _product(cur: Cursor, lookup: Lookup) -> int:
    value = _unary(cur, lookup)
    while cur.tok.kind == "op" and cur.tok.text in _PRODUCT_OPS:
        op = cur.next()
        rhs_tok = cur.tok
        rhs = _unary(cur, lookup)
        if op.text == "*":
            value *= rhs
        elif rhs == 0:
            raise AsmError(f"{cur.pos(rhs_tok)}: division by zero.")
        else:
            value = value % rhs if op.text == "%" else value // rhs
    return value


def _unary(cur: Cursor, lookup: Lookup) -> int:
    tok = cur.tok
    if tok.kind == "num":  # the common case first
        cur.next()
        return tok.value
    if cur.accept("-"):
        return -_unary(cur, lookup)
    if cur.accept("+"):
        return _unary(cur, lookup)
    if cur.accept("~"):
        return ~_unary(cur, lookup)
    return _atom(cur, lookup)


def _atom(cur: Cursor, lookup: Lookup) -> int:
    tok = cur.tok
    if tok.kind == "num":
        cur.next()
        return tok.value
    if tok.kind == "ident":
        cur.next()
        return lookup(tok.text, cur.pos(tok))
    if cur.accept("("):
        value = _shift(cur, lookup)
        cur.expect(")", "')' to close the parenthesis")
        return value
    raise AsmError(f"{cur.pos()}: expected a number, symbol or '(', found {describe(tok)}.")


__all__ = ["Cursor", "Lookup", "describe", "parse_expr", "symbol_lookup"]
