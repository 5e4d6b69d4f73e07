"""Reading inputs and writing outputs without losing a user's data.

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
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import io
import json
import math
import os
import shutil
import stat
import tempfile
import tokenize
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib import format as npformat

from tinynpu.errors import TinyNpuError, UsageError

# Default read limit: well above the largest program we make (the naive 1024^3 matmul's image is 13 MB
# and its assembly 40 MB), well below what would exhaust a laptop's memory.
MAX_READ_BYTES = 1 << 30
# Prefix of every temporary name: hidden, and recognisably ours if a killed run leaves one behind.  The
# writer's pid follows (TEMP_PREFIX + "1234-" + target name + random suffix), so a later write into the
# same directory can tell a dead writer's leftover, which it removes, from a live writer's file.
TEMP_PREFIX = ".tinynpu-tmp-"
# A staging directory that, after its swap, holds entries of the user's still to be moved back: never
# removed by the sweep, whatever happened to its writer.
KEPT_PREFIX = ".tinynpu-kept-"

Ours = Callable[[Path], bool]


def _reason(exc: OSError) -> str:
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
                raise error(f"{path}: cannot read {what}: it is {_kind(info.st_mode)}, not a regular file.")
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
        raise error(f"{path}: cannot read {what}: {_reason(exc)}.") from None
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


def _kind(mode: int) -> str:
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


# ---------------------------------------------------------------- checks before any work

def starts_with(magic: bytes) -> Ours:
    """An ``ours`` test: the file starts with ``magic`` (an earlier tinynpu output of this kind)."""

    def ours(path: Path) -> bool:
        try:
            with open(path, "rb") as fh:
                return fh.read(len(magic)) == magic
        except OSError:
            return False

    return ours


def _same_file(a: Path, b: Path) -> bool:
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
        if _same_file(path, Path(source)):
            raise UsageError(f"{what} {path}: this file is also an input of this run ({source}); "
                             "write the output to another path.")
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot write here: {_reason(exc)}.") from None
    if info is not None:
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{what} {path}: it is {_kind(info.st_mode)}; an output replaces only a regular "
                             "file (even with --force); choose a file path.")
        if not force and not (ours is not None and ours(target)):
            raise UsageError(f"{what} {path}: the file already exists and was not written by tinynpu; pass --force "
                             "to overwrite it or choose another path.")
    _check_dir_writable(target.parent, what, path)
    return target


def _check_dir_writable(directory: Path, what: str, path: Path) -> None:
    directory = directory if str(directory) else Path(".")
    try:
        info = os.stat(directory)
    except FileNotFoundError:
        raise UsageError(f"{what} {path}: the directory {directory} does not exist.") from None
    except OSError as exc:  # e.g. a component of the path is a regular file (ENOTDIR)
        raise UsageError(f"{what} {path}: cannot write here: {_reason(exc)}.") from None
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
        raise UsageError(f"{what} {out}: cannot write here: {_reason(exc)}.") from None
    if info is None:
        parent = _existing_ancestor(out)
        if not parent.is_dir():
            raise UsageError(f"{what} {out}: {parent} is not a directory.")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(f"{what} {out}: the directory {parent} is not writable.")
        return out
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{what} {out}: it exists and is {_kind(info.st_mode)}, not a directory; the output must "
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
            raise UsageError(f"{what} {out}: {entry} is {_kind(mode) if not stat.S_ISLNK(mode) else 'a link'}; "
                             "an output replaces only a regular file (even with --force).")
        if not ours and not force:
            raise UsageError(f"{what} {out}: {entry} exists and was not written by tinynpu; pass --force to "
                             "overwrite it or choose another directory.")
        for source in inputs:
            if _same_file(entry, Path(source)):
                raise UsageError(f"{what} {out}: {entry} is also an input of this run; write the outputs "
                                 "to another directory.")
    return out


def _existing_ancestor(path: Path) -> Path:
    parent = path.absolute().parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    return parent


# ---------------------------------------------------------------- atomic writes

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
            raise UsageError(f"{what} {path}: cannot write: {_reason(exc)}.") from None
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
        raise UsageError(f"{what} {path}: cannot write in {directory}: {_reason(exc)}.") from None
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
        raise UsageError(f"{what} {path}: cannot write: {_reason(exc)}.") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"{what} {path}: it is {_kind(mode)}; an output replaces only a regular file.")
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot write: {_reason(exc)}.") from None


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
        raise UsageError(f"{what} {out}: cannot write in {parent}: {_reason(exc)}.") from None
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
        raise UsageError(f"{what} {out}: cannot replace it: {_reason(exc)}.") from None
    old = stage  # swapped: the old set now lives under the staging name
    _fsync_dir(out.parent)
    if inside_out:  # the working directory was the old `out`, soon deleted: follow the name to the new one
        os.chdir(out)
    for name in later:
        try:
            os.rename(old / name, out / name)
        except OSError as exc:
            raise UsageError(f"{what} {out}: written, but your {name} could not be moved back into it from "
                             f"{old}, where it still is: {_reason(exc)}.") from None
    shutil.rmtree(old, ignore_errors=True)


def write_dir(out: Path | str, files: Mapping[str, bytes | str], *, what: str = "output directory") -> None:
    """Replace directory ``out`` by ``files`` (name -> content) as one set (see :func:`replace_dir`)."""
    with replace_dir(out, what=what) as stage:
        for name, data in files.items():
            (stage / name).write_bytes(data.encode("utf-8") if isinstance(data, str) else data)


__all__ = [
    "KEPT_PREFIX",
    "MAX_READ_BYTES",
    "TEMP_PREFIX",
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
]
