"""What onnx, onnxruntime and numpy print while tinynpu works: captured, never shown raw.

onnxruntime's C++ logger writes ``[E:onnxruntime:...]`` lines (coloured)
straight to file descriptor 2, the quantizer logs through Python's
``logging``, numpy and onnx warn through ``warnings``.  Printed raw, they come
before tinynpu's own paragraph (or instead of it, on success) and say less
than it does.  :func:`library_output` takes all of them for the duration of
the work (descriptor 2 itself included), and :func:`explained` turns an error
that escapes from onnx or onnxruntime into the project's paragraph, with what
the libraries said appended in one short sentence.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

from tinynpu.errors import OnnxError, TinyNpuError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: An onnxruntime log line: ``2026-01-01 ... [E:onnxruntime:Default, file.cc:42 Function] message``.
_ORT_LINE = re.compile(r"\[([EWF]):onnxruntime:[^\]]*\]\s*(.*)")


@dataclass
class Captured:
    """What the libraries said during the block: warnings (``Category: text``) and log lines."""

    warnings: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def summary(self, limit: int = 3) -> str:
        """The distinct things said, errors first, in one sentence (empty when nothing was said)."""
        said: list[str] = []
        for line in self.lines:
            m = _ORT_LINE.search(line)
            if m and m.group(1) in "EF":
                said.append(f"onnxruntime: {m.group(2).strip()}")
        said += self.warnings
        for line in self.lines:
            m = _ORT_LINE.search(line)
            if m and m.group(1) == "W":
                said.append(f"onnxruntime warning: {m.group(2).strip()}")
        distinct = list(dict.fromkeys(s[:240] for s in said if s))
        if not distinct:
            return ""
        more = f" (and {len(distinct) - limit} more)" if len(distinct) > limit else ""
        return "The libraries said: " + "; ".join(distinct[:limit]) + more + "."


@contextlib.contextmanager
def library_output() -> Iterator[Captured]:
    """Capture warnings, log records and descriptor-2 output of the block into the yielded :class:`Captured`."""
    captured = Captured()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    sink = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below, after the descriptor is restored
    saved = os.dup(2)
    os.dup2(sink.fileno(), 2)
    python_err = io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as records, contextlib.redirect_stderr(python_err):
            warnings.simplefilter("always")
            try:
                yield captured
            finally:
                captured.warnings = [f"{r.category.__name__}: {_first_line(str(r.message))}" for r in records]
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        sink.seek(0)
        raw = sink.read().decode(errors="replace")
        sink.close()
        text = _ANSI.sub("", raw + python_err.getvalue())
        captured.lines = [line.strip() for line in text.splitlines() if line.strip()]


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def _from_library(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.split(".")[0] in ("onnx", "onnxruntime", "google")


@contextlib.contextmanager
def explained(source: str) -> Iterator[None]:
    """Run the block with library output captured; an error leaves as one paragraph.

    A :class:`TinyNpuError` keeps its message, with what the libraries said appended; an exception
    raised by onnx or onnxruntime themselves (a model they refuse that no check of tinynpu's caught)
    and running out of memory become an :class:`OnnxError` naming ``source``.
    """
    with library_output() as captured:
        try:
            yield
        except TinyNpuError as exc:
            failure: TinyNpuError = exc
        except MemoryError:
            failure = OnnxError(f"{source}: the host ran out of memory; the model or the option values "
                                "(--batch, --calibrate, --compare) need more than this machine gives.")
        except Exception as exc:
            if not _from_library(exc):
                raise
            text = " ".join(str(exc).split()) or type(exc).__name__
            text = re.sub(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*", "", text)
            failure = OnnxError(f"{source}: onnxruntime or onnx refused the model: {text[:600]}")
        else:
            return
    note = captured.summary()
    message = f"{failure.message} {note}" if note and note not in failure.message else failure.message
    failure.message = message
    failure.args = (message,)
    raise failure from None


__all__ = ["Captured", "explained", "library_output"]
