"""Reading inputs and writing outputs without losing a user's data: the one module commands import.

Every command that writes goes through this module, so three promises hold
everywhere:

* **Checked before any work.**  :func:`check_output` (one file) and
  :func:`check_output_dir` (a directory of files written as a set) refuse,
  before the command starts computing, to replace a file the user made
  (unless ``--force``), to write an output over an input of the same run
  (even with ``--force``), or to replace anything that is not a regular file
  (a device node, a directory, a FIFO) at all.
* **Atomic.**  :func:`write_atomic` writes a temporary file in the target's
  directory, fsyncs it and renames it over the target: a killed run leaves
  the old file or the new one, never a truncated one.  :func:`replace_dir`
  builds a whole directory beside the target and swaps it in with one
  rename, so a directory of outputs is the old set or the new set.
* **Bounded reads.**  :func:`read_bytes` / :func:`read_text` read only
  regular files (never ``/dev/zero`` or a FIFO) up to a size limit.

The three jobs are three modules, re-exported here so callers write
``fsio.check_output`` and ``fsio.write_atomic`` whichever part they need:
:mod:`tinynpu.fsread`, :mod:`tinynpu.fscheck` and :mod:`tinynpu.fswrite`.
:func:`write_output` is the check and the write together, for a single output.
"""

from __future__ import annotations

from pathlib import Path

from tinynpu.fscheck import Ours, check_output, check_output_dir, starts_with
from tinynpu.fsread import MAX_READ_BYTES, parse_json, read_bytes, read_json, read_npy, read_text
from tinynpu.fswrite import (
    KEPT_PREFIX,
    TEMP_PREFIX,
    remove_stale_temps,
    replace_dir,
    staged,
    staged_data,
    write_atomic,
    write_dir,
)


def write_output(path: Path | str, data: bytes | str, *, overwrite: bool, magic: bytes | None = None) -> None:
    """Write an output file atomically without silently destroying a user's file.

    An existing file is replaced only when ``overwrite`` is set, or when it
    starts with ``magic`` (it is one of ours, e.g. a previous build); never
    when it is not a regular file.
    """
    target = check_output(path, force=overwrite, ours=starts_with(magic) if magic else None)
    write_atomic(target, data)


__all__ = [
    "KEPT_PREFIX",
    "MAX_READ_BYTES",
    "TEMP_PREFIX",
    "Ours",
    "check_output",
    "check_output_dir",
    "parse_json",
    "read_bytes",
    "read_json",
    "read_npy",
    "read_text",
    "remove_stale_temps",
    "replace_dir",
    "staged",
    "staged_data",
    "starts_with",
    "write_atomic",
    "write_dir",
    "write_output",
]
