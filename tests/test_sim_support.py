"""Helpers for the simulator tests: build small programs with isa.encode (no tests here)."""

from __future__ import annotations

import atexit
import functools
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tinynpu.assembler.image import Program, Tensor
from tinynpu.isa import ArchConfig, load_config, load_isa
from tinynpu.isa.config import CONFIG_DIR, TILES
from tinynpu.simulator import Machine
from tinynpu.simulator.native import NativeUnavailable, library

ISA = load_isa()
DEFAULT = load_config("default")
FP32 = load_config("fp32")
#: The shipped configs of tile edge 8, 16 and 32: the tests whose behaviour depends on T run on each.
TILE_CONFIGS = (load_config("t8"), DEFAULT, load_config("t32"))


@functools.cache
def derived_tile_configs() -> tuple[ArchConfig, ...]:
    """T = 4, 64 and 128, which no config ships: t32.yaml with its tile, step interval and bandwidth changed.

    Loaded through :func:`load_config` from files in a temporary folder that lives as long as the process.
    """
    folder = Path(tempfile.mkdtemp(prefix="tinynpu-tiles-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    t32 = (CONFIG_DIR / "t32.yaml").read_text(encoding="utf-8")
    configs = []
    for tile in sorted(set(TILES) - {cfg.tile for cfg in TILE_CONFIGS}):
        text = re.sub(r"(?m)^name: t32", f"name: t{tile}", t32)
        text = re.sub(r"(?m)^tile: 32", f"tile: {tile}", text)
        text = text.replace("tmm_interval_cycles: 32", f"tmm_interval_cycles: {tile}")
        text = text.replace("bytes_per_cycle: 64", f"bytes_per_cycle: {min(128, tile * tile // 16)}")
        path = folder / f"t{tile}.yaml"
        path.write_text(text, encoding="utf-8")
        configs.append(load_config(path))
    return tuple(configs)


def over_tiles(*, ci: bool = False, every_tile: bool = False) -> pytest.MarkDecorator:
    """Parametrize a test's ``cfg`` over :data:`TILE_CONFIGS`.

    ``ci``: all three in the default suite (the representative subset); otherwise the
    default config there and T = 8 and 32 with the slow tests.  ``every_tile``: also
    every other T the ISA allows (:func:`derived_tile_configs`), with the slow tests.
    """
    fast = {cfg.name for cfg in TILE_CONFIGS} if ci else {DEFAULT.name}
    return pytest.mark.parametrize("cfg", [
        pytest.param(cfg, id=cfg.name, marks=() if cfg.name in fast else pytest.mark.slow)
        for cfg in (*TILE_CONFIGS, *(derived_tile_configs() if every_tile else ()))])


def units(*names: str) -> int:
    """A wait/signal mask from unit names."""
    return sum(1 << ISA.unit_ids[n] for n in names)


def scope(name: str) -> int:
    return ISA.scope_by_name[name].id


def program(instrs: Sequence[tuple[str, dict[str, Any]]], cfg: ArchConfig = DEFAULT,
            tensors: Sequence[Tensor] = ()) -> Program:
    return Program.build(ISA, cfg, [ISA.encode(m, f, tile=cfg.tile) for m, f in instrs], tensors)


def machine(instrs: Sequence[tuple[str, dict[str, Any]]], cfg: ArchConfig = DEFAULT,
            tensors: Sequence[Tensor] = ()) -> Machine:
    m = Machine(cfg, ISA)
    m.load(program(instrs, cfg, tensors))
    return m


def load(sc: str, row: int, dram: int, rows: int | None = None, cols: int | None = None,
         stride: int | None = None, *, cfg: ArchConfig = DEFAULT, **kw: int) -> tuple[str, dict[str, Any]]:
    """A load of ``cfg``: by default one whole tile (T rows of T elements), rows packed in DRAM."""
    rows = cfg.tile if rows is None else rows
    cols = cfg.tile if cols is None else cols
    if stride is None:
        stride = cols * cfg.elem_bytes(ISA.scope_by_name[sc].config_key)
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
