"""pytest plugin: the native simulator core replaced by a build with -fsanitize=address,undefined.

Loaded by ``tests/test_fuzz_sanitize.py`` in a child pytest (``-p asan_core``) whose process has
libasan preloaded; ``$TINYNPU_ASAN_LIB`` is the sanitized library.
"""

from __future__ import annotations

import ctypes
import functools
import os

from tinynpu.simulator import native

_LIB = ctypes.CDLL(os.environ["TINYNPU_ASAN_LIB"])
_LIB.tinynpu_run.argtypes = [ctypes.POINTER(native._Run)]
_LIB.tinynpu_run.restype = ctypes.c_int


@functools.cache
def _sanitized(enabled: str, cc: str | None, cache: str) -> ctypes.CDLL | native.NativeUnavailable:
    if enabled == "0":
        return native.NativeUnavailable("TINYNPU_NATIVE=0 turns the native core off")
    return _LIB


native._load = _sanitized  # type: ignore[assignment]
