"""``tinynpu run tvm FILE.py``: a Python file that writes a TensorIR schedule, loaded and compiled.

The file defines ``schedule(config)``, which registers the intrinsic
(``register_intrinsics(config)``), schedules a TensorIR function and returns
the ``tvm.s_tir.Schedule`` (or the tensorized IRModule or PrimFunc); and, for
a function that is not a GEMM, ``reference(inputs)``: the numpy value of each
output from the inputs, by name.  docs/tvm.md writes such files.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from tinynpu.compiler.compiled import Compiled
from tinynpu.compiler.tvm.build import compile_tvm
from tinynpu.compiler.tvm.require import require_tvm
from tinynpu.errors import TinyNpuError, UsageError
from tinynpu.isa import ArchConfig


def _where(exc: BaseException, path: Path) -> str:
    """``FILE:LINE`` of the deepest frame of ``exc`` inside ``path`` (else the file alone)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)


def _first_lines(exc: BaseException, limit: int = 6) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    text = " ".join(lines[-limit:]) if lines else type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def _load(path: Path) -> ModuleType:
    if not path.is_file():
        raise UsageError(f"{path}: no such file; give the Python file that defines schedule(config).")
    spec = importlib.util.spec_from_file_location(f"tinynpu_tvm_schedule_{abs(hash(path.resolve()))}", path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: not a Python file tinynpu can import.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # TVMScript reads the source of the functions it parses through the module
    try:
        spec.loader.exec_module(module)
    except TinyNpuError:
        raise
    except Exception as exc:  # the user's code: one paragraph with its place, not a traceback
        raise UsageError(f"{_where(exc, path)}: running the file failed: {_first_lines(exc)}") from None
    return module


def compile_file(path: str | Path, cfg: ArchConfig) -> Compiled:
    """Load ``path``, call its ``schedule(cfg)`` and compile the result (with its ``reference``, if any).

    Raises:
        UsageError: TVM missing (saying how to install it), no ``schedule`` function, an exception in the file
            (with its file:line), or whatever the lowering refuses.
    """
    require_tvm("tinynpu run tvm")
    path = Path(path)
    module = _load(path)
    make = getattr(module, "schedule", None)
    if not callable(make):
        raise UsageError(f"{path}: defines no function schedule(config) returning the tensorized "
                         "tvm.s_tir.Schedule (docs/tvm.md shows one).")
    try:
        sch: Any = make(cfg)
    except TinyNpuError:
        raise
    except Exception as exc:  # TVM's ScheduleError and the like, raised in the user's schedule
        raise UsageError(f"{_where(exc, path)}: schedule(config) failed: {_first_lines(exc)}") from None
    reference = getattr(module, "reference", None)
    return compile_tvm(sch, config=cfg, reference=reference if callable(reference) else None, name=path.name)


__all__ = ["compile_file"]
