"""What every workload's compile step shares: the config for a dtype, size checks, DRAM placement, schedules."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tinynpu.assembler.image import Tensor
from tinynpu.compiler.schedule import Schedule, naive
from tinynpu.errors import UsageError
from tinynpu.intmath import round_up
from tinynpu.isa import ArchConfig, load_config

DTYPES = {"int8": "int8", "fp32": "float32"}
DRAM_ALIGN = 64  # DRAM tensors start on 64-byte boundaries (a whole number of DMA beats)


def resolve_config(dtype: str, cfg: ArchConfig | None) -> ArchConfig:
    """The config for ``dtype``: the built-in one if none is given, else check they agree.

    Raises:
        UsageError: unknown dtype, or a config whose input dtype differs.
    """
    if dtype not in DTYPES:
        raise UsageError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}.")
    if cfg is None:
        cfg = load_config("default" if dtype == "int8" else "fp32")
    if cfg.input_dtype != DTYPES[dtype]:
        raise UsageError(f"dtype {dtype!r} is not supported by config {cfg.name!r}, whose scratchpads hold "
                         f"{cfg.input_dtype}; use --dtype {_dtype_name(cfg.input_dtype)} or another config.")
    return cfg


def _dtype_name(numpy_name: str) -> str:
    return {v: k for k, v in DTYPES.items()}[numpy_name]


def check_sizes(prefix: str = "", **sizes: int) -> None:
    """Every size must be a positive integer; the message starts with ``prefix`` (e.g. ``"conv2d: "``).

    Raises:
        UsageError: naming the first bad size and its value.
    """
    for name, value in sizes.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
            raise UsageError(f"{prefix}{name} must be a positive integer, not {value!r}.")


class DramAllocator:
    """Bump allocation of DRAM tensors, each on a :data:`DRAM_ALIGN` boundary, failing with the sizes.

    Args:
        cfg: The config whose DRAM the tensors live in.
        workload: How the workload is named in the error when DRAM is too small.
    """

    def __init__(self, cfg: ArchConfig, workload: str = "the workload") -> None:
        self.cfg = cfg
        self.workload = workload
        self.next = 0
        self.tensors: list[Tensor] = []

    def add(self, name: str, shape: tuple[int, ...], dtype: str, role: str) -> Tensor:
        """Place tensor ``name`` after the previous one.

        Raises:
            UsageError: the tensor would end beyond the config's DRAM.
        """
        addr = round_up(self.next, DRAM_ALIGN)
        t = Tensor(name=name, addr=addr, shape=shape, dtype=dtype, role=role)
        if addr + t.nbytes > self.cfg.dram_bytes:
            raise UsageError(
                f"{self.workload} does not fit DRAM: tensor {name} {list(shape)} ({dtype}) would end at byte "
                f"{addr + t.nbytes}, but config {self.cfg.name!r} has {self.cfg.dram_bytes} bytes of DRAM."
            )
        self.next = addr + t.nbytes
        self.tensors.append(t)
        return t


def resolve_schedule(schedule: str | Schedule, cfg: ArchConfig) -> Schedule | None:
    """``naive`` -> the seed loop, ``auto`` -> None (search), a path -> the saved trace.

    Raises:
        UsageError: ``schedule`` names no file, or the file is not a schedule.
    """
    if isinstance(schedule, Schedule):
        return schedule
    if schedule == "naive":
        return naive(cfg)
    if schedule == "auto":
        return None
    if not Path(schedule).exists():
        raise UsageError(f"schedule must be naive, auto or a schedule JSON file; {schedule!r} is none of "
                         "these.")
    return Schedule.load(schedule)


__all__ = ["DRAM_ALIGN", "DTYPES", "DramAllocator", "check_sizes", "resolve_config", "resolve_schedule"]
