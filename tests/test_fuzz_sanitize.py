"""The native core built with -fsanitize=address,undefined runs the differential and faulting programs: no reports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tinynpu.simulator import native

ROOT = Path(__file__).resolve().parent.parent
SANITIZERS = ("address", "undefined")


def _runtime(cc: str, name: str) -> str | None:
    proc = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True, check=False)
    path = proc.stdout.strip()
    return path if proc.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else None


@pytest.mark.slow
def test_native_core_under_address_and_undefined_sanitizers(tmp_path: Path) -> None:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    assert cc, "no C compiler"
    libs = [_runtime(cc, "libasan.so"), _runtime(cc, "libubsan.so")]
    if None in libs:
        pytest.skip(f"{cc} has no sanitizer runtimes (libasan, libubsan)")
    lib = tmp_path / "core-asan.so"
    flags = [f for f in native.FLAGS if not f.startswith("-O")]
    build = subprocess.run([cc, *flags, "-O1", "-g", "-fno-omit-frame-pointer",
                            f"-fsanitize={','.join(SANITIZERS)}", "-fno-sanitize-recover=undefined",
                            "-o", str(lib), str(native.SOURCE)], capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr
    env = {
        **os.environ,
        "LD_PRELOAD": " ".join(str(p) for p in libs),
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:verify_asan_link_order=0",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
        "TINYNPU_ASAN_LIB": str(lib),
        "TINYNPU_ENGINE": "native",
        "TINYNPU_SLOW": "0",  # the default number of random programs: each runs far slower under the sanitizers
        "PYTHONPATH": str(Path(__file__).resolve().parent),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "asan_core", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
         "tests/test_sim_native.py", "tests/test_sim_faults.py", "-k", "not failing_compiler"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600, check=False)
    output = proc.stdout + proc.stderr
    reports = [line for line in output.splitlines() if "runtime error:" in line or "Sanitizer" in line]
    assert proc.returncode == 0 and not reports, output[-5000:]
    assert " passed" in proc.stdout
