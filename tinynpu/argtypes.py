"""The argparse types every command's options share: one definition of "a positive integer" and its message.

An ``ArgumentTypeError`` here becomes argparse's usage error, one paragraph
naming the option (``argument --size: must be a positive integer, not 0``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _integer(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None


def positive_int(text: str) -> int:
    """An integer of at least 1 (sizes, counts)."""
    value = _integer(text, "a positive integer")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer of at least 0 (seeds, a size where 0 means "skip it")."""
    value = _integer(text, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, not {value}")
    return value


def positive_int_at_most(ceiling: Callable[[], int]) -> Callable[[str], int]:
    """A positive integer of at most ``ceiling()`` (read when an option is parsed, not when it is declared)."""

    def parse(text: str) -> int:
        limit = ceiling()
        value = _integer(text, "a positive integer")
        if not 0 < value <= limit:
            raise argparse.ArgumentTypeError(f"must be a positive integer of at most {limit}, not {value}")
        return value

    return parse


__all__ = ["non_negative_int", "positive_int", "positive_int_at_most"]
