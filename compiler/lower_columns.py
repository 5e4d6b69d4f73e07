"""The GEMM lowering of :mod:`tinynpu.compiler.lower` for dense operands, as columns.

A naive 1024^3 GEMM is ~800 K instructions, GPT-2-small's LM head ~90 K;
emitting them one Python call at a time costs ~10 us each.  For dense DRAM
operands the instructions follow from the chunk plan by arithmetic alone, so
this module computes every field of every ``load``/``tmm``/ALU/``store``/``zero``
as numpy arrays and hands them to :meth:`~tinynpu.compiler.emitter.Emitter.extend`,
with each instruction's position in the program.  A bias vector or a layer
epilogue (:class:`~tinynpu.compiler.epilogue.Epilogue`) adds its parameter
rows' loads to each block's start and its ALU instructions before each store.  The program is the one
:func:`~tinynpu.compiler.lower.lower_gemm_by_calls` emits, word for word
(a test compares them); that function stays the readable statement of the
loop nest, and the path for operands that are not dense.

Program order inside chunk ``c`` (the positions below)::

    [zero acc]                    first chunk of a block, init fill_zero
    [parameter rows]              first chunk of a block: bias or epilogue rows, whole tiles, then a narrow one
    [loads of c]                  single buffers: right before use
    for j in nj:
        tmm x nk                  column j, every reduction tile
        [ALU x steps]             last chunk of the block: + bias, or the epilogue's steps
        [store column j]          last chunk of the block
        [prefetch slice j]        loads of chunk c+1 into the other buffer
    [after loads]                 loads of c+1 into rows chunk c still reads
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tinynpu.compiler.emitter import Columns, Emitter
from tinynpu.compiler.epilogue import AluStep
from tinynpu.compiler.operands import DenseOperand, DenseOutput
from tinynpu.compiler.schedule import Tiling, buffer_rows
from tinynpu.intmath import ceil_div

if TYPE_CHECKING:
    from tinynpu.compiler.lower import Bias, EpilogueRows

#: Positions a block's start reserves inside its first chunk: the acc zero, then two parameter-row loads.
_START_SLOTS = 3


def _expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ``counts[i]`` items per owner i: each item's owner and its index within its owner."""
    owner = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    first = np.cumsum(counts) - counts
    return owner, np.arange(len(owner), dtype=np.int64) - first[owner]


def _escape(name: str) -> str:
    return name.replace("{", "{{").replace("}", "}}")


@dataclass(frozen=True)
class _Params:
    """A block's accumulator parameter rows (a bias vector or an epilogue's table) and the ALU steps per column.

    Attributes:
        addr: The table's DRAM address.
        per_tile: Its rows per output column tile.
        columns: The output columns it covers.
        epilogue: Whether it is an epilogue's table (else a bias vector): how its loads are commented.
        steps: The ALU instructions per output column tile, before its store.
    """

    addr: int
    per_tile: int
    columns: int
    epilogue: bool
    steps: tuple[AluStep, ...]

    @staticmethod
    def of(n: int, bias: Bias | None, epilogue: EpilogueRows | None) -> _Params | None:
        """The parameters of a GEMM with ``n`` output columns (a bias of ``n`` elements: the caller checks)."""
        if epilogue is not None:
            epi = epilogue.epilogue
            return _Params(epilogue.addr, epi.param_rows, n, True, epi.alu_steps())
        if bias is not None:
            return _Params(bias.addr, 1, bias.n, False, (AluStep("vaddrow", 0, None, "+ bias"),))
        return None


class _Plan:
    """Every (block, chunk) in execution order as arrays: :func:`~tinynpu.compiler.lower.chunks`, vectorized."""

    def __init__(self, m: int, n: int, k: int, t: Tiling, tile: int) -> None:
        mt, nt, kt = ceil_div(m, tile), ceil_div(n, tile), ceil_div(k, tile)
        ib = np.arange(0, mt, t.bm, dtype=np.int64)
        jb = np.arange(0, nt, t.bn, dtype=np.int64)
        if t.order == "mn":
            i0, j0 = np.repeat(ib, len(jb)), np.tile(jb, len(ib))
            outer = i0
        else:
            j0, i0 = np.repeat(jb, len(ib)), np.tile(ib, len(jb))
            outer = j0
        blocks = len(i0)
        new_panel = np.r_[True, outer[1:] != outer[:-1]] if blocks else np.zeros(0, bool)
        panel = np.cumsum(new_panel) - 1
        k0s = np.arange(0, kt, t.bk, dtype=np.int64)
        per = len(k0s)
        block = np.repeat(np.arange(blocks, dtype=np.int64), per)
        self.i0, self.j0 = i0[block], j0[block]
        self.ni = np.minimum(t.bm, mt - self.i0)
        self.nj = np.minimum(t.bn, nt - self.j0)
        self.k0 = np.tile(k0s, blocks)
        self.nk = np.minimum(t.bk, kt - self.k0)
        self.first = self.k0 == 0
        self.last = self.k0 + self.nk >= kt
        stream = np.arange(len(block), dtype=np.int64) % t.stream_buffers
        resident_buf = panel[block] % t.panel_buffers if t.resident != "none" else stream
        self.abuf = resident_buf if t.resident == "a" else stream
        self.bbuf = resident_buf if t.resident == "b" else stream
        np_block = new_panel[block]
        self.load_a = np_block if t.resident == "a" else np.ones(len(block), bool)
        self.load_b = np_block if t.resident == "b" else np.ones(len(block), bool)
        self.acc = block % t.acc_buffers
        self.size = len(block)


def lower_gemm_columns(emit: Emitter, *, m: int, n: int, k: int, a: DenseOperand, b: DenseOperand,
                       c: DenseOutput, tiling: Tiling, bias: Bias | None = None,
                       epilogue: EpilogueRows | None = None) -> int:
    """Emit ``C = A @ B^T (+ bias)`` for ``tiling``, or with its layer ``epilogue``, as columns; the arguments
    and result of ``lower_gemm`` (a ``bias`` covers exactly the ``n`` output columns)."""
    cfg = emit.cfg
    e = cfg.tile
    t = tiling
    params = _Params.of(n, bias, epilogue)
    per_tile = params.per_tile if params is not None else 0
    steps = params.steps if params is not None else ()
    rows = buffer_rows(t, cfg, bias=per_tile, k=k)
    a_buf = rows["a_reg"] // t.buffers("a")
    b_buf = rows["b_reg"] // t.buffers("b")
    acc_buf = rows["acc"] // t.acc_buffers
    p = _Plan(m, n, k, t, e)
    if not p.size:
        return 0

    def sub(ch: np.ndarray, operand: str, kk: np.ndarray | int) -> np.ndarray:
        """First row of reduction tile ``kk`` of chunk ``ch`` in ``operand``'s scope (``sub`` of lower_gemm)."""
        if operand == "a":
            return p.abuf[ch] * a_buf + ((p.k0[ch] if t.resident == "a" else 0) + kk) * t.bm * e
        return p.bbuf[ch] * b_buf + ((p.k0[ch] if t.resident == "b" else 0) + kk) * t.bn * e

    every = np.arange(p.size, dtype=np.int64)
    _zero_edge_rows(emit, m, p, every, lambda ch, kk: sub(ch, "a", kk), "a", is_a=True)
    _zero_edge_rows(emit, n, p, every, lambda ch, kk: sub(ch, "b", kk), "b", is_a=False)

    # Sort keys: (issuing chunk + 1) * span + place within the chunk; chunk -1 is the prologue.
    pf = 2 * t.bk  # the most loads of one chunk
    store_at = t.bk + len(steps)  # in an output column's group: its tmm, its ALU steps, ...
    group = store_at + 1 + pf  # ... its store, its slice of the prefetch
    ring = t.stream_buffers
    base_loads = _START_SLOTS
    base_cols = base_loads + max(1, ring - 1) * pf  # the prologue loads chunk 0 and a ring's next ones
    base_after = base_cols + t.bn * group
    span = base_after + pf

    # -- loads: one per chunk, operand and reduction tile (chunks that keep a resident panel skip it)
    need = np.stack([p.load_a, p.load_b], axis=1).astype(np.int64)  # chunk x operand
    per_kk = need.sum(axis=1)
    if t.double_buffer:
        nxt = every[1:]
        reuse = np.zeros((p.size, 2), dtype=np.int64)  # by the loaded chunk: its rows overlap the previous one's
        for col, (op, blk) in enumerate((("a", t.bm), ("b", t.bn))):
            lo, hi = sub(nxt - 1, op, 0), sub(nxt - 1, op, p.nk[nxt - 1] - 1) + blk * e
            reuse[1:, col] = (lo < sub(nxt, op, p.nk[nxt] - 1) + blk * e) & (sub(nxt, op, 0) < hi)
    chunk_op_kk = []
    for operand_no in (0, 1):
        loaded, tile_no = _expand(np.where(need[:, operand_no] == 1, p.nk, 0))
        chunk_op_kk.append((loaded, np.full(len(loaded), operand_no, np.int64), tile_no))
    ch = np.concatenate([v[0] for v in chunk_op_kk])
    x = np.concatenate([v[1] for v in chunk_op_kk])
    kk = np.concatenate([v[2] for v in chunk_op_kk])
    if not t.double_buffer:  # loaded by its own chunk, before its tmm
        load_key = (ch + 1) * span + base_loads + kk * per_kk[ch] + x * need[ch, 0]
    else:
        load_key = _prefetch_keys(p, t, need, reuse, ch, x, kk, span=span, group=group, base_loads=base_loads,
                                  base_cols=base_cols, base_after=base_after, store_at=store_at)

    # -- tmm: per chunk, output column j, reduction tile kk
    cj, jj = _expand(p.nj)
    tm_cj, tm_kk = _expand(p.nk[cj])
    tm_ch, tm_j = cj[tm_cj], jj[tm_cj]
    tmm_key = (tm_ch + 1) * span + base_cols + tm_j * group + tm_kk
    acc_j = p.acc * acc_buf
    # -- stores: per last chunk and column
    st = p.last[cj]
    st_ch, st_j = cj[st], jj[st]
    column_key = (st_ch + 1) * span + base_cols + st_j * group  # ... plus bk and the ALU step, or store_at
    # -- zero acc: first chunk of each block, with init fill_zero
    zc = every[p.first] if t.init == "fill_zero" else every[:0]
    zero_key = (zc + 1) * span
    # -- parameter rows: first chunk of each block, whole column tiles, then a narrow last one
    starts = _param_loads(p, every[p.first], params, e)

    keys = np.concatenate([zero_key, *((part.chunk + 1) * span + 1 + i for i, part in enumerate(starts)), load_key,
                           tmm_key, *(column_key + t.bk + i for i in range(len(steps))), column_key + store_at])
    rank = np.empty(len(keys), dtype=np.int64)
    rank[np.argsort(keys, kind="stable")] = np.arange(len(keys), dtype=np.int64)
    z_ord, *param_ord, l_ord, t_ord = np.split(rank, np.cumsum(
        [len(zero_key), *(len(part.chunk) for part in starts), len(load_key), len(tmm_key)]))[:3 + len(starts)]
    at = len(keys) - (len(steps) + 1) * len(st_ch)
    alu_ord = [rank[at + i * len(st_ch):at + (i + 1) * len(st_ch)] for i in range(len(steps))]
    s_ord = rank[at + len(steps) * len(st_ch):]

    columns: list[Columns] = []
    if len(zc):
        zrows = t.bm * p.nj[zc] * e
        columns.append(Columns("zero", z_ord, {"scope": emit.isa.scope_by_name["acc"].id,
                                               "sp_row": acc_j[zc], "rows": zrows}, comment="fill_zero(acc)"))
    if params is not None:
        columns += _param_columns(emit, p, starts, param_ord, params, acc_buf=acc_buf, row0=t.bm * t.bn * e)
        columns += _alu_columns(p, steps, alu_ord, st_ch, st_j, per_tile, acc_buf=acc_buf, bm=t.bm, bn=t.bn, e=e)
    for xi, (operand, scope, r0, nr, total) in enumerate(((a, "a", p.i0, p.ni, m), (b, "b", p.j0, p.nj, n))):
        sel = x == xi
        lch, lkk = ch[sel], kk[sel]
        row0 = r0[lch] * e
        nrows = np.minimum(nr[lch] * e, total - row0)
        kcol = (p.k0[lch] + lkk) * e
        cols = np.minimum(e, operand.k_total - kcol)
        stride = operand.k_total * operand.elem_bytes
        dram = operand.addr + row0 * stride + kcol * operand.elem_bytes
        sp_row = sub(lch, scope, lkk)
        sc = emit.isa.scope_by_name[scope]
        columns.append(Columns("load", l_ord[sel], {"scope": sc.id, "sp_row": sp_row, "dram": dram,
                                                    "stride": stride, "rows": nrows, "cols": cols},
                               comment=_escape(operand.name) + "[{}:{}, {}:{}]",
                               comment_args=(row0, row0 + nrows, kcol, kcol + cols)))
    tacc = acc_j[tm_ch] + tm_j * t.bm * e
    ta = sub(tm_ch, "a", tm_kk)
    tb = sub(tm_ch, "b", tm_kk) + tm_j * e
    accumulate = ~(p.first[tm_ch] & (tm_kk == 0) & (t.init == "fold"))
    for acc_flag in (True, False):
        s = accumulate == acc_flag
        if not s.any():
            continue
        columns.append(Columns("tmm", t_ord[s], {"acc": tacc[s] // e, "a": ta[s] // e, "b": tb[s] // e,
                                                 "m": p.ni[tm_ch[s]], "n": 1, "k": 1,
                                                 "accumulate": int(acc_flag)},
                               comment="C[{}+{} tiles, {}] k-tile {}",
                               comment_args=(p.i0[tm_ch[s]], p.ni[tm_ch[s]], p.j0[tm_ch[s]] + tm_j[s],
                                             p.k0[tm_ch[s]] + tm_kk[s])))
    if len(st_ch):
        s_row0 = p.i0[st_ch] * e
        s_col0 = (p.j0[st_ch] + st_j) * e
        s_rows = np.minimum(p.ni[st_ch] * e, m - s_row0)
        s_cols = np.minimum(e, n - s_col0)
        stride = c.n * c.elem_bytes
        dram = c.addr + s_row0 * stride + s_col0 * c.elem_bytes
        sp_row = acc_j[st_ch] + st_j * t.bm * e
        columns.append(Columns("store", s_ord, {"sp_row": sp_row, "dram": dram, "stride": stride, "rows": s_rows,
                                                "cols": s_cols, "narrow": int(c.narrow), "relu": int(c.relu),
                                                "shift": c.shift},
                               comment=_escape(c.name) + "[{}:{}, {}:{}]",
                               comment_args=(s_row0, s_row0 + s_rows, s_col0, s_col0 + s_cols)))
    emit.extend(columns)
    return int((p.nj * p.ni * p.nk).sum()) * e ** 3


@dataclass(frozen=True)
class _ParamLoads:
    """One part of the blocks' parameter-row loads: whole column tiles, or the narrow last one.

    Attributes:
        chunk: The first chunk of each block that loads this part.
        tile0: The part's first column tile, relative to the block's.
        tiles: Its column tiles.
        cols: Its columns per row.
    """

    chunk: np.ndarray
    tile0: np.ndarray
    tiles: np.ndarray
    cols: np.ndarray | int


def _param_loads(p: _Plan, firsts: np.ndarray, params: _Params | None, e: int) -> list[_ParamLoads]:
    """The parameter-row loads of each block's first chunk, in program order (``start_block`` of
    :mod:`tinynpu.compiler.lower`): the whole column tiles in one load, a last, narrower one on its own."""
    if params is None:
        return []
    nj, j0 = p.nj[firsts], p.j0[firsts]
    full = np.minimum(nj, (params.columns - j0 * e) // e)
    whole, narrow = full > 0, full < nj
    return [_ParamLoads(firsts[whole], np.zeros(int(whole.sum()), np.int64), full[whole], e),
            _ParamLoads(firsts[narrow], full[narrow], (nj - full)[narrow],
                        params.columns - (j0 + full)[narrow] * e)]


def _param_columns(emit: Emitter, p: _Plan, parts: list[_ParamLoads], orders: list[np.ndarray], params: _Params, *,
                   acc_buf: int, row0: int) -> list[Columns]:
    """The loads of :func:`_param_loads` as columns (``row0``: the parameter rows' offset in an acc buffer)."""
    e = emit.cfg.tile
    table_row = e * emit.cfg.elem_bytes("acc")
    out = []
    for part, order in zip(parts, orders, strict=True):
        if not len(part.chunk):
            continue
        j = p.j0[part.chunk] + part.tile0
        if params.epilogue:
            comment, args = "epilogue rows of column tiles {}..{}", (j, j + part.tiles - 1)
        else:
            comment, args = "bias[{}:{}]", (j * e, np.minimum((j + part.tiles) * e, params.columns))
        out.append(Columns("load", order, {"scope": emit.isa.scope_by_name["acc"].id,
                                           "sp_row": p.acc[part.chunk] * acc_buf + row0 + part.tile0 * params.per_tile,
                                           "dram": params.addr + j * params.per_tile * table_row,
                                           "stride": table_row, "rows": part.tiles * params.per_tile,
                                           "cols": part.cols},
                           comment=comment, comment_args=args))
    return out


def _alu_columns(p: _Plan, steps: tuple[AluStep, ...], orders: list[np.ndarray], st_ch: np.ndarray,
                 st_j: np.ndarray, per_tile: int, *, acc_buf: int, bm: int, bn: int, e: int) -> list[Columns]:
    """The ALU steps before each output column tile's store (``finish_column`` of :mod:`tinynpu.compiler.lower`)."""
    acc0 = p.acc[st_ch] * acc_buf
    dst = acc0 + st_j * bm * e
    params = acc0 + bm * bn * e + st_j * per_tile
    out = []
    for step, order in zip(steps, orders, strict=True):
        fields: dict[str, np.ndarray | int] = {"dst": dst, "rows": p.ni[st_ch] * e}
        if step.param_row is not None:
            fields["src"] = params + step.param_row
        if step.imm is not None:
            fields["imm"] = step.imm
        out.append(Columns(step.mnemonic, order, fields, comment=_escape(step.comment)))
    return out


def _prefetch_keys(p: _Plan, t: Tiling, need: np.ndarray, reuse: np.ndarray, ch: np.ndarray, x: np.ndarray,
                   kk: np.ndarray, *, span: int, group: int, base_loads: int, base_cols: int,
                   base_after: int, store_at: int) -> np.ndarray:
    """Sort keys of double-buffered loads (``_prefetched`` of :mod:`tinynpu.compiler.lower`, vectorized).

    Chunk ``c`` is loaded by chunk ``c - 1`` (the prologue, -1, loads chunk 0), spread over its
    tmm loop or, into rows it still reads, after it; a ring's streamed operands are loaded
    ``stream_buffers - 1`` chunks ahead, behind the issuing chunk's share of the next panel.
    """
    pf = 2 * t.bk
    ring = t.stream_buffers
    far_op = np.array([ring > 2 and op in t.streamed for op in "ab"])  # per operand: loaded ring - 1 ahead
    ns = int(far_op.sum())
    far = far_op[x]
    issuer = ch - np.where(far, ring - 1, 1)
    near_need = need * ~far_op  # per chunk and operand: loads its previous chunk issues
    kinds = near_need * (reuse == 1)  # ... after that chunk's tmm loop
    early = near_need * (reuse == 0)  # ... spread over it
    n_early = p.nk * early.sum(axis=1)  # per chunk: the spread loads its previous chunk issues for it
    n_far = p.nk * ns  # per chunk: its streamed loads of a ring
    in_after = kk * kinds.sum(axis=1)[ch] + x * kinds[ch, 0]
    in_far = kk * ns + (x if ns == 2 else 0)
    issuing = np.maximum(issuer, 0)
    first_near = np.minimum(issuing + 1, p.size - 1)
    far_of = issuing + ring - 1  # the chunk whose streamed loads the issuing chunk issues
    # Index of each load in its issuing chunk's spread list, and that list's length.
    in_pref = np.where(far, n_early[first_near] + in_far, kk * early.sum(axis=1)[ch] + x * early[ch, 0])
    total_pref = n_early[first_near] + np.where((ns > 0) & (far_of < p.size), n_far[np.minimum(far_of, p.size - 1)], 0)
    j = np.where(total_pref > 0, in_pref * p.nj[issuing] // np.maximum(total_pref, 1), 0)
    pref_key = base_cols + j * group + store_at + 1 + in_pref
    place = np.where((reuse[ch, x] == 1) & ~far, base_after + in_after, pref_key)
    per_kk = need.sum(axis=1)
    prologue_key = base_loads + np.where(ch == 0, kk * per_kk[ch] + x * need[ch, 0], ch * pf + in_far)
    return (np.maximum(issuer, -1) + 1) * span + np.where(issuer < 0, prologue_key, place)


def _zero_edge_rows(emit: Emitter, total: int, p: _Plan, every: np.ndarray,
                    sub: Callable[[np.ndarray, np.ndarray], np.ndarray], scope: str, *, is_a: bool) -> None:
    """``_zero_edge_rows`` of :mod:`tinynpu.compiler.lower` over the plan's arrays (a few spans at most)."""
    e = emit.cfg.tile
    rem = total % e
    if not rem:
        return
    edge = ceil_div(total, e) - 1
    r0, nr = (p.i0, p.ni) if is_a else (p.j0, p.nj)
    hit = every[(r0 <= edge) & (edge < r0 + nr)]
    ch, kk = _expand(p.nk[hit])
    rows = sub(hit[ch], kk) + (edge - r0[hit[ch]]) * e + rem
    for row in np.unique(rows).tolist():
        emit.zero(scope, row, rows=e - rem, comment="edge-tile padding rows")


__all__ = ["lower_gemm_columns"]
