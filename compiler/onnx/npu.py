"""Accelerator layers: each conv/GEMM step becomes a workload of the existing compiler, run on the simulator.

A network layer is compiled by :func:`~tinynpu.compiler.conv2d.compile_conv2d`
or :func:`~tinynpu.compiler.matmul.compile_matmul` (int8 operands, int32
int8 output): no second tiler.  The layer's epilogue (bias, per-channel
``vrequantf`` with onnxruntime's binary32 scale, zero point, relu/clip) runs
in the program (:class:`~tinynpu.compiler.epilogue.Epilogue`), its parameter
rows written to DRAM as data, so programs are cached by shape and epilogue
form: a shape that recurs (ResNet-50 has 53 convolutions of 20 shapes) is
compiled once and re-run with the next layer's data and parameters.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynpu.compiler.compiled import Compiled
from tinynpu.compiler.epilogue import Epilogue as NpuEpilogue
from tinynpu.compiler.onnx.graph import Step
from tinynpu.compiler.onnx.image import DramImage, read_pitched
from tinynpu.compiler.onnx.intops import Epilogue, conv_int32_general, gemm_int32
from tinynpu.isa import ArchConfig


@dataclass
class LayerRun:
    """What one accelerator layer cost (summed over its programs: groups, batch entries)."""

    cycles: int = 0
    macs: int = 0
    issued_macs: int = 0
    dram_bytes: int = 0
    compulsory_bytes: int = 0
    host_bytes: int = 0
    programs: int = 0
    output_in_image: bool = False  # the program stored the step's output at its place in the DRAM image
    groups_per_program: int = 1  # a grouped conv's groups one program runs (block-diagonal kernel)
    note: str = ""  # what a host step did, where its reason alone would not say (the report's note)
    sim_seconds: float = 0.0


@dataclass
class ProgramCache:
    """Compiled programs by workload key, with the time spent compiling."""

    cfg: ArchConfig
    programs: dict[tuple[Any, ...], Compiled] = field(default_factory=dict)
    compile_seconds: float = 0.0

    def get(self, key: tuple[Any, ...], build: Callable[[], Compiled]) -> Compiled:
        hit = self.programs.get(key)
        if hit is None:
            t0 = time.perf_counter()
            hit = build()
            self.compile_seconds += time.perf_counter() - t0
            self.programs[key] = hit
        return hit


def groups_per_program(groups: int, c_per_group: int, tile: int) -> int:
    """How many of a grouped conv's groups one program runs, their kernels block-diagonal.

    The largest divisor of ``groups`` whose groups' input channels together fit one
    reduction tile (1 when one group alone fills it).  One group alone would leave all but
    its own channels' reduction lanes zero and, with few output channels, most output
    columns empty; packed, the lanes and columns fill, and each output channel still uses
    only its own group's lanes, which is what the report's padding ceiling shows
    (README, "A network run", argues the choice).
    """
    return max(d for d in range(1, groups + 1) if groups % d == 0 and (d == 1 or d * c_per_group <= tile))


def conv_places(image: DramImage, step: Step, comp: Compiled, index: int,
                programs: int) -> tuple[tuple[int, int | None] | None, tuple[int, int | None]]:
    """Where program ``index`` of a conv step's ``programs`` reads its input and writes its output in
    the DRAM image: (address, pitch) each, the input None when the host stages it.

    A program writes in place, and reads in place in the ``direct`` layout (``rowpack`` reads the
    host's re-laid copy).  The programs of a layer's groups each read and write their own channels
    of every pixel: at their channel offset, with the whole tensor's pixel as the pitch; a layer's
    output that a concatenation joins is its slice of the joined pixel.
    """
    x_t, y_t = comp.program.tensor("X"), comp.program.tensor("Y")
    c_part, k_part = x_t.shape[-1], y_t.shape[-1]
    grouped = programs > 1
    x_place = None
    if comp.workload["layout"] == "direct":
        x_addr = image.address(step.inputs[0], x_t.nbytes * programs)
        if x_addr is not None:
            x_place = (x_addr + index * c_part, c_part * programs if grouped else None)
    y_addr = image.address(step.outputs[0], y_t.nbytes * programs)
    if y_addr is None:  # never: a conv's int8 output is always planned
        raise RuntimeError(f"conv step {step.name!r}: its output {step.outputs[0]!r} has no place in the image")
    sl = image.slice_of(step.outputs[0])
    y_pitch = sl.pitch if sl is not None else k_part * programs if grouped else None
    return x_place, (y_addr + index * k_part, y_pitch)


def gemm_in_place(step: Step, input_shape: tuple[int, ...]) -> tuple[bool, bool]:
    """Whether a Gemm/MatMul-by-weights layer reads its input and writes its output at their planned places.

    A 2-D activation is the GEMM's A and C as the image holds them; Gemm's transA has the
    host transpose A first (staged).
    """
    flat = len(input_shape) == 2
    return flat and not step.attrs["trans_a"], flat


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


def conv_program(cache: ProgramCache, n: int, c: int, h: int, w: int, k: int, r: int, s: int, *, step: Step,
                 epilogue: NpuEpilogue) -> tuple[tuple[Any, ...], Compiled]:
    """The program of one conv shape (strides, pads, dilations from ``step``), by shape and epilogue form.

    The epilogue's parameter rows are data, so layers that differ only in them share the program.
    """
    from tinynpu.compiler.conv2d import compile_conv2d
    from tinynpu.compiler.conv_shape import ConvShape

    shape = ConvShape(n=n, c=c, h=h, w=w, k=k, r=r, s=s, stride=tuple(step.attrs["strides"]),
                      pad=tuple(step.attrs["pads"]), dilation=tuple(step.attrs["dilations"]))
    key = ("conv2d", *shape.kwargs().values(), _epilogue_form(epilogue))
    return key, cache.get(key, lambda: compile_conv2d(**shape.kwargs(), dtype="int8", cfg=cache.cfg,
                                                      epilogue=epilogue))


def gemm_program(cache: ProgramCache, m: int, n: int, k: int, *,
                 epilogue: NpuEpilogue) -> tuple[tuple[Any, ...], Compiled]:
    """The program of one GEMM shape, by shape and epilogue form (its parameter rows are data)."""
    from tinynpu.compiler.matmul import compile_matmul

    key = ("matmul", m, n, k, _epilogue_form(epilogue))
    return key, cache.get(key, lambda: compile_matmul(m, n, k, dtype="int8", cfg=cache.cfg, epilogue=epilogue))


def _epilogue_form(epi: NpuEpilogue) -> str:
    """What of an epilogue the instructions depend on (the rows it loads, the ALU ops it runs), as a name."""
    return "_".join(["int8", epi.requantizer, *(["bias"] if epi.bias is not None else []),
                     *(["zp"] if epi.zero_point else []),
                     f"clamp{epi.lo}to{epi.hi}"])


def conv_layer(step: Step, x_nchw: np.ndarray, *, cache: ProgramCache | None, run: LayerRun,
               image: DramImage | None = None) -> np.ndarray:
    """int8 outputs (N, P, Q, K) of a conv step; ``cache`` None = the numpy reference.

    On the accelerator the layer's epilogue runs in its program.  With an ``image``, each
    program reads its input and writes its output at their planned places in the network's
    DRAM image (the input in the ``direct`` layout; else through the staging area).
    """
    a = step.attrs
    w = a["weight"]  # K x R x S x C/g
    g = a["group"]
    epi: Epilogue = a["epilogue"]
    x = np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1))
    k_per, c_per = w.shape[0] // g, x.shape[3] // g
    if cache is None or step.where != "npu":
        accs = [conv_int32_general(x[..., gi * c_per:(gi + 1) * c_per], w[gi * k_per:(gi + 1) * k_per], a["pads"],
                                   a["strides"], a["dilations"]) for gi in range(g)]
        return epi.apply(accs[0] if g == 1 else np.concatenate(accs, axis=3))
    per = groups_per_program(g, c_per, cache.cfg.tile)
    programs = g // per
    run.groups_per_program = per
    outs = []
    for pi in range(programs):
        xg = x[..., pi * per * c_per:(pi + 1) * per * c_per]
        ks = slice(pi * per * k_per, (pi + 1) * per * k_per)
        wg = block_diagonal(w, g, per, pi) if g > 1 else w
        part = epi.channels(w.shape[0], ks)
        npu_epi = part.on_accelerator()
        n, h, wd, c = xg.shape
        k, r, s, _ = wg.shape
        key, comp = conv_program(cache, n, c, h, wd, k, r, s, step=step, epilogue=npu_epi)
        if image is None:
            run.host_bytes += 2 * xg.nbytes  # NCHW -> NHWC
            y = _simulate(comp, {"X": xg, "W": wg}, "Y", npu_epi, cache.cfg, run, packed=per)
        else:
            y = _conv_in_image(image, step, pi, key, comp, xg, wg, npu_epi, programs, run, per)
        outs.append(y)
    return outs[0] if programs == 1 else np.concatenate(outs, axis=3)


def _conv_in_image(image: DramImage, step: Step, gi: int, key: tuple[Any, ...], comp: Compiled, xg: np.ndarray,
                   wg: np.ndarray, npu_epi: NpuEpilogue, programs: int, run: LayerRun,
                   packed: int) -> np.ndarray:
    """One conv program run in the DRAM image: weights once, its input in place or staged and its
    output in place (:func:`conv_places`)."""
    bases: dict[str, int] = {}
    pitches: dict[str, int] = {}
    staged: dict[str, np.ndarray] = {}
    x_place, (bases["Y"], y_pitch) = conv_places(image, step, comp, gi, programs)
    w_key = (step.name, f"W{gi}")
    if x_place is None or w_key not in image.weights:
        device = comp.to_device({"X": xg, "W": wg})
        image.weight(w_key, device["W"])
        if x_place is None:
            staged["X"] = device["X"]
            run.host_bytes += 2 * xg.nbytes + comp.host_traffic_bytes
    if x_place is not None:
        bases["X"], x_pitch = x_place
        if x_pitch is not None:
            pitches["X"] = x_pitch
    if y_pitch is not None:
        pitches["Y"] = y_pitch
    bases["W"] = image.weights[w_key]
    bases["P"] = image.weight((step.name, f"P{gi}"), npu_epi.param_table(image.cfg.tile))
    run.output_in_image = True
    return _simulate(comp, staged, "Y", npu_epi, image.cfg, run, image=image, key=(*key, step.name, gi),
                     bases=bases, pitches=pitches, packed=packed)


def gemm_layer(a2d: np.ndarray, w_nk: np.ndarray, epi: Epilogue, *, cache: ProgramCache | None,
               run: LayerRun, image: DramImage | None = None, names: tuple[str, str, str] | None = None) -> np.ndarray:
    """int8 ``epilogue(a2d @ w_nk.T)`` on the simulator (``cache``) or in numpy (None).

    With an ``image``: ``names`` = (step, input, output) when the weights are the step's own
    (laid out once) and the input and output are 2-D activations read and written in place;
    else the operands are staged.
    """
    if cache is None:
        return epi.apply(gemm_int32(a2d, w_nk))
    m, k = a2d.shape
    n = w_nk.shape[0]
    epi = epi.channels(n)
    npu_epi = epi.on_accelerator()
    key, comp = gemm_program(cache, m, n, k, epilogue=npu_epi)
    if image is None:
        y = _simulate(comp, {"A": np.ascontiguousarray(a2d), "B": np.ascontiguousarray(w_nk)}, "C", npu_epi,
                      cache.cfg, run)
        return y
    staged: dict[str, np.ndarray] = {}
    bases: dict[str, int] = {}
    a_addr = image.address(names[1], a2d.nbytes) if names else None
    c_addr = image.address(names[2], comp.program.tensor("C").nbytes) if names else None
    if a_addr is not None:
        bases["A"] = a_addr
    else:
        staged["A"] = np.ascontiguousarray(a2d)
        run.host_bytes += 2 * a2d.nbytes
    if names:
        bases["B"] = image.weight((names[0], "B"), np.ascontiguousarray(w_nk))
    else:
        staged["B"] = np.ascontiguousarray(w_nk)
        run.host_bytes += 2 * w_nk.nbytes
    table = npu_epi.param_table(image.cfg.tile)
    if names:
        bases["P"] = image.weight((names[0], "P"), table)
    else:
        staged["P"] = table
    if c_addr is not None:
        bases["C"] = c_addr
        run.output_in_image = True
    y = _simulate(comp, staged, "C", npu_epi, image.cfg, run, image=image, key=(*key, *(names or ("",))),
                  bases=bases)
    return y


def add_program_key(cache: ProgramCache, step: Step, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """The cached program of a residual add step on tensors of ``shape`` (as the image lays them out)."""
    from tinynpu.compiler.onnx.eltwise import add_compiled

    a = step.attrs
    pixels, channels = _rows_and_channels(shape)
    key = ("add", pixels, channels, a["scales"], a["relu"])
    cache.get(key, lambda: add_compiled(cache.cfg, pixels, channels, a["scales"], relu=a["relu"]))
    return key


def _rows_and_channels(shape: tuple[int, ...]) -> tuple[int, int]:
    """A tensor as the image holds it: (pixels, channels) for NCHW (stored NHWC), else (rows, last dim)."""
    if len(shape) == 4:
        return shape[0] * shape[2] * shape[3], shape[1]
    return int(np.prod(shape[:-1])), shape[-1]


def add_layer(step: Step, xs: list[np.ndarray], *, cache: ProgramCache | None, run: LayerRun,
              image: DramImage | None = None) -> np.ndarray:
    """A residual add step's int8 output (the inputs' shape); ``cache`` None = the numpy reference."""
    from tinynpu.compiler.onnx.eltwise import FRACTION_BITS, add_parameters, add_reference
    from tinynpu.compiler.onnx.image import from_image_layout, image_layout

    a = step.attrs
    if cache is None:
        return add_reference(xs, a["scales"], relu=a["relu"])
    key = add_program_key(cache, step, xs[0].shape)
    comp = cache.programs[key]
    run.note = ("residual add on the accelerator: each input through tmm with an identity tile, scaled to "
                f"{FRACTION_BITS} bits below the point (vmul, vrequant), summed (vadd), rounded by the store")
    params = {"I": np.eye(cache.cfg.tile, dtype=np.int8), "P": add_parameters(a["scales"], cache.cfg.tile)}
    if image is None:
        inputs = {f"X{i}": image_layout(x).reshape(comp.program.tensor("X0").shape) for i, x in enumerate(xs)}
        y = _simulate(comp, inputs | params, "Y", None, cache.cfg, run)
    else:
        places = {f"X{i}": image.address(name, x.nbytes) for i, (name, x) in enumerate(zip(step.inputs, xs,
                                                                                         strict=True))}
        places["Y"] = image.address(step.outputs[0], xs[0].nbytes)
        bases = {k: v for k, v in places.items() if v is not None}
        if len(bases) < len(places):  # never: the planner places every int8 activation
            raise RuntimeError(f"add step {step.name!r}: an operand has no place in the image")
        bases |= {name: image.weight((step.name, name), value) for name, value in params.items()}
        run.output_in_image = True
        y = _simulate(comp, {}, "Y", None, cache.cfg, run, image=image, key=(*key, step.name), bases=bases)
    return from_image_layout(y.reshape(-1), xs[0].shape)


def _simulate(comp: Compiled, inputs: dict[str, np.ndarray], out: str, epi: NpuEpilogue | None, cfg: ArchConfig,
              run: LayerRun, *, image: DramImage | None = None, key: tuple[Any, ...] = (),
              bases: dict[str, int] | None = None, pitches: dict[str, int] | None = None,
              packed: int = 1) -> np.ndarray:
    """Run one program: on a fresh machine from the user-layout ``inputs``, or in ``image``.

    In the image the program is relocated to ``bases`` (and ``pitches``:
    :func:`~tinynpu.compiler.onnx.image.relocate`); a tensor without a base gets room in the
    staging area, and ``inputs`` are then the device-layout tensors the host writes there.
    ``packed`` groups of a conv run block-diagonal in the program: only one in ``packed`` of
    its MACs and weight bytes is the layer's own, and only those are counted as useful.  ``epi``
    None: a program without an epilogue's parameter rows (a residual add's come in ``inputs``).
    """
    from tinynpu.simulator import Machine

    if image is None:
        machine = Machine(cfg)
        program = comp.program
        machine.load(program)
        device = comp.to_device(inputs)
        if epi is not None:  # this layer's parameter rows (the program was compiled for the shape)
            device["P"] = epi.param_table(cfg.tile)
    else:
        bases = dict(bases or {})
        for t in comp.program.tensors:
            if t.name not in bases:
                bases[t.name] = image.stage(None, t.nbytes)
        program = image.program(key, comp.program, bases, pitches)
        machine = image.machine
        machine.load(program)
        device = inputs
    for name, arr in device.items():
        machine.write_tensor(name, arr)
    t0 = time.perf_counter()
    stats = machine.run(check_races=False).to_json()
    run.sim_seconds += time.perf_counter() - t0
    run.cycles += int(stats["cycles"])
    run.macs += comp.bounds.useful_macs // packed
    run.issued_macs += comp.bounds.issued_macs
    run.dram_bytes += int(stats["dram_read_bytes"]) + int(stats["dram_write_bytes"])
    if pitches and out in pitches:
        t = program.tensor(out)
        rows = int(np.prod(t.shape[:-1]))
        y = read_pitched(machine, t.addr, rows, t.nbytes // rows, pitches[out])[:, :t.nbytes // rows]
        y = np.ascontiguousarray(y).view(t.dtype).reshape(t.shape)
    else:
        y = machine.read_tensor(out)
    run.compulsory_bytes += comp.bounds.io_lower_bound_bytes if comp.bounds.bound_kind == "compulsory" or \
        epi is None else \
        sum(t.nbytes for t in program.tensors if t.name != "P") + \
        epi.param_rows * epi.channels * cfg.elem_bytes("acc")
    if packed > 1:  # the zero blocks of the kernel are no compulsory traffic
        run.compulsory_bytes -= program.tensor("W").nbytes * (packed - 1) // packed
    run.host_bytes += comp.host_traffic_bytes if image is None else 0
    run.programs += 1
    return y


__all__ = ["LayerRun", "ProgramCache", "add_layer", "add_program_key", "block_diagonal", "conv_layer",
           "conv_places", "conv_program", "gemm_in_place",
           "gemm_layer", "gemm_program", "groups_per_program"]
