"""Tokens of one assembly line, each with its 1-based column.

The assembler works line by line (one instruction or directive per line), so
the lexer only needs to split a line into numbers, identifiers, strings and
punctuation, drop the trailing comment, and remember columns for messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tinynpu.errors import AsmError


@dataclass(frozen=True)
class Pos:
    """A place in the source: file, 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Token:
    """One token; ``kind`` is ``num``, ``ident``, ``directive``, ``str``, ``op`` or ``end``."""

    kind: str
    text: str
    col: int
    value: int = 0


# Longest operators first so `<<` is not read as two `<`.
_OPS = ("//", "<<", ">>", "+", "-", "*", "/", "%", "(", ")", "[", "]", ",", "=", "|", ":", "~")
_NUMBER = re.compile(r"0[xX][0-9a-fA-F_]+|0[bB][01_]+|[0-9][0-9_]*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD_TAIL = re.compile(r"[A-Za-z0-9_]+")


def strip_comment(text: str) -> str:
    """The line without its ``;`` or ``#`` comment (neither counts inside a string)."""
    in_string = False
    for i, ch in enumerate(text):
        if ch == '"':
            in_string = not in_string
        elif ch in ";#" and not in_string:
            return text[:i]
    return text


def _number(text: str, where: Pos) -> int:
    digits = text.replace("_", "")
    base = 10
    if digits[:2].lower() == "0x":
        base, digits = 16, digits[2:]
    elif digits[:2].lower() == "0b":
        base, digits = 2, digits[2:]
    if not digits or text.endswith("_"):
        raise AsmError(f"{where}: malformed number {text!r}.")
    if base == 10 and len(digits) > 1 and digits[0] == "0":
        raise AsmError(f"{where}: decimal number {text!r} has a leading zero; "
                       "write 0x.. for hex, 0b.. for binary.")
    return int(digits, base)


def tokenize(text: str, file: str, line: int) -> list[Token]:
    """Split one source line (comment already removed or not) into tokens, ending with an ``end`` token.

    Raises:
        AsmError: an unexpected character, malformed number or unterminated string.
    """
    text = strip_comment(text)
    tokens: list[Token] = []
    i = 0
    while i < len(text):
        ch = text[i]
        col = i + 1
        if ch.isspace():
            i += 1
            continue
        if ch == '"':
            end = text.find('"', i + 1)
            if end < 0:
                raise AsmError(f"{file}:{line}:{col}: unterminated string.")
            tokens.append(Token("str", text[i + 1 : end], col))
            i = end + 1
            continue
        if ch.isdigit():
            m = _NUMBER.match(text, i)
            assert m is not None
            tail = _WORD_TAIL.match(text, m.end())
            word = m.group() + (tail.group() if tail else "")
            tokens.append(Token("num", word, col, _number(word, Pos(file, line, col))))
            i += len(word)
            continue
        if ch == "." and (m := _IDENT.match(text, i + 1)):
            tokens.append(Token("directive", "." + m.group(), col))
            i = m.end()
            continue
        if m := _IDENT.match(text, i):
            tokens.append(Token("ident", m.group(), col))
            i = m.end()
            continue
        for op in _OPS:
            if text.startswith(op, i):
                tokens.append(Token("op", op, col))
                i += len(op)
                break
        else:
            raise AsmError(f"{file}:{line}:{col}: unexpected character {ch!r}.")
    tokens.append(Token("end", "", len(text.rstrip()) + 1))
    return tokens


__all__ = ["Pos", "Token", "strip_comment", "tokenize"]
