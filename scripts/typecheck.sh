#!/usr/bin/env bash
# mypy over the installed namespace.  The editable install maps the top-level
# folders (isa/, assembler/, ...) onto tinynpu.* with an import hook mypy
# cannot follow, so mirror that mapping with symlinks in a temporary tree.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/tinynpu"
for entry in "$root"/tinynpu/*; do ln -s "$entry" "$tree/tinynpu/"; done
for part in isa assembler simulator compiler rtl explore; do ln -s "$root/$part" "$tree/tinynpu/$part"; done
cd "$tree"
mypy --config-file "$root/pyproject.toml" -p tinynpu
