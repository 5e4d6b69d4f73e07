"""`tinynpu sweep` on a real 2-worker Dask LocalCluster (results, a failing point, resume, the cache) and on a
separate-process cluster started with the dask CLI."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinynpu.cli import main
from tinynpu.compiler.matmul import compile_matmul
from tinynpu.compiler.run import run_compiled
from tinynpu.isa import load_config

DASHBOARD_PORT = 8787  # Dask's default dashboard port

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
            assert {c: float(row[f"energy_{c}_pj"]) for c in report["energy_breakdown_pj"]} == \
                report["energy_breakdown_pj"]  # by component too
    index = (out / "index.md").read_text()
    assert "## Energy by component" in index and "| config | mac | array_idle | alu |" in index
    assert all(f"energy_{c}_pj" in summary["totals"][0] for c in ("mac", "dram", "static", "clock"))
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


@contextlib.contextmanager
def _process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process of the dask CLI (``python -m dask ...``), stopped (and, if stuck, killed) on leaving."""
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dask", *args], stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


def _wait_for(path: Path, proc: subprocess.Popen[bytes], log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, f"dask exited with {proc.returncode}: {log.read_text()}"
        assert time.monotonic() < deadline, f"no {path.name} after {seconds} s: {log.read_text()}"
        time.sleep(0.2)


def test_sweep_on_a_separate_process_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A real `dask scheduler` and `dask worker`, each its own process on a free localhost port."""
    from dask.distributed import Client

    monkeypatch.setenv("TINYNPU_CACHE", str(tmp_path / "cache"))  # inherited by the worker process
    spec = tmp_path / "sweep.yaml"
    spec.write_text(textwrap.dedent(SPEC).replace("[67108864, 8192]", "[67108864]"))
    info = tmp_path / "scheduler.json"
    # Port 0: the scheduler binds a free port and writes its address to the scheduler file.  Its HTTP routes,
    # served with the dashboard off too, take a free port as well, so 8787 stays free for the test below.
    with _process(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--dashboard-address",
                   "127.0.0.1:0", "--scheduler-file", str(info)], tmp_path / "scheduler.log") as scheduler:
        _wait_for(info, scheduler, tmp_path / "scheduler.log")
        address = json.loads(info.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        with _process(["worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                       "--local-directory", str(tmp_path / "worker")], tmp_path / "worker.log") as worker:
            with Client(address, timeout="30s") as client:
                try:
                    client.wait_for_workers(1, timeout=60)
                except TimeoutError:
                    pytest.fail(f"the worker did not join: {(tmp_path / 'worker.log').read_text()}")
            code, summary = _sweep(capsys, str(spec), "-o", str(tmp_path / "out"), "--scheduler", address)
            assert worker.poll() is None
    assert code == 0 and (summary["points"], summary["computed"], summary["failed"], summary["workers"]) == (2, 2, 0, 1)
    assert all(r["status"] == "ok" for r in _rows(tmp_path / "out" / "results.csv"))
    assert scheduler.returncode is not None and worker.returncode is not None  # both stopped
    assert main(["sweep", str(spec), "-o", str(tmp_path / "o2"), "--workers", "2", "--scheduler", "tcp://x:1"]) == 2
    assert "cannot be combined with --scheduler" in capsys.readouterr().err


def test_unreachable_scheduler(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(textwrap.dedent(SPEC))
    with socket.socket() as sock:  # a free port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert main(["sweep", str(spec), "-o", str(tmp_path / "out"), "--scheduler", f"tcp://127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert f"--scheduler tcp://127.0.0.1:{port}: cannot reach a Dask scheduler there" in err and "Traceback" not in err


def test_only_a_points_own_error_is_cacheable(tmp_path: Path) -> None:
    from tinynpu.explore.task import evaluate

    text = load_config("default").source.read_text().replace("bytes: 67108864", "bytes: 8192")
    own = evaluate(text, "small-dram", "gemm", {"m": 64, "n": 48, "k": 32})
    assert own["status"] == "failed" and "does not fit DRAM" in own["error"] and own["cacheable"] is True
    # Not the point's error (here a missing size; in practice a bug or files changed under a worker).
    internal = evaluate(text, "small-dram", "gemm", {"m": 64})
    assert internal["status"] == "failed" and internal["error"].startswith("KeyError") and not internal["cacheable"]


def test_a_sweep_prints_nothing_about_a_dashboard_port_held_elsewhere(tmp_path: Path) -> None:
    """The scheduler's HTTP server (health and metrics routes, served even with the dashboard off) binds a free
    port, not 8787: a port another cluster holds is not this sweep's concern, and no warning names it."""
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", DASHBOARD_PORT))
        holder.listen()
    except OSError as exc:
        holder.close()
        pytest.skip(f"cannot hold 127.0.0.1:{DASHBOARD_PORT} for the test ({exc}): some other process has it")
    spec = tmp_path / "sweep.yaml"
    spec.write_text(textwrap.dedent(SPEC).replace("[67108864, 8192]", "[67108864]").replace(", [64, 48, 32]", ""))
    env = {**os.environ, "PYTHONWARNINGS": "default"}  # every warning shown, as a user's terminal would
    with holder:
        done = subprocess.run([sys.executable, "-m", "tinynpu", "sweep", str(spec), "-o", str(tmp_path / "out"),
                               "--workers", "1", "--no-cache", "--json"], capture_output=True, text=True, env=env,
                              timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["computed"] == 1
    assert str(DASHBOARD_PORT) not in done.stderr and "already in use" not in done.stderr, done.stderr
