"""Accelerator steps run on the simulator: each program with its operands in place, or on a fresh machine.

A layer's programs come from the lowering (:mod:`~tinynpu.compiler.onnx.lower.programs`);
here they run.  With the network's DRAM image, a program reads its input and
writes its output at their planned places (:func:`conv_places`,
:func:`gemm_in_place`); an operand the program cannot read in place is
re-laid by the host into the staging area.  Without an :class:`Accelerator`
the same functions compute the numpy integer reference
(:mod:`~tinynpu.compiler.onnx.intops`), so the two runs are compared bit for bit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynpu.compiler.compiled import Compiled
from tinynpu.compiler.epilogue import Epilogue as NpuEpilogue
from tinynpu.compiler.onnx.intops import Epilogue, conv_int32_general, gemm_int32
from tinynpu.compiler.onnx.ir import NPU, AddStep, ConvStep, GemmStep, ProductStep
from tinynpu.compiler.onnx.lower.eltwise import TermScale
from tinynpu.compiler.onnx.lower.programs import (
    ProgramCache,
    ProgramKey,
    add_program_key,
    block_diagonal,
    conv_program,
    gemm_program,
    groups_per_program,
)
from tinynpu.compiler.onnx.runtime.image import DramImage, read_pitched
from tinynpu.simulator.stats import Stats


@dataclass
class LayerRun:
    """What one step cost (an accelerator layer's summed over its programs: groups, batch entries)."""

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
    #: loading its programs: relocating them into the image and the simulator's decoding and checking (once per
    #: program and image; the first run's), apart from the host's work
    load_seconds: float = 0.0
    energy_breakdown_pj: dict[str, float] = field(default_factory=dict)  # summed over the step's programs
    #: cycles each unit (load, tensor, alu, store, control) was busy, summed over the step's programs: what an
    #: element-wise program's utilization is measured by (it issues no MACs)
    busy_cycles: dict[str, int] = field(default_factory=dict)

    @property
    def energy_pj(self) -> float:
        return sum(self.energy_breakdown_pj.values())


@dataclass(frozen=True)
class Accelerator:
    """Where accelerator steps run: the compiled programs, in the network's DRAM image (None: each
    program on a fresh machine), with the simulator's data-race sanitizer on or off."""

    cache: ProgramCache
    image: DramImage | None = None
    check_races: bool = False
    #: linking (:mod:`.link`): each program is relocated into the image and checked, not run (its output
    #: reads as zeros)
    link_only: bool = False


def conv_places(image: DramImage, step: ConvStep, comp: Compiled, index: int,
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


def gemm_in_place(step: GemmStep, input_shape: tuple[int, ...]) -> tuple[bool, bool]:
    """Whether a Gemm/MatMul-by-weights layer reads its input and writes its output at their planned places.

    A 2-D activation is the GEMM's A and C as the image holds them; Gemm's transA has the
    host transpose A first (staged).
    """
    flat = len(input_shape) == 2
    return flat and not step.trans_a, flat


def conv_layer(step: ConvStep, x_nchw: np.ndarray, *, npu: Accelerator | None, run: LayerRun) -> np.ndarray:
    """int8 outputs (N, P, Q, K) of a conv step; ``npu`` None = the numpy reference.

    On the accelerator the layer's epilogue runs in its program.  In the DRAM image, each
    program reads its input and writes its output at their planned places (the input in the
    ``direct`` layout; else through the staging area).
    """
    w, g = step.weight, step.group  # K x R x S x C/g
    x = np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1))
    k_per, c_per = w.shape[0] // g, x.shape[3] // g
    if npu is None or step.where != NPU:
        accs = [conv_int32_general(x[..., gi * c_per:(gi + 1) * c_per], w[gi * k_per:(gi + 1) * k_per], step.pads,
                                   step.strides, step.dilations) for gi in range(g)]
        return step.epilogue.apply(accs[0] if g == 1 else np.concatenate(accs, axis=3))
    per = groups_per_program(g, c_per, npu.cache.cfg.tile)
    programs = g // per
    run.groups_per_program = per
    outs = []
    for pi in range(programs):
        xg = x[..., pi * per * c_per:(pi + 1) * per * c_per]
        wg = block_diagonal(w, g, per, pi) if g > 1 else w
        npu_epi = step.epilogue.channels(w.shape[0], slice(pi * per * k_per, (pi + 1) * per * k_per)).on_accelerator()
        n, h, wd, c = xg.shape
        k, r, s, _ = wg.shape
        key, comp = conv_program(npu.cache, n, c, h, wd, k, r, s, step=step, epilogue=npu_epi)
        if npu.image is None:
            run.host_bytes += 2 * xg.nbytes  # NCHW -> NHWC
            y = _simulate(npu, comp, {"X": xg, "W": wg}, "Y", npu_epi, run, packed=per)
        else:
            y = _conv_in_image(npu, npu.image, step, (pi, programs, per), key, comp, xg, wg, npu_epi, run)
        outs.append(y)
    return outs[0] if programs == 1 else np.concatenate(outs, axis=3)


def _conv_in_image(npu: Accelerator, image: DramImage, step: ConvStep, which: tuple[int, int, int],
                   key: ProgramKey, comp: Compiled, xg: np.ndarray, wg: np.ndarray, npu_epi: NpuEpilogue,
                   run: LayerRun) -> np.ndarray:
    """Program ``which = (index, programs, groups packed)`` of a conv run in the DRAM image: weights
    once, its input in place or staged and its output in place (:func:`conv_places`)."""
    gi, programs, packed = which
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
    return _simulate(npu, comp, staged, "Y", npu_epi, run, key=(*key, step.name, gi), bases=bases,
                     pitches=pitches, packed=packed)


def gemm_layer(a2d: np.ndarray, w_nk: np.ndarray, epi: Epilogue, *, npu: Accelerator | None,
               run: LayerRun, names: tuple[str, str, str] | None = None,
               owner: tuple[Any, ...] = ()) -> np.ndarray:
    """int8 ``epilogue(a2d @ w_nk.T)`` on the simulator (``npu``) or in numpy (None).

    In the DRAM image: ``names`` = (step, input, output) when the weights are the step's own
    (laid out once) and the input and output are 2-D activations read and written in place;
    else the operands are staged.  ``owner``: the step whose epilogue ``epi`` is and what else ``epi`` was made
    for (an attention head's product: the step's own shape), when ``names`` is not given, so the program and
    parameter rows are made once.
    """
    if npu is None:
        return epi.apply(gemm_int32(a2d, w_nk))
    m, k = a2d.shape
    n = w_nk.shape[0]
    image = npu.image

    def program() -> tuple[NpuEpilogue, ProgramKey, Compiled, np.ndarray]:
        npu_epi = epi.channels(n).on_accelerator()
        key, comp = gemm_program(npu.cache, m, n, k, epilogue=npu_epi)
        return npu_epi, key, comp, npu_epi.param_table(npu.cache.cfg.tile)

    if image is None:
        npu_epi, key, comp, _ = program()
        return _simulate(npu, comp, {"A": np.ascontiguousarray(a2d), "B": np.ascontiguousarray(w_nk)}, "C",
                         npu_epi, run)
    # a step's own epilogue: its program and parameter rows are the same on every run
    made_for = names[:1] if names else owner
    npu_epi, key, comp, table = image.derive((*made_for, "gemm", m, n, k), program, epi) if made_for else program()
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
        bases["P"] = image.weight((names[0], "P"), table)
    else:
        staged["B"] = np.ascontiguousarray(w_nk)
        run.host_bytes += 2 * w_nk.nbytes
        staged["P"] = table
    if c_addr is not None:
        bases["C"] = c_addr
        run.output_in_image = True
    return _simulate(npu, comp, staged, "C", npu_epi, run, key=(*key, *(names or ("",))), bases=bases)


def add_layer(step: AddStep | ProductStep, xs: list[np.ndarray], *, npu: Accelerator | None,
              run: LayerRun) -> np.ndarray:
    """A residual add (or product) step's int8 output (the inputs' shape); ``npu`` None = the numpy reference."""
    from tinynpu.compiler.onnx.lower.eltwise import (
        FRACTION_BITS,
        add_parameters,
        add_reference,
        product_parameters,
        product_reference,
    )
    from tinynpu.compiler.onnx.runtime.image import from_image_layout, image_layout

    if isinstance(step, ProductStep):
        scales: tuple[TermScale, ...] = (step.scale,)
        note = ("product on the accelerator: both inputs through tmm with an identity tile, "
                + ("the first through its gate table (vlut, 16 bits), " if step.gate is not None else "")
                + "multiplied (vmulb by the second input's tile), requantized once (vrequant)")
    elif step.scales is None:  # never: an accelerator add step has its scales (ir.AddStep checks)
        raise RuntimeError(f"add step {step.name!r} has no fixed-point scales")
    else:
        scales = step.scales
        note = ("residual add on the accelerator: each input through tmm with an identity tile, scaled to "
                f"{FRACTION_BITS} bits below the point (vmul, vrequant), summed (vadd), rounded by the store")
    if npu is None:
        if isinstance(step, ProductStep):
            return product_reference(xs[0], xs[1], step.scale, step.gate)
        return add_reference(xs, scales, relu=step.relu)
    tile, image = npu.cache.cfg.tile, npu.image

    def program() -> tuple[ProgramKey, Compiled, dict[str, np.ndarray]]:
        key = add_program_key(npu.cache, step, xs[0].shape)
        rows = (product_parameters(step.scale, step.gate, tile) if isinstance(step, ProductStep)
                else add_parameters(scales, tile))
        return key, npu.cache.programs[key], {"I": np.eye(tile, dtype=np.int8), "P": rows}

    key, comp, params = (image.derive((step.name, "add", xs[0].shape), program, step) if image is not None
                         else program())
    run.note = note
    if image is None:
        inputs = {f"X{i}": image_layout(x).reshape(comp.program.tensor("X0").shape) for i, x in enumerate(xs)}
        y = _simulate(npu, comp, inputs | params, "Y", None, run)
    else:
        places = {f"X{i}": image.address(name, x.nbytes) for i, (name, x) in enumerate(zip(step.inputs, xs,
                                                                                         strict=True))}
        places["Y"] = image.address(step.outputs[0], xs[0].nbytes)
        bases = {k: v for k, v in places.items() if v is not None}
        if len(bases) < len(places):  # never: the planner places every int8 activation
            raise RuntimeError(f"add step {step.name!r}: an operand has no place in the image")
        bases |= {name: image.weight((step.name, name), value) for name, value in params.items()}
        run.output_in_image = True
        y = _simulate(npu, comp, {}, "Y", None, run, key=(*key, step.name), bases=bases)
    return from_image_layout(y.reshape(-1), xs[0].shape)


def _simulate(npu: Accelerator, comp: Compiled, inputs: dict[str, np.ndarray], out: str, epi: NpuEpilogue | None,
              run: LayerRun, *, key: ProgramKey = (), bases: dict[str, int] | None = None,
              pitches: dict[str, int] | None = None, packed: int = 1) -> np.ndarray:
    """Run one program: on a fresh machine from the user-layout ``inputs``, or in ``npu.image``.

    In the image the program is relocated to ``bases`` (and ``pitches``:
    :func:`~tinynpu.compiler.onnx.runtime.image.relocate`); a tensor without a base gets room in
    the staging area, and ``inputs`` are then the device-layout tensors the host writes there.
    ``packed`` groups of a conv run block-diagonal in the program: only one in ``packed`` of
    its MACs and weight bytes is the layer's own, and only those are counted as useful.  ``epi``
    None: a program without an epilogue's parameter rows (a residual add's come in ``inputs``).
    """
    from tinynpu.simulator import Machine

    cfg, image = npu.cache.cfg, npu.image
    t0 = time.perf_counter()
    if image is None:
        machine = Machine(cfg)
        program = comp.program
        machine.load(program, like=npu.cache.decoded(program))
        run.load_seconds += time.perf_counter() - t0
        device = comp.to_device(inputs)
        if epi is not None:  # this layer's parameter rows (the program was compiled for the shape)
            device["P"] = epi.param_table(cfg.tile)
    else:
        bases = dict(bases or {})
        for t in comp.program.tensors:
            if t.name not in bases:
                bases[t.name] = image.stage(None, t.nbytes)
        t0 = time.perf_counter()  # relocated and loaded once per program and image: the program's loading
        program = image.program(key, comp.program, bases, pitches)
        if npu.link_only:
            image.check(program, npu.cache.decoded(comp.program))
            t = comp.program.tensor(out)
            return np.zeros(t.shape, t.dtype)
        machine = image.machine_for(program, npu.cache.decoded(comp.program))
        run.load_seconds += time.perf_counter() - t0
        device = inputs
    for name, arr in device.items():
        t = program.tensor(name)
        if arr.dtype == np.dtype(t.dtype).newbyteorder("<") and arr.shape == t.shape:  # the runtime's device layout
            machine.write_dram(t.addr, arr)
        else:
            machine.write_tensor(name, arr)
    t0 = time.perf_counter()
    stats = machine.run(check_races=npu.check_races)
    run.sim_seconds += time.perf_counter() - t0
    _count(run, comp, program, stats, epi, cfg.elem_bytes("acc"), packed, staged_host=image is None)
    if pitches and out in pitches:
        t = program.tensor(out)
        rows = int(np.prod(t.shape[:-1]))
        y = read_pitched(machine, t.addr, rows, t.nbytes // rows, pitches[out])[:, :t.nbytes // rows]
        return np.ascontiguousarray(y).view(t.dtype).reshape(t.shape)
    return machine.read_tensor(out)


def _count(run: LayerRun, comp: Compiled, program: Any, stats: Stats, epi: NpuEpilogue | None,
           acc_bytes: int, packed: int, *, staged_host: bool) -> None:
    """Add one program run's cycles, MACs and traffic to the step's :class:`LayerRun`."""
    run.cycles += stats.cycles
    run.macs += comp.bounds.useful_macs // packed
    run.issued_macs += comp.bounds.issued_macs
    run.dram_bytes += stats.dram_read_bytes + stats.dram_write_bytes
    if comp.bounds.bound_kind == "compulsory" or epi is None:
        run.compulsory_bytes += comp.bounds.io_lower_bound_bytes
    else:
        run.compulsory_bytes += (sum(t.nbytes for t in program.tensors if t.name != "P")
                                 + epi.param_rows * epi.channels * acc_bytes)
    if packed > 1:  # the zero blocks of the kernel are no compulsory traffic
        run.compulsory_bytes -= program.tensor("W").nbytes * (packed - 1) // packed
    run.host_bytes += comp.host_traffic_bytes if staged_host else 0
    run.programs += 1
    for component, pj in stats.energy.breakdown_pj:
        run.energy_breakdown_pj[component] = run.energy_breakdown_pj.get(component, 0.0) + float(pj)
    for unit, busy in stats.busy_cycles.items():
        run.busy_cycles[unit] = run.busy_cycles.get(unit, 0) + int(busy)


__all__ = ["Accelerator", "LayerRun", "add_layer", "conv_layer", "conv_places", "gemm_in_place", "gemm_layer"]
