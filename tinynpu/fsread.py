"""Bounded reads of a user's input files: only regular files (never ``/dev/zero`` or a FIFO), up to a size limit.

Part of :mod:`tinynpu.fsio` (which re-exports it); the checks before a write
are in :mod:`tinynpu.fscheck`, the atomic writes in :mod:`tinynpu.fswrite`.
"""

from __future__ import annotations

import io
import json
import math
import os
import stat
import tokenize
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib import format as npformat

from tinynpu.errors import TinyNpuError, UsageError

# Default read limit: well above the largest program we make (the naive 1024^3 matmul's image is 13 MB
# and its assembly 40 MB), well below what would exhaust a laptop's memory.
MAX_READ_BYTES = 1 << 30


def os_reason(exc: OSError) -> str:
    """The operating system's reason for ``exc`` in words, for a message."""
    return exc.strerror or str(exc)


# ---------------------------------------------------------------- reading

def read_bytes(path: Path | str, *, what: str, limit: int = MAX_READ_BYTES,
               error: type[TinyNpuError] = UsageError) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.

    Args:
        path: The file.
        what: What the file is, for messages ("the assembly source").
        limit: Largest size accepted, in bytes.
        error: Exception class raised (a :class:`TinyNpuError` subclass).

    Raises:
        TinyNpuError: missing, unreadable, not a regular file, or larger than ``limit``.
    """
    path = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise error(f"{path}: cannot read {what}: it is {file_kind(info.st_mode)}, not a regular file.")
            if info.st_size > limit:
                raise error(f"{path}: cannot read {what}: it has {info.st_size:,} bytes, more than the "
                            f"{limit:,}-byte limit.")
            # read(n) allocates n bytes up front: ask for what the file says it holds, then go on in
            # bounded chunks in case it holds more (a growing file, or /proc's size-0 files)
            chunks = [fh.read(min(info.st_size, limit) + 1)]
            total = len(chunks[0])
            while chunks[-1] and total <= limit:
                chunks.append(fh.read(min(1 << 20, limit + 1 - total)))
                total += len(chunks[-1])
            data = b"".join(chunks)
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {os_reason(exc)}.") from None
    if len(data) > limit:  # grew while we read it
        raise error(f"{path}: cannot read {what}: it has more than the {limit:,}-byte limit.")
    return data


def read_text(path: Path | str, *, what: str, limit: int = MAX_READ_BYTES,
              error: type[TinyNpuError] = UsageError) -> str:
    """The UTF-8 text of a regular file (see :func:`read_bytes`); bad UTF-8 names the byte offset."""
    data = read_bytes(path, what=what, limit=limit, error=error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{path}:{line}: cannot read {what}: byte 0x{data[exc.start]:02x} at offset {exc.start} "
                    "is not UTF-8 text.") from None


def parse_json(text: str, *, where: str, what: str, error: type[TinyNpuError] = UsageError) -> Any:
    """JSON text parsed, every malformation (bad syntax, nesting too deep for the parser) one error.

    Args:
        text: The JSON text.
        where: The place named first in messages (a path, or ``path: byte N``).
        what: What the text is ("the schedule").
        error: Exception class raised.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where}:{exc.lineno}:{exc.colno}: {what} is not valid JSON: {exc.msg}.") from None
    except RecursionError:
        raise error(f"{where}: {what} nests too deep to be read.") from None


def read_json(path: Path | str, *, what: str, limit: int = MAX_READ_BYTES,
              error: type[TinyNpuError] = UsageError) -> Any:
    """A regular UTF-8 file's JSON (see :func:`read_text` and :func:`parse_json`)."""
    return parse_json(read_text(path, what=what, limit=limit, error=error), where=str(path), what=what, error=error)


def read_npy(path: Path | str, *, what: str, limit: int = MAX_READ_BYTES) -> np.ndarray:
    """A numeric array from a ``.npy`` file, never pickled objects and never more than the file holds.

    The header is parsed and checked against the file's size before any array is made, so a header
    that claims a huge shape is an error rather than an allocation.

    Raises:
        UsageError: unreadable, not a .npy file, a malformed header, a shape the data does not fill,
            or a dtype that is not bool, integer or float.
    """
    data = read_bytes(path, what=f"a .npy array ({what})", limit=limit)
    fh = io.BytesIO(data)
    try:
        version = npformat.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(fh)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = npformat.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    # numpy reports a malformed header through whichever of these its parser hits first
    except (ValueError, SyntaxError, TypeError, EOFError, RecursionError, MemoryError, OverflowError,
            tokenize.TokenError) as exc:
        raise UsageError(f"{path}: {what} is not a valid .npy file: {str(exc).strip() or type(exc).__name__}.") \
            from None
    if dtype.kind not in "biuf" or dtype.hasobject:
        raise UsageError(f"{path}: {what} has dtype {dtype}; tensors take bool, integer or float arrays.")
    count = math.prod(shape)
    have = len(data) - fh.tell()
    if count * dtype.itemsize != have:
        raise UsageError(f"{path}: {what}: the header promises shape {tuple(shape)} of {dtype} "
                         f"({count * dtype.itemsize:,} bytes) but the file holds {have:,} bytes of data.")
    array = np.frombuffer(data, dtype=dtype, count=count, offset=fh.tell())
    return array.reshape(shape, order="F" if fortran else "C")


def file_kind(mode: int) -> str:
    """What a path of ``st_mode`` ``mode`` is, for a message that refuses it ("a FIFO")."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


__all__ = ["MAX_READ_BYTES", "file_kind", "os_reason", "parse_json", "read_bytes", "read_json", "read_npy", "read_text"]
