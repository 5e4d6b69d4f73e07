"""The README's commands run as written, in order, in a fresh copy of the repository.

The README's "Using it" block runs as one bash session from the root of a temporary copy of the tracked
files (so nothing here touches the working tree, a file the README forgets to create is a failure, not a
leftover from an earlier run, and its `cd scratch` holds for the lines after it).  The lines that take more
than a few seconds (1024^3 runs, the tuner, co-simulation, the full report, benchmarks) run only in the slow
suite; the fast subset keeps their order, and no fast line depends on a slow one.  The first block, the two
setup scripts, installs and tests the project itself and is checked by hand from a fresh clone instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SLOW_PREFIXES = (
    "tinynpu run matmul --m 1024",
    "tinynpu run conv2d",
    "tinynpu tune",
    "tinynpu cosim",
    "tinynpu synth",
    "tinynpu report",
    "tinynpu bench",
)


def readme_commands() -> list[str]:
    """The command lines of the README's "Using it" code block, in order."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Using it", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README.md: no ```sh block under '## Using it'"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _fresh_copy(tmp: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the README test copies the tracked files")
    copy = tmp / "repo"
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


def _session(commands: list[str]) -> str:
    """One bash script running ``commands`` in order; the first that fails exits with its status, named on stderr."""
    lines = ["set -u -o pipefail"]
    for i, command in enumerate(commands):
        lines += [command, f"status=$?; if [ $status -ne 0 ]; then echo '@@ line {i} failed' >&2; exit $status; fi"]
    return "\n".join(lines) + "\n"


def _run_in_order(commands: list[str], tmp: Path, *, passes: int) -> None:
    """Run ``commands`` as one session from the copy's root, ``passes`` times in the same copy."""
    copy = _fresh_copy(tmp)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for n in range(passes):
        proc = subprocess.run(["bash", "-c", _session(commands)], cwd=copy, env=env, capture_output=True, text=True,
                              check=False)
        failed = re.search(r"@@ line (\d+) failed", proc.stderr)
        where = commands[int(failed.group(1))] if failed else "(the session)"
        assert proc.returncode == 0, \
            f"README command failed ({proc.returncode}, pass {n + 1}): {where}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr, f"README commands printed a traceback (pass {n + 1}):\n{proc.stderr}"


def test_the_readme_block_has_the_commands_it_promises() -> None:
    commands = readme_commands()
    assert any(c.startswith("tinynpu sim seed.bin --input A=a.npy") for c in commands)
    # Every output lands in a scratch folder, not in the repository's root.
    assert commands[0].startswith("mkdir -p scratch && cd scratch")
    # The inputs the sim line reads are made by an earlier line.
    sim = next(i for i, c in enumerate(commands) if c.startswith("tinynpu sim"))
    assert any("a.npy" in c and "np.save" in c for c in commands[:sim])


def test_readme_fast_commands_run_as_written_twice(tmp_path: Path) -> None:
    """Run in order, then all again in the same folder: every output the first pass wrote may be replaced."""
    fast = [c for c in readme_commands() if not c.startswith(SLOW_PREFIXES)]
    _run_in_order(fast, tmp_path, passes=2)


@pytest.mark.slow
def test_readme_commands_run_as_written_twice(tmp_path: Path) -> None:
    _run_in_order(readme_commands(), tmp_path, passes=2)
