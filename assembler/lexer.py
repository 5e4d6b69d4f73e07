"""Tokens of one assembly line, each with its 1-based column.

The assembler works line by line (one instruction or directive per line), so
the lexer only needs to split a line into numbers, identifiers, strings and
punctuation, drop the trailing comment, and remember columns for messages.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from tinynpu.errors import AsmError


class Pos(NamedTuple):
    """A place in the source: file, 1-based line and column (a tuple: made for every operand)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Token(NamedTuple):
    """One token; ``kind`` is ``num``, ``ident``, ``directive``, ``str``, ``op`` or ``end``.

    A named tuple rather than a frozen dataclass: the lexer makes millions of
    them for a large program and tuple construction is several times faster.
    """

    kind: str
    text: str
    col: int
    value: int = 0


# One pattern for every token kind; alternatives are tried in order, and the
# longest operators come first so `<<` is not read as two `<`.
_TOKEN = re.compile(
    r"""\s*(?:(?P<str>"[^"]*")
    |(?P<num>[0-9][A-Za-z0-9_]*)
    |(?P<directive>\.[A-Za-z_][A-Za-z0-9_]*)
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>//|<<|>>|[-+*/%()\[\],=|:~])
    |(?P<bad>\S))""",
    re.VERBOSE,
)
# Longest number accepted, in digits: enough for any value of a 128-bit word in binary, and far below
# the length at which Python refuses to convert a decimal string (4,300 digits).
MAX_NUMBER_DIGITS = 256
_NUMBER = re.compile(r"0[xX][0-9a-fA-F_]+|0[bB][01_]+|[0-9][0-9_]*")


def strip_comment(text: str) -> str:
    """The line without its ``;`` or ``#`` comment (neither counts inside a string)."""
    if '"' not in text:  # the common case, without a loop over characters
        cut = min((i for i in (text.find(";"), text.find("#")) if i >= 0), default=len(text))
        return text[:cut]
    in_string = False
    for i, ch in enumerate(text):
        if ch == '"':
            in_string = not in_string
        elif ch in ";#" and not in_string:
            return text[:i]
    return text


def _number(text: str, where: Pos) -> int:
    if not _NUMBER.fullmatch(text) or text.endswith("_"):
        raise AsmError(f"{where}: malformed number {text!r}.")
    digits = text.replace("_", "")
    base = 10
    if digits[:2].lower() == "0x":
        base, digits = 16, digits[2:]
    elif digits[:2].lower() == "0b":
        base, digits = 2, digits[2:]
    if not digits:
        raise AsmError(f"{where}: malformed number {text!r}.")
    if len(digits) > MAX_NUMBER_DIGITS:
        raise AsmError(f"{where}: a number of {len(digits):,} digits; numbers have at most {MAX_NUMBER_DIGITS}.")
    if base == 10 and len(digits) > 1 and digits[0] == "0":
        raise AsmError(f"{where}: decimal number {text!r} has a leading zero; "
                       "write 0x.. for hex, 0b.. for binary.")
    return int(digits, base)


def tokenize(text: str, file: str, line: int) -> list[Token]:
    """Split one source line into tokens (its comment dropped), ending with an ``end`` token.

    Raises:
        AsmError: an unexpected character, malformed number or unterminated string.
    """
    text = strip_comment(text)
    tokens: list[Token] = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind is None:  # trailing whitespace
            continue
        col = m.start(kind) + 1
        word = m.group(kind)
        if kind == "num":
            tokens.append(Token("num", word, col, _number(word, Pos(file, line, col))))
        elif kind == "str":
            tokens.append(Token("str", word[1:-1], col))
        elif kind == "bad":
            what = "unterminated string" if word == '"' else f"unexpected character {word!r}"
            raise AsmError(f"{file}:{line}:{col}: {what}.")
        else:
            tokens.append(Token(kind, word, col))
    tokens.append(Token("end", "", len(text.rstrip()) + 1))
    return tokens


__all__ = ["MAX_NUMBER_DIGITS", "Pos", "Token", "strip_comment", "tokenize"]
