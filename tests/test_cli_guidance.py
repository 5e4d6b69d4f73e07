"""The command line guides a user who slips: no abbreviated options, the closest option named, assembly given
where an image belongs, the config ``--dtype fp32`` switches to, and a sweep spec given as a config."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tinynpu.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
MATMUL = ["run", "matmul", "--m", "16", "--n", "16", "--k", "16"]


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                out += _parsers(sub)
    return out


def test_no_parser_takes_abbreviations() -> None:
    parsers = _parsers(build_parser())
    assert len(parsers) > 20
    assert [p.prog for p in parsers if p.allow_abbrev] == []


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_an_abbreviated_option_is_refused_and_the_full_one_named(capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error([*MATMUL, "--schedul", "naive"], capsys)
    assert err.startswith("tinynpu run matmul: error: unrecognized arguments: --schedul naive; "
                          "--schedul: did you mean --schedule?"), err


def test_an_unknown_option_names_the_closest_one_of_its_command(capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(["sim", "program.bin", "--jsn"], capsys)
    assert "tinynpu sim: error: unrecognized arguments: --jsn; --jsn: did you mean --json?" in err
    err = _usage_error(["sim", "program.bin", "--frobnicate"], capsys)
    assert "unrecognized arguments: --frobnicate. Run 'tinynpu sim --help'" in err  # nothing close: no guess


def test_sim_on_assembly_text_says_to_assemble_it(capsys: pytest.CaptureFixture[str]) -> None:
    seed = ROOT / "examples" / "seed_32.s"
    assert main(["sim", str(seed)]) == 2
    err = capsys.readouterr().err
    assert f"{seed}: this is text, not a program image" in err and f"tinynpu asm {seed} -o PROGRAM.bin" in err


def test_dtype_fp32_says_which_config_it_runs_on(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*MATMUL, "--dtype", "fp32", "--json", "--no-race-check"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["config"] == "fp32"
    assert "note: --dtype fp32 runs on the built-in fp32 config" in captured.err
    assert main([*MATMUL, "--dtype", "fp32", "--config", "fp32", "--json", "--no-race-check"]) == 0
    assert "note: --dtype fp32" not in capsys.readouterr().err  # the user chose the config: nothing to say


@pytest.mark.parametrize("argv", [MATMUL, ["synth"], ["compile", "matmul", "--m", "16", "--n", "16", "--k", "16",
                                                      "-o", "unused"]])
def test_a_sweep_spec_given_as_config_says_so(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    spec = ROOT / "examples" / "sweep.yaml"
    assert main([*argv, "--config", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "this is a sweep spec (it has parameters: and workloads:), not an architecture config; run it with: " \
           f"tinynpu sweep {spec}" in err, err
