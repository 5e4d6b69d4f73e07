"""The binary program image: header, instruction words, tensor manifest.

Layout (all little-endian)::

    offset  size  field
    0       4     magic b"TNPU"
    4       2     format version (1)
    6       2     header size in bytes (48)
    8       16    build hash: identity of the (ISA, config) pair it was built for
    24      16    config name, ASCII, NUL padded
    40      4     instruction count N
    44      4     CRC-32 of everything after the header
    48      16*N  instruction words (each 16 bytes, little-endian)
    ...     rest  manifest: UTF-8 JSON {"tensors": [{name, addr, shape, dtype, role}, ...]}

The manifest names the DRAM tensors a program reads and writes, so the
simulator and the co-simulation bench can load inputs and read outputs by name.
"""

from __future__ import annotations

import functools
import json
import math
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinynpu import fsio
from tinynpu.errors import AsmError
from tinynpu.isa import ArchConfig, Isa, build_hash, load_config
from tinynpu.isa.config import CONFIG_DIR
from tinynpu.isa.encoding import split, to_ints

MAGIC = b"TNPU"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<4sHH16s16sII")
HEADER_BYTES = _HEADER.size
WORD_BYTES = 16
DTYPES = ("int8", "int32", "float32")
ROLES = ("input", "output", "inout", "scratch")


@dataclass(frozen=True)
class Tensor:
    """A named DRAM tensor, row-major at byte address ``addr``."""

    name: str
    addr: int
    shape: tuple[int, ...]
    dtype: str
    role: str = "input"

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise AsmError(f"tensor name must be an identifier, not {self.name!r}.")
        if self.dtype not in DTYPES:
            raise AsmError(f"tensor {self.name}: dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}.")
        if self.role not in ROLES:
            raise AsmError(f"tensor {self.name}: role must be one of {', '.join(ROLES)}, not {self.role!r}.")
        if self.addr < 0 or any(d <= 0 for d in self.shape):
            raise AsmError(f"tensor {self.name}: address must be >= 0 and every dimension positive, "
                           f"not addr={self.addr} shape={self.shape}.")

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize  # exact: np.prod wraps at 2**63

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "addr": self.addr, "shape": list(self.shape), "dtype": self.dtype, "role": self.role}


@dataclass(frozen=True)
class Program:
    """An assembled program: words plus the manifest and what it was built for."""

    words: tuple[int, ...]
    tensors: tuple[Tensor, ...]
    config_name: str
    build_hash: bytes

    @classmethod
    def build(cls, isa: Isa, cfg: ArchConfig, words: list[int] | tuple[int, ...],
              tensors: list[Tensor] | tuple[Tensor, ...] = ()) -> Program:
        """A program for ``(isa, cfg)``; checks the manifest fits DRAM and does not overlap."""
        tensors = tuple(tensors)
        check_manifest(tensors, cfg)
        return cls(words=tuple(words), tensors=tensors, config_name=cfg.name, build_hash=build_hash(isa, cfg))

    @classmethod
    def from_columns(cls, isa: Isa, cfg: ArchConfig, lo: np.ndarray, hi: np.ndarray,
                     tensors: list[Tensor] | tuple[Tensor, ...] = ()) -> Program:
        """:meth:`build` from the words' low and high 64-bit columns, which it keeps as :attr:`columns`."""
        program = cls.build(isa, cfg, to_ints(lo, hi), tensors)
        program._keep_columns(np.array(lo, dtype=np.uint64), np.array(hi, dtype=np.uint64))
        return program

    def _keep_columns(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Keep ``lo``/``hi`` (this program's own, what ``split(words)`` gives) as :attr:`columns`."""
        lo.flags.writeable = hi.flags.writeable = False
        self.__dict__["columns"] = (lo, hi)

    @functools.cached_property
    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """The words' low and high 64-bit columns (read-only), split once per program: the simulator decodes
        from them, and a relocation rewrites them (splitting every word again took a network's first run a
        third of its program loading)."""
        lo, hi = split(self.words)
        lo.flags.writeable = hi.flags.writeable = False
        return lo, hi

    def tensor(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise AsmError(f"the program has no tensor {name!r}; its manifest names "
                       f"{', '.join(t.name for t in self.tensors) or 'none'}.")

    def config_for(self, isa: Isa, config: str | None, where: str = "program") -> ArchConfig:
        """The config to run this program on, checked against the image's build hash.

        ``config`` is the user's ``--config`` (a built-in's name or a YAML file, used as given whatever the
        ``name:`` inside says); without it, the built-in config named in the image.  An image built from a
        config file records only that file's ``name:``, so it needs ``--config FILE`` again: the refusal says so.

        Raises:
            AsmError: the image names no built-in config and no ``--config`` was given, or the hashes differ.
        """
        if config is None and not (CONFIG_DIR / f"{self.config_name}.yaml").is_file():
            raise AsmError(f"{where}: built for config {self.config_name!r}, which is not a built-in config; "
                           "pass the config file it was built from as --config FILE.")
        cfg = load_config(config if config is not None else self.config_name, isa)
        try:
            self.check_built_for(isa, cfg, where=where)
        except AsmError as exc:
            if config is not None or self.build_hash == build_hash(isa, cfg):
                raise
            raise AsmError(f"{exc.message} If it was built from a config file that reuses the name "
                           f"{self.config_name!r}, pass that file as --config FILE.") from None
        return cfg

    def check_built_for(self, isa: Isa, cfg: ArchConfig, where: str = "program") -> None:
        """Refuse a program built for another ISA or config, or whose manifest does not fit its DRAM."""
        expected = build_hash(isa, cfg)
        if self.build_hash != expected:
            raise AsmError(
                f"{where}: built for config {self.config_name!r} with build hash {self.build_hash.hex()}, "
                f"but this machine is ISA {isa.name} v{isa.version} with config {cfg.name!r} "
                f"(hash {expected.hex()}); reassemble it for this ISA and config."
            )
        try:
            check_manifest(self.tensors, cfg)
        except AsmError as exc:
            raise AsmError(f"{where}: {exc.message}") from None

    def to_bytes(self) -> bytes:
        manifest = json.dumps({"tensors": [t.to_json() for t in self.tensors]}).encode()
        # from the columns, as many bytes as the words: a bytes object per word made ~60 bytes a word of temporaries
        lo, hi = self.__dict__.get("columns") or split(self.words)
        body = np.column_stack((lo, hi)).astype("<u8").tobytes() + manifest
        header = _HEADER.pack(MAGIC, FORMAT_VERSION, HEADER_BYTES, self.build_hash,
                              self.config_name.encode("ascii")[:16], len(self.words), zlib.crc32(body))
        return header + body

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "<bytes>") -> Program:
        """Parse an image; every malformation is an :class:`AsmError` naming the byte offset."""
        if data and not data.startswith(MAGIC) and _is_text(data):
            raise AsmError(f"{where}: this is text, not a program image (an image starts with {MAGIC!r}); if it "
                           f"is assembly, assemble it first: tinynpu asm {where} -o PROGRAM.bin, then give "
                           "PROGRAM.bin.")
        if len(data) < HEADER_BYTES:
            raise AsmError(f"{where}: truncated binary: {len(data)} bytes, shorter than the "
                           f"{HEADER_BYTES}-byte header.")
        magic, version, header_bytes, bhash, cname, count, crc = _HEADER.unpack_from(data)
        if magic != MAGIC:
            raise AsmError(f"{where}: byte 0: not a tinynpu binary (magic {magic!r}, expected {MAGIC!r}).")
        if version != FORMAT_VERSION or header_bytes != HEADER_BYTES:
            raise AsmError(f"{where}: byte 4: format version {version} (header {header_bytes} bytes) is not "
                           f"the supported version {FORMAT_VERSION} ({HEADER_BYTES} bytes).")
        words_end = HEADER_BYTES + count * WORD_BYTES
        if len(data) < words_end:
            raise AsmError(f"{where}: truncated binary: the header promises {count} instructions "
                           f"(up to byte {words_end}) but the file has {len(data)} bytes.")
        if zlib.crc32(data[HEADER_BYTES:]) != crc:
            raise AsmError(f"{where}: byte 44: checksum mismatch: the file is corrupted "
                           "(CRC-32 of the words and manifest differs from the header's).")
        # The words' columns straight from the bytes, kept (the simulator decodes from them), and the words
        # from the columns: 2.5x faster than an int.from_bytes per word, with no whole-program temporaries.
        halves = np.frombuffer(data, dtype="<u8", count=2 * count, offset=HEADER_BYTES).reshape(count, 2)
        lo, hi = (np.array(halves[:, i], dtype=np.uint64) for i in (0, 1))  # copies: the image's bytes are freed
        words = tuple(to_ints(lo, hi))
        try:
            manifest = fsio.parse_json(data[words_end:].decode("utf-8"), where=f"{where}: byte {words_end}",
                                       what="the manifest", error=AsmError)
            tensors = tuple(_tensor_from_json(t) for t in manifest["tensors"])
        except (UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
            raise AsmError(f"{where}: byte {words_end}: the manifest is not valid: {exc}.") from None
        program = cls(words=words, tensors=tensors, config_name=cname.rstrip(b"\0").decode("ascii", "replace"),
                      build_hash=bhash)
        program._keep_columns(lo, hi)
        return program

    def save(self, path: Path, *, overwrite: bool = False) -> None:
        """Write the image; an existing file that is not a tinynpu binary is never replaced."""
        fsio.write_output(path, self.to_bytes(), overwrite=overwrite, magic=MAGIC)

    @classmethod
    def load(cls, path: Path) -> Program:
        data = fsio.read_bytes(path, what="the binary", error=AsmError)
        return cls.from_bytes(data, where=str(path))


def _tensor_from_json(entry: object) -> Tensor:
    """One manifest entry, every field of the type the manifest promises (else TypeError/ValueError)."""
    if not isinstance(entry, dict):
        raise TypeError(f"a tensor entry must be an object, not {entry!r:.80}")
    addr, shape = entry["addr"], entry["shape"]
    if not isinstance(addr, int) or not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
        raise TypeError(f"a tensor's addr and shape must be integers, not {addr!r:.40} and {shape!r:.80}")
    name, dtype, role = entry["name"], entry["dtype"], entry["role"]
    if not all(isinstance(v, str) for v in (name, dtype, role)):
        raise TypeError(f"a tensor's name, dtype and role must be strings, not {name!r:.40}, {dtype!r:.40}, "
                        f"{role!r:.40}")
    return Tensor(name=name, addr=addr, shape=tuple(shape), dtype=dtype, role=role)


def _is_text(data: bytes) -> bool:
    """UTF-8 without NUL bytes: what an assembly source (or any text file) is, and an image never is."""
    try:
        return b"\0" not in data and bool(data.decode("utf-8"))
    except UnicodeDecodeError:
        return False


def check_manifest(tensors: tuple[Tensor, ...], cfg: ArchConfig) -> None:
    """Tensor names unique, no two tensors overlapping, every tensor inside the config's DRAM.

    The one check of a manifest: the assembler applies it when building, and every reader
    of an image (``sim``, ``disasm``, ``cosim``) through :meth:`Program.check_built_for`.
    """
    names = [t.name for t in tensors]
    if len(set(names)) != len(names):
        raise AsmError(f"tensor names must be unique, got {names}.")
    spans = sorted((t.addr, t.addr + t.nbytes, t.name) for t in tensors)
    for (_, end, name), (start, _, other) in zip(spans, spans[1:], strict=False):
        if start < end:
            raise AsmError(f"tensors {name} and {other} overlap in DRAM (0x{start:x} < 0x{end:x}).")
    for t in tensors:
        if t.addr + t.nbytes > cfg.dram_bytes:
            raise AsmError(f"tensor {t.name} ends at byte {t.addr + t.nbytes}, beyond the "
                           f"{cfg.dram_bytes} bytes of DRAM in config {cfg.name!r}.")


__all__ = ["HEADER_BYTES", "MAGIC", "Program", "Tensor", "check_manifest"]
