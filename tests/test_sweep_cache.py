"""The sweep's per-point cache is keyed by the code that computes a point: an edit to it recomputes the point,
an edit elsewhere serves it from the cache.

The digest reads a copy of the installed packages in a temporary directory, and the tests edit the copy;
the sweep's workers run the real code."""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinynpu.cli import main
from tinynpu.explore import execute, sources
from tinynpu.explore.execute import read_results
from tinynpu.explore.spec import design_points, load_sweep

SPEC = """\
base: default
parameters:
  dram.latency_cycles: [50]
workloads:
  gemm: [[32, 32, 32]]
objectives: [cycles, energy_pj]
"""


@pytest.fixture
def code_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of every package :data:`sources.CODE` names (subpackages and neighbours included), which the
    digest then reads instead of the installed files."""
    copies = tmp_path / "code"
    for package in dict.fromkeys(package for package, _ in sources.CODE):  # a package may give several globs
        shutil.copytree(sources.package_dir(package), copies / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(sources, "package_dir", lambda package: copies / package)
    sources.code_digest.cache_clear()
    yield copies
    sources.code_digest.cache_clear()  # the next test computes the installed files' digest again


def _edit(path: Path) -> None:
    """An edit that changes no behaviour: only the bytes differ."""
    comment = "\n/* an edit */\n" if path.suffix in (".c", ".h") else "\n# an edit\n"
    path.write_text(path.read_text() + comment)
    sources.code_digest.cache_clear()  # a new process: the digest is read once per process


def _key(tmp_path: Path) -> str:
    spec = load_sweep(_write_spec(tmp_path))
    (tmp_path / "configs").mkdir(exist_ok=True)
    (point,) = design_points(spec, tmp_path / "configs")
    return execute.point_key(point, spec.workloads[0])


def _write_spec(tmp_path: Path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(SPEC))
    return path


def _sweep(capsys: pytest.CaptureFixture[str], spec: Path, out: Path, *args: str) -> dict[str, int]:
    code = main(["sweep", str(spec), "-o", str(out), "--workers", "1", "--json", *args])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_a_cached_point_is_recomputed_after_a_simulator_edit(tmp_path: Path, code_copy: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    names = {name for name, _ in sources.source_files()}  # the installed packages' files (here their copy)
    assert {"tinynpu.simulator/core.c", "tinynpu.compiler/onnx/network.py", "tinynpu.isa/isa.yaml",
            "tinynpu.explore/task.py", "tinynpu.explore/llm_workload.py", "tinynpu/intmath.py"} <= names
    # Neither the reports, nor the sweep's own report, nor the RTL (an area has its own key), nor any docs.
    assert not {n for n in names if n.startswith(("tinynpu/report/", "tinynpu.rtl", "tinynpu.explore/report"))}
    assert not {n for n in names if n.endswith((".md", ".pyc", ".so"))}
    monkeypatch.setattr(execute, "cache_dir", lambda: tmp_path / "cache")  # the native core's cache stays shared
    spec = _write_spec(tmp_path)
    first = _sweep(capsys, spec, tmp_path / "first")
    assert (first["computed"], first["cached"]) == (1, 0)

    # Files that compute no point: the reports, the sweep's own report and figures.
    for unrelated in ("tinynpu/report/build.py", "tinynpu.explore/report.py", "tinynpu.explore/figures.py"):
        _edit(code_copy / unrelated)
    served = _sweep(capsys, spec, tmp_path / "served")
    assert (served["computed"], served["cached"]) == (0, 1)

    _edit(code_copy / "tinynpu.simulator" / "core.c")
    again = _sweep(capsys, spec, tmp_path / "again")
    assert (again["computed"], again["cached"]) == (1, 0)
    # --resume keeps no row the earlier code computed: the point comes from the cache the new code filled.
    resumed = _sweep(capsys, spec, tmp_path / "first", "--resume")
    assert (resumed["resumed"], resumed["computed"], resumed["cached"]) == (0, 0, 1)
    (old,), (new,) = (read_results(tmp_path / d / "results.csv") for d in ("served", "first"))
    assert old["key"] != new["key"]  # the key column names the code too
    assert (old["cycles"], old["energy_pj"]) == (new["cycles"], new["energy_pj"])  # the edit changed only bytes


@pytest.mark.parametrize("edited", [
    "tinynpu.simulator/core.c", "tinynpu.simulator/generated/tinynpu_core.h", "tinynpu.simulator/energy.py",
    "tinynpu.simulator/timing.py", "tinynpu.compiler/matmul.py", "tinynpu.compiler/onnx/frontend/importer.py",
    "tinynpu.isa/isa.yaml", "tinynpu.isa/configs/default.yaml", "tinynpu.isa/config.py",
    "tinynpu.assembler/image.py", "tinynpu/intmath.py", "tinynpu/__init__.py", "tinynpu.explore/task.py",
    "tinynpu.explore/llm_workload.py",
])
def test_every_part_that_computes_a_point_is_in_its_key(tmp_path: Path, code_copy: Path, edited: str) -> None:
    before = _key(tmp_path)
    _edit(code_copy / "tinynpu.explore" / "report.py")  # not a part: the same key
    assert _key(tmp_path) == before
    _edit(code_copy / edited)
    assert _key(tmp_path) != before

