"""Apache TVM front end: TensorIR schedules tensorized onto tinynpu's ``tmm``, lowered to tinynpu programs.

Needs the optional extra ``tinynpu[tvm]`` (exact pins in pyproject.toml);
nothing else in tinynpu imports TVM.  docs/tvm.md is the course's lesson on
this front end::

    from tinynpu.compiler import tvm as npu
    intrin = npu.register_intrinsics("default")     # tmm16 for the default config
    ...                                             # schedule, sch.tensorize(loop, intrin.name)
    report = npu.run(sch)                           # compile, simulate, verify against numpy
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tinynpu.compiler.tvm.build import Reference, compile_tvm
from tinynpu.compiler.tvm.intrinsics import Intrinsic, register_intrinsics
from tinynpu.compiler.tvm.program import Lowered, lower
from tinynpu.compiler.tvm.require import missing, require_tvm
from tinynpu.isa import ArchConfig


def run(schedule: Any, *, config: ArchConfig | str = "default", reference: Reference | None = None,
        seed: int = 0, check_races: bool = True, name: str = "tvm") -> Mapping[str, Any]:
    """Compile a tensorized schedule, simulate it, verify it against numpy and report (as ``tinynpu run``).

    Raises:
        UsageError: as :func:`compile_tvm`.
        VerificationError: an output differs from the reference.
    """
    from tinynpu.compiler.run import run_compiled

    compiled = compile_tvm(schedule, config=config, reference=reference, name=name)
    return run_compiled(compiled, seed=seed, check_races=check_races)


__all__ = ["Intrinsic", "Lowered", "compile_tvm", "lower", "missing", "register_intrinsics", "require_tvm", "run"]
