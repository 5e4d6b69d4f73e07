"""docs/architecture.md documents every field of the JSON that scripts read, and only fields that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_sim_support import HALT, load, program, units

from tinynpu.assembler.image import Tensor
from tinynpu.cli import main

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _documented() -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", DOC.read_text(encoding="utf-8")))


def _json_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_every_stats_field_is_documented(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.bin"
    copy = [load("acc", 0, 0, rows=16, cols=4, stride=16, signal=units("store")),
            ("store", {"sp_row": 0, "dram": 0x1000, "rows": 16, "stride": 64, "wait": units("load")}), HALT]
    program(copy, tensors=[Tensor("X", 0, (16, 16), "int8", "input"),
                           Tensor("Y", 0x1000, (16, 16), "int32", "output")]).save(path)
    stats = _json_of(["sim", str(path), "--json"], capsys)
    missing = set(stats) - _documented()
    assert not missing, f"stats fields missing from {DOC.name}: {sorted(missing)}"
    causes = {cause for by_cause in stats["stall_cycles"].values() for cause in by_cause}
    assert causes <= _documented()


@pytest.mark.parametrize("argv", [
    ["run", "matmul", "--m", "40", "--n", "24", "--k", "32"],
    ["run", "conv2d", "--n", "1", "--c", "4", "--h", "6", "--w", "6", "--k", "8", "--r", "3", "--s", "3", "--pad", "1"],
])
def test_every_run_report_field_is_documented(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    report = _json_of([*argv, "--json", "--no-race-check"], capsys)
    missing = (set(report) | set(report["workload"].get("tiling") or {})) - _documented()
    assert not missing, f"run report fields missing from {DOC.name}: {sorted(missing)}"


def test_the_yardsticks_are_defined() -> None:
    text = DOC.read_text(encoding="utf-8")
    for name in ("io_lower_bound_bytes", "best_tiling_bytes", "roofline_cycles", "padding_ceiling"):
        assert f"**`{name}`**" in text, f"{name} has no definition in {DOC.name}"
