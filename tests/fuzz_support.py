"""Fuzzing every command with bad input: the cases, and a runner that counts tracebacks, crashes and hangs.

Each :class:`Case` is one command line with the files it reads (made in a
fresh directory) and the environment it runs under.  :func:`run_cases` runs
the cases in a worker process (``main()`` in-process, so hundreds of cases
take seconds), one fresh directory each, and checks every promise of the
README on each:

* the exit code is 0 or a small non-zero code, never a signal (a crash);
* a failure prints exactly one ``tinynpu...: error:`` paragraph as the last
  line on stderr, nothing else but ``tinynpu`` notes, no traceback, no
  warning;
* nothing in the directory changes on a failure, and on success only the
  files the command was asked to write;
* the case ends within :data:`HANG_SECONDS` (else the worker is killed:
  a hang).  The worker's address space is capped, so runaway memory is a
  MemoryError (a traceback) rather than a machine in swap.

A worker that dies from a signal counts as a crash of that case and is
restarted for the rest.  ``python tests/fuzz_support.py --inputs 1200``
prints the counts (the same as the slow test ``test_fuzz_counts``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import io
import json
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HANG_SECONDS = 60.0
MEMORY_LIMIT = 3 << 30  # bytes of address space a worker may map
WORKER_CASES = 100  # cases per worker process before a fresh one starts
OUTCOMES = ("ok", "error", "traceback", "crash", "hang", "violation")


@dataclass(frozen=True)
class Case:
    """One fuzz input: a command line run in a fresh directory holding ``files``.

    ``may_write`` names the files (relative to that directory) the command may
    create or replace when it succeeds; anything else that changes is a violation.
    """

    kind: str
    argv: tuple[str, ...]
    files: dict[str, bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    may_write: tuple[str, ...] = ()
    fifos: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "argv": list(self.argv), "env": self.env, "may_write": list(self.may_write),
                "fifos": list(self.fifos),
                "files": {k: base64.b64encode(v).decode() for k, v in self.files.items()}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Case:
        return cls(kind=d["kind"], argv=tuple(d["argv"]), env=d["env"], may_write=tuple(d["may_write"]),
                   fifos=tuple(d["fifos"]), files={k: base64.b64decode(v) for k, v in d["files"].items()})

    def describe(self) -> str:
        return f"[{self.kind}] tinynpu {' '.join(a[:80] for a in self.argv)}" + (
            f" (env {self.env})" if self.env else "")


@dataclass(frozen=True)
class Outcome:
    case: Case
    outcome: str
    detail: str = ""


# ---------------------------------------------------------------- the worker: runs cases in-process

def _snapshot(directory: Path) -> dict[str, str]:
    out = {}
    for p in sorted(directory.rglob("*")):
        rel = str(p.relative_to(directory))
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() + f":{p.stat().st_mode:o}"
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = f"special:{p.lstat().st_mode:o}"
    return out


class _Timeout(BaseException):
    pass


def _check(case: Case, code: int, err: str, before: dict[str, str], after: dict[str, str]) -> tuple[str, str]:
    if "Traceback" in err:
        return "traceback", err[-1500:]
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("tinynpu") and ": error:" in line]
    strays = [line for line in lines if not line.startswith("tinynpu")]
    if strays:
        return "violation", f"stray stderr (a warning?): {strays[0][:300]}"
    if code != 0:
        if not 0 < code < 128:
            return "violation", f"exit code {code}"
        if len(errors) != 1 or lines[-1] != errors[0]:
            return "violation", f"{len(errors)} error paragraphs: {err[-600:]}"
        if before != after:
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            return "violation", f"a failed run changed {changed}"
        return "error", errors[0][:300]
    if errors:
        return "violation", f"exit 0 with an error paragraph: {errors[0][:300]}"
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    allowed = set(case.may_write)
    if any(k not in allowed and not any(k.startswith(a + "/") for a in allowed) for k in changed):
        return "violation", f"changed files it was not asked to write: {changed}"
    return "ok", ""


def run_one(case: Case, timeout: float) -> tuple[str, str]:
    """Run one case in this process; (outcome, detail)."""
    from tinynpu.cli import main

    home = Path.cwd()
    work = Path(tempfile.mkdtemp(prefix="tinynpu-fuzz-"))
    saved_env = {k: os.environ.get(k) for k in case.env}
    try:
        for rel, data in case.files.items():
            _make(work, rel, data)
        for rel in case.fifos:
            os.mkfifo(work / rel)
        before = _snapshot(work)
        os.chdir(work)
        os.environ.update(case.env)
        out, err = io.StringIO(), io.StringIO()
        # What a library writes to file descriptor 2 itself (onnxruntime's C++ log lines) bypasses
        # sys.stderr: it is caught at the descriptor and counted with the rest.
        sys.stderr.flush()
        fd_err = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below, after fd 2 is restored
        saved_fd = os.dup(2)
        os.dup2(fd_err.fileno(), 2)

        def alarm(*_: object) -> None:
            raise _Timeout()

        signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(list(case.argv))
                except SystemExit as exc:  # argparse's own usage errors
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
                except _Timeout:
                    raise
                except BaseException:
                    import traceback

                    err.write(traceback.format_exc())
                    code = 1
        except _Timeout:
            return "hang", f"still running after {timeout:.0f} s"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            fd_err.seek(0)
            raw = fd_err.read().decode(errors="replace")
            fd_err.close()
        os.chdir(home)
        return _check(case, code, raw + err.getvalue(), before, _snapshot(work))
    finally:
        os.chdir(home)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(work, ignore_errors=True)


def _make(work: Path, rel: str, data: bytes) -> None:
    """One file of a case; ``@link PATH`` (a symlink to ``data``), ``@dir PATH`` and ``@fifo PATH`` make
    those instead of a regular file."""
    kind, _, name = rel.partition(" ") if rel.startswith("@") else ("", "", rel)
    path = work / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "@link":
        os.symlink(data.decode(), path)
    elif kind == "@dir":
        path.mkdir(exist_ok=True)
    elif kind == "@fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(data)


def _worker(timeout: float) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    for line in sys.stdin:
        case = Case.from_json(json.loads(line))
        outcome, detail = run_one(case, timeout)
        channel = sys.__stdout__
        assert channel is not None
        channel.write(json.dumps([outcome, detail]) + "\n")
        channel.flush()


def run_cases(cases: list[Case], *, progress: Callable[[int], None] | None = None,
              timeout: float = HANG_SECONDS) -> list[Outcome]:
    """Run ``cases`` in a worker process (restarted after a crash or hang); one :class:`Outcome` each,
    a case still running after ``timeout`` seconds being a hang."""
    results: list[Outcome] = []
    here = str(Path(__file__).resolve().parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    proc: subprocess.Popen[str] | None = None
    try:
        for index, case in enumerate(cases):
            if proc is not None and index % WORKER_CASES == 0:  # a fresh worker: memory does not pile up
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(timeout=30)
                proc = None
            if proc is None:
                proc = subprocess.Popen([sys.executable, __file__, "--worker", "--timeout", str(timeout)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(case.to_json()) + "\n")
            proc.stdin.flush()
            line = _read_line(proc, timeout + 30)
            if line is None:
                status = proc.poll()
                if status is None:
                    proc.kill()
                    proc.wait()
                    results.append(Outcome(case, "hang", "the worker stopped answering"))
                else:
                    results.append(Outcome(case, "crash", f"the worker died with status {status}"))
                proc = None
            else:
                outcome, detail = json.loads(line)
                results.append(Outcome(case, outcome, detail))
            if progress is not None:
                progress(index + 1)
    finally:
        if proc is not None:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)
    return results


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str | None:
    import selectors

    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        return None
    line = proc.stdout.readline()
    return line or None


# ---------------------------------------------------------------- the inputs

def _assembled_seed() -> bytes:
    from tinynpu.assembler.assemble import assemble
    from tinynpu.isa import load_config, load_isa

    isa = load_isa()
    src = (ROOT / "examples" / "seed_32.s").read_text()
    return assemble(src, filename="seed.s", isa=isa, cfg=load_config("default", isa)).to_bytes()


def _npy(array: Any) -> bytes:
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


class Inputs:
    """Deterministic generators of every input class (``seed`` fixes them all)."""

    def __init__(self, seed: int) -> None:
        import numpy as np

        self.rng = random.Random(seed)
        self.seed_s = (ROOT / "examples" / "seed_32.s").read_bytes()
        self.seed_bin = _assembled_seed()
        self.config = (ROOT / "isa" / "configs" / "default.yaml").read_bytes()
        self.isa = (ROOT / "isa" / "isa.yaml").read_bytes()
        gen = np.random.default_rng(seed)
        self.a = _npy(gen.integers(-128, 128, (32, 32), dtype=np.int8))
        self.b = _npy(gen.integers(-128, 128, (32, 32), dtype=np.int8))

    # -- helpers
    def choice(self, items: list[Any]) -> Any:
        return items[self.rng.randrange(len(items))]

    def _sim_files(self) -> dict[str, bytes]:
        return {"seed.bin": self.seed_bin, "a.npy": self.a, "b.npy": self.b}

    def _sim_argv(self, *extra: str) -> tuple[str, ...]:
        return ("sim", "seed.bin", "--input", "A=a.npy", "--input", "B=b.npy", *extra)

    def _bad_number(self) -> str:
        r = self.rng.random()
        if r < 0.2:
            return "9" * self.rng.choice([300, 4301, 5000, 20000])
        if r < 0.4:
            return "0x" + "f" * self.rng.choice([8, 9, 40, 300])
        return str(self.rng.choice([0, 1, -1, 2**31, 2**32, 2**63, 2**64, 10**40]))

    # -- assembly
    def assembly(self) -> Case:
        lines = self.seed_s.split(b"\n")
        depth = self.rng.choice([3, 70, 1000, 3000, 100000])
        pool: list[bytes] = [
            f".equ X, {self._bad_number()}".encode(),
            f".equ X, {'(' * depth}1{')' * depth}".encode(),
            f".equ X, {'-' * depth}1".encode(),
            f".equ X, {'~' * depth}1".encode(),
            f".equ X, {'- ' * depth}1".encode(),
            b".equ X, 1 << 100000000000",
            b".equ X, 1 << 40",
            b".equ X, 2\n.equ Y, X*X*X*X\n.equ Z, Y*Y*Y*Y\n.equ W, Z*Z*Z*Z*Z*Z*Z*Z",
            b".equ X, 1 // 0",
            b".equ X, 5 % 0",
            b'.include "/dev/zero"',
            b'.include "/dev/urandom"',
            b'.include "missing.s"',
            b'.include "bad.s"',
            b'.include "seed.s"',
            b'.include "."',
            b'.include "/proc/self/mem"',
            b"\xff\xfe\x00 garbage",
            b"\x00\x00\x00",
            b"tmm " + b",".join([b"9" * 50] * 8),
            f"load a, {self._bad_number()}, {self._bad_number()}, rows={self._bad_number()}".encode(),
            b"store 0, 0x" + b"f" * 40,
            b".tensor T, 0x0, int8, [" + str(2**31).encode() + b", " + str(2**31).encode() + b"], input",
            b".tensor T, 0x0, int8, [1, 1], input\n.tensor T2, 0x0, int8, [1, 1], input",
            b".tensor T, " + str(2**32 - 1).encode() + b", int32, [4096, 4096], output",
            b".config fp32",
            b"label: label:",
            b"x" * 100000,
            b"sync wait=" + str(2**40).encode(),
            b'.tensor "A"',
            b"halt " * 1000,
        ]
        for _ in range(self.rng.choice([1, 1, 2, 3])):
            op = self.rng.random()
            at = self.rng.randrange(len(lines) + 1)
            if op < 0.6:
                lines.insert(at, self.choice(pool))
            elif op < 0.75 and lines:
                del lines[min(at, len(lines) - 1)]
            elif op < 0.9 and lines:
                line = bytearray(lines[min(at, len(lines) - 1)])
                if line:
                    line[self.rng.randrange(len(line))] = self.rng.randrange(256)
                lines[min(at, len(lines) - 1)] = bytes(line)
            else:
                lines.insert(at, bytes(self.rng.randrange(32, 127) for _ in range(self.rng.randrange(1, 60))))
        files = {"src.s": b"\n".join(lines), "bad.s": b"load \xff\xfe\n", "seed.s": self.seed_s}
        return Case("assembly", ("asm", "src.s", "-o", "out.bin"), files, may_write=("out.bin",))

    def assembly_path(self) -> Case:
        src = self.choice(["/dev/zero", "/dev/null", ".", "missing.s", "/proc/self/mem", "fifo"])
        return Case("assembly", ("asm", src, "-o", "out.bin"), fifos=("fifo",) if src == "fifo" else (),
                    may_write=("out.bin",))

    # -- binaries
    def binary(self) -> Case:
        data = bytearray(self.seed_bin)
        op = self.rng.random()
        if op < 0.3:
            data = data[: self.rng.randrange(len(data))]
        elif op < 0.8:
            for _ in range(self.rng.choice([1, 2, 8])):
                data[self.rng.randrange(len(data))] = self.rng.randrange(256)
            if self.rng.random() < 0.7:
                struct.pack_into("<I", data, 44, zlib.crc32(bytes(data[48:])))
        else:
            data += bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(1, 64)))
        cmd = self.choice([self._sim_argv(), ("disasm", "seed.bin"), ("disasm", "seed.bin", "-o", "out.s"),
                           self._sim_argv("--engine", "python"), self._sim_argv("--engine", "native")])
        files = {**self._sim_files(), "seed.bin": bytes(data)}
        return Case("binary", cmd, files, may_write=("out.s",))

    def manifest(self) -> Case:
        count = struct.unpack_from("<I", self.seed_bin, 40)[0]
        words_end = 48 + 16 * count
        good = json.loads(self.seed_bin[words_end:])["tensors"]
        t = dict(self.choice(good))
        key = self.choice(["addr", "shape", "name", "dtype", "role"])
        value = self.choice([float("inf"), float("nan"), -1, 2**70, 2**63, [], {}, ["A"], None, True, "x",
                             "A", [2**40, 2**40], [0], [-1, 2], "float64", "output", 1e300, [1.5, 2]])
        t[key] = value
        tensors: Any = [t if x["name"] == t.get("name", x["name"]) else x for x in good]
        r = self.rng.random()
        if r < 0.15:
            tensors = good + [dict(good[0])]  # a duplicate
        elif r < 0.3:
            tensors = [dict(good[0], addr=good[1]["addr"]), *good[1:]]  # overlapping
        elif r < 0.4:
            tensors = [dict(good[0], addr=(1 << 26) - 16), *good[1:]]  # beyond DRAM
        if r > 0.9:
            text = "[" * self.rng.choice([1000, 100000]) + "]" * 3
        elif r > 0.85:
            text = json.dumps(self.choice([[], 3, "x", {"tensors": 7}, {"tensors": [[1]]}, {}]))
        else:
            text = json.dumps({"tensors": tensors})
        body = self.seed_bin[48:words_end] + text.encode()
        head = bytearray(self.seed_bin[:48])
        struct.pack_into("<I", head, 44, zlib.crc32(body))
        cmd = self.choice([self._sim_argv("--output", "C=c.npy"), ("disasm", "seed.bin")])
        return Case("manifest", cmd, {**self._sim_files(), "seed.bin": bytes(head) + body}, may_write=("c.npy",))

    # -- npy
    def npy(self) -> Case:
        import numpy as np

        r = self.rng.random()
        a: bytes
        if r < 0.1:
            a = b""
        elif r < 0.2:
            a = self.a[: self.rng.randrange(len(self.a))]
        elif r < 0.4:
            header = bytearray(self.a[:128])
            header[self.rng.randrange(10, 118)] = self.rng.choice(b"()[]{}'\":,0123456789xX \\\n")
            a = bytes(header) + self.a[128:]
        elif r < 0.5:
            shape = self.choice(["(1000000000, 1000000000)", "(32, 32, 32)", "(-1, 32)", "(2**40,)", "()",
                                 "(" * 300])
            hdr = f"{{'descr': '|i1', 'fortran_order': False, 'shape': {shape}, }}".encode()
            hdr += b" " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + b"\n"
            a = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + b"\x00" * 1024
        else:
            arr = self.choice([
                np.full((32, 32), 200, np.uint8), np.full((32, 32), np.nan), np.full((32, 32), np.inf),
                np.full((32, 32), 1e30), np.full((32, 32), 1 + 1j), np.zeros((32, 32), "U3"),
                np.zeros((32, 32), "S3"), np.zeros((32, 32), "V4"), np.zeros((16, 32), np.int8),
                np.zeros((32, 32), np.int64) - 129, np.zeros((32, 32), np.float32) + 0.5,
                np.zeros((32, 32), bool), np.asfortranarray(np.ones((32, 32), np.int8)),
                np.zeros((32, 32), ">i4"), np.zeros(3, [("x", "i4")]),
            ])
            a = _npy(arr)
        if self.rng.random() < 0.2:
            cmd: tuple[str, ...] = ("cosim", "seed.bin", "--input", "A=a.npy", "--input", "B=b.npy")
        else:
            cmd = self._sim_argv("--output", "C=c.npy")
        return Case("npy", cmd, {**self._sim_files(), "a.npy": a}, may_write=("c.npy",))

    # -- YAML
    def _mutate_yaml(self, text: bytes) -> bytes:
        lines = text.split(b"\n")
        r = self.rng.random()
        numeric = [i for i, line in enumerate(lines) if line.rstrip()[-1:].isdigit() and b":" in line]
        if r < 0.3 and numeric:
            i = self.choice(numeric)
            head = lines[i].rsplit(b":", 1)[0]
            lines[i] = head + b": " + self.choice([b"2048.0", b"16.0", b"-1", b"0", str(2**63).encode(),
                                                   str(2**62).encode(), b"1e400", b"abc", b"[1, 2]", b"{a: 1}",
                                                   b"null", b"true", b"0x10", b"9" * 5000, b"*nothing"])
        elif r < 0.45 and lines:
            i = self.rng.randrange(len(lines))
            lines.insert(i, lines[i])  # very often a duplicate key
        elif r < 0.55:
            bomb = [b"a: &a [x, x, x, x, x, x, x, x, x, x]"]
            for n in range(1, 10):
                prev = chr(ord("a") + n - 1)
                cur = chr(ord("a") + n)
                bomb.append(f"{cur}: &{cur} [{', '.join(['*' + prev] * 10)}]".encode())
            lines = bomb + lines
        elif r < 0.65:
            depth = self.choice([100, 5000, 50000])
            lines.append(b"deep: " + b"[" * depth + b"]" * depth)
        elif r < 0.7:
            lines.append(b"deep:\n" + b"\n".join(b" " * i + b"k:" for i in range(1, 3000)))
        elif r < 0.8:
            i = self.rng.randrange(len(lines))
            lines[i] = lines[i][: len(lines[i]) // 2] + self.choice([b"\x00", b"\xff", b"\t", b"\x07", b"&x *x"])
        elif r < 0.9 and lines:
            del lines[self.rng.randrange(len(lines))]
        else:
            i = self.rng.randrange(len(lines))
            lines[i] = b" " * self.rng.randrange(8) + lines[i]
        return b"\n".join(lines)

    def config_yaml(self) -> Case:
        cfg = self._mutate_yaml(self.config)
        cmd = self.choice([
            ("asm", "seed.s", "--config", "cfg.yaml", "-o", "out.bin"),
            ("isa", "check", "--config", "cfg.yaml"),
            ("sim", "seed.bin", "--config", "cfg.yaml"),
            ("run", "matmul", "--m", "16", "--n", "16", "--k", "16", "--config", "cfg.yaml"),
            ("compile", "matmul", "--m", "16", "--n", "16", "--k", "16", "--config", "cfg.yaml", "-o", "mm"),
        ])
        files = {**self._sim_files(), "seed.s": self.seed_s, "cfg.yaml": cfg}
        return Case("config", cmd, files, may_write=("out.bin", "mm"))

    def isa_yaml(self) -> Case:
        isa = self._mutate_yaml(self.isa)
        cmd = self.choice([("asm", "seed.s", "--isa", "isa.yaml", "-o", "out.bin"), ("isa", "check", "--isa",
                                                                                    "isa.yaml"),
                           ("disasm", "seed.bin", "--isa", "isa.yaml")])
        return Case("isa", cmd, {"seed.s": self.seed_s, "seed.bin": self.seed_bin, "isa.yaml": isa},
                    may_write=("out.bin",))

    def config_name(self) -> Case:
        name = self.choice(["default", "fp32"])
        as_dir = self.rng.random() < 0.5
        files = {"seed.s": self.seed_s} if as_dir else {"seed.s": self.seed_s, name: b"not: a config\n"}
        if as_dir:
            files[f"{name}/x"] = b"x"
        return Case("config", ("asm", "seed.s", "--config", name, "-o", "out.bin"), files, may_write=("out.bin",))

    # -- schedule JSON
    def schedule(self) -> Case:
        r = self.rng.random()
        if r < 0.15:
            text = b"\xff\xfe{}"
        elif r < 0.3:
            text = b"[" * self.rng.choice([1000, 100000])
        elif r < 0.45:
            text = b'{"steps": ' + b"[" * 50000 + b"]" * 50000 + b"}"
        else:
            step = self.choice([{"op": "split", "axis": "m", "factor": self._bad_int()},
                                {"op": "tile", "m": self._bad_int(), "n": 16, "k": 16},
                                {"op": self.choice(["split", "reorder", "nonsense", "", 3])},
                                {"op": "reorder", "order": self.choice([["m", "n"], "mnk", [1, 2], None])},
                                {"op": "double_buffer", "scope": self.choice(["a", "zzz", 1])}])
            text = json.dumps(self.choice([{"name": "x", "steps": [step]}, {"steps": step}, [step], {"steps": []},
                                           {"name": 3, "steps": [step, step]}])).encode()
        cmd = self.choice([("run", "matmul", "--m", "32", "--n", "32", "--k", "32", "--schedule", "s.json"),
                           ("compile", "matmul", "--m", "32", "--n", "32", "--k", "32", "--schedule", "s.json",
                            "-o", "mm")])
        return Case("schedule", cmd, {"s.json": text}, may_write=("mm",))

    def _bad_int(self) -> Any:
        return self.choice([0, -1, 2**63, 2**70, 1.5, "16", None, float("inf"), 16, 3])

    # -- CLI numbers
    def numbers(self) -> Case:
        def num() -> str:
            return self.choice(["0", "-1", "-5", "1", "3", "16", "17", str(2**31), str(2**62), str(2**63),
                                str(2**64), str(10**9), "1e3", "abc", "", "0x10", "16.0", "9" * 5000])

        small = ["1", "3", "16", "17"]
        cmd = self.choice([
            ("run", "matmul", "--m", num(), "--n", num(), "--k", num()),
            ("run", "matmul", "--m", "16", "--n", "16", "--k", "16", "--seed", num()),
            ("tune", "matmul", "--m", num(), "--n", self.choice(small), "--k", num(), "--trials", "4"),
            ("tune", "matmul", "--m", "16", "--n", "16", "--k", "16", "--trials", num(), "--simulate-best",
             self.choice(["-1", "0", "1"])),
            ("tune", "matmul", "--m", "16", "--n", "16", "--k", "16", "--trials", "4", "--seed", num()),
            ("run", "conv2d", "--n", "1", "--c", num(), "--h", num(), "--w", "8", "--k", "16", "--r", num(),
             "--s", "3", "--stride", num(), "--pad", num()),
            ("run", "mlp", "--batch", num()),
            ("compile", "matmul", "--m", num(), "--n", num(), "--k", "16", "-o", "mm"),
            ("run", "matmul", "--m", "16", "--n", "16", "--k", "16", "--out-dtype", "int8", "--shift", num()),
            self._sim_argv("--max-cycles", num()),
            ("demo", "--size", self.choice(["0", "-1", "abc"]), "-o", "d"),
            ("bench", "sim", "--size", self.choice(["0", "-3", "x"])),
        ])
        return Case("numbers", cmd, self._sim_files(), may_write=("mm", "d"))

    # -- output paths
    def outputs(self) -> Case:
        force = ("--force",) if self.rng.random() < 0.5 else ()
        path = self.choice(["dir", "/dev/null", "/dev/full", "fifo", "missing/x", "a.npy", "seed.bin", "user.npy",
                            "/proc/x", "user.txt/sub", "dir/", "", ".", "seed.s", "new"])
        files = {**self._sim_files(), "user.npy": _npy([1, 2, 3]), "user.txt": b"mine", "dir/keep": b"k",
                 "seed.s": self.seed_s}
        tune = ("tune", "matmul", "--m", "16", "--n", "16", "--k", "16", "--trials", "2", "--simulate-best", "1")
        # (command line, the files it reads, whether it writes a directory)
        cmd, reads, makes_dir = self.choice([
            (self._sim_argv("--output", f"C={path}", *force), ("seed.bin", "a.npy", "b.npy"), False),
            (self._sim_argv("--trace", path, *force), ("seed.bin", "a.npy", "b.npy"), False),
            (self._sim_argv("--trace", path, "--max-cycles", "5", *force), ("seed.bin", "a.npy", "b.npy"), False),
            (("asm", "seed.s", "-o", path, *force), ("seed.s",), False),
            (("disasm", "seed.bin", "-o", path, *force), ("seed.bin",), False),
            (("compile", "matmul", "--m", "16", "--n", "16", "--k", "16", "-o", path, *force), (), True),
            ((*tune, "-o", path, *force), (), False),
            (("report", "matmul", "--m", "16", "--n", "16", "--k", "16", "-o",  # only paths it must refuse:
              self.choice(["user.txt/sub", "/dev/null/sub", "/proc/x", "fifo", "user.npy"])), (), True),
        ])
        target = path.rstrip("/")
        # What a successful run may change: a new file, an earlier output of ours, or with --force a user's
        # regular file; a directory of outputs for compile; never a file the run reads.
        user_files = {"user.npy", "user.txt", "a.npy", "b.npy", "seed.bin", "seed.s"}
        writable: tuple[str, ...] = ()
        if makes_dir:  # made with its missing parents
            target = target.split("/")[0]
        if makes_dir and target in ("", "."):  # its files in the working directory itself, beside the user's
            return Case("outputs", cmd, files, fifos=("fifo",),
                        may_write=("program.s", "program.bin", "schedule.json", "manifest.json"))
        if target and target not in reads and (force or target not in user_files) and (makes_dir or target != "dir"):
            writable = (target,)
        return Case("outputs", cmd, files, fifos=("fifo",), may_write=writable)

    # -- environment
    def environment(self) -> Case:
        env = self.choice([{"TINYNPU_ENGINE": "bogus"}, {"TINYNPU_ENGINE": ""}, {"TINYNPU_ENGINE": "native"},
                           {"TINYNPU_NATIVE": "0", "TINYNPU_ENGINE": "native"}, {"TINYNPU_CACHE": "user.txt"},
                           {"TINYNPU_CACHE": "/dev/null/x"}, {"CC": "/nonexistent/cc"}, {"CC": "/bin/false"},
                           {"TINYNPU_NATIVE": "0"}])
        cmd = self.choice([self._sim_argv(), ("run", "matmul", "--m", "16", "--n", "16", "--k", "16")])
        return Case("environment", cmd, {**self._sim_files(), "user.txt": b"mine"}, env=env)

    def generators(self) -> list[Callable[[], Case]]:
        return [self.assembly, self.assembly, self.assembly, self.assembly_path, self.binary, self.binary,
                self.manifest, self.manifest, self.npy, self.npy, self.config_yaml, self.config_yaml,
                self.isa_yaml, self.config_name, self.schedule, self.numbers, self.numbers, self.outputs,
                self.outputs, self.environment]


def cases(count: int, seed: int = 0) -> list[Case]:
    """``count`` cases over every input class, the same for the same ``seed``."""
    inputs = Inputs(seed)
    gens = inputs.generators()
    return [gens[i % len(gens)]() for i in range(count)]


def counts(results: list[Outcome]) -> Counter[str]:
    c: Counter[str] = Counter({k: 0 for k in OUTCOMES})
    c.update(r.outcome for r in results)
    return c


def summary(results: list[Outcome]) -> str:
    c = counts(results)
    kinds = Counter(r.case.kind for r in results)
    head = (f"fuzz: {len(results)} inputs ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}): "
            f"{c['traceback']} tracebacks, {c['crash']} crashes, {c['hang']} hangs, {c['violation']} other "
            f"broken promises; {c['error']} clean errors, {c['ok']} successes")
    bad = [r for r in results if r.outcome in ("traceback", "crash", "hang", "violation")]
    return "\n".join([head, *(f"  {r.outcome}: {r.case.describe()}\n    {r.detail[-700:]}" for r in bad[:40])])


def _cli() -> int:
    parser = argparse.ArgumentParser(description="Fuzz every tinynpu command with bad inputs; print the counts.")
    parser.add_argument("--inputs", type=int, default=1200, help="how many inputs (default 1200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs (default 0)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=HANG_SECONDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.timeout)
        return 0
    results = run_cases(cases(args.inputs, args.seed),
                        progress=lambda n: print(f"\r{n}/{args.inputs}", end="", file=sys.stderr, flush=True))
    print(file=sys.stderr)
    print(summary(results))
    c = counts(results)
    return 1 if c["traceback"] or c["crash"] or c["hang"] or c["violation"] else 0


if __name__ == "__main__":
    sys.exit(_cli())
