"""Lowering a tiled GEMM onto the ISA: loads, tmm blocks and stores in a software-pipelined order.

The loop nest (``order`` "mn" shown)::

    for i0 in blocks of bm tiles:            # output block in acc (one of acc_buffers)
      for j0 in blocks of bn tiles:
        for k0 in chunks of bk tiles:        # A/B chunks in a_reg/b_reg (one of 2 buffers)
          for j1 in bn:
            for k1 in bk: tmm acc[:, j1], A[i0-block, k1], B[j1, k1]   (m=bm, n=1, k=1)
        for j1 in bn:    store acc[:, j1] -> C[i0-block, j1]

One ``tmm`` per output column tile and reduction tile (n=1, m=bm, k=1) keeps each column tile's
accumulator rows contiguous, so it leaves the chip in one ``store`` of ``bm``
tiles, and that store can start as soon as its column is final, while the
other columns are still being computed.  Loads of the next chunk are
interleaved between the current chunk's ``tmm`` instructions in program order
so that neither queue starves the dispatcher.  All tokens come from the
:class:`~tinynpu.compiler.emitter.Emitter`'s dependency tracking.

Each reduction tile k1 of a chunk has its own sub-buffer of ``bm`` (``bn``)
tiles, so one ``load`` of up to ``bm * tile`` consecutive GEMM rows fills it.
With ``resident`` A (B), the whole K is one chunk and a panel is loaded only
by the first block of its outer row (column), into one of two panel buffers.

Edge tiles: columns past K are zero-filled by ``load`` (cols < tile); rows
past M or N inside an edge tile are zeroed once at the start in every buffer
position an edge tile occupies, and never stored.  What padding costs is
reported as ``padding_ceiling`` (useful / issued MACs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.epilogue import Epilogue
from tinynpu.compiler.lower_columns import lower_gemm_columns
from tinynpu.compiler.operands import DenseOperand, DenseOutput, OperandA, OutputC
from tinynpu.compiler.schedule import Tiling, buffer_rows
from tinynpu.intmath import ceil_div


@dataclass(frozen=True)
class Bias:
    """A per-output-column bias vector of ``n`` accumulator elements (int32 or fp32) at DRAM ``addr``."""

    addr: int
    n: int


@dataclass(frozen=True)
class EpilogueRows:
    """A layer epilogue whose :meth:`Epilogue.param_table` lies at DRAM ``addr`` (int32, ``tile`` per row)."""

    addr: int
    epilogue: Epilogue


class _Chunk(NamedTuple):  # a tuple: several hundred thousand of them for a naive 1024^3
    i0: int  # first tile row of the block
    ni: int  # tile rows in the block
    j0: int
    nj: int
    k0: int  # first reduction tile of the chunk
    nk: int
    first: bool  # first chunk of its block
    last: bool
    abuf: int  # a_reg buffer
    bbuf: int  # b_reg buffer
    load_a: bool  # False: the A panel is already resident
    load_b: bool
    acc: int  # acc buffer


def chunks(m: int, n: int, k: int, t: Tiling, tile: int) -> list[_Chunk]:
    """Every (block, chunk) in execution order."""
    mt, nt, kt = ceil_div(m, tile), ceil_div(n, tile), ceil_div(k, tile)
    iblocks = [(i, min(t.bm, mt - i)) for i in range(0, mt, t.bm)]
    jblocks = [(j, min(t.bn, nt - j)) for j in range(0, nt, t.bn)]
    blocks = [(ib, jb) for ib in iblocks for jb in jblocks] if t.order == "mn" else \
             [(ib, jb) for jb in jblocks for ib in iblocks]
    out = []
    g = 0
    nbuf = t.stream_buffers
    prev: tuple[int, int] | None = None
    panel = -1  # index of the resident panel (outer block), for its buffer parity
    for b, ((i0, ni), (j0, nj)) in enumerate(blocks):
        outer = i0 if t.order == "mn" else j0
        new_panel = prev is None or outer != (prev[0] if t.order == "mn" else prev[1])
        if new_panel:
            panel += 1
        prev = (i0, j0)
        for k0 in range(0, kt, t.bk):
            nk = min(t.bk, kt - k0)
            stream = g % nbuf
            abuf = panel % t.panel_buffers if t.resident == "a" else stream
            bbuf = panel % t.panel_buffers if t.resident == "b" else stream
            out.append(_Chunk(i0, ni, j0, nj, k0, nk, k0 == 0, k0 + nk >= kt, abuf, bbuf,
                              t.resident != "a" or new_panel, t.resident != "b" or new_panel,
                              b % t.acc_buffers))
            g += 1
    return out


def lower_gemm(emit: Emitter, *, m: int, n: int, k: int, a: OperandA, b: OperandA, c: OutputC,
               tiling: Tiling, bias: Bias | None = None, epilogue: EpilogueRows | None = None) -> int:
    """Emit the instructions of ``C = A @ B^T (+ bias)`` for ``tiling``, or with its layer ``epilogue``.

    Dense operands take the columnar path
    (:func:`~tinynpu.compiler.lower_columns.lower_gemm_columns`, the same
    program computed with numpy), with or without a bias of ``n`` elements or
    an epilogue; everything else (conv's implicit im2col) :func:`lower_gemm_by_calls`.
    Arguments and result as :func:`lower_gemm_by_calls`.
    """
    if (type(a) is DenseOperand and type(b) is DenseOperand and type(c) is DenseOutput
            and (bias is None or bias.n == n) and (bias is None or epilogue is None)):
        return lower_gemm_columns(emit, m=m, n=n, k=k, a=a, b=b, c=c, tiling=tiling, bias=bias, epilogue=epilogue)
    return lower_gemm_by_calls(emit, m=m, n=n, k=k, a=a, b=b, c=c, tiling=tiling, bias=bias, epilogue=epilogue)


def lower_gemm_by_calls(emit: Emitter, *, m: int, n: int, k: int, a: OperandA, b: OperandA, c: OutputC,
                        tiling: Tiling, bias: Bias | None = None, epilogue: EpilogueRows | None = None) -> int:
    """Emit the instructions of ``C = A @ B^T (+ bias)`` for ``tiling``, one emitter call each.

    Args:
        emit: Where instructions go (tokens are derived on :meth:`Emitter.finish`).
        m, n, k: GEMM sizes (any positive values).
        a: Operand for A (M x K); b: operand for B in N x K form; c: the output.
        tiling: The schedule's tiling (already checked to fit).
        bias: Optional bias per output column (accumulator dtype), added in acc before the store.
        epilogue: Optional layer epilogue (not with ``bias``): its parameter rows are loaded with
            each block's first chunk, its ALU instructions run on each column before the store.

    Returns:
        The MACs issued by tmm (whole tile steps), for the padding ceiling.
    """
    if bias is not None and epilogue is not None:
        raise ValueError("lower_gemm: an epilogue carries its own bias; pass bias or epilogue, not both")
    t = tiling
    low = _ByCalls(emit, m, n, k, a, b, c, t, bias, epilogue)
    plan = chunks(m, n, k, t, emit.cfg.tile)
    _zero_edge_rows(emit, m, plan, lambda ch, kk: low.sub(ch, "a", kk), "a", is_a=True)
    _zero_edge_rows(emit, n, plan, lambda ch, kk: low.sub(ch, "b", kk), "b", is_a=False)
    if t.double_buffer and plan:  # prologue: the first chunk, and a ring's next streamed chunks
        _issue(emit, low.loads(plan[0]))
        for ahead in plan[1:t.stream_buffers - 1]:
            _issue(emit, low.loads(ahead, t.streamed))
    issued = 0
    for idx, ch in enumerate(plan):
        if ch.first:
            low.start_block(ch)
        if not t.double_buffer:  # single buffers: load right before use, as the seed loop does
            _issue(emit, low.loads(ch))
        issued += low.compute(ch, *_prefetched(low, plan, idx))
    return issued


def _prefetched(low: _ByCalls, plan: list[_Chunk], idx: int) -> tuple[list[_Load], list[_Load]]:
    """The loads chunk ``idx`` issues for later chunks: (spread over its tmm loop, after it).

    Two buffers: the next chunk's loads; those into rows this chunk still reads (a single panel
    buffer reloaded at the same reduction tiles) wait for the whole tmm loop.  A ring of more
    buffers: the resident panel's loads of the next chunk as with two, the streamed operands' loads
    of chunk ``idx + stream_buffers - 1``, into the ring slot of chunk ``idx - 1`` (already read).
    """
    t = low.t
    if not t.double_buffer or idx + 1 >= len(plan):
        return [], []
    ch, nxt = plan[idx], plan[idx + 1]
    reuse = {"a": low.overlaps(ch, nxt, "a", t.bm), "b": low.overlaps(ch, nxt, "b", t.bn)}
    near = "ab" if t.stream_buffers == 2 else "ab".replace(t.streamed, "")
    spread = low.loads(nxt, "".join(x for x in near if not reuse[x]))
    after = low.loads(nxt, "".join(x for x in near if reuse[x]))
    far = idx + t.stream_buffers - 1
    if t.stream_buffers > 2 and far < len(plan):
        spread += low.loads(plan[far], t.streamed)
    return spread, after


class _ByCalls:
    """One GEMM's lowering, call by call: where each chunk's operands live and the instructions of a chunk."""

    def __init__(self, emit: Emitter, m: int, n: int, k: int, a: OperandA, b: OperandA, c: OutputC, t: Tiling,
                 bias: Bias | None, epilogue: EpilogueRows | None) -> None:
        cfg = emit.cfg
        self.emit, self.m, self.n, self.a, self.b, self.c, self.t = emit, m, n, a, b, c, t
        self.bias, self.epilogue = bias, epilogue
        self.e = e = cfg.tile
        self.epi = epilogue.epilogue if epilogue is not None else None
        # acc parameter rows per column tile
        self.per_tile = self.epi.param_rows if self.epi is not None else int(bias is not None)
        rows = buffer_rows(t, cfg, bias=self.per_tile, k=k)
        self.a_buf = rows["a_reg"] // t.buffers("a")
        self.b_buf = rows["b_reg"] // t.buffers("b")
        self.acc_buf = rows["acc"] // t.acc_buffers
        self.bias_row0 = t.bm * t.bn * e  # bias rows follow the block inside each acc buffer
        self.bias_bytes = cfg.elem_bytes("acc")

    def sub(self, ch: _Chunk, operand: str, kk: int) -> int:
        """First row of reduction tile kk of chunk ch in ``operand``'s scope.

        Streamed chunks reuse sub-buffers 0..bk-1; a resident panel keeps every
        reduction tile of K at its own offset.
        """
        t, e = self.t, self.e
        if operand == "a":
            return ch.abuf * self.a_buf + ((ch.k0 if t.resident == "a" else 0) + kk) * t.bm * e
        return ch.bbuf * self.b_buf + ((ch.k0 if t.resident == "b" else 0) + kk) * t.bn * e

    def overlaps(self, cur: _Chunk, nxt: _Chunk, op: str, blk: int) -> bool:
        """Whether ``nxt``'s ``op`` rows overlap the rows ``cur`` reads."""
        sub, e = self.sub, self.e
        lo, hi = sub(cur, op, 0), sub(cur, op, cur.nk - 1) + blk * e
        return lo < sub(nxt, op, nxt.nk - 1) + blk * e and sub(nxt, op, 0) < hi

    def loads(self, ch: _Chunk, operands: str = "ab") -> list[_Load]:
        """The loads of ``operands`` of one chunk, as deferred loads (so they can be interleaved).

        Reduction tile kk of the chunk has its own sub-buffer of ``bm`` (``bn``)
        tiles, so its rows are consecutive GEMM rows: one DMA per operand and kk.
        """
        e = self.e
        calls: list[_Load] = []
        for kk in range(ch.nk):
            for op, scope, r0, nr, total, need in ((self.a, "a", ch.i0, ch.ni, self.m, ch.load_a),
                                                   (self.b, "b", ch.j0, ch.nj, self.n, ch.load_b)):
                if not need or scope not in operands:
                    continue
                row0 = r0 * e
                calls.append((op, scope, self.sub(ch, scope, kk), row0, min(nr * e, total - row0),
                              (ch.k0 + kk) * e))
        return calls

    def start_block(self, ch: _Chunk) -> None:
        """What the first chunk of an output block does first: clear its acc block, load its parameter rows."""
        emit, e, t = self.emit, self.e, self.t
        acc0 = ch.acc * self.acc_buf
        if t.init == "fill_zero":
            emit.zero("acc", acc0, rows=t.bm * ch.nj * e, comment="fill_zero(acc)")
        bias, bias_bytes, bias_row0 = self.bias, self.bias_bytes, self.bias_row0
        if bias is not None:
            col0 = ch.j0 * e
            full = min(ch.nj, (bias.n - col0) // e)
            if full:
                emit.load("acc", acc0 + bias_row0, bias.addr + col0 * bias_bytes, rows=full, cols=e,
                          stride=e * bias_bytes, comment=f"bias[{col0}:{col0 + full * e}]")
            if full < ch.nj:
                c0 = col0 + full * e
                emit.load("acc", acc0 + bias_row0 + full, bias.addr + c0 * bias_bytes, rows=1,
                          cols=bias.n - c0, stride=e * bias_bytes, comment=f"bias[{c0}:{bias.n}]")
        epilogue, per_tile, n = self.epilogue, self.per_tile, self.n
        if epilogue is not None:
            # Whole column tiles in one load; a last, narrower one on its own (the load zeroes the rest).
            table_row = e * bias_bytes
            full = min(ch.nj, (n - ch.j0 * e) // e)
            for j, nj, cols in ((ch.j0, full, e), (ch.j0 + full, ch.nj - full, n - (ch.j0 + full) * e)):
                if nj:
                    emit.load("acc", acc0 + bias_row0 + (j - ch.j0) * per_tile,
                              epilogue.addr + j * per_tile * table_row, rows=nj * per_tile, cols=cols,
                              stride=table_row, comment=f"epilogue rows of column tiles {j}..{j + nj - 1}")

    def compute(self, ch: _Chunk, prefetch: list[_Load], after: list[_Load]) -> int:
        """The chunk's tmm loop (with its block's stores when it is the last chunk), the ``prefetch``
        loads of later chunks spread over it and the ``after`` loads behind it; the MACs it issues."""
        emit, e, t, sub = self.emit, self.e, self.t, self.sub
        acc0 = ch.acc * self.acc_buf
        issued = 0
        done = 0
        for j in range(ch.nj):
            acc_j = acc0 + j * t.bm * e
            for kk in range(ch.nk):
                emit.tmm(acc_j, sub(ch, "a", kk), sub(ch, "b", kk) + j * e,
                         m=ch.ni, n=1, k=1, accumulate=not (ch.first and kk == 0 and t.init == "fold"),
                         comment=f"C[{ch.i0}+{ch.ni} tiles, {ch.j0 + j}] k-tile {ch.k0 + kk}")
            issued += ch.ni * ch.nk * e * e * e
            if ch.last:
                self.finish_column(ch, j, acc_j, acc0)
            # Spread the next chunk's loads evenly over this chunk's tmm instructions.
            upto = ceil_div(len(prefetch) * (j + 1), ch.nj)
            _issue(emit, prefetch[done:upto])
            done = upto
        _issue(emit, after)
        return issued

    def finish_column(self, ch: _Chunk, j: int, acc_j: int, acc0: int) -> None:
        """Column tile j of a finished block: its bias or epilogue, then its store."""
        emit, e = self.emit, self.e
        row0, col0 = ch.i0 * e, (ch.j0 + j) * e
        if self.bias is not None:
            emit.alu("vaddrow", acc_j, rows=ch.ni * e, src=acc0 + self.bias_row0 + j, comment="+ bias")
        if self.epi is not None:
            _emit_epilogue(emit, self.epi, acc_j, ch.ni * e, acc0 + self.bias_row0 + j * self.per_tile)
        self.c.store(emit, sp_row=acc_j, row0=row0, rows=min(ch.ni * e, self.m - row0), col0=col0,
                     cols=min(e, self.n - col0))


def _emit_epilogue(emit: Emitter, epi: Epilogue, dst: int, rows: int, params: int) -> None:
    """The ALU instructions of ``epi`` on one output column tile (its parameter rows from ``params``)."""
    for step in epi.alu_steps():
        emit.alu(step.mnemonic, dst, rows=rows, src=None if step.param_row is None else params + step.param_row,
                 imm=step.imm, comment=step.comment)


_Load = tuple[OperandA, str, int, int, int, int]  # operand, scope, scratchpad row, first GEMM row, rows, k0


def _issue(emit: Emitter, calls: list[_Load]) -> None:
    """Emit deferred loads in order."""
    for op, scope, sp_row, row0, rows, k0 in calls:
        op.load(emit, scope=scope, sp_row=sp_row, row0=row0, rows=rows, k0=k0)


def _zero_edge_rows(emit: Emitter, total: int, plan: list[_Chunk], sub: Callable[[_Chunk, int], int],
                    scope: str, *, is_a: bool) -> None:
    """Zero, once, the rows past ``total`` of every buffer position an edge tile occupies.

    Rows past M (or N) only feed accumulator rows (or columns) that are never
    stored, so any finite value would do; zeroing them keeps the machine state
    deterministic and free of reads of never-written rows.
    """
    e = emit.cfg.tile
    rem = total % e
    if not rem or not plan:
        return
    edge = ceil_div(total, e) - 1  # the last tile row (or column)
    spans: set[tuple[int, int]] = set()
    for ch in plan:
        r0, nr = (ch.i0, ch.ni) if is_a else (ch.j0, ch.nj)
        if r0 <= edge < r0 + nr:
            pos = edge - r0
            for kk in range(ch.nk):
                spans.add((sub(ch, kk) + pos * e + rem, e - rem))
    for row, n_rows in sorted(spans):
        emit.zero(scope, row, rows=n_rows, comment="edge-tile padding rows")


__all__ = ["Bias", "EpilogueRows", "chunks", "lower_gemm", "lower_gemm_by_calls"]
