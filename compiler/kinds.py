"""The one registry from a workload kind (``matmul``, ``conv2d``, ``mlp``) to the function that compiles it.

Every caller that turns "a kind and its sizes" into a program goes through
:func:`compile_workload`: the ``run``/``compile``/``cosim`` command lines, the
report's suite and the sweep's tasks.  A new workload kind is added here once
(and given its command-line options in :mod:`tinynpu.compiler.workload_args`).
Each kind's module is imported only when that kind is compiled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinynpu.errors import UsageError

if TYPE_CHECKING:
    from tinynpu.compiler.compiled import Compiled
    from tinynpu.isa import ArchConfig

Compile = Callable[..., "Compiled"]


@dataclass(frozen=True)
class WorkloadKind:
    """A workload kind: its name, the integer sizes it needs, the options it may take and how to compile it.

    Attributes:
        name: The kind as the command line names it (``tinynpu run NAME``).
        sizes: The parameters every workload of this kind gives (``m``, ``n``, ``k``).
        options: The parameters it may give, with their defaults (``stride``: 1).
        schedules: Whether it takes a schedule other than ``auto``.
        compile: ``compile(params, dtype=, cfg=, schedule=)`` -> the compiled program.
    """

    name: str
    sizes: tuple[str, ...]
    options: tuple[tuple[str, Any], ...]
    schedules: bool
    compile: Compile


def _matmul(p: Mapping[str, Any], *, dtype: str, cfg: ArchConfig | None, schedule: str) -> Compiled:
    from tinynpu.compiler.matmul import compile_matmul

    return compile_matmul(p["m"], p["n"], p["k"], dtype=dtype, schedule=schedule, layout=p["layout"], cfg=cfg,
                          out_dtype=p["out_dtype"], shift=p["shift"])


def _conv2d(p: Mapping[str, Any], *, dtype: str, cfg: ArchConfig | None, schedule: str) -> Compiled:
    from tinynpu.compiler.conv2d import compile_conv2d

    return compile_conv2d(p["n"], p["c"], p["h"], p["w"], p["k"], p["r"], p["s"], stride=p["stride"], pad=p["pad"],
                          dilation=p["dilation"], dtype=dtype, cfg=cfg, schedule=schedule)


def _mlp(p: Mapping[str, Any], *, dtype: str, cfg: ArchConfig | None, schedule: str) -> Compiled:
    from tinynpu.compiler.mlp import compile_mlp

    return compile_mlp(p["batch"], dtype=dtype, cfg=cfg)


KINDS: dict[str, WorkloadKind] = {kind.name: kind for kind in (
    WorkloadKind("matmul", ("m", "n", "k"), (("layout", "nt"), ("out_dtype", None), ("shift", None)), True, _matmul),
    WorkloadKind("conv2d", ("n", "c", "h", "w", "k", "r", "s"), (("stride", 1), ("pad", 0), ("dilation", 1)), True,
                 _conv2d),
    WorkloadKind("mlp", ("batch",), (), False, _mlp),
)}


def workload_kind(name: str) -> WorkloadKind:
    """The registered kind called ``name`` (else a UsageError listing the kinds)."""
    try:
        return KINDS[name]
    except KeyError:
        raise UsageError(f"unknown workload kind {name!r}; the kinds are {', '.join(KINDS)}.") from None


def compile_workload(kind: str, params: Mapping[str, Any], *, dtype: str = "int8", cfg: ArchConfig | None = None,
                     schedule: str = "auto") -> Compiled:
    """Compile the workload ``kind`` of ``params`` (its sizes, and any of its options) for ``cfg``.

    Raises:
        UsageError: an unknown kind, or a schedule other than ``auto`` for a kind without schedules; and
            whatever the kind's compiler refuses.
        KeyError, TypeError: a missing size, or a parameter the kind does not take (the caller's bug).
    """
    spec = workload_kind(kind)
    # A missing size is the caller's bug, not the user's: it stays a KeyError (a sweep does not cache it).
    unknown = sorted(set(params) - set(spec.sizes) - {name for name, _ in spec.options})
    if unknown:
        raise TypeError(f"{kind}: {', '.join(unknown)} is not a parameter of this kind")
    if not spec.schedules and schedule != "auto":
        raise UsageError(f"{kind}: takes no schedule (its tiling is fixed), not {schedule!r}.")
    full = {**dict(spec.options), **params}
    return spec.compile(full, dtype=dtype, cfg=cfg, schedule=schedule)


__all__ = ["KINDS", "WorkloadKind", "compile_workload", "workload_kind"]
