"""A sweep's PNG figures carry a digest of the data they plot, so a committed figure can be checked against
its results without comparing pixels (which change with the matplotlib version and its fonts).

The data is what the figure draws (names and values, floats to 12 significant digits), hashed as canonical
JSON; :func:`save` writes it into the PNG as a ``tEXt`` chunk, :func:`embedded_digest` reads it back.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
from pathlib import Path
from typing import Any

from tinynpu.fsio import read_bytes, write_atomic

#: The PNG text keyword holding the digest.
DATA_KEY = "tinynpu-data-sha256"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.12g}")  # totals summed in another order differ in the last bits only
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    return value


def data_digest(data: Any) -> str:
    """The digest of a figure's data (JSON-like: dicts, lists, strings, numbers)."""
    return hashlib.sha256(json.dumps(_canonical(data), sort_keys=True).encode()).hexdigest()


def save(path: Path, fig: Any, data: Any, *, dpi: int) -> None:
    """Write matplotlib figure ``fig`` to ``path`` as a PNG (atomically) with the digest of ``data`` in it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None, DATA_KEY: data_digest(data)})
    write_atomic(path, buf.getvalue(), what="sweep figure")


def embedded_digest(path: Path) -> str | None:
    """The data digest a PNG written by :func:`save` carries, or None if it has none (or is no PNG)."""
    blob = read_bytes(path, what="sweep figure")
    if not blob.startswith(_PNG_SIGNATURE):
        return None
    at = len(_PNG_SIGNATURE)
    while at + 8 <= len(blob):
        length, kind = struct.unpack(">I4s", blob[at:at + 8])
        body = blob[at + 8:at + 8 + length]
        if kind == b"tEXt":
            keyword, _, text = body.partition(b"\0")
            if keyword.decode("latin-1") == DATA_KEY:
                return text.decode("latin-1")
        if kind == b"IEND":
            break
        at += 12 + length  # length, type, data, CRC
    return None


__all__ = ["DATA_KEY", "data_digest", "embedded_digest", "save"]
