#!/usr/bin/env bash
# Refreshes requirements/test.lock: the exact versions of every package the
# README's test command installs (tinynpu's dependencies, its test extras and the
# optional TVM front end's, so its tests run in CI),
# for every Python tinynpu supports.  pyproject.toml keeps its ranges for
# `pip install tinynpu`; the lock is what the tests run against, so a new
# release of a dependency reaches them only through a reviewed refresh.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v uv >/dev/null 2>&1; then
  echo "lock: uv not found; install it with 'python3 -m pip install uv'" >&2
  exit 2
fi
uv pip compile pyproject.toml --extra test --extra tvm --universal --python-version 3.10 \
  --custom-compile-command "bash scripts/lock.sh" -o requirements/test.lock "$@"
