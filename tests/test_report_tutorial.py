"""docs/tutorial.md: every command it shows prints what the page says it prints (slow: 1024^3 runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_tutorial_schedules_replay() -> None:
    from tinynpu.compiler.schedule import Schedule, Tiling, apply
    from tinynpu.isa import load_config

    cfg = load_config("default")
    tilings = {
        p.stem: apply(Schedule.load(p), m=1024, n=1024, k=1024, cfg=cfg)
        for p in sorted((ROOT / "docs" / "tutorial").glob("*.json"))
    }
    assert tilings == {
        "2_tiling_reorder": Tiling(bm=8, bn=8, bk=1, double_buffer=False, init="fill_zero"),
        "3_scopes": Tiling(bm=8, bn=8, bk=8, double_buffer=False, init="fill_zero"),
        "4_tensorize_fold": Tiling(bm=8, bn=8, bk=8, double_buffer=False, init="fold"),
        "5_double_buffer": Tiling(bm=8, bn=8, bk=8, init="fold"),
    }


@pytest.mark.slow
def test_tutorial_outputs_are_current() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "tutorial" / "refresh.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
