"""The skeleton every nonlinear program shares: an int8 ``[rows, width]`` matrix through the accumulators.

The accelerator has no int8 load into the accumulators, so (as a residual add
does, :mod:`.eltwise`) a tile-row of ``T`` logical rows comes in through the
MAC array: its ``n = ceil(width / T)`` column segments are loaded into ``a``
rows ``j*T..`` and one ``tmm`` against an identity tile (``m = n``) writes
segment ``j`` of logical row ``rr`` to accumulator row ``base + j*T + rr``:
the layout the reductions (``vredmax``, ``vredsum``, ``vredsq``) read, the
segments of one logical row ``T`` rows apart.  A *block* of ``T`` rows then
holds one value per logical row (a maximum, a sum, a reciprocal), which the
block instructions (``vsubb``, ``vmulb``) broadcast back over the segments.

A lowering gives the body (the ALU instructions of one tile-row) and its
parameter rows (tables, multipliers, rows to add); this module loads the
parameters once, walks the tile-rows through two buffers when they fit
(the Emitter's tokens let tile-row ``i+1``'s loads and ``tmm`` run while the
ALU works on tile-row ``i``), and stores each segment narrow (int8) to ``Y``.
Where the last segment is narrower than ``T``, its padding columns hold
values nothing stores; the reductions read only ``cols`` of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.compiler.compiled import Bounds, Compiled
from tinynpu.compiler.emitter import Emitter
from tinynpu.errors import OnnxError
from tinynpu.intmath import ceil_div
from tinynpu.isa import ArchConfig, load_isa

#: ``tmm``'s m field (7 bits): the segments one identity ``tmm`` brings in.
MAX_SEGMENTS = 127


@dataclass(frozen=True)
class TileRow:
    """Where one tile-row lives while its body runs.

    Attributes:
        data: First accumulator row of segment 0 (segment ``j`` at ``data + j*T``).
        blocks: First row of each of the body's ``T``-row blocks.
        params: First accumulator row of the parameter rows (loaded once).
        rows: Logical rows of this tile-row (``T``, fewer in the last one).
        index: Which tile-row (logical rows ``index*T..``): a constant mask's rows depend on it.
        a: First ``a`` row of segment 0 (segment ``j`` at ``a + j*T``): the int8 rows, for a body's own ``tmm``.
        p_addr: DRAM address of the parameter rows, for a body that loads the rows past the resident ones.
        m_addr: DRAM address of a per-run mask's codes (``M``), for a body that reads them.
    """

    data: int
    blocks: tuple[int, ...]
    params: int
    rows: int
    index: int = 0
    a: int = 0
    p_addr: int = 0
    m_addr: int = 0


@dataclass(frozen=True)
class RowShape:
    """An int8 ``[rows, width]`` matrix as tile-rows of ``segments`` column segments."""

    rows: int
    width: int
    tile: int

    @property
    def segments(self) -> int:
        return ceil_div(self.width, self.tile)

    @property
    def last_cols(self) -> int:
        """Columns of the last segment (``cols`` of a reduction)."""
        return self.width - (self.segments - 1) * self.tile

    def seg_cols(self, j: int) -> int:
        return self.last_cols if j == self.segments - 1 else self.tile


Body = Callable[[Emitter, TileRow, RowShape], None]


def acc_plan(cfg: ArchConfig, shape: RowShape, blocks: int, param_rows: int, *, what: str) -> int:
    """How many tile-row buffers fit (2, else 1), beside ``param_rows`` parameter rows.

    Raises:
        OnnxError: one tile-row does not fit the accumulators, ``a`` or ``tmm``'s fields (``what``
            names the node and the sizes).
    """
    t, n = cfg.tile, shape.segments
    per = (n + blocks) * t
    acc, a_rows = cfg.rows("acc"), cfg.rows("a_reg")
    if n > MAX_SEGMENTS or n * t > a_rows or per + param_rows > acc:
        raise OnnxError(f"{what}: a row of {shape.width} elements is {n} segments of {t}; one tile-row needs "
                        f"{per} accumulator rows and {param_rows} parameter rows (config {cfg.name!r} has "
                        f"{acc}), {n * t} rows of a (it has {a_rows}) and a tmm of m={n} (at most "
                        f"{MAX_SEGMENTS}): too large for the accelerator, so it cannot be lowered.")
    return 2 if 2 * per + param_rows <= acc and 2 * n * t <= a_rows else 1


def check_b_tiles(cfg: ArchConfig, b_tiles: int, *, what: str) -> None:
    """Refuse more constant ``b`` tiles (the identity, a rotary embedding's rotation) than ``b`` holds.

    Raises:
        OnnxError: naming the node (``what``), the rows needed and the config's.
    """
    if b_tiles * cfg.tile > cfg.rows("b_reg"):
        raise OnnxError(f"{what}: its {b_tiles} constant tiles of b need {b_tiles * cfg.tile} rows (config "
                        f"{cfg.name!r} has {cfg.rows('b_reg')}): too large for the accelerator, so it cannot be "
                        "lowered.")


def row_program(cfg: ArchConfig, shape: RowShape, params: np.ndarray, blocks: int, body: Body, *,
                what: str, b_tiles: int = 1, resident: int | None = None,
                codes: tuple[int, int] | None = None) -> Program:
    """The program: ``X`` (int8 ``rows x width``) through ``body`` into ``Y`` (int8, same shape).

    DRAM tensors: ``X``, ``I`` (``b_tiles`` int8 tiles loaded into ``b`` rows 0..: the identity tile, then
    any a body multiplies by, such as a rotary embedding's rotation), ``P`` (``params``, int32 rows of
    ``T``: the first ``resident`` of them, default all, loaded once; the body loads any others it needs
    into its blocks), ``M`` (with ``codes``: a per-run mask's int8 codes of that shape, which the body reads),
    ``Y``.
    """
    from tinynpu.compiler.workload import DramAllocator

    t, n = cfg.tile, shape.segments
    kept = params.shape[0] if resident is None else resident
    buffers = acc_plan(cfg, shape, blocks, kept, what=what)
    dram = DramAllocator(cfg, what)
    x = dram.add("X", (shape.rows, shape.width), "int8", "input")
    check_b_tiles(cfg, b_tiles, what=what)
    ident = dram.add("I", (b_tiles * t, t), "int8", "input")
    p = dram.add("P", tuple(params.shape), "int32", "input")
    m = dram.add("M", codes, "int8", "input") if codes is not None else None
    y = dram.add("Y", (shape.rows, shape.width), "int8", "output")
    emit = Emitter(load_isa(), cfg)
    per = (n + blocks) * t
    param_row = buffers * per
    emit.load("b", 0, ident.addr, rows=b_tiles * t, cols=t, stride=t, comment="identity tile (and the body's)")
    emit.load("acc", param_row, p.addr, rows=kept, cols=t, stride=4 * t, comment="parameter rows")
    emit.barrier()
    for index, r0 in enumerate(range(0, shape.rows, t)):
        r = min(t, shape.rows - r0)
        buf = (index % buffers) * per
        a_row = (index % buffers) * n * t
        for j in range(n):
            emit.load("a", a_row + j * t, x.addr + r0 * shape.width + j * t, rows=r, cols=shape.seg_cols(j),
                      stride=shape.width)
        emit.tmm(buf, a_row, 0, m=n, n=1, k=1, accumulate=False, comment="int8 rows into acc (x @ I)")
        body(emit, TileRow(buf, tuple(buf + (n + b) * t for b in range(blocks)), param_row, r, index, a_row, p.addr,
                           m.addr if m is not None else 0), shape)
        for j in range(n):
            emit.store(buf + j * t, y.addr + r0 * shape.width + j * t, rows=r, cols=shape.seg_cols(j),
                       stride=shape.width, narrow=True)
    words, _ = emit.finish()
    return Program.build(load_isa(), cfg, words, dram.tensors)


def alu(emit: Emitter, mnemonic: str, dst: int, rows: int, **fields: int) -> None:
    """One ALU instruction with any of its fields (the transformer instructions' ``n``, ``cols``, ``base``...)."""
    emit.emit(mnemonic, {"dst": dst, "rows": rows, **fields})


def row_compiled(cfg: ArchConfig, shape: RowShape, params: np.ndarray, blocks: int, body: Body,
                 reference: Callable[..., np.ndarray], *, kind: str, what: str,
                 b_rows: np.ndarray | None = None, resident: int | None = None,
                 codes: tuple[int, int] | None = None) -> Compiled:
    """:func:`row_program` as a compiled workload (its inputs and output its only traffic); ``b_rows``: the
    ``I`` tensor (default the identity tile alone); ``resident``, ``codes``: see :func:`row_program` (with
    ``codes``, ``reference`` takes ``X`` and ``M``, and the random ``M`` is -128 or 0 per byte)."""
    io = 2 * shape.rows * shape.width
    t = cfg.tile
    ident = np.eye(t, dtype=np.int8) if b_rows is None else b_rows

    def make_inputs(seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        inputs = {"X": rng.integers(-128, 128, (shape.rows, shape.width), dtype=np.int8), "I": ident, "P": params}
        if codes is not None:
            inputs["M"] = np.where(rng.random(codes) < 0.3, -128, 0).astype(np.int8)
        return inputs

    def ref(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"Y": reference(inputs["X"]) if codes is None else reference(inputs["X"], inputs["M"])}

    program = row_program(cfg, shape, params, blocks, body, what=what, b_tiles=ident.shape[0] // t, resident=resident,
                          codes=codes)
    return Compiled(program=program, comments={},
                    workload={"kind": kind, "rows": shape.rows, "width": shape.width, "config": cfg.name},
                    trace=(), bounds=Bounds(io_lower_bound_bytes=io, best_tiling_bytes=io,
                                            roofline_cycles=ceil_div(io, cfg.dram_bytes_per_cycle),
                                            padding_ceiling=0.0, useful_macs=0, issued_macs=0,
                                            bound_kind="compulsory"),
                    host_traffic_bytes=0, make_inputs=make_inputs, reference=ref, outputs=("Y",))


def broadcast_rows(values: np.ndarray, tile: int) -> np.ndarray:
    """One parameter row per value, the value in every column (int32)."""
    return np.repeat(np.asarray(values, dtype=np.int64).reshape(-1, 1), tile, axis=1).astype(np.int32)


def column_rows(values: np.ndarray, shape: RowShape) -> np.ndarray:
    """Per-column values (``width``) as one row per segment (padding columns 0), int32."""
    out = np.zeros((shape.segments, shape.tile), dtype=np.int64)
    out.reshape(-1)[:shape.width] = np.asarray(values, dtype=np.int64)
    return out.astype(np.int32)


__all__ = ["MAX_SEGMENTS", "Body", "RowShape", "TileRow", "acc_plan", "alu", "broadcast_rows", "check_b_tiles",
           "column_rows", "row_compiled", "row_program"]
