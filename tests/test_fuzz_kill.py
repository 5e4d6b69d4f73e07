"""SIGKILL at random points of `compile`, `sim --output` and `report`: the outputs are the old set or the new one.

Each command first runs to completion twice (the "old" and the "new" version of its outputs, as
references), then the new version is started again and again and killed at a random moment; after each
kill the output set must equal one of the two references, whole.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tinynpu import fsio
from tinynpu.cli import main

ROOT = Path(__file__).resolve().parent.parent
KILLS = 10 if os.environ.get("TINYNPU_SLOW") == "1" else 3


def _files(directory: Path) -> dict[str, bytes]:
    """The outputs in ``directory``; a killed writer's hidden temporary file (never an output) is left out."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and not p.name.startswith(fsio.TEMP_PREFIX)}


def _leftovers(*directories: Path) -> list[str]:
    """Temporary files and staging directories (ours by their prefix) in ``directories``."""
    return sorted(p.name for d in directories for p in d.iterdir()
                  if p.name.startswith((fsio.TEMP_PREFIX, fsio.KEPT_PREFIX)))


def _timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tinynpu", *argv], cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def _kill_at_random(argv: list[str], cwd: Path, duration: float, rng: random.Random,
                    check: Callable[[], None]) -> None:
    for _ in range(KILLS):
        proc = subprocess.Popen([sys.executable, "-m", "tinynpu", *argv], cwd=cwd, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.05) * duration)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        check()


def _two_versions(tmp_path: Path, argv_of: Callable[[str], list[str]], out: str,
                  versions: tuple[str, str]) -> tuple[dict[str, bytes], dict[str, bytes], float]:
    refs = []
    for version in versions:
        assert main(argv_of(version)) == 0
        refs.append(_files(tmp_path / out))
    assert refs[0] != refs[1]
    return refs[0], refs[1], 0.0


def test_compile_killed_leaves_the_old_or_the_new_set(tmp_path: Path) -> None:
    def argv(size: str) -> list[str]:
        return ["compile", "matmul", "--m", size, "--n", size, "--k", size, "--schedule", "naive", "-o", "mm"]

    os.chdir(tmp_path)
    old, new, _ = _two_versions(tmp_path, argv, "mm", ("64", "256"))
    duration = _timed(argv("256"), tmp_path)
    assert main(argv("64")) == 0  # start from the old set

    def check() -> None:
        assert _files(tmp_path / "mm") in (old, new), "a mix of two compiles"

    _kill_at_random(argv("256"), tmp_path, duration, random.Random(0), check)
    assert main(argv("64")) == 0  # the next run removes what the killed ones left behind
    assert _leftovers(tmp_path, tmp_path / "mm") == []
    assert _files(tmp_path / "mm") == old


def test_sim_output_killed_leaves_the_old_or_the_new_files(tmp_path: Path) -> None:
    os.chdir(tmp_path)
    assert main(["compile", "matmul", "--m", "128", "--n", "128", "--k", "128", "--schedule", "naive", "-o",
                 "mm"]) == 0
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        for version in ("old", "new"):
            np.save(f"{name}_{version}.npy", rng.integers(-128, 128, (128, 128), dtype=np.int8))

    def argv(version: str) -> list[str]:
        return ["sim", "mm/program.bin", "--input", f"A=a_{version}.npy", "--input", f"B=b_{version}.npy",
                "--output", "C=out/c.npy", "--trace", "out/t.json", "--force", "--engine", "python"]

    (tmp_path / "out").mkdir()
    old, new, _ = _two_versions(tmp_path, argv, "out", ("old", "new"))
    duration = _timed(argv("new"), tmp_path)
    assert main(argv("old")) == 0

    def check() -> None:
        now = _files(tmp_path / "out")
        assert set(now) == {"c.npy", "t.json"}, f"files lost or left behind: {sorted(now)}"
        for name, data in now.items():
            assert data in (old[name], new[name]), f"{name} is neither the old nor the new output"

    _kill_at_random(argv("new"), tmp_path, duration, random.Random(1), check)
    assert main(argv("old")) == 0  # the next run removes what the killed ones left behind
    assert _leftovers(tmp_path / "out") == []
    assert _files(tmp_path / "out") == old


@pytest.mark.slow
def test_report_killed_leaves_the_old_or_the_new_report(tmp_path: Path) -> None:
    os.chdir(tmp_path)

    def argv(size: str) -> list[str]:
        return ["report", "matmul", "--m", size, "--n", size, "--k", size, "-o", "rep", "--json"]

    def whole() -> str:
        """The report's version (its size), after checking every file it lists is there and nothing else."""
        index = (tmp_path / "rep" / "index.md").read_text()
        summary = json.loads((tmp_path / "rep" / "report.json").read_text())
        listed = {Path(p["path"]).name for p in summary["figures"].values()}
        present = {p.name for p in (tmp_path / "rep" / "figures").iterdir()}
        assert listed == present, f"figures {sorted(present)} but the report lists {sorted(listed)}"
        label = summary["workloads"][0]["workload"]
        assert label in index, "index.md and report.json of different runs"
        return label

    assert main(argv("16")) == 0
    old = whole()
    duration = _timed(argv("32"), tmp_path)
    new = whole()
    assert main(argv("16")) == 0

    def check() -> None:
        assert whole() in (old, new)

    _kill_at_random(argv("32"), tmp_path, duration, random.Random(2), check)
    assert main(argv("16")) == 0  # the next run removes what the killed ones left behind
    assert _leftovers(tmp_path, tmp_path / "rep") == []
    assert whole() == old
