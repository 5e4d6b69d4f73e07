"""Workloads for reports: compile, simulate, verify, and collect the report dicts.

A :class:`Workload` is one row of a report; :func:`run_workload` compiles it
with :mod:`tinynpu.compiler`, simulates and verifies it with
:func:`tinynpu.compiler.run_compiled` and returns that report dict (fields in
docs/architecture.md) together with the command that reproduces it.  The compiler is
imported lazily so ``tinynpu --help`` stays fast.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from tinynpu.isa import ArchConfig

T = TypeVar("T")

MLP_BATCHES = (1, 64)
# --quick: small shapes of each kind, so a report (and its tests) finish in seconds.
QUICK_GEMMS = ((256, 256, 256), (512, 512, 64), (35, 200, 100))
QUICK_CONVS = ((1, 64, 14, 14, 64, 3, 3, 1, 1), (1, 3, 32, 32, 16, 7, 7, 2, 3))


@dataclass(frozen=True)
class Workload:
    """One workload of a report.

    Attributes:
        kind: ``matmul``, ``conv2d`` or ``mlp``.
        params: Sizes as the compiler entry point takes them.
        schedule: ``naive`` or ``auto`` (matmul; the others always compile ``auto``).
        group: Suite section it belongs to (e.g. ``DeepBench``).
        dtype: ``int8`` or ``fp32``, as the compiler's entry points take it.
        config: The config name or path as the user gave it (for the printed commands).
    """

    kind: str
    params: tuple[tuple[str, int], ...]
    schedule: str = "auto"
    group: str = ""
    dtype: str = "int8"
    config: str = "default"

    @property
    def label(self) -> str:
        p = dict(self.params)
        if self.kind == "matmul":
            name = f"matmul {p['m']}x{p['n']}x{p['k']}"
            return f"{name} ({self.schedule})" if self.schedule != "auto" else name
        if self.kind == "conv2d":
            return f"conv {p['c']}x{p['h']}x{p['w']}->{p['k']} {p['r']}x{p['s']}/{p['stride']}"
        return f"mlp batch {p['batch']}"

    @property
    def command(self) -> str:
        """The CLI command that reproduces this workload's numbers."""
        flags = " ".join(f"--{k} {v}" for k, v in self.params)
        sched = f" --schedule {self.schedule}" if self.kind == "matmul" else ""
        extra = (f" --dtype {self.dtype}" if self.dtype != "int8" else "") + (
            f" --config {self.config}" if self.config != "default" else ""
        )
        return f"tinynpu run {self.kind} {flags}{sched}{extra} --json"

    def compile(self, cfg: ArchConfig) -> Any:
        """Compile with the compiler's public entry points."""
        from tinynpu.compiler.kinds import compile_workload

        return compile_workload(self.kind, dict(self.params), dtype=self.dtype, cfg=cfg, schedule=self.schedule)


def for_config(w: Workload, config: str, cfg: ArchConfig) -> Workload:
    """``w`` on config ``config`` (as the user named it), with the dtype that config computes in."""
    return replace(w, dtype="fp32" if cfg.input_dtype == "float32" else "int8", config=config)


def matmul(m: int, n: int, k: int, *, schedule: str = "auto", group: str = "") -> Workload:
    return Workload("matmul", (("m", m), ("n", n), ("k", k)), schedule, group)


def conv2d(shape: Sequence[int], *, group: str = "ResNet-50") -> Workload:
    names = ("n", "c", "h", "w", "k", "r", "s", "stride", "pad")
    return Workload("conv2d", tuple(zip(names, (int(v) for v in shape), strict=True)), "auto", group)


def mlp(batch: int) -> Workload:
    return Workload("mlp", (("batch", batch),), "auto", "MLP 784-128-10")


def suite_workloads(*, quick: bool) -> list[Workload]:
    """The benchmark suite of docs/architecture.md (``quick``: small shapes of every kind, said in the report)."""
    if quick:
        gemms = [matmul(*s, group="quick GEMM") for s in QUICK_GEMMS]
        gemms.insert(1, matmul(*QUICK_GEMMS[0], schedule="naive", group="quick GEMM"))
        return gemms + [conv2d(s, group="quick conv2d") for s in QUICK_CONVS] + [mlp(b) for b in MLP_BATCHES]
    # The GEMM list lives once, in the compiler's benchmark: the seed, DeepBench, BERT-base.
    from tinynpu.compiler.bench import GEMMS, SEED

    out = [matmul(*SEED, group="seed"), matmul(*SEED, schedule="naive", group="seed")]
    out += [matmul(*s, group="GEMM") for s in GEMMS if tuple(s) != tuple(SEED)]
    out += [conv2d(_conv_tuple(s)) for s in _resnet50()]
    out += [mlp(b) for b in MLP_BATCHES]
    return out


def _resnet50() -> Sequence[Any]:
    from tinynpu.compiler.conv_shape import RESNET50_CONVS

    return RESNET50_CONVS


def _conv_tuple(shape: Any) -> tuple[int, ...]:
    return tuple(getattr(shape, f) for f in ("n", "c", "h", "w", "k", "r", "s", "stride", "pad"))


@dataclass(frozen=True)
class Result:
    """A workload's report dict plus the facts a report prints next to it."""

    workload: Workload
    report: dict[str, Any]
    compile_seconds: float
    timeline: tuple[Any, ...] = field(default=(), repr=False)

    @property
    def label(self) -> str:
        return self.workload.label


def run_workload(
    workload: Workload,
    cfg: ArchConfig,
    *,
    timeline: bool = False,
    check_races: bool = True,
    say: Callable[[str], None] | None = None,
) -> Result:
    """Compile, simulate and verify one workload.

    Args:
        workload: What to run.
        cfg: Architecture config.
        timeline: Also keep the simulator's per-instruction timeline, for the Gantt chart.
        check_races: Run the data-race sanitizer during the (verified) simulation.
        say: Progress messages (instruction count after compiling, each simulation).
    """
    from tinynpu.compiler.run import run_compiled_with_stats

    t0 = time.perf_counter()
    compiled = workload.compile(cfg)
    compile_seconds = time.perf_counter() - t0
    if say:
        say(
            f"{workload.label}: {len(compiled.program.words):,} instructions compiled in "
            f"{compile_seconds:.1f} s; "
            f"simulating with timing{' and race checks' if check_races else ''}, verifying against numpy ..."
        )
    report, stats = run_compiled_with_stats(compiled, cfg=cfg, check_races=check_races)
    rows: tuple[Any, ...] = tuple(stats.timeline) if timeline else ()
    return Result(workload, report, compile_seconds, rows)


def simulate(compiled: Any, cfg: ArchConfig) -> Any:
    """Simulate a compiled program with timing on its seed-0 inputs; the simulator's ``Stats``."""
    from tinynpu.simulator import Machine

    machine = Machine(cfg)
    machine.load(compiled.program)
    for name, array in compiled.to_device(compiled.make_inputs(0)).items():
        machine.write_tensor(name, array)
    return machine.run(timing=True, check_races=False)


def simulate_timeline(compiled: Any, cfg: ArchConfig) -> Sequence[Any]:
    """The simulator's per-instruction timeline of a compiled program on its seeded inputs."""
    return list(simulate(compiled, cfg).timeline)


__all__ = [
    "Result",
    "Workload",
    "conv2d",
    "matmul",
    "mlp",
    "run_workload",
    "simulate_timeline",
    "suite_workloads",
]
