#!/usr/bin/env bash
# The test command: lint, type check, and the pytest suite (a representative
# co-simulation subset; set TINYNPU_SLOW=1 for the full set).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/bootstrap.sh"
cd "$root"
echo "== ruff"; ruff check .
echo "== mypy"; bash scripts/typecheck.sh
echo "== pytest"
set +e
pytest -n 2 "$@"
status=$?
set -e
if [ "$status" = 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; exit 1; fi
exit "$status"
