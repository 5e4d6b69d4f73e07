"""Atomic writes: a killed run leaves the old output or the new one, never a truncated one.

:func:`write_atomic` writes a temporary file in the target's directory, fsyncs
it and renames it over the target; :func:`replace_dir` builds a whole directory
beside the target and swaps it in with one rename.  Part of :mod:`tinynpu.fsio`,
which re-exports it; the caller checks the target first (:mod:`tinynpu.fscheck`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from tinynpu import written
from tinynpu.errors import UsageError
from tinynpu.fsread import file_kind, os_reason

# Prefix of every temporary name: hidden, and recognisably ours if a killed run leaves one behind.  The
# writer's pid follows (TEMP_PREFIX + "1234-" + target name + random suffix), so a later write into the
# same directory can tell a dead writer's leftover, which it removes, from a live writer's file.
TEMP_PREFIX = ".tinynpu-tmp-"
# A staging directory that, after its swap, holds entries of the user's still to be moved back: never
# removed by the sweep, whatever happened to its writer.
KEPT_PREFIX = ".tinynpu-kept-"



def _umask_mode(base: int) -> int:
    mask = os.umask(0)
    os.umask(mask)
    return base & ~mask


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path: Path | str, data: bytes | str, *, what: str = "output") -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and one rename.

    The caller checks the target first (:func:`check_output`); this never
    replaces anything but a regular file or a missing name.

    Raises:
        UsageError: the directory is not writable, the disk is full, or the target is not a regular file.
    """
    path = Path(path)
    with staged_data(path, data, what=what):
        pass
    _fsync_dir(path.parent if str(path.parent) else Path("."))


@contextlib.contextmanager
def staged_data(path: Path | str, data: bytes | str, *, what: str = "output") -> Iterator[Path]:
    """``data`` written whole under a temporary name beside ``path``, renamed over it when the block ends.

    For a command with several outputs: stage each, then leave all the blocks at once, so the renames
    come back to back after every file is complete (an ``ExitStack`` of these).
    """
    with staged(path, what=what) as tmp:
        try:
            with open(tmp, "wb") as fh:
                fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        except OSError as exc:
            raise UsageError(f"{what} {path}: cannot write: {os_reason(exc)}.") from None
        yield tmp


@contextlib.contextmanager
def staged(path: Path | str, *, what: str = "output") -> Iterator[Path]:
    """A fresh temporary name beside ``path``; on success it is renamed over ``path``, else removed.

    For writers that insist on writing a file themselves (a trace, a shared
    library): give them the temporary name.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    remove_stale_temps(directory)
    try:
        fd, name = tempfile.mkstemp(prefix=_temp_prefix(path.name), dir=directory)
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot write in {directory}: {os_reason(exc)}.") from None
    os.close(fd)
    tmp = Path(name)
    try:
        mode = os.stat(path).st_mode & 0o7777 if path.is_file() else _umask_mode(0o666)
        os.unlink(tmp)  # the writer creates it; mkstemp only reserved a unique name
        yield tmp
        if not tmp.exists():
            raise UsageError(f"{what} {path}: nothing was written.")
        os.chmod(tmp, mode)
        _fsync_file(tmp)
        _replace_file(tmp, path, what)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fsync_file(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _temp_prefix(target: str) -> str:
    return f"{TEMP_PREFIX}{os.getpid()}-{target}."


def _writer_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by someone else
        return True
    return True


def remove_stale_temps(directory: Path) -> list[Path]:
    """Remove the temporary files and staging directories in ``directory`` whose writer is dead.

    A name is stale only when it carries a pid (:data:`TEMP_PREFIX` + pid) and no process has that pid:
    a live writer's file, a name without a pid (from an older version) and a :data:`KEPT_PREFIX`
    directory are left alone.  A reused pid keeps a leftover until that process ends too.  Errors are
    ignored: cleaning up never stops a write.

    Returns:
        What was removed.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        pid, dash, _ = entry.name.removeprefix(TEMP_PREFIX).partition("-")
        if not entry.name.startswith(TEMP_PREFIX) or not dash or not pid.isdigit() or _writer_alive(int(pid)):
            continue
        path = Path(entry.path)
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(path)
    return removed


def _replace_file(tmp: Path, path: Path, what: str) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot write: {os_reason(exc)}.") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"{what} {path}: it is {file_kind(mode)}; an output replaces only a regular file.")
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot write: {os_reason(exc)}.") from None
    written.remember_if_claimed(path)


# ---------------------------------------------------------------- directory sets

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directory entries (Linux renameat2); False where that is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


@contextlib.contextmanager
def replace_dir(out: Path | str, *, what: str = "output directory") -> Iterator[Path]:
    """Build a new version of directory ``out`` beside it, then swap it in with one rename.

    Yields an empty staging directory in ``out``'s parent.  When the block
    ends without an exception, the staging directory replaces ``out``
    atomically (``renameat2(RENAME_EXCHANGE)`` on Linux), so anyone looking
    at ``out`` sees the complete old set or the complete new one.  Entries of
    the old ``out`` that the new set does not contain (the user's other
    files) stay: regular files are hard-linked into the new directory before
    the swap, anything else is moved over after it.  On an exception the
    staging directory is removed and ``out`` is untouched.

    Call :func:`check_output_dir` first: this replaces without asking.
    """
    out = Path(os.path.realpath(out))  # "." or a link: the real directory, which one rename can replace
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(parent)
        stage = Path(tempfile.mkdtemp(prefix=_temp_prefix(out.name), dir=parent))
    except OSError as exc:
        raise UsageError(f"{what} {out}: cannot write in {parent}: {os_reason(exc)}.") from None
    try:
        yield stage
        _sync_tree(stage)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    _commit_dir(stage, out, what=what)


def _sync_tree(root: Path) -> None:
    for entry in root.rglob("*"):
        if entry.is_file():
            _fsync_file(entry)


def _commit_dir(stage: Path, out: Path, *, what: str) -> None:
    """Swap ``stage`` in for ``out``; nothing of the user's is ever removed, whatever fails."""
    later: list[str] = []  # kept entries that are not regular files: moved after the swap
    try:
        inside_out = os.path.realpath(os.getcwd()) == str(out)
    except OSError:
        inside_out = False
    try:
        if not out.is_dir():
            os.chmod(stage, _umask_mode(0o777))
            os.rename(stage, out)
            _fsync_dir(out.parent)
            return
        os.chmod(stage, os.stat(out).st_mode & 0o7777)
        made = {p.name for p in stage.iterdir()}
        for entry in out.iterdir():
            if entry.name in made:
                continue
            if entry.is_file() and not entry.is_symlink():
                try:
                    os.link(entry, stage / entry.name)  # both sets hold it until the swap
                    continue
                except OSError:
                    pass
            later.append(entry.name)
        if later:  # after the swap the old set holds them until moved back: a dead writer's sweep must not
            kept = stage.with_name(stage.name.replace(TEMP_PREFIX, KEPT_PREFIX, 1))
            os.rename(stage, kept)
            stage = kept
        if not _exchange(stage, out):
            # Between the two renames the backup is the user's whole directory: never a sweep's.
            backup = stage.with_name(stage.name.replace(TEMP_PREFIX, KEPT_PREFIX, 1) + ".old")
            os.rename(out, backup)
            try:
                os.rename(stage, out)
            except OSError:
                os.rename(backup, out)
                raise
            stage = backup
    except OSError as exc:
        shutil.rmtree(stage, ignore_errors=True)  # not swapped: it holds the new set and links only
        raise UsageError(f"{what} {out}: cannot replace it: {os_reason(exc)}.") from None
    old = stage  # swapped: the old set now lives under the staging name
    _fsync_dir(out.parent)
    if inside_out:  # the working directory was the old `out`, soon deleted: follow the name to the new one
        os.chdir(out)
    for name in later:
        try:
            os.rename(old / name, out / name)
        except OSError as exc:
            raise UsageError(f"{what} {out}: written, but your {name} could not be moved back into it from "
                             f"{old}, where it still is: {os_reason(exc)}.") from None
    shutil.rmtree(old, ignore_errors=True)


def write_dir(out: Path | str, files: Mapping[str, bytes | str], *, what: str = "output directory") -> None:
    """Replace directory ``out`` by ``files`` (name -> content) as one set (see :func:`replace_dir`)."""
    with replace_dir(out, what=what) as stage:
        for name, data in files.items():
            (stage / name).write_bytes(data.encode("utf-8") if isinstance(data, str) else data)


__all__ = ["KEPT_PREFIX", "TEMP_PREFIX", "remove_stale_temps", "replace_dir", "staged", "staged_data", "write_atomic",
           "write_dir"]
