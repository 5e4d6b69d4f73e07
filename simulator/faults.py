"""The simulator's fault type."""

from __future__ import annotations

from tinynpu.errors import TinyNpuError


class SimFault(TinyNpuError):
    """A program fault: the message names pc (= index * word bytes), index, mnemonic and reason."""

    def __init__(self, message: str, *, index: int | None = None) -> None:
        super().__init__(message, exit_code=3)
        self.index = index


def where(index: int, mnemonic: str, word_bytes: int) -> str:
    """``instruction 5 (pc 0x50, tmm)``: how every fault names an instruction."""
    return f"instruction {index} (pc 0x{index * word_bytes:x}, {mnemonic})"


__all__ = ["SimFault", "where"]
