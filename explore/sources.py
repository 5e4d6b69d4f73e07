"""What computes a sweep point: a digest of the source files whose edit can change a point's figures.

The per-point cache (:func:`tinynpu.explore.execute.point_key`) is keyed by it, so
a point computed before an edit to the simulator, the compiler, the energy model
or the ISA is computed again, not served; an edit elsewhere (the docs, the RTL,
reports, the sweep's own report and figures) leaves every cached point valid.

The files are found in the installed packages' directories, not listed by hand,
so a module added to one of them is covered the day it is added:

- ``tinynpu.isa``: the loader and validator of the config, ``isa.yaml``, the
  built-in configs (``isa/configs/*.yaml``: a sweep's base configs and the
  overrides are hashed as the point's config text, but the loader reads the ISA
  and the schemas too) and the generated files;
- ``tinynpu.assembler``: the compiler encodes its programs with it;
- ``tinynpu.compiler``, ``compiler/onnx/`` included: it builds every program,
  and the ONNX front end reads a model's layers;
- ``tinynpu.simulator``: both cores (``core.c`` and its generated header), the
  timing and the energy model (``simulator/energy.py``);
- ``tinynpu``'s own modules (the version, ``intmath``, ``errors``: a failing
  point caches its message), not its subpackages: in an installed wheel every
  package, the reports and the RTL included, sits below ``tinynpu/``, so the
  ones that count are named one by one;
- ``tinynpu.explore.task`` and ``llm_workload``: the point's evaluation (the rest of
  ``tinynpu.explore`` only turns the spec into config texts and workload shapes,
  which the key holds themselves, or draws the results).

``tinynpu.rtl`` is left out: a point's figures come from the simulator, and an
area is cached under the RTL sources by :func:`tinynpu.explore.execute.area_key`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path

#: (package, glob below its directory) of every file a point's figures depend on; see the module docstring.
CODE: tuple[tuple[str, str], ...] = (
    ("tinynpu.isa", "**/*"),
    ("tinynpu.assembler", "**/*"),
    ("tinynpu.compiler", "**/*"),
    ("tinynpu.simulator", "**/*"),
    ("tinynpu", "*"),
    ("tinynpu.explore", "task.py"),
    ("tinynpu.explore", "llm_workload.py"),
)
#: The kinds of file that hold code or the data it reads (not docs, caches or build products).
SUFFIXES = frozenset({".py", ".c", ".h", ".yaml", ".json"})


def package_dir(package: str) -> Path:
    """The directory ``package`` is installed in (found without importing it)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"tinynpu is not installed completely: package {package} is missing")
    return Path(spec.origin).parent


def source_files() -> list[tuple[str, Path]]:
    """Every file of :data:`CODE`: (name as package/relative path, path), sorted by name."""
    files: dict[str, Path] = {}
    for package, pattern in CODE:
        root = package_dir(package)
        for path in root.glob(pattern):
            if path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                files[f"{package}/{path.relative_to(root).as_posix()}"] = path
    return sorted(files.items())


@functools.cache
def code_digest() -> str:
    """The digest of :func:`source_files` (each name and its bytes), read once per process."""
    h = hashlib.sha256()
    for name, path in source_files():
        data = path.read_bytes()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


__all__ = ["CODE", "SUFFIXES", "code_digest", "package_dir", "source_files"]
