"""Whether the optional TVM front end (``tinynpu[tvm]``) is installed, at the versions tinynpu pins.

The pins live in one place, pyproject.toml's ``tvm`` extra; they are read back
from the installed package's metadata, so a TVM of another version is refused
with the same message as a missing one (TVM's Python API changes between
releases, and apache-tvm-ffi 0.1.15.post2 segfaults in ``sch.tensorize``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re

from tinynpu.errors import UsageError

INSTALL = "pip install 'tinynpu[tvm]'"


def pins() -> dict[str, str]:
    """The distributions of the ``tvm`` extra and their pinned versions (from tinynpu's metadata)."""
    try:
        requires = importlib.metadata.requires("tinynpu") or []
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return {}
    out = {}
    for req in requires:
        found = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^;\s]+)\s*;\s*extra\s*==\s*['\"]tvm['\"]\s*", req)
        if found:
            out[found.group(1).lower()] = found.group(2)
    return out


def missing() -> str | None:
    """Why the TVM front end cannot run here (what is missing or of the wrong version), or None."""
    if importlib.util.find_spec("tvm") is None:
        return "Apache TVM is not installed"
    for dist, want in pins().items():
        try:
            have = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return f"{dist} is not installed (tinynpu needs {dist}=={want})"
        if have != want:
            return f"{dist} {have} is installed, but tinynpu needs {dist}=={want}"
    return None


def require_tvm(what: str = "the TVM front end") -> None:
    """Raise a UsageError saying how to install the extra, unless TVM is here at the pinned versions."""
    why = missing()
    if why is not None:
        raise UsageError(f"{what} needs Apache TVM at the versions tinynpu pins: {why}. Install it with "
                         f"`{INSTALL}` (or `bash scripts/bootstrap.sh` in a checkout), then run the command "
                         "again.")


__all__ = ["INSTALL", "missing", "pins", "require_tvm"]
