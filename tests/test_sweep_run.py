"""`tinynpu sweep` on a real 2-worker Dask LocalCluster: results, a failing point, resume, the cache."""

from __future__ import annotations

import csv
import json
import textwrap
from pathlib import Path

import pytest

from tinynpu.cli import main
from tinynpu.compiler.matmul import compile_matmul
from tinynpu.compiler.run import run_compiled
from tinynpu.isa import load_config

# 8 KiB of DRAM holds the 32^3 GEMM (A, B: 1 KiB, C: 4 KiB) but not the 64x48x32 one (C alone is 12 KiB).
SPEC = """\
base: default
parameters:
  dram.bytes: [67108864, 8192]
workloads:
  gemm: [[32, 32, 32], [64, 48, 32]]
objectives: [cycles, dram_bytes, energy_pj, edp]
"""


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def _sweep(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, float]]:
    code = main(["sweep", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_sweep_resume_and_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TINYNPU_CACHE", str(tmp_path / "cache"))
    spec = tmp_path / "sweep.yaml"
    spec.write_text(textwrap.dedent(SPEC))
    out = tmp_path / "out"

    code, summary = _sweep(capsys, str(spec), "-o", str(out), "--workers", "2")
    assert code == 1  # one point failed: recorded, and the sweep went on
    assert (summary["points"], summary["failed"], summary["computed"], summary["workers"]) == (4, 1, 4, 2)
    rows = _rows(out / "results.csv")
    assert len(rows) == 4
    failed = [r for r in rows if r["status"] != "ok"]
    assert len(failed) == 1 and failed[0]["dram.bytes"] == "8192" and failed[0]["workload"] == "gemm m=64 n=48 k=32"
    assert "does not fit DRAM" in failed[0]["error"]
    for row in rows:
        if row["status"] == "ok":  # the sweep's figures are the compiler's and simulator's own
            cfg = load_config(Path(row["config_file"]))
            m, n, k = (int(a) for a in row["run_args"].split()[1::2])
            report = run_compiled(compile_matmul(m, n, k, cfg=cfg), cfg=cfg, check_races=False, verify=False)
            assert (int(row["cycles"]), int(row["dram_bytes"])) == (report["cycles"], report["dram_bytes"])
            assert (float(row["energy_pj"]), float(row["edp"])) == (report["energy_pj"], report["edp"])
    index = (out / "index.md").read_text()
    assert "![Pareto front: energy_pj against cycles](pareto-energy_pj-vs-cycles.png)" in index
    assert (out / "pareto-energy_pj-vs-cycles.png").stat().st_size > 0

    # A sweep killed after two points: --resume keeps them and computes only the other two.
    kept = (out / "results.csv").read_text().splitlines()[:3]
    (out / "results.csv").write_text("\n".join(kept) + "\n")
    code, summary = _sweep(capsys, str(spec), "-o", str(out), "--workers", "1", "--resume", "--no-cache")
    assert (summary["resumed"], summary["computed"], summary["failed"]) == (2, 2, 1)
    assert (out / "results.csv").read_text().splitlines()[:3] == kept
    assert sorted(r["key"] for r in _rows(out / "results.csv")) == sorted(r["key"] for r in rows)

    # Without --resume an existing results.csv is refused; a new directory is served from the cache.
    assert main(["sweep", str(spec), "-o", str(out)]) == 2
    assert "--resume" in capsys.readouterr().err
    code, summary = _sweep(capsys, str(spec), "-o", str(tmp_path / "again"))
    assert (summary["computed"], summary["cached"], summary["workers"]) == (0, 4, 0)


def test_sweep_on_an_existing_scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from dask.distributed import LocalCluster

    monkeypatch.setenv("TINYNPU_CACHE", str(tmp_path / "cache"))
    spec = tmp_path / "sweep.yaml"
    spec.write_text(textwrap.dedent(SPEC).replace("[67108864, 8192]", "[67108864]"))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster:
        code, summary = _sweep(capsys, str(spec), "-o", str(tmp_path / "out"), "--scheduler",
                               cluster.scheduler_address)
    assert code == 0 and (summary["points"], summary["computed"], summary["failed"], summary["workers"]) == (2, 2, 0, 1)
    assert main(["sweep", str(spec), "-o", str(tmp_path / "o2"), "--workers", "2", "--scheduler", "tcp://x:1"]) == 2
    assert "cannot be combined with --scheduler" in capsys.readouterr().err
