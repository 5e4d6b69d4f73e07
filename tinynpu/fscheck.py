"""Checks before any work: may this output file or directory be written?

Refuses, before a command starts computing, to replace a file the user made
(unless ``--force``; a file tinynpu wrote and nobody changed since is replaced,
see :mod:`tinynpu.written`), to write an output over an input of the same run (even
with ``--force``), or to replace anything that is not a regular file.  Part of
:mod:`tinynpu.fsio`, which re-exports it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from tinynpu import written
from tinynpu.errors import UsageError
from tinynpu.fsread import file_kind, os_reason

Ours = Callable[[Path], bool]


def starts_with(magic: bytes) -> Ours:
    """An ``ours`` test: the file starts with ``magic`` (an earlier tinynpu output of this kind)."""

    def ours(path: Path) -> bool:
        try:
            with open(path, "rb") as fh:
                return fh.read(len(magic)) == magic
        except OSError:
            return False

    return ours


def same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def check_output(path: Path | str, *, force: bool, ours: Ours | None = None, inputs: Iterable[Path | str] = (),
                 what: str = "output") -> Path:
    """Check that ``path`` may be written, before the run does any work.

    Args:
        path: The output file.
        force: ``--force``: a user's regular file may be replaced.
        ours: Says whether an existing file is an earlier output of ours (replaced without ``--force``).
        inputs: Files this run reads: the output must not be one of them, even with ``--force``.
        what: How the output is named in messages ("--output C", "--trace").

    Returns:
        The path to write: symbolic links followed, so the link itself is never replaced.

    Raises:
        UsageError: in one paragraph naming the path and the reason.
    """
    path = Path(path)
    for source in inputs:
        if same_file(path, Path(source)):
            raise UsageError(f"{what} {path}: this file is also an input of this run ({source}); "
                             "write the output to another path.")
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot write here: {os_reason(exc)}.") from None
    if info is not None:
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{what} {path}: it is {file_kind(info.st_mode)}; an output replaces only a regular "
                             "file (even with --force); choose a file path.")
        if not force and not (ours is not None and ours(target)) and not written.wrote(target):
            raise UsageError(f"{what} {path}: the file already exists and was not written by tinynpu (or was "
                             "changed since); pass --force to overwrite it or choose another path.")
    _check_dir_writable(target.parent, what, path)
    written.claim(target)
    return target


def _check_dir_writable(directory: Path, what: str, path: Path) -> None:
    directory = directory if str(directory) else Path(".")
    try:
        info = os.stat(directory)
    except FileNotFoundError:
        raise UsageError(f"{what} {path}: the directory {directory} does not exist.") from None
    except OSError as exc:  # e.g. a component of the path is a regular file (ENOTDIR)
        raise UsageError(f"{what} {path}: cannot write here: {os_reason(exc)}.") from None
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{what} {path}: {directory} is not a directory.")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: the directory {directory} is not writable.")


def check_output_dir(out: Path | str, names: Iterable[str], *, force: bool, ours: bool,
                     what: str = "output directory", inputs: Iterable[Path | str] = ()) -> Path:
    """Check that directory ``out`` may be replaced by a new set of outputs, before any work.

    ``out`` may be missing (its parent must then exist or be creatable), or a
    directory; each of ``names`` it already holds is replaced only if ``ours``
    (the directory holds an earlier output set) or ``force``.  Entries that are
    not in ``names`` (the user's other files) are kept: see :func:`replace_dir`.

    Returns:
        ``out`` as a :class:`Path`.

    Raises:
        UsageError: ``out`` is not a directory, an entry to replace is not a regular file, a
            user's file would be replaced without ``force``, or an input of this run lies inside.
    """
    out = Path(out)
    try:
        info = os.stat(out)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise UsageError(f"{what} {out}: cannot write here: {os_reason(exc)}.") from None
    if info is None:
        parent = _existing_ancestor(out)
        if not parent.is_dir():
            raise UsageError(f"{what} {out}: {parent} is not a directory.")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(f"{what} {out}: the directory {parent} is not writable.")
        return out
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{what} {out}: it exists and is {file_kind(info.st_mode)}, not a directory; the output must "
                         "be a directory.")
    if not os.access(out.parent if str(out.parent) else Path("."), os.W_OK | os.X_OK) or not os.access(
            out, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {out}: the directory is not writable.")
    for name in names:
        entry = out / name
        if not os.path.lexists(entry):
            continue
        mode = os.lstat(entry).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError(f"{what} {out}: {entry} is {file_kind(mode) if not stat.S_ISLNK(mode) else 'a link'}; "
                             "an output replaces only a regular file (even with --force).")
        if not ours and not force:
            raise UsageError(f"{what} {out}: {entry} exists and was not written by tinynpu; pass --force to "
                             "overwrite it or choose another directory.")
        for source in inputs:
            if same_file(entry, Path(source)):
                raise UsageError(f"{what} {out}: {entry} is also an input of this run; write the outputs "
                                 "to another directory.")
    return out


def _existing_ancestor(path: Path) -> Path:
    parent = path.absolute().parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    return parent


__all__ = ["Ours", "check_output", "check_output_dir", "same_file", "starts_with"]
