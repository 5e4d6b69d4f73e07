"""The top-level command: every part registers, errors are one paragraph without traceback."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tinynpu.cli import build_parser, main

COMMANDS = {"isa", "asm", "disasm", "sim", "compile", "run", "tune", "cosim", "report", "demo", "bench"}
BENCHES = {"sim", "compiler", "cosim"}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_part_registers_its_commands() -> None:
    commands = _subcommands(build_parser())
    assert set(commands) >= COMMANDS
    assert set(_subcommands(commands["bench"])) >= BENCHES


def test_usage_error_is_one_line_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "matmul", "--m", "notanumber", "--n", "1", "--k", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--m" in err


def test_user_error_exits_nonzero_without_traceback() -> None:
    proc = subprocess.run([sys.executable, "-m", "tinynpu", "run", "matmul", "--m", "0", "--n", "4", "--k", "4"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert proc.stderr.startswith("tinynpu: error:") and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1  # one paragraph on one line
