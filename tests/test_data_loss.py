"""No user file lost or half written: outputs checked before any work, written atomically, never over an input."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from tinynpu import fsio
from tinynpu.cli import main
from tinynpu.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "examples" / "seed_32.s"


@pytest.fixture()
def seed(tmp_path: Path) -> Path:
    """The 32^3 seed program assembled, with int8 inputs a.npy and b.npy beside it."""
    out = tmp_path / "seed.bin"
    assert main(["asm", str(SEED), "-o", str(out)]) == 0
    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.integers(-128, 128, (32, 32), dtype=np.int8))
    np.save(tmp_path / "b.npy", rng.integers(-128, 128, (32, 32), dtype=np.int8))
    return out


def _sim(seed: Path, *extra: str) -> int:
    d = seed.parent
    return main(["sim", str(seed), "--input", f"A={d / 'a.npy'}", "--input", f"B={d / 'b.npy'}", *extra])


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- 1: --output over a user's array or an input

def test_output_over_a_users_npy_needs_force(seed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = seed.parent / "mine.npy"
    np.save(mine, np.arange(5))
    before = mine.read_bytes()
    assert _sim(seed, "--output", f"C={mine}") == 2
    assert "already exists and was not written by tinynpu" in capsys.readouterr().err
    assert mine.read_bytes() == before
    assert _sim(seed, "--output", f"C={mine}", "--force") == 0
    assert np.load(mine).shape == (32, 32)


def test_a_rerun_replaces_its_own_output_but_not_one_changed_since(seed: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = seed.parent / "c.npy"
    assert _sim(seed, "--output", f"C={out}") == 0
    assert _sim(seed, "--output", f"C={out}") == 0  # the same command again: tinynpu wrote this file
    np.save(out, np.arange(3))  # the user writes over it: now it is theirs
    capsys.readouterr()
    assert _sim(seed, "--output", f"C={out}") == 2
    assert "was not written by tinynpu (or was changed since)" in capsys.readouterr().err
    assert np.load(out).shape == (3,)


def test_a_file_copied_over_an_earlier_output_is_the_users(seed: Path) -> None:
    out, mine = seed.parent / "c.npy", seed.parent / "mine.npy"
    assert _sim(seed, "--output", f"C={out}") == 0
    np.save(mine, np.arange(4))
    os.replace(mine, out)  # same name, another file (another inode)
    assert _sim(seed, "--output", f"C={out}") == 2
    assert np.load(out).shape == (4,)


def test_tune_twice_replaces_its_schedule(tmp_path: Path) -> None:
    out = tmp_path / "schedule.json"
    for _ in range(2):
        assert main(["tune", "matmul", "--m", "32", "--n", "32", "--k", "32", "--trials", "4", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["steps"]


def test_output_over_an_input_is_refused_even_with_force(seed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = seed.parent / "a.npy"
    before = a.read_bytes()
    assert _sim(seed, "--output", f"C={a}", "--force") == 2
    err = capsys.readouterr().err
    assert "also an input of this run" in err and "Traceback" not in err
    assert a.read_bytes() == before


def test_output_over_the_program_is_refused(seed: Path) -> None:
    before = seed.read_bytes()
    assert _sim(seed, "--output", f"C={seed}", "--force") == 2
    assert seed.read_bytes() == before


# ---------------------------------------------------------------- 2: --trace --force and a faulting run

def test_trace_force_keeps_the_old_file_when_the_run_faults(seed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = seed.parent / "t.json"
    trace.write_text("my notes\n")
    assert _sim(seed, "--trace", str(trace), "--force", "--max-cycles", "5") != 0
    assert "cycle" in capsys.readouterr().err
    assert trace.read_text() == "my notes\n"
    assert not [p for p in seed.parent.iterdir() if p.name.startswith(fsio.TEMP_PREFIX)]


def test_trace_is_never_a_device_or_fifo(seed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = seed.parent / "fifo"
    os.mkfifo(fifo)
    assert _sim(seed, "--trace", str(fifo), "--force") == 2
    assert "a FIFO" in capsys.readouterr().err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert _sim(seed, "--trace", "/dev/null", "--force") == 2
    assert "a device" in capsys.readouterr().err
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_trace_of_a_users_file_is_refused_before_the_run(seed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = seed.parent / "t.json"
    trace.write_text("mine")
    # The run would fault at 5 cycles: the refusal must come first, so the message is about the trace.
    assert _sim(seed, "--trace", str(trace), "--max-cycles", "5") == 2
    err = capsys.readouterr().err
    assert "--trace" in err and "already exists" in err and "cycle" not in err


def test_trace_replaces_an_earlier_trace(seed: Path) -> None:
    trace = seed.parent / "t.json"
    assert _sim(seed, "--trace", str(trace)) == 0
    first = trace.read_bytes()
    assert _sim(seed, "--trace", str(trace)) == 0
    assert trace.read_bytes() == first


# ---------------------------------------------------------------- 3: check every target first, write atomically

def test_compile_into_a_dir_with_a_users_program_s_writes_nothing(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mm"
    out.mkdir()
    (out / "program.s").write_text("; my hand-written kernel\n")
    assert main(["compile", "matmul", "--m", "32", "--n", "32", "--k", "32", "-o", str(out)]) == 2
    assert "program.s exists and was not written by tinynpu" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["program.s"]


def test_compile_replaces_its_own_set_and_keeps_other_files(tmp_path: Path) -> None:
    out = tmp_path / "mm"
    args = ["compile", "matmul", "--m", "32", "--n", "32", "--k", "32", "-o", str(out)]
    assert main(args) == 0
    (out / "notes.txt").write_text("mine")
    assert main([*args[:-2], "--schedule", "naive", "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "notes.txt", "program.bin", "program.s",
                                                    "schedule.json"]
    assert (out / "notes.txt").read_text() == "mine"
    assert '"naive"' in (out / "schedule.json").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(fsio.TEMP_PREFIX)]


def test_asm_refuses_before_assembling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.s"
    src.write_text("nonsense here\n")
    out = tmp_path / "bad.bin"
    out.write_text("mine")
    assert main(["asm", str(src), "-o", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err  # not the syntax error: the check came first


def test_a_failed_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")

    def full(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(UsageError, match="No space left"):
        fsio.write_atomic(path, b"new")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_a_failed_dir_set_leaves_the_old_set(tmp_path: Path) -> None:
    out = tmp_path / "set"
    fsio.write_dir(out, {"a": "1", "b": "1"})
    with pytest.raises(RuntimeError), fsio.replace_dir(out) as stage:
        (stage / "a").write_text("2")
        raise RuntimeError("killed half way")
    assert _snapshot(out) == {"a": b"1", "b": b"1"}
    fsio.write_dir(out, {"a": "2", "b": "2"})
    assert _snapshot(out) == {"a": b"2", "b": b"2"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]


def test_atomic_write_keeps_the_mode_and_follows_links(tmp_path: Path) -> None:
    real = tmp_path / "real.npy"
    real.write_bytes(b"old")
    real.chmod(0o640)
    link = tmp_path / "link.npy"
    link.symlink_to(real)
    target = fsio.check_output(link, force=True)
    fsio.write_atomic(target, b"new")
    assert link.is_symlink() and real.read_bytes() == b"new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


# ---------------------------------------------------------------- 4: values that do not fit the tensor's dtype

def test_uint8_values_that_do_not_fit_int8_are_an_error(seed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(seed.parent / "a.npy", np.full((32, 32), 200, dtype=np.uint8))
    assert _sim(seed) == 2
    assert "do not fit the tensor's dtype int8" in capsys.readouterr().err
    np.save(seed.parent / "a.npy", np.full((32, 32), 100, dtype=np.uint8))
    assert _sim(seed) == 0


@pytest.mark.parametrize("values", [np.full((32, 32), np.nan), np.full((32, 32), np.inf),
                                    np.full((32, 32), 1e30), np.full((32, 32), 1 + 1j)])
def test_non_finite_or_complex_inputs_are_one_paragraph_without_warnings(
        seed: Path, values: np.ndarray, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(seed.parent / "a.npy", values)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _sim(seed) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and " A" in err and "Traceback" not in err


def test_compile_into_the_working_directory_keeps_its_dirs_and_fifos(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "keep").write_text("mine")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    for out in (".", ""):
        assert main(["compile", "matmul", "--m", "16", "--n", "16", "--k", "16", "-o", out]) == 0
        assert (tmp_path / "sub" / "keep").read_text() == "mine" and (tmp_path / "notes.txt").read_text() == "mine"
        assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode) and (tmp_path / "program.bin").is_file()
    assert not [p for p in tmp_path.parent.iterdir() if p.name.startswith(fsio.TEMP_PREFIX)]


def test_reading_allocates_only_what_the_file_holds(tmp_path: Path) -> None:
    import resource

    path = tmp_path / "small.bin"
    path.write_bytes(b"x" * 100)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert fsio.read_bytes(path, what="a file") == b"x" * 100
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024  # KiB: not a 1 GiB buffer


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def test_the_next_write_removes_a_dead_writers_temporaries_only(tmp_path: Path) -> None:
    dead = _dead_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale_file = tmp_path / f"{fsio.TEMP_PREFIX}{dead}-out.npy.abc123"
        stale_dir = tmp_path / f"{fsio.TEMP_PREFIX}{dead}-mm.xyz"
        live_file = tmp_path / f"{fsio.TEMP_PREFIX}{live.pid}-out.npy.def456"
        mine = tmp_path / f"{fsio.TEMP_PREFIX}{os.getpid()}-out.npy.ghi789"
        no_pid = tmp_path / f"{fsio.TEMP_PREFIX}out.npy.jkl012"  # an older version's: its writer is unknown
        kept = tmp_path / f"{fsio.KEPT_PREFIX}{dead}-mm.uvw"  # user entries waiting to be moved back
        (stale_dir / "sub").mkdir(parents=True)
        (stale_dir / "sub" / "program.bin").write_bytes(b"x")
        kept.mkdir()
        (kept / "notes.txt").write_text("mine")
        for path in (stale_file, live_file, mine, no_pid):
            path.write_bytes(b"partial")
        fsio.write_atomic(tmp_path / "result.txt", "new")
        left = {p.name for p in tmp_path.iterdir()}
        assert stale_file.name not in left and stale_dir.name not in left
        assert {live_file.name, mine.name, no_pid.name, kept.name, "result.txt"} <= left
        assert (kept / "notes.txt").read_text() == "mine"
        # the directory-set writer sweeps its parent the same way
        (tmp_path / f"{fsio.TEMP_PREFIX}{dead}-again.bin.x").write_bytes(b"partial")
        fsio.write_dir(tmp_path / "set", {"a.txt": "a"})
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(fsio.TEMP_PREFIX)) == sorted(
            [live_file.name, mine.name, no_pid.name])
    finally:
        live.kill()
        live.wait()


def test_temporary_names_carry_the_writers_pid(tmp_path: Path) -> None:
    with fsio.staged(tmp_path / "out.bin") as tmp:
        assert tmp.name.startswith(f"{fsio.TEMP_PREFIX}{os.getpid()}-out.bin.")
        tmp.write_bytes(b"x")
    with fsio.replace_dir(tmp_path / "set") as stage:
        assert stage.name.startswith(f"{fsio.TEMP_PREFIX}{os.getpid()}-set.")


def test_staged_outputs_are_renamed_after_all_are_written_or_not_at_all(tmp_path: Path) -> None:
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"old a")
    b.write_bytes(b"old b")
    with pytest.raises(RuntimeError), contextlib.ExitStack() as stack:
        stack.enter_context(fsio.staged_data(a, b"new a"))
        assert a.read_bytes() == b"old a"  # staged, not yet renamed
        stack.enter_context(fsio.staged_data(b, b"new b"))
        raise RuntimeError("the run fails after both are staged")
    assert (a.read_bytes(), b.read_bytes()) == (b"old a", b"old b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "b.bin"]
    with contextlib.ExitStack() as stack:
        stack.enter_context(fsio.staged_data(a, b"new a"))
        stack.enter_context(fsio.staged_data(b, "new b"))
    assert (a.read_bytes(), b.read_bytes()) == (b"new a", b"new b")
