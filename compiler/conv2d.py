"""``compile_conv2d``: a 2-D convolution by implicit im2col, a GEMM whose A operand is gathered by strided DMA.

The GEMM view (NT form, as ``tmm``)::

    M = N*P*Q      one GEMM row per output pixel (n, p, q), row-major: the output is NHWC
    N = K          one GEMM column per output channel
    K_gemm         the reduction over (r, s, c)

Tensors in DRAM (user-facing layouts, no host work): the input is NHWC, the
weights are ``K x R x S x C`` (a ``K x (R*S*C)`` matrix: B of the NT form,
no transpose), the output is NHWC (``M x K``), the accumulator's dtype or,
with ``out_dtype="int8"``, requantized by the store as a quantized
network's layer would be.  An NCHW user (``input_layout="NCHW"``) gets the
transposes done on the host, counted in ``host_traffic_bytes``.

The parts, one job each: :mod:`~tinynpu.compiler.conv_shape` (sizes, seeded
inputs, numpy oracle), :mod:`~tinynpu.compiler.conv_geometry` (the
``direct`` and ``rowpack`` layouts of the reduction, host re-layout, tile
DMAs), :mod:`~tinynpu.compiler.conv_lower` (operands, layout and schedule,
emission through the GEMM lowering), :mod:`~tinynpu.compiler.conv_bounds`
(exact traffic, ``best_tiling_bytes``, the compulsory I/O bound).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.compiler.bounds import roofline_cycles
from tinynpu.compiler.compiled import Bounds, Compiled
from tinynpu.compiler.conv_bounds import conv_best_tiling_bytes, conv_compulsory_bytes, conv_traffic_model
from tinynpu.compiler.conv_geometry import ConvLayout
from tinynpu.compiler.conv_lower import IM2COL_OP, conv_auto_tiling, lower_conv2d, resolve_layout_schedule
from tinynpu.compiler.conv_shape import ConvShape, Pair, Quad, conv2d_reference, conv_inputs
from tinynpu.compiler.cost import estimate
from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.epilogue import Epilogue
from tinynpu.compiler.lower import EpilogueRows
from tinynpu.compiler.operands import DenseOutput
from tinynpu.compiler.quant import calibrate_shift, requantize
from tinynpu.compiler.schedule import apply, from_tiling
from tinynpu.compiler.workload import DramAllocator, resolve_config
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, load_isa


def compile_conv2d(n: int, c: int, h: int, w: int, k: int, r: int, s: int, *, stride: Pair = 1, pad: Quad = 0,
                   dilation: Pair = 1, dtype: str = "int8", cfg: ArchConfig | None = None, schedule: str = "auto",
                   layout: str = "auto", out_dtype: str | None = None,
                   input_layout: str = "NHWC", epilogue: Epilogue | None = None) -> Compiled:
    """Compile a 2-D convolution (NHWC input, KRSC weights, NHWC output) by implicit im2col.

    Args:
        n, c, h, w: Input batch, channels, height, width.
        k, r, s: Output channels, kernel height, kernel width.
        stride: Stride in both directions, or ``(height, width)``.
        pad: Zero padding on every side, or ``(top, left, bottom, right)`` (ONNX's order).
        dilation: Kernel dilation in both directions, or ``(height, width)``.
        dtype: ``int8`` (int32 output) or ``fp32`` (the fp32 config).
        cfg: Architecture config; by default the one matching ``dtype``.
        schedule: ``auto`` (cost-model choice), ``naive`` (the seed loop's one-tile blocks) or a
            saved trace file (a conv trace starts with its ``im2col`` step).
        layout: ``auto``, ``direct`` or ``rowpack`` (see the module docstring).
        out_dtype: ``None`` (the accumulator's int32/fp32) or ``int8``: requantized on the way out
            (``store narrow=1``) with the shift :func:`~tinynpu.compiler.quant.calibrate_shift`
            picks on the seed-0 inputs, as a network layer feeding the next one would be.
        input_layout: the user's layout: ``NHWC`` (input NHWC, weights KRSC, output NHWC: no host
            work) or ``NCHW`` (input NCHW, weights KCRS, output NCHW): the host transposes to the
            device's NHWC and back, and that traffic is counted in ``host_traffic_bytes``.
        epilogue: A quantized layer's epilogue (bias, per-channel ``vrequant``, zero point, clamp;
            one entry per output channel) run by the program before an int8 store; its parameter
            rows are the DRAM tensor ``P`` (:meth:`Epilogue.param_table`).  Integer configs;
            implies int8 output.

    Returns:
        The compiled program, its inputs/reference/host layout change and its yardsticks.

    Raises:
        UsageError: bad sizes, a kernel larger than the padded input, an unsupported dtype, or a
            schedule that does not apply or fit.
    """
    started = time.perf_counter()
    cfg = resolve_config(dtype, cfg)
    isa = load_isa()
    shape = ConvShape(n=n, c=c, h=h, w=w, k=k, r=r, s=s, stride=stride, pad=pad, dilation=dilation)
    in_elems = shape.n * shape.h * shape.w * shape.c + shape.k * shape.r * shape.s * shape.c
    need = in_elems * cfg.elem_bytes("a_reg") + shape.gemm_m * shape.gemm_n * cfg.elem_bytes("acc")
    if need > cfg.dram_bytes:  # checked before generating (and calibrating on) data of that size
        raise UsageError(f"{shape}: its tensors need at least {need} bytes of DRAM, more than the "
                         f"{cfg.dram_bytes} bytes of config {cfg.name!r}.")
    lay, sched = resolve_layout_schedule(schedule, shape, cfg, layout)
    if input_layout not in ("NHWC", "NCHW"):
        raise UsageError(f"conv2d: input_layout must be NHWC or NCHW, not {input_layout!r}.")
    integer = cfg.is_integer
    acc_dt = str(cfg.dtype("acc"))
    if out_dtype not in (None, acc_dt, "int8") or (out_dtype == "int8" and not integer):
        raise UsageError(f"conv2d: out_dtype must be {acc_dt}" + (" or int8" if integer else "")
                         + f" in config {cfg.name!r}, not {out_dtype!r}.")
    if epilogue is not None:
        if not integer:
            raise UsageError(f"conv2d: an epilogue needs an integer config, not {cfg.name!r}.")
        if out_dtype not in (None, "int8"):
            raise UsageError(f"conv2d: an epilogue writes int8 output, not out_dtype {out_dtype!r}.")
        if epilogue.channels != k:
            raise UsageError(f"conv2d: the epilogue has {epilogue.channels} channels, the conv k={k} output "
                             "channels.")
        out_dtype = "int8"
    narrow = out_dtype == "int8"
    param_rows = epilogue.param_rows if epilogue is not None else 0
    in_b, out_b = cfg.elem_bytes("a_reg"), 1 if narrow else cfg.elem_bytes("acc")
    in_dt, y_dt = str(cfg.dtype("a_reg")), "int8" if narrow else acc_dt
    x_shape, w_shape, y_shape = lay.input_shape(), lay.weight_shape(), (shape.n, shape.p, shape.q, shape.k)
    alloc = DramAllocator(cfg, f"{shape} in the {lay.kind} layout")
    x_addr = alloc.add("X", x_shape, in_dt, "input").addr
    w_addr = alloc.add("W", w_shape, in_dt, "input").addr
    y_addr = alloc.add("Y", y_shape, y_dt, "output").addr
    epi_rows = None
    if epilogue is not None:
        table = epilogue.param_table(cfg.tile)
        epi_rows = EpilogueRows(alloc.add("P", table.shape, acc_dt, "input").addr, epilogue)
    m_g, n_g, k_g = shape.gemm_m, shape.gemm_n, lay.padded_k
    shift = 0
    if narrow and epilogue is None:
        x0 = conv_inputs(shape, integer=True, seed=0)
        shift = calibrate_shift(conv2d_reference(x0["X"], x0["W"], stride=shape.stride, pad=shape.pad,
                                                 dilation=shape.dilation, acc_dtype=cfg.dtype("acc")), relu=False)
    if sched is None:
        tiling = conv_auto_tiling(lay, cfg, out_b, bias=param_rows,
                                  alu_ops=epilogue.alu_ops if epilogue is not None else 0)
        sched = from_tiling(tiling, cfg, name="auto")
    else:
        tiling = apply(sched, m=m_g, n=n_g, k=k_g, cfg=cfg, bias=param_rows)

    emit = Emitter(isa, cfg)
    issued = lower_conv2d(emit, lay, x_addr=x_addr, w_addr=w_addr,
                          out=DenseOutput(y_addr, n_g, out_b, narrow=narrow, shift=shift, name="Y",
                                          relu=epilogue is not None and epilogue.store_relu),
                          tiling=tiling, epilogue=epi_rows)
    words, comments = emit.finish()
    program = Program.build(isa, cfg, words, alloc.tensors)

    compulsory = conv_compulsory_bytes(shape, in_b, out_b) + param_rows * shape.k * cfg.elem_bytes("acc")
    bounds = Bounds(
        io_lower_bound_bytes=compulsory,
        best_tiling_bytes=conv_best_tiling_bytes(lay, cfg, out_b, bias=param_rows),
        roofline_cycles=roofline_cycles(shape.macs, compulsory, cfg),
        padding_ceiling=shape.macs / issued,
        useful_macs=shape.macs,
        issued_macs=issued,
        bound_kind="compulsory",
    )
    nchw = input_layout == "NCHW"

    def make_inputs(seed: int) -> dict[str, np.ndarray]:
        d = conv_inputs(shape, integer=integer, seed=seed)
        if not nchw:
            return d
        return {name: np.ascontiguousarray(a.transpose(0, 3, 1, 2)) for name, a in d.items()}

    def device_order(inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        x, wt = np.asarray(inputs["X"]), np.asarray(inputs["W"])
        return (x.transpose(0, 2, 3, 1), wt.transpose(0, 2, 3, 1)) if nchw else (x, wt)

    def reference(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        # The device's Y is NHWC; an NCHW user gets it transposed on the host (counted, not compared).
        y = conv2d_reference(*device_order(inputs), stride=shape.stride, pad=shape.pad, dilation=shape.dilation,
                             acc_dtype=cfg.dtype("acc"))
        if epilogue is not None:
            return {"Y": epilogue.reference(y)}
        return {"Y": requantize(y, shift, relu=False) if narrow else y}

    def to_device(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        x, wt = device_order(inputs)
        device = {"X": lay.host_input(x), "W": lay.host_weights(wt)}
        if epilogue is not None:
            device["P"] = epilogue.param_table(cfg.tile)
        return device

    model = {"tiling": list(tiling.key()),
             "cycles": estimate(m_g, n_g, k_g, tiling, cfg, in_bytes=in_b, out_bytes=out_b, bias=param_rows,
                                alu_ops=epilogue.alu_ops if epilogue is not None else 0).cycles,
             "dram_bytes": conv_traffic_model(lay, cfg, out_b, bias=param_rows)(tiling)}
    trace = ({"op": IM2COL_OP, "layout": lay.kind,
              "reduction": "(r, s, c)" if lay.kind == "direct" else "(s, r, c)",
              "gemm": {"m": m_g, "n": n_g, "k": shape.gemm_k, "k_padded": k_g}}, *sched.steps)
    return Compiled(
        program=program,
        comments=comments,
        workload={"kind": "conv2d", **shape.kwargs(), "p": shape.p, "q": shape.q, "config": cfg.name,
                  "dtype": "int8" if integer else "fp32", "out_dtype": y_dt,
                  "shift": shift if narrow and epilogue is None else None,
                  "epilogue": epilogue.describe() if epilogue is not None else None, "layout": lay.kind,
                  "input_layout": input_layout,
                  "weight_layout": "KCRS" if nchw else "KRSC", "output_layout": input_layout,
                  "device_layouts": {"X": "NPWRC" if lay.kind == "rowpack" else "NHWC",
                                     "W": "KSRC" if lay.kind == "rowpack" else "KRSC", "Y": "NHWC"},
                  "gemm": {"m": m_g, "n": n_g, "k": shape.gemm_k, "k_padded": k_g}},
        trace=tuple(trace),
        schedule_name=sched.name,
        bounds=bounds,
        host_traffic_bytes=lay.host_traffic_bytes() + _nchw_host_bytes(lay, nchw, out_b),
        make_inputs=make_inputs,
        reference=reference,
        to_device=to_device,
        outputs=("Y",),
        exact=integer,
        compile_seconds=time.perf_counter() - started,
        model=model,
    )


def _nchw_host_bytes(lay: ConvLayout, nchw: bool, out_bytes: int) -> int:
    """Host bytes to serve an NCHW user beyond the layout's own re-layout (0 for NHWC users).

    ``direct`` transposes X and W to NHWC/KRSC (read + write each); ``rowpack``
    already reads X and W once and writes them re-laid, which absorbs the
    transpose.  Either way Y is transposed back to NCHW (read + write).
    """
    if not nchw:
        return 0
    sh = lay.shape
    y = 2 * sh.gemm_m * sh.gemm_n * out_bytes
    if lay.kind == "rowpack":
        return y
    return 2 * (sh.n * sh.c * sh.h * sh.w + sh.k * sh.c * sh.r * sh.s) * lay.elem + y


__all__ = ["compile_conv2d"]
