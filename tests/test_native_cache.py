"""The native core's cache: a truncated, empty or never-loadable library is rebuilt or refused, never loaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_sim_support import native_reason

from tinynpu.cli import main

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(native_reason() is not None and os.environ.get("TINYNPU_REQUIRE_NATIVE") != "1",
                                reason=f"no native core: {native_reason()}")


def _sim(binary: Path, cache: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    run_env = {**os.environ, "TINYNPU_CACHE": str(cache), **(env or {})}
    return subprocess.run([sys.executable, "-m", "tinynpu", "sim", str(binary), "--json", *extra],
                          capture_output=True, text=True, env=run_env, timeout=300, check=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The seed program and a cache holding a freshly built core (built once for the module)."""
    tmp = tmp_path_factory.mktemp("native")
    binary = tmp / "seed.bin"
    assert main(["asm", str(ROOT / "examples" / "seed_32.s"), "-o", str(binary)]) == 0
    cache = tmp / "cache"
    proc = _sim(binary, cache)
    assert proc.returncode == 0 and json.loads(proc.stdout)["engine"] == "native", proc.stderr
    return binary, cache


@pytest.mark.parametrize("size", ["half", pytest.param(0, marks=pytest.mark.slow),
                                  pytest.param(100, marks=pytest.mark.slow)])
def test_a_damaged_cached_core_is_rebuilt_and_said_so(built: tuple[Path, Path], tmp_path: Path,
                                                      size: str | int) -> None:
    binary, cache = built
    mine = tmp_path / "cache"
    shutil.copytree(cache, mine)
    (lib,) = mine.glob("core-*.so")
    data = lib.read_bytes()
    lib.write_bytes(data[: len(data) // 2 if size == "half" else int(size)])
    proc = _sim(binary, mine)
    assert proc.returncode == 0, proc.stderr  # not SIGBUS (-7)
    assert json.loads(proc.stdout)["engine"] == "native"
    assert "rebuilding it" in proc.stderr and str(lib) in proc.stderr
    assert lib.read_bytes() == data or len(lib.read_bytes()) > len(data) // 2
    again = _sim(binary, mine)
    assert again.returncode == 0 and "rebuilding" not in again.stderr  # rebuilt once, then trusted


def test_a_compiler_that_writes_nothing_caches_nothing(built: tuple[Path, Path], tmp_path: Path) -> None:
    binary, _ = built
    cache = tmp_path / "cache"
    proc = _sim(binary, cache, "--engine", "native", env={"CC": "/bin/true"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "does not load" in proc.stderr
    assert not list(cache.glob("core-*.so"))
    fallback = _sim(binary, cache, env={"CC": "/bin/true"})  # auto: the Python core, and no broken cache left
    assert fallback.returncode == 0 and json.loads(fallback.stdout)["engine"] == "python"
