"""Integer helpers every layer uses (a leaf module: it imports nothing from tinynpu)."""

from __future__ import annotations


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers, exact at any size (no float rounding).

    Args:
        a: Dividend.
        b: Positive divisor.
    """
    return -(-a // b)


def round_up(a: int, multiple: int) -> int:
    """The smallest multiple of ``multiple`` that is at least ``a``."""
    return ceil_div(a, multiple) * multiple
