"""``compile_matmul``: C = A @ B^T ("nt", the course's form) or A @ B ("nn", B transposed on the host)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.compiler.bounds import best_tiling_bytes, matmul_io_lower_bound, roofline_cycles
from tinynpu.compiler.compiled import Arrays, Bounds, Compiled
from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.epilogue import Epilogue
from tinynpu.compiler.lower import EpilogueRows, lower_gemm
from tinynpu.compiler.operands import DenseOperand, DenseOutput
from tinynpu.compiler.quant import max_shift, requantize
from tinynpu.compiler.schedule import Schedule, apply, from_tiling
from tinynpu.compiler.search import auto_tiling
from tinynpu.compiler.workload import DramAllocator, check_sizes, resolve_config, resolve_schedule
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, load_isa


def default_shift(k: int) -> int:
    """Requantization shift for int8 output of a depth-k int8 GEMM: ~3 sigma of uniform int8 data -> 127."""
    sigma = math.sqrt(k) * 74.0 * 74.0  # std of a sum of k products of uniform int8 values
    return max(0, min(max_shift(), math.ceil(math.log2(3 * sigma / 127))))


def compile_matmul(m: int, n: int, k: int, *, dtype: str = "int8", schedule: str | Schedule = "auto",
                   layout: str = "nt", cfg: ArchConfig | None = None, out_dtype: str | None = None,
                   shift: int | None = None, relu: bool = False, epilogue: Epilogue | None = None) -> Compiled:
    """Compile a GEMM for the accelerator.

    Args:
        m, n, k: C is m x n, the reduction is k (any positive sizes).
        dtype: ``int8`` (default config) or ``fp32`` (fp32 config).
        schedule: ``naive``, ``auto``, a schedule JSON path or a :class:`Schedule`.
        layout: ``nt``: C = A @ B^T with B given N x K; ``nn``: C = A @ B with B given K x N
            (transposed on the host; that traffic is counted in ``host_traffic_bytes``).
        cfg: Architecture config (default: the built-in one for ``dtype``).
        out_dtype: ``int32``/``float32`` (the accumulator, default) or ``int8`` (requantized on store).
        shift: Requantization shift for ``int8`` output (default: :func:`default_shift`).
        relu: Clamp negatives to zero on store.
        epilogue: A quantized layer's epilogue (bias, per-column ``vrequant``, zero point, clamp;
            one entry per output column) run by the program before an int8 store, instead of
            ``shift``/``relu``; its parameter rows are the DRAM tensor ``P``
            (:meth:`Epilogue.param_table`).  Integer configs; implies int8 output.

    Raises:
        UsageError: bad sizes, dtype/config mismatch, a schedule that does not apply or fit,
            tensors beyond DRAM.
    """
    t_start = time.perf_counter()
    cfg = resolve_config(dtype, cfg)
    check_sizes(m=m, n=n, k=k)
    if layout not in ("nt", "nn"):
        raise UsageError(f"layout must be 'nt' (A @ B^T) or 'nn' (A @ B), not {layout!r}.")
    acc_name = cfg.acc_dtype
    if epilogue is not None:
        if not cfg.is_integer:
            raise UsageError(f"an epilogue needs an integer config, not {cfg.name!r}.")
        if out_dtype not in (None, "int8") or shift is not None or relu:
            raise UsageError("an epilogue writes int8 output with its own requantization and clamp: "
                             "give no out_dtype other than 'int8', no shift and no relu with it.")
        if epilogue.channels != n:
            raise UsageError(f"the epilogue has {epilogue.channels} channels, the matmul n={n} output columns.")
        out_dtype, shift, relu = "int8", 0, epilogue.store_relu
    out_dtype = out_dtype or acc_name
    if out_dtype == "fp32":
        out_dtype = "float32"
    if out_dtype not in (acc_name, "int8") or (out_dtype == "int8" and not cfg.is_integer):
        raise UsageError(f"out_dtype must be {acc_name!r}" + (" or 'int8'" if cfg.is_integer else "")
                         + f" for config {cfg.name!r}, not {out_dtype!r}.")
    narrow = out_dtype == "int8"
    if shift is None:
        shift = default_shift(k) if narrow else 0
    if not narrow and shift:
        raise UsageError("shift applies only to int8 output (out_dtype='int8').")
    isa = load_isa()
    in_np = cfg.input_dtype
    in_bytes = cfg.elem_bytes("a_reg")
    out_bytes = np.dtype(out_dtype).itemsize

    alloc = DramAllocator(cfg)
    ta = alloc.add("A", (m, k), in_np, "input")
    tb = alloc.add("B" if layout == "nt" else "Bt", (n, k), in_np, "input")
    tc = alloc.add("C", (m, n), out_dtype, "output")
    param_rows = epilogue.param_rows if epilogue is not None else 0
    alu_ops = epilogue.alu_ops if epilogue is not None else 0
    epi_rows = None
    if epilogue is not None:
        epi_rows = EpilogueRows(alloc.add("P", epilogue.param_table(cfg.tile).shape, acc_name, "input").addr,
                                epilogue)

    sched = resolve_schedule(schedule, cfg)
    model: dict[str, object] = {}
    if sched is None:
        best = auto_tiling(m, n, k, cfg, in_bytes=in_bytes, out_bytes=out_bytes, bias=param_rows,
                           alu_ops=alu_ops)
        tiling = best.tiling
        sched = from_tiling(tiling, cfg, name="auto")
        model = {"cycles": best.est.cycles, "dram_bytes": best.est.dram_bytes}
    else:
        tiling = apply(sched, m=m, n=n, k=k, cfg=cfg, bias=param_rows)

    emit = Emitter(isa, cfg)
    issued = lower_gemm(emit, m=m, n=n, k=k,
                        a=DenseOperand(ta.addr, m, k, in_bytes, "A"),
                        b=DenseOperand(tb.addr, n, k, in_bytes, tb.name),
                        c=DenseOutput(tc.addr, n, out_bytes, narrow=narrow, shift=shift, relu=relu),
                        tiling=tiling, epilogue=epi_rows)
    words, comments = emit.finish()
    program = Program.build(isa, cfg, words, alloc.tensors)

    useful = m * n * k
    param_bytes = param_rows * n * cfg.elem_bytes("acc")
    io = matmul_io_lower_bound(m, n, k, cfg, in_bytes=in_bytes, out_bytes=out_bytes, bias_bytes=param_bytes)
    bounds = Bounds(
        io_lower_bound_bytes=io,
        best_tiling_bytes=best_tiling_bytes(m, n, k, cfg, in_bytes=in_bytes, out_bytes=out_bytes,
                                            bias=param_rows),
        roofline_cycles=roofline_cycles(useful, io, cfg),
        padding_ceiling=useful / issued,
        useful_macs=useful,
        issued_macs=issued,
        bound_kind="matmul",
    )
    fp = not cfg.is_integer

    def make_inputs(seed: int) -> Arrays:
        rng = np.random.default_rng(seed)
        b_shape = (n, k) if layout == "nt" else (k, n)
        if fp:  # the course's np.random.rand: positive values, so rtol=1e-5 is meaningful
            return {"A": rng.random((m, k), dtype=np.float32), "B": rng.random(b_shape, dtype=np.float32)}
        return {"A": rng.integers(-128, 128, (m, k), dtype=np.int8),
                "B": rng.integers(-128, 128, b_shape, dtype=np.int8)}

    def b_nk(inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.asarray(inputs["B"]) if layout == "nt" else np.ascontiguousarray(np.asarray(inputs["B"]).T)

    def to_device(inputs: Mapping[str, np.ndarray]) -> Arrays:
        device = {"A": np.asarray(inputs["A"]), tb.name: b_nk(inputs)}
        if epilogue is not None:
            device["P"] = epilogue.param_table(cfg.tile)
        return device

    def reference(inputs: Mapping[str, np.ndarray]) -> Arrays:
        a, b = np.asarray(inputs["A"]), b_nk(inputs)
        if fp:
            return {"C": (a.astype(np.float64) @ b.T.astype(np.float64)).astype(np.float32)}
        wide = a.astype(np.int64) @ b.T.astype(np.int64)
        if epilogue is not None:
            return {"C": epilogue.reference(wide.astype(np.uint32).view(np.int32))}
        if narrow:
            return {"C": requantize(wide.astype(np.int32), shift, relu=relu)}
        c = wide.astype(np.int32)  # two's-complement wrap, as the accumulator
        return {"C": np.maximum(c, 0) if relu else c}

    host = 2 * n * k * in_bytes if layout == "nn" else 0
    return Compiled(
        program=program, comments=comments,
        workload={"kind": "matmul", "m": m, "n": n, "k": k, "dtype": dtype, "layout": layout,
                  "out_dtype": out_dtype, "shift": shift, "relu": relu,
                  "epilogue": epilogue.describe() if epilogue is not None else None, "config": cfg.name,
                  "config_path": str(cfg.source),
                  "tiling": {"bm": tiling.bm, "bn": tiling.bn, "bk": tiling.bk, "order": tiling.order,
                             "double_buffer": tiling.double_buffer, "acc_buffers": tiling.acc_buffers,
                             "init": tiling.init, "resident": tiling.resident,
                             "panel_buffers": tiling.panel_buffers, "stream_buffers": tiling.stream_buffers}},
        trace=tuple(dict(s) for s in sched.steps), bounds=bounds, host_traffic_bytes=host,
        make_inputs=make_inputs, reference=reference, to_device=to_device, outputs=("C",),
        exact=not fp, compile_seconds=time.perf_counter() - t_start, model=dict(model),
        schedule_name=sched.name,
    )


__all__ = ["compile_matmul", "default_shift"]
