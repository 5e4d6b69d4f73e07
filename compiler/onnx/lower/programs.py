"""Accelerator programs: each accelerator step becomes a workload of the existing compiler, cached by shape.

A network layer is compiled by :func:`~tinynpu.compiler.conv2d.compile_conv2d`
or :func:`~tinynpu.compiler.matmul.compile_matmul` (int8 operands, int32
int8 output): no second tiler.  The layer's epilogue (bias, per-channel
``vrequantf`` with onnxruntime's binary32 scale, zero point, relu/clip) runs
in the program (:class:`~tinynpu.compiler.epilogue.Epilogue`), its parameter
rows written to DRAM as data, so programs are cached by shape and epilogue
form: a shape that recurs (ResNet-50 has 53 convolutions of 20 shapes) is
compiled once and re-run with the next layer's data and parameters.  A
residual add's program comes from :mod:`.eltwise`.

This module only builds and names programs; running them is the runtime's job
(:mod:`~tinynpu.compiler.onnx.runtime.layers`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.compiler.compiled import Compiled
from tinynpu.compiler.epilogue import Epilogue as NpuEpilogue
from tinynpu.compiler.onnx.ir import NPU, AddStep, ConvStep, GemmStep, MatmulStep, Network, NonlinearStep, ProductStep
from tinynpu.isa import ArchConfig, load_isa
from tinynpu.simulator.decode import Decoded, decode_program

#: A cached program's key: the workload, its shape and its epilogue form.
ProgramKey = tuple[Any, ...]


@dataclass
class ProgramCache:
    """Compiled programs by workload key, each decoded once, with the time spent compiling and decoding.

    The simulator decodes and checks a program's every word when it loads it; the runtime loads
    one compiled program several times (each relocation into the DRAM image, each image-less
    run), and relocation changes only its DRAM addresses.  So each compiled program is decoded
    once here (:attr:`decode_seconds`, reported apart from compiling) and every load of it decodes
    only the words that differ (:meth:`~tinynpu.simulator.Machine.load`'s ``like``).
    """

    cfg: ArchConfig
    programs: dict[ProgramKey, Compiled] = field(default_factory=dict)
    compile_seconds: float = 0.0
    decode_seconds: float = 0.0
    _decoded: dict[int, Decoded] = field(default_factory=dict)  # id of a cached Compiled's program -> its decoding
    #: A matmul between two activations (attention's) has its N and K rounded up to a multiple of this,
    #: its operands zero-padded (both zero points are 0, so the sums are exact): one program then serves
    #: that many lengths of a growing KV cache.  1: every shape its own program.
    matmul_bucket: int = 1

    def get(self, key: ProgramKey, build: Callable[[], Compiled]) -> Compiled:
        hit = self.programs.get(key)
        if hit is None:
            t0 = time.perf_counter()
            hit = build()
            self.compile_seconds += time.perf_counter() - t0
            self.programs[key] = hit
            t0 = time.perf_counter()
            program = hit.program
            self._decoded[id(program)] = decode_program(load_isa(), self.cfg, program.words, program.columns)
            self.decode_seconds += time.perf_counter() - t0
        return hit

    def decoded(self, program: Program) -> Decoded | None:
        """The decoding of ``program`` if it is one of the cached programs (None: not compiled here)."""
        return self._decoded.get(id(program))


def groups_per_program(groups: int, c_per_group: int, tile: int) -> int:
    """How many of a grouped conv's groups one program runs, their kernels block-diagonal.

    The largest divisor of ``groups`` whose groups' input channels together fit one
    reduction tile (1 when one group alone fills it).  One group alone would leave all but
    its own channels' reduction lanes zero and, with few output channels, most output
    columns empty; packed, the lanes and columns fill, and each output channel still uses
    only its own group's lanes, which is what the report's padding ceiling shows
    (docs/onnx.md, "A network run", argues the choice).
    """
    return max(d for d in range(1, groups + 1) if groups % d == 0 and (d == 1 or d * c_per_group <= tile))


def conv_programs(step: ConvStep, tile: int) -> int:
    """How many programs a conv step runs (one per set of packed groups)."""
    return step.group // groups_per_program(step.group, step.weight.shape[3], tile)


def block_diagonal(w_krsc: np.ndarray, groups: int, per_program: int, index: int) -> np.ndarray:
    """The KRSC kernel of program ``index`` of a grouped conv: its ``per_program`` groups' kernels on the diagonal.

    ``w_krsc`` is the layer's ``K x R x S x C/groups`` kernel; the result is dense
    ``per_program*K/groups x R x S x per_program*C/groups``, zero off the diagonal blocks.
    """
    k_per, c_per = w_krsc.shape[0] // groups, w_krsc.shape[3]
    out = np.zeros((per_program * k_per, *w_krsc.shape[1:3], per_program * c_per), dtype=w_krsc.dtype)
    for j in range(per_program):
        g = index * per_program + j
        out[j * k_per:(j + 1) * k_per, :, :, j * c_per:(j + 1) * c_per] = w_krsc[g * k_per:(g + 1) * k_per]
    return out


def conv_program(cache: ProgramCache, n: int, c: int, h: int, w: int, k: int, r: int, s: int, *, step: ConvStep,
                 epilogue: NpuEpilogue) -> tuple[ProgramKey, Compiled]:
    """The program of one conv shape (strides, pads, dilations from ``step``), by shape and epilogue form.

    The epilogue's parameter rows are data, so layers that differ only in them share the program.
    """
    from tinynpu.compiler.conv2d import compile_conv2d
    from tinynpu.compiler.conv_shape import ConvShape

    shape = ConvShape(n=n, c=c, h=h, w=w, k=k, r=r, s=s, stride=step.strides, pad=step.pads,
                      dilation=step.dilations)
    key = ("conv2d", *shape.kwargs().values(), _epilogue_form(epilogue))
    return key, cache.get(key, lambda: compile_conv2d(**shape.kwargs(), dtype="int8", cfg=cache.cfg,
                                                      epilogue=epilogue))


def gemm_program(cache: ProgramCache, m: int, n: int, k: int, *,
                 epilogue: NpuEpilogue) -> tuple[ProgramKey, Compiled]:
    """The program of one GEMM shape, by shape and epilogue form (its parameter rows are data)."""
    from tinynpu.compiler.matmul import compile_matmul

    key = ("matmul", m, n, k, _epilogue_form(epilogue))
    return key, cache.get(key, lambda: compile_matmul(m, n, k, dtype="int8", cfg=cache.cfg, epilogue=epilogue))


def _epilogue_form(epi: NpuEpilogue) -> str:
    """What of an epilogue the instructions depend on (the rows it loads, the ALU ops it runs), as a name."""
    return "_".join(["int8", epi.requantizer, *(["bias"] if epi.bias is not None else []),
                     *(["zp"] if epi.zero_point else []),
                     f"clamp{epi.lo}to{epi.hi}"])


def matmul_dims(cache: ProgramCache, m: int, n: int, k: int) -> tuple[int, int, int]:
    """The (M, N, K) a matmul between two activations is compiled for (N, K: whole ``matmul_bucket``s)."""
    b = cache.matmul_bucket
    return m, -(-n // b) * b, -(-k // b) * b


def padded_epilogue(epi: Any, n: int, n_pad: int) -> Any:
    """``epi`` (an :class:`~tinynpu.compiler.onnx.intops.Epilogue`) of a layer with ``n`` output channels for
    ``n_pad``: the padding channels repeat the last one's parameters (their outputs are dropped)."""
    from dataclasses import replace

    epi = epi.channels(n)

    def pad(v: np.ndarray | None) -> np.ndarray | None:
        return None if v is None else np.pad(v, (0, n_pad - n), mode="edge")

    return replace(epi, bias=pad(epi.bias), scale=pad(epi.scale))


@dataclass(frozen=True)
class MatmulProgram:
    """The program a matmul between two activations runs: compiled for ``n`` x ``k`` (whole
    ``matmul_bucket``s, at least the step's own), with the step's epilogue padded to ``n`` channels."""

    key: ProgramKey
    compiled: Compiled
    n: int
    k: int
    epilogue: Any  # an onnx.intops.Epilogue of n channels (the padding ones repeat the last)


def matmul_program(cache: ProgramCache, epi: Any, m: int, n: int, k: int) -> MatmulProgram:
    """The program of a matmul step of ``m`` x ``k`` by ``k`` x ``n`` with epilogue ``epi`` (intops), the one
    :func:`compile_programs` compiles and the runtime runs (its operands zero-padded when bucketed)."""
    _, n_pad, k_pad = matmul_dims(cache, m, n, k)
    padded = padded_epilogue(epi, n, n_pad)
    key, compiled = gemm_program(cache, m, n_pad, k_pad, epilogue=padded.on_accelerator())
    return MatmulProgram(key, compiled, n_pad, k_pad, padded)


def rows_and_channels(shape: tuple[int, ...]) -> tuple[int, int]:
    """A tensor as the image holds it: (pixels, channels) for NCHW (stored NHWC), else (rows, last dim)."""
    if len(shape) == 4:
        return shape[0] * shape[2] * shape[3], shape[1]
    return int(np.prod(shape[:-1])), shape[-1]


def add_program_key(cache: ProgramCache, step: AddStep | ProductStep, shape: tuple[int, ...]) -> ProgramKey:
    """The cached program of a residual add (or product) step on tensors of ``shape`` (as the image lays them out)."""
    from tinynpu.compiler.onnx.lower.eltwise import add_compiled, product_compiled

    pixels, channels = rows_and_channels(shape)
    if isinstance(step, ProductStep):
        gate = step.gate
        key: ProgramKey = ("product", pixels, channels, step.scale, None if gate is None else gate.tobytes())
        cache.get(key, lambda: product_compiled(cache.cfg, pixels, channels, step.scale, gate))
        return key
    if step.scales is None:  # never: an accelerator add step has its scales (ir.AddStep checks)
        raise RuntimeError(f"add step {step.name!r} has no fixed-point scales")
    scales = step.scales
    key = ("add", pixels, channels, scales, step.relu)
    cache.get(key, lambda: add_compiled(cache.cfg, pixels, channels, scales, relu=step.relu))
    return key


def compile_programs(net: Network, cache: ProgramCache) -> dict[str, tuple[ProgramKey, ...]]:
    """Compile every accelerator step's programs (each distinct shape and epilogue form once).

    Returns:
        Each accelerator step's program keys, by step name (a conv's one per set of packed groups).
    """
    out: dict[str, tuple[ProgramKey, ...]] = {}
    for step in net.steps:
        if step.where != NPU:
            continue
        if isinstance(step, (AddStep, ProductStep)):
            out[step.name] = (add_program_key(cache, step, net.shapes[step.inputs[0]]),)
        elif isinstance(step, NonlinearStep):
            from tinynpu.compiler.onnx.lower.nonlinear import program_key

            out[step.name] = (program_key(cache, step, net.shapes[step.inputs[0]]),)
        elif isinstance(step, ConvStep):
            n, _, h, w = net.shapes[step.inputs[0]]
            k, r, s, cg = step.weight.shape
            per = groups_per_program(step.group, cg, cache.cfg.tile)
            kp = k // step.group * per
            out[step.name] = tuple(
                conv_program(cache, n, cg * per, h, w, kp, r, s, step=step,
                             epilogue=step.epilogue.channels(k, slice(i * kp, (i + 1) * kp)).on_accelerator())[0]
                for i in range(step.group // per))
        elif isinstance(step, GemmStep):
            shape = net.shapes[step.inputs[0]]
            if step.trans_a:
                shape = shape[::-1]
            n_out = step.weight.shape[0]
            out[step.name] = (gemm_program(cache, int(np.prod(shape[:-1])), n_out, shape[-1],
                                           epilogue=step.epilogue.channels(n_out).on_accelerator())[0],)
        elif isinstance(step, MatmulStep):
            a, b = step.operand_shapes(net.shapes)
            out[step.name] = (matmul_program(cache, step.epilogue, a[-2], b[-1], a[-1]).key,)
    return out


__all__ = ["MatmulProgram", "ProgramCache", "ProgramKey", "add_program_key", "block_diagonal", "compile_programs",
           "conv_program", "conv_programs", "gemm_program", "groups_per_program", "matmul_dims", "matmul_program",
           "padded_epilogue", "rows_and_channels"]
