"""``compile_tvm``: a tensorized TVM schedule as a :class:`~tinynpu.compiler.compiled.Compiled` workload.

The program comes from :func:`~tinynpu.compiler.tvm.program.lower`; the
inputs, the numpy oracle and the yardsticks from the function's parameters.
A function of the GEMM's form (``A[M, K]``, ``B[N, K]`` in, ``C[M, N]`` out,
in the config's types) is recognized as ``C = A @ B^T``: it is verified against
numpy and measured against the GEMM's I/O lower bound and best tiling, as
``tinynpu run matmul`` is.  Any other function needs the numpy ``reference``
of its outputs, and is measured against its compulsory traffic.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tinynpu.assembler.image import Tensor
from tinynpu.compiler.bounds import best_tiling_bytes, matmul_io_lower_bound, roofline_cycles
from tinynpu.compiler.compiled import Arrays, Bounds, Compiled
from tinynpu.compiler.tvm.program import Lowered, lower
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, load_config

Reference = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


def gemm_sizes(tensors: tuple[Tensor, ...], cfg: ArchConfig) -> tuple[int, int, int] | None:
    """``(m, n, k)`` when the tensors are a GEMM's ``A[M, K]``, ``B[N, K]`` -> ``C[M, N]``, else None."""
    ins = [t for t in tensors if t.role == "input"]
    outs = [t for t in tensors if t.role == "output"]
    if len(ins) != 2 or len(outs) != 1 or any(len(t.shape) != 2 for t in tensors):
        return None
    (m, k), (n, k2), (m2, n2) = ins[0].shape, ins[1].shape, outs[0].shape
    types = (ins[0].dtype, ins[1].dtype, outs[0].dtype) == (cfg.input_dtype, cfg.input_dtype, cfg.acc_dtype)
    return (m, n, k) if types and (k, m, n) == (k2, m2, n2) else None


def _gemm_reference(names: tuple[str, str, str], fp: bool) -> Reference:
    a_name, b_name, c_name = names

    def reference(inputs: Mapping[str, np.ndarray]) -> Arrays:
        a, b = np.asarray(inputs[a_name]), np.asarray(inputs[b_name])
        if fp:
            return {c_name: (a.astype(np.float64) @ b.T.astype(np.float64)).astype(np.float32)}
        return {c_name: (a.astype(np.int64) @ b.T.astype(np.int64)).astype(np.int32)}  # wraps as the accumulator

    return reference


def _inputs(tensors: tuple[Tensor, ...]) -> Callable[[int], Arrays]:
    def make_inputs(seed: int) -> Arrays:
        rng = np.random.default_rng(seed)
        out: Arrays = {}
        for t in tensors:
            if t.role != "input":
                continue
            if np.dtype(t.dtype).kind == "f":  # the course's np.random.rand: rtol=1e-5 is meaningful
                out[t.name] = rng.random(t.shape, dtype=np.float32).astype(t.dtype)
            else:
                info = np.iinfo(np.dtype(t.dtype))
                lo, hi = max(info.min, -128), min(info.max, 127)
                out[t.name] = rng.integers(lo, hi + 1, t.shape).astype(t.dtype)
        return out

    return make_inputs


def _checked(reference: Reference, outputs: tuple[Tensor, ...]) -> Callable[[Mapping[str, np.ndarray]], Arrays]:
    def run(inputs: Mapping[str, np.ndarray]) -> Arrays:
        got = dict(reference(inputs))
        for t in outputs:
            if t.name not in got:
                raise UsageError(f"the reference returned no array for output {t.name} (it returned "
                                 f"{', '.join(sorted(got)) or 'none'}).")
            got[t.name] = np.asarray(got[t.name]).astype(t.dtype).reshape(t.shape)
        return got

    return run


def _trace(schedule: Any) -> tuple[dict[str, Any], ...]:
    """The schedule's TVM trace as steps (one line of Python each), or none for a module."""
    trace = getattr(schedule, "trace", None)
    if trace is None:
        return ()
    return tuple({"op": line.split("sch.", 1)[-1].split("(", 1)[0], "python": line} for line in trace.as_python())


def compile_tvm(schedule: Any, *, config: ArchConfig | str = "default", reference: Reference | None = None,
                name: str = "tvm") -> Compiled:
    """Compile a tensorized TVM schedule (``tvm.s_tir.Schedule``, IRModule or PrimFunc) for ``config``.

    Args:
        schedule: The schedule, its module or its PrimFunc.
        config: The config (or its name or YAML path) the schedule was tensorized for.
        reference: ``inputs -> {output name: array}``, the numpy oracle; needed unless the function is a GEMM.
        name: The schedule's name in reports.

    Raises:
        UsageError: TVM missing, a statement the lowering cannot map, or no reference for a function that is
            not a GEMM.
    """
    t0 = time.perf_counter()
    cfg = load_config(config) if isinstance(config, str) else config
    low: Lowered = lower(schedule, cfg)
    outputs = tuple(t for t in low.tensors if t.role == "output")
    gemm = gemm_sizes(low.tensors, cfg)
    fp = not cfg.is_integer
    issued = low.tmm_steps * cfg.tile ** 3
    workload: dict[str, Any] = {"kind": "tvm", "function": name, "config": cfg.name, "config_path": str(cfg.source)}
    if gemm is not None:
        m, n, k = gemm
        in_bytes, out_bytes = cfg.elem_bytes("a_reg"), cfg.elem_bytes("acc")
        io = matmul_io_lower_bound(m, n, k, cfg, in_bytes=in_bytes, out_bytes=out_bytes)
        bounds = Bounds(io, best_tiling_bytes(m, n, k, cfg, in_bytes=in_bytes, out_bytes=out_bytes),
                        roofline_cycles(m * n * k, io, cfg), m * n * k / max(issued, 1), m * n * k, issued, "matmul")
        workload.update(m=m, n=n, k=k)
        if reference is None:
            reference = _gemm_reference((low.tensors[0].name, low.tensors[1].name, outputs[0].name), fp)
    else:
        if reference is None:
            raise UsageError(f"{name}: the function is not a GEMM (A[M, K], B[N, K] -> C[M, N]), so tinynpu has no "
                             "numpy reference for it; give one (reference(inputs) -> {output name: array}).")
        compulsory = sum(t.nbytes for t in low.tensors)
        bounds = Bounds(compulsory, compulsory, roofline_cycles(issued, compulsory, cfg), 1.0, issued, issued,
                        "compulsory")
    workload.update({t.name: "x".join(map(str, t.shape)) + f" {t.dtype}" for t in low.tensors})
    return Compiled(program=low.program, comments=low.comments, workload=workload, trace=_trace(schedule),
                    bounds=bounds, host_traffic_bytes=0, make_inputs=_inputs(low.tensors),
                    reference=_checked(reference, outputs), outputs=tuple(t.name for t in outputs), exact=not fp,
                    compile_seconds=time.perf_counter() - t0, schedule_name=name)


__all__ = ["compile_tvm", "gemm_sizes"]
