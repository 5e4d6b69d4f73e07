#!/usr/bin/env bash
# The main job: sets everything up, checks the ISA, then runs the whole
# toolchain demo (the course's 1024^3 matmul, naive vs tuned, verified, with a report).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/bootstrap.sh"
cd "$root"
tinynpu isa check
tinynpu demo "$@"
