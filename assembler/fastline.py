"""Recognising the common instruction line without the tokenizer.

Almost every line of a generated program has the shape
``mnemonic op, [A + 16], key=value, wait=load|tensor  ; comment``: operands
that are scratchpad addresses, bracketed or bare sums of symbols and plain
literals, and ``key=value`` options.  :data:`FAST_LINE` accepts exactly such
lines, and only those whose every token the tokenizer would also accept (no
malformed numbers, strings, labels or directives), so a line it matches needs
no tokenizing in pass 1.  :func:`split_line` and :func:`eval_sum` then read it
with string operations, which are several times cheaper than tokens, a cursor
and the recursive expression parser.  Anything else (and every line that turns
out to be wrong) goes through the full lexer and parser, which alone produce
error messages.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# Stricter than the lexer's numbers on purpose (no '_', no leading zero): what
# this accepts, int(text, 0) reads with the same value as the lexer.
# Bounded like the lexer's numbers (lexer.MAX_NUMBER_DIGITS): a longer one takes the full parser, which reports it.
_NUM = r"(?:0[xX][0-9a-fA-F]{1,256}|0[bB][01]{1,256}|[1-9][0-9]{0,255}|0)(?![A-Za-z0-9_])"
_TERM = rf"(?:{_IDENT}|{_NUM})"
_SUM = rf"(?:-\s*)?{_TERM}(?:\s*[-+]\s*{_TERM})*"  # a leading '-' for negative immediates
_VALUE = rf"(?:-\s*)?{_TERM}(?:\s*[-+|]\s*{_TERM})*"  # '|' for unit masks such as load|tensor
_ITEM = rf"(?:{_IDENT}\s*=\s*{_VALUE}|{_IDENT}\s*\[\s*{_SUM}\s*\]|\[\s*{_SUM}\s*\]|{_SUM})"

FAST_LINE = re.compile(rf"\s*{_IDENT}(?:\s+{_ITEM}(?:\s*,\s*{_ITEM})*)?\s*(?:[;#].*)?")
"""A whole instruction line the fast path can read (use with ``fullmatch``)."""

# Mnemonic and item text of a line FAST_LINE matched (no ';' or '#' can occur before the comment).
_SPLIT = re.compile(r"(\s*)(\w+)([^;#]*)")
_SUM_SPLIT = re.compile(r"\s*([-+])\s*")

Lookup = Callable[[str], int]


def split_line(text: str) -> tuple[str, int, list[str]]:
    """``(mnemonic, its 1-based column, stripped comma-separated items)`` of a FAST_LINE line.

    Brackets in such a line hold only sums, never commas, so splitting at
    every comma gives the items.
    """
    m = _SPLIT.match(text)
    assert m is not None, "split_line needs a line FAST_LINE matched"
    rest = m.group(3).strip()
    items = [item.strip() for item in rest.split(",")] if rest else []
    return m.group(2), len(m.group(1)) + 1, items


def _term(text: str, lookup: Lookup) -> int:
    return int(text, 0) if text[0].isdigit() else lookup(text)


def eval_sum(text: str, lookup: Lookup) -> int:
    """Value of a ``[-] term (+|- term)*`` sum from a FAST_LINE line; ``lookup`` resolves symbols."""
    if "+" not in text and "-" not in text:  # a single literal or symbol: the common case
        return _term(text, lookup)
    parts = _SUM_SPLIT.split(text)
    # An empty first part is a leading '-': 0 - x is the full parser's unary -x, which binds tightest.
    value = _term(parts[0], lookup) if parts[0] else 0
    for i in range(1, len(parts), 2):
        rhs = _term(parts[i + 1], lookup)
        value = value + rhs if parts[i] == "+" else value - rhs
    return value


__all__ = ["FAST_LINE", "eval_sum", "split_line"]
