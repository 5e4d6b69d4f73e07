"""Re-run every command of docs/tutorial.md and paste its real output under it.

Each output block in the tutorial is preceded by a marker line::

    <!-- output: COMMAND [| head -N] -->

followed by a fenced code block; this script runs COMMAND from the
repository root (with ``head -N`` keeping the first N lines) and replaces
the block's contents with what it printed.  Run it after changing the
compiler or simulator, then read the diff: the prose around the blocks
quotes some of the numbers.

Usage: ``python docs/tutorial/refresh.py [--check]`` (``--check``: exit 1
if any block differs, without writing).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
BLOCK = re.compile(r"(<!-- output: (?P<cmd>.+?) -->\n```text\n)(?P<body>.*?)(```)", re.S)
# Wall-clock lines change on every run; --check ignores them.
VOLATILE = re.compile(r"(wall time|compile time|compiled in|ranked by the cost model in)")


def run(cmd: str) -> str:
    proc = subprocess.run(cmd, shell=True, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 141):  # 141: head closed the pipe early
        raise SystemExit(f"tutorial command failed ({proc.returncode}): {cmd}\n{proc.stderr}")
    return proc.stdout


def stable(text: str) -> list[str]:
    return [line for line in text.splitlines() if not VOLATILE.search(line)]


def main() -> int:
    check = "--check" in sys.argv[1:]
    text = TUTORIAL.read_text(encoding="utf-8")
    differ = []

    def fill(match: re.Match[str]) -> str:
        cmd = match.group("cmd")
        print(f"$ {cmd}", file=sys.stderr, flush=True)
        out = run(cmd)
        if stable(out) != stable(match.group("body")):
            differ.append(cmd)
        return match.group(1) + out + match.group(4)

    new = BLOCK.sub(fill, text)
    if check:
        for cmd in differ:
            print(f"differs: {cmd}", file=sys.stderr)
        return 1 if differ else 0
    TUTORIAL.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
