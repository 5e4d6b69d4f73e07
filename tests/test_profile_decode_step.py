"""scripts/profile_decode_step.py (the per-step timing of docs/llm.md) runs on a small decoder."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "profile_decode_step.py"


def test_profile_decode_step_prints_every_step(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("profile_decode_step", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--layers", "1", "--hidden", "64", "--heads", "2", "--vocab", "96", "--prompt", "4",
                 "--generate", "3", "--config", "default", "--profile", str(tmp_path / "p")])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert [line.split(" (")[0] for line in lines] == ["step 0", "step 1", "step 2"]
    assert all(" cycles, " in line and "simulator " in line and "reference " in line for line in lines)
    assert (tmp_path / "p.sim").stat().st_size > 0 and (tmp_path / "p.ref").stat().st_size > 0
