"""Progress for the steps that can take more than about a second, and the closing "wrote ..." line.

Everything here writes to stderr, so stdout keeps exactly what a command promises (a table, or one
JSON object), and is silent when ``quiet`` (the command's ``--json``) or when stderr is not a
terminal (a log file or a pipe gets no bar redraws).  Three shapes cover every long step:

- :func:`progress`: a bar over a known number of items (workloads, trials, benchmark runs);
- :func:`step`: one long call whose length is unknown (a simulation, a co-simulation), shown as its
  name and the seconds elapsed, refreshed while it runs;
- :func:`say`: a line between steps that does not break a bar drawn below it.

One more, :func:`announce`, is never silent: a step that can take more than about ten seconds (a
synthesis, a Verilator build) says what it does and roughly how long it takes when it starts, on
stderr, with ``--json`` and without a terminal too, so a log or a CI job shows why nothing else
moves for minutes.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
REFRESH_SECONDS = 0.5  # how often a running step redraws its elapsed time


def enabled(quiet: bool) -> bool:
    """Whether progress is shown: not under ``--json``, and only to a terminal."""
    return not quiet and sys.stderr.isatty()


def progress(items: Iterable[T], *, total: int | None = None, desc: str, quiet: bool,
             unit: str = "step") -> Iterator[T]:
    """``items``, with a bar on stderr counting them (removed when done)."""
    from tqdm import tqdm

    yield from tqdm(items, total=total, desc=desc, file=sys.stderr, disable=not enabled(quiet), unit=unit,
                    leave=False, dynamic_ncols=True)


@contextlib.contextmanager
def step(desc: str, *, quiet: bool) -> Iterator[None]:
    """Show ``desc`` and the seconds elapsed on stderr while the ``with`` body runs."""
    if not enabled(quiet):
        yield
        return
    from tqdm import tqdm

    bar = tqdm(total=None, desc=desc, file=sys.stderr, bar_format="{desc}: {elapsed}", leave=False)
    done = threading.Event()

    def refresh() -> None:
        while not done.wait(REFRESH_SECONDS):
            bar.refresh()

    ticker = threading.Thread(target=refresh, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        bar.close()


def say(message: str, *, quiet: bool) -> None:
    """One line on stderr that leaves any bar below it intact."""
    if enabled(quiet):
        from tqdm import tqdm

        tqdm.write(message, file=sys.stderr)


def announce(what: str, expect: str) -> None:
    """``tinynpu: WHAT (EXPECT)`` on stderr, always: the start of a step that can take minutes."""
    from tqdm import tqdm

    tqdm.write(f"tinynpu: {what} ({expect})", file=sys.stderr)


def wrote(paths: Sequence[Path | str]) -> str:
    """The closing line of a command that wrote files: every file named, those in one folder grouped."""
    if not paths:
        return "wrote no files"
    groups: dict[Path, list[str]] = {}
    for path in map(Path, paths):
        groups.setdefault(path.parent, []).append(path.name)
    parts = [", ".join(names) if folder == Path(".") else str(folder / names[0]) if len(names) == 1
             else f"{folder}/: {', '.join(names)}" for folder, names in groups.items()]
    return "wrote " + "; ".join(parts)


__all__ = ["announce", "enabled", "progress", "say", "step", "wrote"]
