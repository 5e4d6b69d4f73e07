"""Where tinynpu keeps what it can rebuild: ``$TINYNPU_CACHE``, else ``$XDG_CACHE_HOME/tinynpu``, else
``~/.cache/tinynpu``.  Deleting it is always safe."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache directory (not created here)."""
    root = os.environ.get("TINYNPU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tinynpu")
    return Path(root)


__all__ = ["cache_root"]
