"""CONTRIBUTING.md's worked example, replayed: `vabs` added by a patch of five hand-written files.

``tests/worked_example/vabs.patch`` adds an ALU instruction touching only the
YAML, the Python semantics, the C semantics, the ALU unit and one test.  The
test applies it to a copy of the tree, regenerates what the project generates,
and checks that this is all it takes: ``tinynpu isa check`` passes, the patch's
own test and its YAML ``semantics`` text agree with both simulator cores, the tests of the generated header
and the ALU's shapes pass with it (their dispatcher checks included), and (slow, with a Verilog simulator)
random programs using every instruction, vabs included, co-simulate cycle for
cycle.
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
PATCH = Path(__file__).resolve().parent / "worked_example" / "vabs.patch"
HAND_WRITTEN = {"isa/isa.yaml", "simulator/semantics.py", "simulator/core.c", "rtl/tinynpu_alu_unit.sv",
                "tests/test_sim_semantics.py"}
PACKAGE_PARTS = ("isa", "assembler", "simulator", "compiler", "rtl", "explore")  # mapped under tinynpu.*
SKIP = shutil.ignore_patterns(".git", ".venv*", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                              "reports", "*.so")


def test_the_patch_touches_only_the_five_hand_written_files() -> None:
    touched = set(re.findall(r"^\+\+\+ b/(\S+)$", PATCH.read_text(encoding="utf-8"), flags=re.M))
    assert touched == HAND_WRITTEN


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A copy of the tree with the patch applied and the generated files regenerated, and its environment."""
    base = tmp_path_factory.mktemp("worked-example")
    tree = base / "tree"
    shutil.copytree(ROOT, tree, ignore=SKIP, symlinks=True)
    subprocess.run(["git", "apply", "--whitespace=nowarn", str(PATCH)], cwd=tree, check=True)
    # The package as installed maps isa/, simulator/, ... under tinynpu.*: the same mapping, by symlinks.
    package = base / "pkg" / "tinynpu"
    package.mkdir(parents=True)
    for entry in (tree / "tinynpu").iterdir():
        (package / entry.name).symlink_to(entry)
    for part in PACKAGE_PARTS:
        (package / part).symlink_to(tree / part)
    env = {**os.environ, "PYTHONPATH": str(package.parent)}
    for what in ("cheader", "verilog", "doc"):
        _tinynpu(["isa", what, "--force"], env, cwd=base)
    return tree, env


def _tinynpu(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the copy's tinynpu (``cwd`` outside the tree, so its own tinynpu/ folder does not shadow it)."""
    return subprocess.run([sys.executable, "-m", "tinynpu", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, check=True, timeout=600)


def _pytest(tree: Path, env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *args],
                          env={**env, "PYTHONSAFEPATH": "1"}, cwd=tree, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_isa_check_passes_with_the_new_instruction(patched: tuple[Path, dict[str, str]]) -> None:
    tree, env = patched
    out = _tinynpu(["isa", "check"], env, cwd=tree.parent).stdout
    assert str(tree / "isa" / "isa.yaml") in out and "vabs" in out


def test_both_simulator_cores_run_it(patched: tuple[Path, dict[str, str]]) -> None:
    tree, env = patched
    _pytest(tree, env, "tests/test_sim_semantics.py", "tests/test_isa_semantics.py", "-k", "vabs")


def test_the_generated_header_and_shape_tests_pass_with_it(patched: tuple[Path, dict[str, str]]) -> None:
    """The tests of what is generated from the YAML hold for any ISA, not only today's instructions."""
    tree, env = patched
    _pytest(tree, env, "tests/test_rtl_gen.py", "tests/test_isa_alu_shapes.py", "tests/test_isa_cheader.py")


@pytest.mark.slow
@pytest.mark.rtl
def test_random_programs_with_it_cosimulate_cycle_exact(patched: tuple[Path, dict[str, str]]) -> None:
    """The random RTL programs use every ALU instruction of the YAML, so vabs runs on the RTL too."""
    from test_rtl_cosim import require_rtl

    require_rtl()
    tree, env = patched
    _pytest(tree, env, "tests/test_rtl_cosim.py", "-k",
            "icarus and (test_rtl_agrees_with_simulator and random or test_random_programs_exercise_every_instruction)")
