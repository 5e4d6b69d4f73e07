"""``tinynpu bench sim``: simulator speed on the seed workload, against numpy in the same process.

The size^3 int8 matmul is compiled twice (the compiler's ``naive`` seed
schedule and its tiled ``auto`` schedule, a 128x128 output block in
``acc``), saved as program images, and each is simulated (functional +
timing together) with the race sanitizer on and off.  Every simulation runs
in a fresh child process, so its peak RSS is the simulator's own (the
compiler's memory is not counted), and that child also times numpy's float32
size^3 matmul, after the simulation, as the yardstick for the ratio.  Each
result is verified against the compiler's numpy reference.
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
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.errors import TinyNpuError, UsageError
from tinynpu.isa import load_config

SCHEDULES = ("naive", "auto")


def _numpy_seconds(size: int, repeats: int = 5) -> float:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
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


def _child(binary: Path, inputs: Path, reference: Path, races: bool, size: int) -> dict[str, Any]:
    """One measured simulation (runs in its own process)."""
    from tinynpu.assembler.image import Program
    from tinynpu.isa import load_isa
    from tinynpu.simulator.machine import Machine

    isa = load_isa()
    program = Program.load(binary)
    machine = Machine(load_config(program.config_name, isa), isa)
    machine.load(program)
    with np.load(inputs) as arrays:
        for name in arrays.files:
            machine.write_tensor(name, arrays[name])
    t0 = time.perf_counter()
    stats = machine.run(check_races=races)
    wall = time.perf_counter() - t0
    peak = _peak_rss()
    with np.load(reference) as ref:
        verified = all(np.array_equal(machine.read_tensor(name), ref[name]) for name in ref.files)
    numpy_s = _numpy_seconds(size)
    n = stats.instructions_total
    return {"races_checked": races, "verified": verified, "instructions": n, "cycles": stats.cycles,
            "utilization": stats.utilization, "wall_seconds": wall, "instructions_per_second": n / wall,
            "cycles_per_second": stats.cycles / wall, "numpy_float32_seconds": numpy_s,
            "ratio_to_numpy": wall / numpy_s, "peak_rss_bytes": peak,
            "image_bytes": load_config(program.config_name).dram_bytes + binary.stat().st_size}


def _prepare(size: int, schedule: str, tmp: Path) -> tuple[Path, Path, Path]:
    from tinynpu.compiler.matmul import compile_matmul

    compiled = compile_matmul(size, size, size, dtype="int8", schedule=schedule, cfg=load_config("default"))
    inputs = compiled.make_inputs(0)
    binary, inp, ref = tmp / f"{schedule}.bin", tmp / f"{schedule}_in.npz", tmp / f"{schedule}_ref.npz"
    compiled.program.save(binary)
    np.savez(inp, **compiled.to_device(inputs))
    reference = compiled.reference(inputs)
    np.savez(ref, **{name: reference[name] for name in compiled.outputs})
    return binary, inp, ref


def run_bench(args: argparse.Namespace) -> int:
    size = args.size
    if size % load_config("default").tile:
        raise UsageError(f"--size must be a multiple of the tile edge, not {size}.")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tinynpu-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for schedule in SCHEDULES:
            files = _prepare(size, schedule, tmp)
            for races in (True, False):
                cmd = [sys.executable, "-m", "tinynpu.simulator.bench", *map(str, files), str(int(races)), str(size)]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy(), check=False)
                if proc.returncode != 0:
                    raise TinyNpuError(f"bench sim: the {schedule} simulation failed: {proc.stderr.strip()}")
                runs.append({"schedule": schedule, **json.loads(proc.stdout)})
    out = {"size": size, "runs": runs,
           "targets": {"tiled_ratio_to_numpy_max": 10.0, "dma_heavy_instructions_per_second_min": 1e6,
                       "peak_rss_over_image_max": 2.0}}
    if args.json:
        print(json.dumps(out))
        return 0
    for r in runs:
        flag = "on " if r["races_checked"] else "off"
        print(f"{r['schedule']:6s} races={flag} {r['instructions']:>8,} instr {r['cycles']:>12,} cycles "
              f"{r['wall_seconds']:7.3f} s {r['instructions_per_second']:>9,.0f} instr/s "
              f"{r['cycles_per_second']:>12,.0f} cycles/s | numpy f32 {r['numpy_float32_seconds'] * 1e3:6.1f} ms "
              f"-> {r['ratio_to_numpy']:6.1f}x | peak RSS {r['peak_rss_bytes'] / 2**20:5.0f} MiB = "
              f"{r['peak_rss_bytes'] / r['image_bytes']:.2f}x DRAM+program | verified={r['verified']}")
    return 0


if __name__ == "__main__":  # the measured child process
    binary_, inputs_, reference_, races_, size_ = sys.argv[1:6]
    print(json.dumps(_child(Path(binary_), Path(inputs_), Path(reference_), races_ == "1", int(size_))))
