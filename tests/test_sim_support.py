"""Helpers for the simulator tests: build small programs with isa.encode (no tests here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinynpu.assembler.image import Program, Tensor
from tinynpu.isa import ArchConfig, load_config, load_isa
from tinynpu.simulator import Machine
from tinynpu.simulator.native import NativeUnavailable, library

ISA = load_isa()
DEFAULT = load_config("default")
FP32 = load_config("fp32")


def units(*names: str) -> int:
    """A wait/signal mask from unit names."""
    return sum(1 << ISA.unit_ids[n] for n in names)


def scope(name: str) -> int:
    return ISA.scope_by_name[name].id


def program(instrs: Sequence[tuple[str, dict[str, Any]]], cfg: ArchConfig = DEFAULT,
            tensors: Sequence[Tensor] = ()) -> Program:
    return Program.build(ISA, cfg, [ISA.encode(m, f) for m, f in instrs], tensors)


def machine(instrs: Sequence[tuple[str, dict[str, Any]]], cfg: ArchConfig = DEFAULT,
            tensors: Sequence[Tensor] = ()) -> Machine:
    m = Machine(cfg, ISA)
    m.load(program(instrs, cfg, tensors))
    return m


def load(sc: str, row: int, dram: int, rows: int = 16, cols: int = 16, stride: int | None = None,
         **kw: int) -> tuple[str, dict[str, Any]]:
    if stride is None:
        stride = cols * DEFAULT.elem_bytes(ISA.scope_by_name[sc].config_key)
    return "load", {"scope": scope(sc), "sp_row": row, "dram": dram, "rows": rows, "cols": cols,
                    "stride": stride, **kw}


def acc_rows(m: Machine, r0: int, r1: int) -> np.ndarray:
    return m.state.acc[r0:r1].copy()


HALT: tuple[str, dict[str, Any]] = ("halt", {})
SYNC: tuple[str, dict[str, Any]] = ("sync", {})


def native_reason() -> str | None:
    """Why the native simulator core cannot run on this machine, or None if it can."""
    try:
        library()
    except NativeUnavailable as exc:
        return str(exc)
    return None
