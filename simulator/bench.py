"""``tinynpu bench sim``: simulator speed on the seed workload, against numpy in the same process.

The size^3 int8 matmul is compiled twice (the compiler's ``naive`` seed
schedule and its tiled ``auto`` schedule, a 128x128 output block in
``acc``), saved as program images, and each is simulated (functional +
timing together) by the default core (``auto``: the native one where it can
run) with the race sanitizer on and off, and by the Python reference core
with it off, which gives the native core's speed-up measured in the same
run.  Every simulation runs
in a fresh child process, so its peak RSS is the simulator's own (the
compiler's memory is not counted), and that child also times numpy's float32
size^3 matmul, after the simulation, as the yardstick for the ratio.  Each
result is verified against the compiler's numpy reference.  A third,
DMA-heavy stream is pure tile loads (as many as the naive schedule's
instructions), verified by the scratchpads it leaves.  A fourth, ``gemv``,
is the tiled 1 x size x size product, a batch-1 decode step's shape (one
row of each A tile filled, the weights streamed), timed against numpy's
float32 matrix-vector product of the same shape.  Each run's
instructions/s is reported (by wall time, which the targets use, and by the
child's CPU time, which a loaded machine does not inflate) with the time its loading took (reading the
image and decoding it, before the run), and a summary states every target, for each
mode (race sanitizer on or off, core) it covers, as met or not met.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.errors import TinyNpuError, UsageError
from tinynpu.isa import load_config
from tinynpu.progress import step

# the compiler's seed and tiled schedules, a pure DMA-load stream, and the tiled 1 x size x size product (a
# batch-1 decode step's matrix-vector shape: one row of each A tile filled, the weights streamed)
SCHEDULES = ("naive", "auto", "loads", "gemv")
# (engine, race sanitizer) of each measured simulation: the default core, and the Python core as a baseline
RUNS = (("auto", True), ("auto", False), ("python", False))


def numpy_matmul_seconds(m: int, n: int, k: int, *, repeats: int = 5) -> float:
    """Best-of-``repeats`` wall time of numpy's float32 (M x K) @ (K x N) in this process: the baseline."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    a @ b  # warm up the BLAS threads
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return best


def _peak_rss() -> int:
    """This process's peak resident memory in bytes.

    VmHWM (Linux) belongs to the current address space, so it starts afresh at
    exec; ru_maxrss would also count the parent's memory at fork time.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _child(binary: Path, inputs: Path, reference: Path, races: bool, size: int, engine: str,
           rows: int) -> dict[str, Any]:
    """One measured simulation (runs in its own process)."""
    from tinynpu.assembler.image import Program
    from tinynpu.isa import load_isa
    from tinynpu.simulator.machine import Machine

    isa = load_isa()
    l0 = time.perf_counter()
    program = Program.load(binary)
    machine = Machine(load_config(program.config_name, isa), isa)
    machine.load(program)
    load_s = time.perf_counter() - l0  # reading the image and decoding it: what a run costs before it starts
    with np.load(inputs) as arrays:
        for name in arrays.files:
            machine.write_tensor(name, arrays[name])
    t0, c0 = time.perf_counter(), time.process_time()
    stats = machine.run(check_races=races, engine=engine)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _peak_rss()
    with np.load(reference) as ref:
        verified = all(np.array_equal(_observed(machine, isa, name), ref[name]) for name in ref.files)
    numpy_s = numpy_matmul_seconds(rows, size, size)
    n = stats.instructions_total
    return {"engine": stats.engine, "races_checked": races, "verified": verified, "instructions": n,
            "cycles": stats.cycles,
            "utilization": stats.utilization, "wall_seconds": wall, "instructions_per_second": n / wall,
            "cpu_seconds": cpu, "instructions_per_cpu_second": n / cpu,
            "cycles_per_second": stats.cycles / wall, "load_seconds": load_s, "numpy_float32_seconds": numpy_s,
            "ratio_to_numpy": wall / numpy_s, "peak_rss_bytes": peak,
            "image_bytes": load_config(program.config_name).dram_bytes + binary.stat().st_size}


def _observed(machine: Any, isa: Any, name: str) -> np.ndarray:
    """A reference key's current value: ``sp:SCOPE`` is a whole scratchpad, anything else a tensor."""
    if name.startswith("sp:"):
        return machine.state.sp[isa.scope_by_name[name[3:]].id]
    return machine.read_tensor(name)


def _prepare_loads(size: int, tmp: Path) -> tuple[Path, Path, Path]:
    """A pure DMA stream: 3 * (size/tile)^3 tile loads (as many as the naive seed's main loop).

    It walks the tiles of one size^2 int8 tensor, alternating the ``a`` and ``b``
    scratchpads and cycling through their tile slots, then halts.  The block of
    one load per tile repeats, so the final scratchpads are those after one
    block; that is the reference.
    """
    from tinynpu.assembler.image import Program, Tensor
    from tinynpu.isa import load_isa

    isa, cfg = load_isa(), load_config("default")
    t = cfg.tile
    kt = size // t
    scopes = [isa.scope_by_name["a"], isa.scope_by_name["b"]]
    slots = min(cfg.rows(sc.config_key) for sc in scopes) // t
    x = np.random.default_rng(0).integers(-128, 128, (size, size), dtype=np.int8)
    expect = {sc.name: np.zeros((cfg.rows(sc.config_key), t), dtype=cfg.dtype(sc.config_key)) for sc in scopes}
    block = []
    for j in range(kt * kt):
        sc, slot = scopes[j % 2], (j // 2) % slots
        r, c = divmod(j, kt)
        block.append(isa.encode("load", {"scope": sc.id, "sp_row": slot * t, "dram": r * t * size + c * t,
                                         "stride": size, "rows": t, "cols": t}))
        expect[sc.name][slot * t:(slot + 1) * t] = x[r * t:(r + 1) * t, c * t:(c + 1) * t]
    words = block * (3 * kt**3 // len(block)) + [isa.encode("halt", {})]
    program = Program.build(isa, cfg, words, [Tensor("X", 0, (size, size), "int8")])
    binary, inp, ref = tmp / "loads.bin", tmp / "loads_in.npz", tmp / "loads_ref.npz"
    program.save(binary)
    np.savez(inp, X=x)
    refs: dict[str, Any] = {f"sp:{name}": arr for name, arr in expect.items()}
    np.savez(ref, **refs)
    return binary, inp, ref


# Writes the compiled seed program of ``schedule`` ("naive" or "auto") at size^3 into ``tmp``: its image,
# inputs and reference outputs.  The compiler (a layer above) provides it when it registers `bench sim`.
PrepareSeed = Callable[[int, str, Path], tuple[Path, Path, Path]]


def run_bench(args: argparse.Namespace, prepare_seed: PrepareSeed) -> int:
    """``tinynpu bench sim``: every schedule of SCHEDULES on every core of RUNS (``prepare_seed`` compiles)."""
    size = args.size
    if size % load_config("default").tile:
        raise UsageError(f"--size must be a multiple of the tile edge, not {size}.")
    runs: list[dict[str, Any]] = []
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tinynpu-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for schedule in SCHEDULES:
            files = _prepare_loads(size, tmp) if schedule == "loads" else prepare_seed(size, schedule, tmp)
            for engine, races in RUNS:
                rows = 1 if schedule == "gemv" else size  # M of the product numpy times as the yardstick
                cmd = [sys.executable, "-m", "tinynpu.simulator.bench", *map(str, files), str(int(races)), str(size),
                       engine, str(rows)]
                shape = f"1x{size}x{size}" if schedule == "gemv" else f"{size}^3"
                with step(f"{schedule} {shape} on the {engine} core, race check {'on' if races else 'off'}",
                          quiet=args.json):
                    proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy(), check=False)
                if proc.returncode != 0:
                    raise TinyNpuError(f"bench sim: the {schedule} simulation failed: {proc.stderr.strip()}")
                runs.append({"schedule": schedule, **json.loads(proc.stdout)})
    targets = {"tuned_ratio_to_numpy_max_races_off": TUNED_RATIO_MAX[False],
               "tuned_ratio_to_numpy_max_races_on": TUNED_RATIO_MAX[True],
               "naive_instructions_per_second_min_races_on": NAIVE_IPS_MIN,
               "dma_heavy_instructions_per_second_min": DMA_IPS_MIN,
               "peak_rss_over_image_max": PEAK_OVER_IMAGE_MAX,
               "races_on_over_off_cpu_max": RACES_COST_MAX}
    for r in runs:
        r["peak_rss_over_image"] = r["peak_rss_bytes"] / r["image_bytes"]
        python = next(p for p in runs if p["schedule"] == r["schedule"] and p["engine"] == "python"
                      and not p["races_checked"])
        r["speedup_over_python_core"] = python["wall_seconds"] / r["wall_seconds"]
    # the wall-clock figures depend on what else the machine runs: the 1-minute load average says how busy it was
    load = {"start": load_start, "end": os.getloadavg()[0]}
    out = {"size": size, "load_average": load, "runs": runs, "targets": targets, "summary": _summary(runs)}
    if args.json:
        print(json.dumps(out))
        return 0
    for r in runs:
        flag = "on " if r["races_checked"] else "off"
        print(f"{r['schedule']:6s} {r['engine']:6s} races={flag} {r['instructions']:>8,} instr "
              f"{r['cycles']:>12,} cycles "
              f"{r['wall_seconds']:7.3f} s {r['instructions_per_second']:>10,.0f} instr/s "
              f"(CPU {r['cpu_seconds']:6.3f} s, {r['instructions_per_cpu_second']:>10,.0f} per CPU second) "
              f"{r['cycles_per_second']:>12,.0f} cycles/s | load {r['load_seconds']:5.3f} s "
              f"| numpy f32 {r['numpy_float32_seconds'] * 1e3:6.1f} ms "
              f"-> {r['ratio_to_numpy']:6.1f}x | peak RSS {r['peak_rss_bytes'] / 2**20:5.0f} MiB = "
              f"{r['peak_rss_over_image']:.2f}x DRAM+program | {r['speedup_over_python_core']:5.1f}x python core "
              f"| verified={r['verified']}")
    print(f"load average (1 minute): {load['start']:.2f} at the start, {load['end']:.2f} at the end")
    for line in out["summary"]:
        print(line)
    return 0


# The speed targets: a model is only useful if it runs a workload in a small multiple of the time the
# host's own matmul takes, streams instruction-bound programs at millions of instructions per second, and
# fits in memory beside the DRAM image it simulates.
TUNED_RATIO_MAX = {False: 2.0, True: 3.0}  # tuned workload / numpy float32 matmul, by race sanitizer off/on
NAIVE_IPS_MIN = 5e6  # simulated instructions/s of the naive seed stream, race sanitizer on
DMA_IPS_MIN = 1e6  # simulated instructions/s of the pure load stream, race sanitizer on or off
PEAK_OVER_IMAGE_MAX = 2.0  # peak memory over DRAM image + program
RACES_COST_MAX = 1.5  # the race sanitizer's cost: CPU time races on over races off, per workload


def _races(on: bool) -> str:
    return f"races {'on' if on else 'off'}"


def _summary(runs: list[dict[str, Any]]) -> list[str]:
    """One line per target; each names every mode it covers with that mode's figure and verdict."""
    default = [r for r in runs if r["engine"] != "python"]
    core = f" [{default[0]['engine']} core]" if default else ""

    def run_of(schedule: str, races: bool) -> dict[str, Any] | None:
        return next((r for r in default if r["schedule"] == schedule and r["races_checked"] == races), None)

    def verdict(ok: bool) -> str:
        return "met" if ok else "not met"

    lines = []
    tuned = [(races, run_of("auto", races)) for races in (False, True)]
    parts = [f"<= {TUNED_RATIO_MAX[races]:g}x numpy ({_races(races)}): {r['ratio_to_numpy']:.2f}x "
             f"{verdict(r['ratio_to_numpy'] <= TUNED_RATIO_MAX[races])}" for races, r in tuned if r]
    if parts:
        lines.append("target tuned " + "; ".join(parts) + core)
    naive = run_of("naive", True)
    if naive:
        ips = naive["instructions_per_second"]
        lines.append(f"target naive >= {NAIVE_IPS_MIN:,.0f} instr/s ({_races(True)}): {ips:,.0f} "
                     f"{verdict(ips >= NAIVE_IPS_MIN)}{core}")
    loads = [(races, run_of("loads", races)) for races in (True, False)]
    parts = [f"({_races(races)}): {r['instructions_per_second']:,.0f} "
             f"{verdict(r['instructions_per_second'] >= DMA_IPS_MIN)}" for races, r in loads if r]
    if parts:
        lines.append(f"target loads >= {DMA_IPS_MIN:,.0f} instr/s " + "; ".join(parts) + core)
    # CPU time, not wall time: a ratio of two single wall times mostly measures the machine's load
    parts = []
    for schedule, name in (("auto", "tuned"), ("naive", "naive"), ("loads", "loads")):
        on, off = run_of(schedule, True), run_of(schedule, False)
        if on and off:
            ratio = on["cpu_seconds"] / off["cpu_seconds"]
            parts.append(f"{name} {ratio:.2f}x {verdict(ratio <= RACES_COST_MAX)}")
    if parts:
        lines.append(f"target races on <= {RACES_COST_MAX:g}x races off (CPU time): " + "; ".join(parts) + core)
    modes: dict[tuple[str, bool], float] = {}  # the worst peak of each (core, race sanitizer) over the workloads
    for r in runs:
        key = (r["engine"], r["races_checked"])
        modes[key] = max(modes.get(key, 0.0), r["peak_rss_over_image"])
    parts = [f"{engine} core, {_races(races)}: {peak:.2f}x {verdict(peak <= PEAK_OVER_IMAGE_MAX)}"
             for (engine, races), peak in modes.items()]
    if parts:
        lines.append(f"target peak RSS <= {PEAK_OVER_IMAGE_MAX:g}x DRAM+program, worst workload: " + "; ".join(parts))
    return lines


if __name__ == "__main__":  # the measured child process
    binary_, inputs_, reference_, races_, size_, engine_, rows_ = sys.argv[1:8]
    print(json.dumps(_child(Path(binary_), Path(inputs_), Path(reference_), races_ == "1", int(size_), engine_,
                            int(rows_))))
