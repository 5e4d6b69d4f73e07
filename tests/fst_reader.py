"""Just enough of an FST (GTKWave's wave format) reader to check a dump is whole and readable.

Reads the header block (time range, scope and variable counts, the writer's
name) and decompresses the hierarchy block (gzip, LZ4 or LZ4 twice, whichever
the writer chose) for the scope and signal names.  The layout is that of
GTKWave's ``fstapi.c``, which both Verilator and Icarus use to write FST.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

HEADER, HIER_GZIP, HIER_LZ4, HIER_LZ4DUO = 0, 4, 6, 7
HEADER_LENGTH = 329  # the header block's length field (which counts itself)
SCOPE, UPSCOPE, ATTR_BEGIN, ATTR_END = 254, 255, 252, 253


@dataclass(frozen=True)
class FstSummary:
    """What an FST file says about itself."""

    start_time: int
    end_time: int
    timescale: int  # times are in units of 10**timescale seconds
    scopes: int
    variables: int
    writer: str
    scope_names: tuple[str, ...]
    signal_names: tuple[str, ...]


def lz4_block(src: bytes) -> bytes:
    """Decompress one LZ4 block (the raw block format, no frame)."""
    out = bytearray()
    i = 0
    while i < len(src):
        token = src[i]
        i += 1
        literals, i = _lz4_length(src, i, token >> 4)
        out += src[i:i + literals]
        i += literals
        if i >= len(src):  # the last sequence has literals only
            break
        offset = src[i] | src[i + 1] << 8
        i += 2
        match, i = _lz4_length(src, i, token & 15)
        start = len(out) - offset
        for k in range(match + 4):  # copies may overlap what they write
            out.append(out[start + k])
    return bytes(out)


def _lz4_length(src: bytes, i: int, nibble: int) -> tuple[int, int]:
    n = nibble
    if nibble == 15:
        while True:
            extra = src[i]
            i += 1
            n += extra
            if extra != 255:
                break
    return n, i


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def _hierarchy(kind: int, block: bytes) -> bytes:
    """The uncompressed hierarchy of a hierarchy block (``block`` follows the length field)."""
    size = struct.unpack(">Q", block[:8])[0]
    data = block[8:]
    if kind == HIER_GZIP:
        out = zlib.decompress(data, 16 + zlib.MAX_WBITS)
    elif kind == HIER_LZ4:
        out = lz4_block(data)
    else:
        _, i = _varint(data, 0)  # the length after the first pass
        out = lz4_block(lz4_block(data[i:]))
    assert len(out) == size, f"hierarchy decompressed to {len(out)} bytes, the block says {size}"
    return out


def _names(hier: bytes) -> tuple[list[str], list[str]]:
    """Scope and variable names, in file order, from an uncompressed hierarchy."""
    scopes: list[str] = []
    signals: list[str] = []
    i = 0
    while i < len(hier):
        tag = hier[i]
        i += 1
        if tag == SCOPE:
            i += 1  # scope type
            end = hier.index(0, i)
            scopes.append(hier[i:end].decode())
            i = hier.index(0, end + 1) + 1  # then the component name
        elif tag in (UPSCOPE, ATTR_END):
            continue
        elif tag == ATTR_BEGIN:
            i += 2  # attribute type and subtype
            i = hier.index(0, i) + 1
            _, i = _varint(hier, i)
        else:  # a variable: type (the tag), direction, name, length, alias
            end = hier.index(0, i + 1)
            signals.append(hier[i + 1:end].decode())
            _, i = _varint(hier, end + 1)
            _, i = _varint(hier, i)
    return scopes, signals


def read_fst(path: Path) -> FstSummary:
    """Parse ``path``'s header and hierarchy; AssertionError when either is missing or malformed."""
    data = path.read_bytes()
    assert data[0] == HEADER, f"{path}: does not start with an FST header block"
    length = struct.unpack(">Q", data[1:9])[0]
    assert length == HEADER_LENGTH, f"{path}: header block of {length} bytes, not {HEADER_LENGTH}"
    start, end, endian = struct.unpack(">QQd", data[9:33])
    if abs(endian - 2.718281828459045) > 1e-12:  # the writer stores e in its native byte order
        (endian,) = struct.unpack("<d", data[25:33])
    assert abs(endian - 2.718281828459045) < 1e-12, f"{path}: the header's endianness check is not e"
    scopes, variables = struct.unpack(">QQ", data[41:57])
    timescale = struct.unpack("b", data[73:74])[0]
    writer = data[74:202].split(b"\0", 1)[0].decode(errors="replace")
    pos = 1 + length
    hier: bytes | None = None
    while pos < len(data):
        kind = data[pos]
        size = struct.unpack(">Q", data[pos + 1:pos + 9])[0]
        if kind in (HIER_GZIP, HIER_LZ4, HIER_LZ4DUO):
            hier = _hierarchy(kind, data[pos + 9:pos + 1 + size])
        pos += 1 + size
    assert pos == len(data), f"{path}: the last block runs past the end of the file (truncated?)"
    assert hier is not None, f"{path}: no hierarchy block"
    scope_names, signal_names = _names(hier)
    return FstSummary(start, end, timescale, scopes, variables, writer, tuple(scope_names), tuple(signal_names))
