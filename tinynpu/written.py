"""The output files tinynpu wrote, remembered so that running a command again may replace them.

An output names a file; if that file exists, it is replaced only when it is
one tinynpu wrote and nobody changed since (or with ``--force``).  A file is
recognized by a record in ``$TINYNPU_CACHE/written/`` (one small JSON file per
output, named by a hash of the output's real path) holding the device, inode,
size and modification time the file had right after tinynpu wrote it: a file
the user made, edited, copied over or renamed into place no longer matches
and is left alone.  This is stricter than ``cp``, ``gcc -o`` or
``numpy.save``, which replace whatever the name points to; it keeps the
project's promise that nothing the user had on disk is overwritten without
being asked, while a command can be run twice in a row as written.  A record
that cannot be written (a read-only cache) only means the next run asks for
``--force``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from tinynpu.cache import cache_root

_claimed: set[str] = set()  # real paths this process checked as outputs: remembered once written


def _record(path: Path) -> Path:
    real = os.path.realpath(path)
    return cache_root() / "written" / hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _fingerprint(path: Path) -> dict[str, int | str]:
    info = os.stat(path)
    return {"path": os.path.realpath(path), "dev": info.st_dev, "ino": info.st_ino, "size": info.st_size,
            "mtime_ns": info.st_mtime_ns}


def claim(path: Path) -> None:
    """``path`` is an output of this run: remember it once it is written (:func:`remember_if_claimed`)."""
    _claimed.add(os.path.realpath(path))


def remember_if_claimed(path: Path) -> None:
    """Record ``path`` as written by tinynpu if it was claimed as an output; never fails the run."""
    if os.path.realpath(path) not in _claimed:
        return
    with contextlib.suppress(OSError):
        record = _record(path)
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_name(f"{record.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(_fingerprint(path)))
        os.replace(tmp, record)


def wrote(path: Path) -> bool:
    """Whether ``path`` is, unchanged, a file tinynpu wrote."""
    try:
        return json.loads(_record(path).read_text()) == _fingerprint(path)
    except (OSError, ValueError):
        return False


__all__ = ["claim", "remember_if_claimed", "wrote"]
