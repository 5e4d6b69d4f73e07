"""Relocation: a compiled program's DRAM tensors moved to their places in the network's image.

Every ``load``/``store`` address is moved from its tensor's compiled base to
the tensor's new base, all of one mnemonic's words at once (a program has
thousands of loads and stores, and the first run of a network relocates every
program: done word by word in Python this was a third of the run's loading).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.errors import OnnxError
from tinynpu.isa import ArchConfig, Isa
from tinynpu.isa.encoding import field_column
from tinynpu.isa.spec import Field

_MASK64 = (1 << 64) - 1


def relocate(program: Program, isa: Isa, cfg: ArchConfig, bases: dict[str, int],
             pitches: dict[str, int] | None = None) -> Program:
    """``program`` with each DRAM tensor named in ``bases`` moved there (its loads and stores re-addressed).

    A tensor named in ``pitches`` is a :class:`~tinynpu.compiler.onnx.lower.memory.ChannelSlice`: its
    rows (its last dimension) go ``pitches[name]`` bytes apart instead of back to back, so each
    access to row ``r``, byte ``c`` moves to ``base + r * pitch + c`` and its row stride scales alike.

    Raises:
        OnnxError: an address outside every tensor of the manifest, an access to a pitched tensor that
            is not whole rows apart or crosses a row, or a moved address or stride too wide for its
            field (compiler bugs).
    """
    pitches = pitches or {}
    # the manifest's tensors do not overlap (Program.build checks it): each address has at most one owner
    tensors = sorted((t for t in program.tensors if t.nbytes), key=lambda t: t.addr)
    starts = np.array([t.addr for t in tensors], dtype=np.int64)
    ends = starts + np.array([t.nbytes for t in tensors], dtype=np.int64)
    new_base = np.array([bases.get(t.name, t.addr) for t in tensors], dtype=np.int64)
    pitch = np.array([pitches.get(t.name, 0) for t in tensors], dtype=np.int64)  # 0: rows back to back
    row_bytes = np.array([t.nbytes // max(int(np.prod(t.shape[:-1])), 1) for t in tensors], dtype=np.int64)
    itemsize = np.array([np.dtype(t.dtype).itemsize for t in tensors], dtype=np.int64)
    lo, hi = program.columns
    for mnemonic in ("load", "store"):
        instr = isa.by_mnemonic[mnemonic]
        f, fs = instr.field_map["dram"], instr.field_map["stride"]
        sel = np.flatnonzero(((lo & np.uint64(instr.mask & _MASK64)) == np.uint64(instr.match & _MASK64))
                             & ((hi & np.uint64(instr.mask >> 64)) == np.uint64(instr.match >> 64)))
        addrs = field_column(lo[sel], hi[sel], f)
        at = np.searchsorted(starts, addrs, side="right") - 1
        inside = (at >= 0) & (addrs < ends[np.maximum(at, 0)]) if len(tensors) else np.zeros(len(sel), bool)
        if not inside.all():
            k = int(np.flatnonzero(~inside)[0])
            raise OnnxError(f"instruction {int(sel[k])} ({mnemonic}) addresses DRAM byte {int(addrs[k])}, outside "
                            "every tensor of its program's manifest.")
        offset = addrs - starts[at]
        pitched = pitch[at] > 0
        if pitched.any():
            rb, stride = row_bytes[at], field_column(lo[sel], hi[sel], fs)
            row, col = np.divmod(offset, rb)
            width = field_column(lo[sel], hi[sel], instr.field_map["cols"]) * itemsize[at]
            bad = pitched & ((stride % rb != 0) | (col + width > rb))
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise OnnxError(f"instruction {int(sel[k])} ({mnemonic}) steps {int(stride[k])} bytes through "
                                f"tensor {tensors[int(at[k])].name!r} from byte {int(col[k])} of a row, "
                                f"{int(width[k])} bytes wide: not whole {int(rb[k])}-byte rows, so it cannot be "
                                "pitched.")
            offset = np.where(pitched, row * pitch[at] + col, offset)
            lo, hi = _with_column(lo, hi, sel[pitched], fs, (stride // rb * pitch[at])[pitched], mnemonic)
        lo, hi = _with_column(lo, hi, sel, f, new_base[at] + offset, mnemonic)
    moved = [replace(t, addr=bases.get(t.name, t.addr)) for t in program.tensors]
    return Program.from_columns(isa, cfg, lo, hi, moved)


def _with_column(lo: np.ndarray, hi: np.ndarray, sel: np.ndarray, f: Field, values: np.ndarray,
                 mnemonic: str) -> tuple[np.ndarray, np.ndarray]:
    """``lo``, ``hi`` with field ``f`` of words ``sel`` set to ``values`` (the vectorized field write)."""
    over = np.flatnonzero((values < 0) | (values >= 1 << f.width))
    if len(over):
        k = int(over[0])
        raise OnnxError(f"instruction {int(sel[k])} ({mnemonic}): its relocated {f.name} {int(values[k])} does not "
                        f"fit the {f.width}-bit field.")
    full = ((1 << f.width) - 1) << f.lsb
    bits = values.astype(np.uint64)
    wlo, whi = lo[sel] & np.uint64(~full & _MASK64), hi[sel] & np.uint64(~(full >> 64) & _MASK64)
    if f.lsb < 64:
        wlo |= bits << np.uint64(f.lsb)  # bits shifted past bit 63 drop out here ...
    if f.msb >= 64:  # ... and land in the high word
        whi |= bits << np.uint64(f.lsb - 64) if f.lsb >= 64 else bits >> np.uint64(64 - f.lsb)
    lo, hi = lo.copy(), hi.copy()
    lo[sel], hi[sel] = wlo, whi
    return lo, hi


__all__ = ["relocate"]
