"""Re-run every command of docs/tutorial.md and paste its real output under it.

Each output block in the tutorial is preceded by a marker line::

    <!-- output: COMMAND [| head -N] -->

followed by a fenced code block; this script runs COMMAND from the
repository root (with ``head -N`` keeping the first N lines) and replaces
the block's contents with the command, as the reader types it, and what it
printed.  Run it after changing the
compiler or simulator, then read the diff: the prose around the blocks
quotes some of the numbers.

Usage: ``python docs/tutorial/refresh.py [--check]`` (``--check``: exit 1
if any block differs, without writing; ``--help``: the options).
``tests/test_report_tutorial.py`` checks every block in the normal suite, one
test per block (:func:`blocks`, :func:`differs`).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
BLOCK = re.compile(r"(<!-- output: (?P<cmd>.+?) -->\n```text\n)(?P<body>.*?)(```)", re.S)
# Wall-clock lines and absolute paths change from run to run and machine to machine; --check ignores them.
VOLATILE = re.compile(r"(wall time|compile time|compiled in|ranked by the cost model in|config_path=)")


def run(cmd: str) -> str:
    # pipefail: a command that fails before its `| head`/`| sed` filter is a failure with its stderr shown, not
    # an empty output that would read as a stale page
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    if proc.returncode not in (0, 141):  # 141: head closed the pipe early
        raise SystemExit(f"tutorial command failed ({proc.returncode}): {cmd}\n{proc.stderr}")
    return proc.stdout


def shown(cmd: str) -> str:
    """The command as the reader types it: one line per ``&&`` step, without the trimming filter or redirect."""
    steps = [re.sub(r"\s*(\|[^|]*|>/dev/null)\s*$", "", step.strip()) for step in cmd.split("&&")]
    return "".join(f"$ {step}\n" for step in steps)


def stable(text: str) -> list[str]:
    return [line for line in text.splitlines() if not VOLATILE.search(line)]


def blocks(text: str | None = None) -> list[tuple[str, str]]:
    """Every output block of the tutorial: (command, the output the page shows, command line included)."""
    text = TUTORIAL.read_text(encoding="utf-8") if text is None else text
    return [(m.group("cmd"), m.group("body")) for m in BLOCK.finditer(text)]


def differs(cmd: str, body: str) -> bool:
    """Whether ``cmd`` run now prints something else than ``body`` (volatile lines aside)."""
    return stable(shown(cmd) + run(cmd)) != stable(body)


SUMMARY_RUNS = "tinynpu run matmul --m 1024 --n 1024 --k 1024"  # the steps the summary table compares
SUMMARY = re.compile(r"(<!-- summary -->\n)(.*?)(<!-- /summary -->)", re.S)
# What each step's schedule does, for the summary table (keyed by the `schedule` line of `tinynpu run`).
STEPS = {
    "naive": "naive (the course's loop)",
    "2_tiling_reorder": "128x128 output block in `acc`",
    "3_scopes": "128-wide K panels in `a_reg`/`b_reg`",
    "4_tensorize_fold": "init folded into `tmm`",
    "5_double_buffer": "double-buffered A/B panels",
    "auto": "`auto` (the compiler's search)",
}


def field(out: str, name: str) -> str:
    match = re.search(rf"^{re.escape(name)}\s{{2,}}(.+)$", out, re.M)
    if not match:
        raise SystemExit(f"no {name!r} line in the output of a tutorial command:\n{out}")
    return match.group(1).strip()


def number(text: str) -> float:
    return float(text.split()[0].replace(",", ""))


def summary(runs: list[str]) -> str:
    """The table of every `tinynpu run` step and the closing comparison, from their outputs."""
    rows = [
        "| step | schedule | cycles | utilization | DRAM traffic | instructions |",
        "| :--- | :--- | ---: | ---: | ---: | ---: |",
    ]
    facts = []
    for i, out in enumerate(runs, 1):
        sched = field(out, "schedule")
        mib = number(field(out, "DRAM read")) * (1 if "MiB" in field(out, "DRAM read") else 1 / 1024)
        mib += number(field(out, "DRAM write")) * (1 if "MiB" in field(out, "DRAM write") else 1 / 1024)
        cycles = int(number(field(out, "cycles")))
        facts.append((sched, cycles, number(field(out, "roofline cycles")), field(out, "I/O lower bound (matmul)")))
        rows.append(
            f"| {i} | {STEPS.get(sched, sched)} | {cycles:,} | {field(out, 'utilization (useful MACs)')} "
            f"| {mib:g} MiB | {field(out, 'instructions').split()[0]} |"
        )
    naive, tuned = facts[0], facts[-1]
    above = tuned[1] - tuned[2]
    text = (
        f"The tuned program (`{tuned[0]}`) takes {naive[1] / tuned[1]:.2f}x fewer cycles than the course's loop "
        f"and is {above:,.0f} cycles ({100 * above / tuned[2]:.2f} %) above the compute bound.  The I/O lower "
        f"bound ({tuned[3].split('(')[0].strip()}) assumes a schedule could use every on-chip byte as one fully "
        "flexible cache, which an output-stationary tiling with fixed scratchpads cannot reach."
    )
    return "\n".join(rows) + "\n\n" + text + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python docs/tutorial/refresh.py",
        description="Re-run every command of docs/tutorial.md and paste its real output under it "
        "(about two minutes: six 1024^3 runs and a tune).",
    )
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if any output block differs from a fresh run, without writing (default: rewrite "
                             "docs/tutorial.md)")
    check = parser.parse_args(argv).check
    text = TUTORIAL.read_text(encoding="utf-8")
    differ = []

    def fill(match: re.Match[str]) -> str:
        cmd = match.group("cmd")
        print(f"$ {cmd}", file=sys.stderr, flush=True)
        out = shown(cmd) + run(cmd)
        if stable(out) != stable(match.group("body")):  # as differs(), keeping the output for the page
            differ.append(cmd)
        return match.group(1) + out + match.group(4)

    runs: list[str] = []

    def fill_and_keep(match: re.Match[str]) -> str:
        block = fill(match)
        if match.group("cmd").startswith(SUMMARY_RUNS):
            runs.append(block[len(match.group(1)) :])
        return block

    new = BLOCK.sub(fill_and_keep, text)
    new = SUMMARY.sub(lambda m: m.group(1) + summary(runs) + m.group(3), new)
    if check:
        for cmd in differ:
            print(f"differs: {cmd}", file=sys.stderr)
        return 1 if differ else 0
    TUTORIAL.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
