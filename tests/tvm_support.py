"""Helpers for the tests of the TVM front end (no tests here)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tinynpu.assembler import Program, assemble
from tinynpu.isa import ArchConfig, Isa, load_isa
from tinynpu.simulator import Machine

ROOT = Path(__file__).resolve().parent.parent
ISA = load_isa()


def require_tvm() -> None:
    """Skip without the ``tinynpu[tvm]`` extra, unless ``TINYNPU_REQUIRE_TVM=1`` (CI) makes that a failure."""
    from tinynpu.compiler.tvm.require import missing

    reason = missing()
    if reason is None:
        return
    if os.environ.get("TINYNPU_REQUIRE_TVM") == "1":
        pytest.fail(f"{reason}; TINYNPU_REQUIRE_TVM=1 says the tinynpu[tvm] extra must be installed")
    pytest.skip(f"{reason} (install tinynpu[tvm])")


def example(name: str) -> ModuleType:
    """``examples/<name>.py`` as a module (TVMScript needs the file's source, so it is imported, not exec'd)."""
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"tinynpu_example_{name.replace('/', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def without_tokens(words: tuple[int, ...] | list[int], isa: Isa = ISA) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    """Each instruction as (mnemonic, its fields but wait/signal): programs compared tokens aside."""
    out = []
    for word in words:
        instr, fields = isa.decode(word)
        out.append((instr.mnemonic, tuple(sorted((k, v) for k, v in fields.items()
                                                 if instr.field_map[k].kind != "units"))))
    return out


def seed_program(m: int, n: int, k: int, cfg: ArchConfig) -> Program:
    """examples/seed.py's program."""
    return assemble(example("seed").seed_source(m, n, k, cfg.name), isa=ISA, cfg=cfg)


def cycles(program: Program, cfg: ArchConfig) -> int:
    """The simulated cycles of ``program`` (on zero-filled DRAM: the timing does not depend on the data)."""
    machine = Machine(cfg, ISA)
    machine.load(program)
    return int(machine.run(check_races=False).to_json()["cycles"])
