"""Progress on stderr only for a terminal and never under --json; every command names the files it wrote."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from tinynpu import progress as P
from tinynpu.cli import main


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_shown_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setattr(P, "REFRESH_SECONDS", 0.01)
    assert list(P.progress(range(3), total=3, desc="shapes", quiet=False)) == [0, 1, 2]
    with P.step("simulating", quiet=False):
        time.sleep(0.05)
    P.say("a note", quiet=False)
    shown = terminal.getvalue()
    assert "shapes" in shown and "simulating: 00:00" in shown and "a note" in shown


@pytest.mark.parametrize("tty", [True, False])
def test_progress_is_silent_under_json_or_without_a_terminal(tty: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = _Terminal() if tty else io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    quiet = tty  # on a terminal, --json silences it; off a terminal it is silent anyway
    assert list(P.progress([1, 2], desc="x", quiet=quiet)) == [1, 2]
    with P.step("simulating", quiet=quiet):
        pass
    P.say("note", quiet=quiet)
    assert stream.getvalue() == ""


def test_wrote_names_every_file() -> None:
    assert P.wrote(["c.npy", "t.json"]) == "wrote c.npy, t.json"
    assert P.wrote(["out/a.s", "out/a.bin", "x/y.json"]) == "wrote out/: a.s, a.bin; x/y.json"


def test_commands_name_the_files_they_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mm"
    assert main(["compile", "matmul", "--m", "32", "--n", "32", "--k", "32", "-o", str(out)]) == 0
    line = capsys.readouterr().out
    assert all(name in line for name in ("program.s", "program.bin", "manifest.json", "schedule.json"))
    assert main(["sim", str(out / "program.bin"), "--output", f"C={tmp_path / 'c.npy'}",
                 "--trace", str(tmp_path / "t.json"), "--no-race-check"]) == 0
    assert f"wrote {tmp_path}/: c.npy, t.json" in capsys.readouterr().out
    assert main(["sim", str(out / "program.bin"), "--output", f"C={tmp_path / 'c.npy'}", "--force", "--json",
                 "--no-race-check"]) == 0
    assert json.loads(capsys.readouterr().out)["files_written"] == [str(tmp_path / "c.npy")]
    schedule = tmp_path / "s.json"
    assert main(["tune", "matmul", "--m", "32", "--n", "32", "--k", "32", "--trials", "4", "--simulate-best", "1",
                 "-o", str(schedule)]) == 0
    assert f"wrote {schedule}" in capsys.readouterr().out


def test_a_long_step_announces_itself_without_a_terminal_and_under_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A synthesis that runs says so on stderr (a log shows why nothing moves); a cached one says nothing."""
    from tinynpu.rtl import synth

    monkeypatch.setenv("TINYNPU_CACHE", str(tmp_path))
    ran: list[str] = []
    for _ in range(2):
        assert synth._cached("m-T8", "k", lambda: {"cells": 1}, ran, what="m at T = 8", expect="seconds") == {
            "cells": 1}
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("tinynpu: synthesizing m at T = 8 with Yosys (seconds on a 2-core machine") == 1
    assert ran == ["m-T8"]
