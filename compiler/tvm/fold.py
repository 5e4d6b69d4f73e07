"""Folding a reduction's init into ``tmm``: ``zero acc`` + ``tmm accumulate=1`` -> ``tmm accumulate=0``.

``sch.annotate(init_block, "tinynpu.fold_init", 1)`` on the block
``decompose_reduction`` returns asks for it (the course's
``decompose_reduction(init="fold")``; docs/tvm.md).  A ``zero`` of the
annotated buffer is dropped when, for every tile it clears, the next
instruction touching that tile (in program order) is a ``tmm`` that writes
it: that ``tmm`` then overwrites the tile instead (``accumulate=0``), which is
the same result without the zero's scratchpad pass.  Any other zero stays.
"""

from __future__ import annotations

import numpy as np

from tinynpu.compiler.tvm.parts import Part

FOLD_INIT = "tinynpu.fold_init"

_ZERO, _TMM, _OTHER = 0, 1, 2


def _events(parts: list[Part], acc_scope: int, tile: int) -> tuple[np.ndarray, ...]:
    """(tile, slot, kind, part, index) of every accumulator tile each instruction touches."""
    cols: list[tuple[np.ndarray, ...]] = []
    for p_no, p in enumerate(parts):
        n = len(p.slots)
        if p.mnemonic == "tmm":
            first, count, kind = np.broadcast_to(p.fields["acc"], (n,)), np.ones(n, np.int64), _TMM
        elif p.mnemonic in ("zero", "load") and np.any(np.asarray(p.fields["scope"]) == acc_scope):
            rows = np.broadcast_to(p.fields["rows"], (n,))
            row = np.broadcast_to(p.fields["sp_row"], (n,))
            first, count = row // tile, (row + rows + tile - 1) // tile - row // tile
            kind = _ZERO if p.mnemonic == "zero" else _OTHER
        elif p.mnemonic == "store":
            rows, row = np.broadcast_to(p.fields["rows"], (n,)), np.broadcast_to(p.fields["sp_row"], (n,))
            first, count, kind = row // tile, (row + rows + tile - 1) // tile - row // tile, _OTHER
        else:
            continue
        idx = np.repeat(np.arange(n, dtype=np.int64), count)
        offset = np.arange(len(idx), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
        cols.append((first[idx] + offset, p.slots[idx], np.full(len(idx), kind), np.full(len(idx), p_no), idx))
    return tuple(np.concatenate([c[k] for c in cols]) for k in range(5))


def fold_inits(parts: list[Part], folded: set[int], acc_scope: int, tile: int) -> list[Part]:
    """``parts`` with the zeros of the parts numbered ``folded`` folded into the ``tmm`` after them."""
    if not folded:
        return parts
    tiles, slots, kind, part, index = _events(parts, acc_scope, tile)
    order = np.lexsort((slots, tiles))
    tiles, kind, part, index = tiles[order], kind[order], part[order], index[order]
    nxt_ok = np.r_[(tiles[1:] == tiles[:-1]) & (kind[1:] == _TMM), False]
    candidate = (kind == _ZERO) & np.isin(part, list(folded))
    out: list[Part] = []
    overwrite: dict[int, np.ndarray] = {}
    drop: dict[int, np.ndarray] = {}
    for p_no in sorted(folded):
        sel = candidate & (part == p_no)
        n = len(parts[p_no].slots)
        bad = np.zeros(n, dtype=bool)
        np.logical_or.at(bad, index[sel], ~nxt_ok[sel])
        drop[p_no] = ~bad
        ok = sel & np.isin(index, np.flatnonzero(~bad))
        after = np.flatnonzero(ok) + 1
        for t_part in np.unique(part[after]).tolist():
            mine = after[part[after] == t_part]
            overwrite.setdefault(t_part, np.zeros(len(parts[t_part].slots), dtype=bool))[index[mine]] = True
    for p_no, p in enumerate(parts):
        if p_no in drop:
            keep = ~drop[p_no]
            fields = {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in p.fields.items()}
            out.append(Part(p.mnemonic, p.slots[keep], fields, p.comment,
                            tuple(a[keep] for a in p.comment_args)))
        elif p_no in overwrite:
            acc = np.where(overwrite[p_no], 0, np.broadcast_to(p.fields["accumulate"], (len(p.slots),)))
            out.append(Part(p.mnemonic, p.slots, {**p.fields, "accumulate": acc}, p.comment, p.comment_args))
        else:
            out.append(p)
    return out


__all__ = ["FOLD_INIT", "fold_inits"]
