"""The one exception type every user-caused error is reported through.

The CLI catches :class:`TinyNpuError` and prints its message as a single
paragraph with a non-zero exit code; anything else is a bug in tinynpu.
"""

from __future__ import annotations


class TinyNpuError(Exception):
    """An error the user can cause (bad file, bad value, faulting program).

    Args:
        message: One paragraph naming the place (file:line:col, pc, field,
            value) and what was expected.
        exit_code: Process exit code the CLI uses for this error.
    """

    def __init__(self, message: str, *, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class SpecError(TinyNpuError):
    """A bad ISA spec or architecture config."""


class AsmError(TinyNpuError):
    """Bad assembly source or a bad binary image."""


class UsageError(TinyNpuError):
    """Bad command-line arguments or paths."""


class OnnxError(TinyNpuError):
    """An ONNX model tinynpu cannot take (not ONNX, truncated, unsupported op, dynamic shape, too big)."""
