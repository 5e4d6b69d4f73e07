"""The result of compiling a workload: program, listing, schedule trace, yardsticks and numpy oracle."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinynpu.assembler.image import Program


@dataclass(frozen=True)
class Bounds:
    """The yardsticks a run is measured against (definitions in :mod:`tinynpu.compiler.bounds`).

    Attributes:
        io_lower_bound_bytes: Proven lower bound on DRAM traffic (``bound_kind`` says which).
        best_tiling_bytes: Least traffic of any tiling in the compiler's space that fits the scopes.
        roofline_cycles: max(compute cycles, io_lower_bound_bytes / DRAM bytes per cycle).
        padding_ceiling: Useful MACs / MACs issued by the tmm instructions.
        useful_macs: MACs of the workload itself (M*N*K, or N*P*Q*K*C*R*S).
        issued_macs: MACs the program issues (whole T x T x T tile steps).
        bound_kind: ``"matmul"`` (the proven 2*M*N*K/sqrt(S) - 2S bound of bounds.py) or ``"compulsory"``.
    """

    io_lower_bound_bytes: int
    best_tiling_bytes: int
    roofline_cycles: int
    padding_ceiling: float
    useful_macs: int
    issued_macs: int
    bound_kind: str

    def to_json(self) -> dict[str, Any]:
        return {
            "io_lower_bound_bytes": self.io_lower_bound_bytes,
            "best_tiling_bytes": self.best_tiling_bytes,
            "roofline_cycles": self.roofline_cycles,
            "padding_ceiling": self.padding_ceiling,
            "useful_macs": self.useful_macs,
            "issued_macs": self.issued_macs,
            "bound_kind": self.bound_kind,
        }


Arrays = dict[str, np.ndarray]


def _identity(inputs: Mapping[str, np.ndarray]) -> Arrays:
    return dict(inputs)


@dataclass(frozen=True)
class Compiled:
    """A compiled workload.

    Attributes:
        program: The binary image (words + DRAM tensor manifest).
        comments: Per-instruction comments for the assembly listing.
        workload: Description, e.g. ``{"kind": "matmul", "m": .., "n": .., "k": .., "dtype": ..}``.
        trace: The schedule trace, as JSON-ready primitive applications.
        bounds: The yardsticks.
        host_traffic_bytes: Bytes the host reads + writes to change layouts (never free).
        make_inputs: ``seed -> {name: array}`` the workload's inputs in the user's layout.
        reference: ``inputs -> {name: array}`` the numpy oracle of every output tensor.
        to_device: ``inputs -> {tensor name: array}`` host-side layout change into the DRAM tensors.
        outputs: Names of the DRAM tensors the reference is compared against.
        exact: Whether outputs must match bit for bit (integer) or within rtol (fp32).
        compile_seconds: Wall time of compilation.
        model: The cost model's estimate of this program (cycles, traffic), if any.
        schedule_name: ``naive``, ``auto``, or the name stored in a schedule file.
    """

    program: Program
    comments: Mapping[int, str]
    workload: dict[str, Any]
    trace: tuple[dict[str, Any], ...]
    bounds: Bounds
    host_traffic_bytes: int
    make_inputs: Callable[[int], Arrays]
    reference: Callable[[Mapping[str, np.ndarray]], Arrays]
    to_device: Callable[[Mapping[str, np.ndarray]], Arrays] = _identity
    outputs: tuple[str, ...] = ("C",)
    exact: bool = True
    compile_seconds: float = 0.0
    model: dict[str, Any] = field(default_factory=dict)
    schedule_name: str = ""

    def asm(self, cfg: Any = None) -> str:
        """The assembly listing (produced on demand: large programs have ~10^5 lines)."""
        from tinynpu.assembler import disassemble
        from tinynpu.isa import load_isa

        return disassemble(self.program, load_isa(), comments=self.comments, cfg=cfg)


__all__ = ["Arrays", "Bounds", "Compiled"]
