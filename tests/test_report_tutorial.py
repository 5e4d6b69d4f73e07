"""docs/tutorial.md: every command it shows prints what the page says it prints, one test per output block."""

from __future__ import annotations

import re
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


def _blocks() -> list[tuple[str, str]]:
    sys.path.insert(0, str(ROOT / "docs" / "tutorial"))
    try:
        import refresh  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    return refresh.blocks()


def test_tutorial_output_is_current() -> None:
    """Each block of the page is what its command prints today (refresh with python docs/tutorial/refresh.py).

    One test, the blocks in page order: a block reads what an earlier one wrote (``out/``, a tuned schedule), as
    a reader following the page does, so they must not be spread over test workers."""
    blocks = _blocks()
    import refresh  # type: ignore[import-not-found]  # on sys.modules since _blocks()

    stale = [cmd for cmd, body in blocks if refresh.differs(cmd, body)]
    assert not stale, f"stale blocks: {stale}; regenerate with python docs/tutorial/refresh.py"


@pytest.mark.slow
def test_tutorial_refresh_check_passes() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "tutorial" / "refresh.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_the_page_names_no_machine_paths() -> None:
    """What the page shows runs anywhere: no absolute path of the machine that refreshed it."""
    text = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    assert str(ROOT) not in text
    assert not re.search(r"(^|[\s=(])/(home|work|tmp|root|usr|opt)/", text, re.M), "an absolute path on the page"
