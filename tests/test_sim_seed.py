"""The course's seed program (lnumpy_tmm) on the simulator: int8 bit-exact, fp32 within rtol 1e-5."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from test_sim_support import ISA

from tinynpu.assembler.assemble import assemble
from tinynpu.isa import load_config
from tinynpu.simulator import Machine

pytestmark = pytest.mark.usefixtures("sim_engine")  # each test runs on both simulator cores

_SEED = Path(__file__).resolve().parents[1] / "examples" / "seed.py"


def _seed_source(size: int, config: str) -> str:
    spec = importlib.util.spec_from_file_location("tinynpu_seed_example", _SEED)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.seed_source(size, size, size, config)


def _run(size: int, config: str, **run: bool):
    cfg = load_config(config)
    prog = assemble(_seed_source(size, config), isa=ISA, cfg=cfg)
    rng = np.random.default_rng(size)
    if cfg.is_integer:
        a = rng.integers(-128, 128, (size, size), dtype=np.int8)
        b = rng.integers(-128, 128, (size, size), dtype=np.int8)
    else:  # the course's data: np.random.rand
        a = rng.random((size, size), dtype=np.float32)
        b = rng.random((size, size), dtype=np.float32)
    m = Machine(cfg, ISA)
    m.load(prog)
    m.write_tensor("A", a)
    m.write_tensor("B", b)
    stats = m.run(**run)
    return a, b, m.read_tensor("C"), stats


@pytest.mark.parametrize("timing", [True, False])
def test_seed_int8_bit_exact(timing: bool) -> None:
    a, b, c, stats = _run(64, "default", timing=timing)
    ref = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32)
    assert np.array_equal(c, ref)
    tiles = 64 // 16
    assert stats.instructions_total == tiles * tiles * (3 * tiles + 2) + 1


def test_seed_fp32_allclose() -> None:
    a, b, c, stats = _run(64, "fp32")
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)
    assert stats.cycles > 0 and stats.dram_read_bytes == 2 * 64 * 64 * 64 // 16 * 4


@pytest.mark.slow
def test_seed_1024_int8() -> None:
    a, b, c, stats = _run(1024, "default")
    ref = (a.astype(np.float64) @ b.astype(np.float64).T).astype(np.int64).astype(np.int32)
    assert np.array_equal(c, ref)


@pytest.mark.slow
def test_seed_1024_fp32() -> None:
    a, b, c, _ = _run(1024, "fp32", check_races=False)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)
