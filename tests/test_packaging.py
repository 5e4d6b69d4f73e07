"""The package list in pyproject.toml covers every folder that ships, so the install stays quiet.

setuptools warns at length when a folder inside a package (``isa/configs``, ``rtl/tb``, ...) is not
itself listed as a package, and a non-editable ``pip install .`` silently leaves out any file that no
``package-data`` pattern matches.  This test walks the folders the way setuptools does and names
what is missing, so a new data folder or file type is caught here rather than on a user's install.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the check is the same on every version

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_DIRS = {"__pycache__"}
SKIPPED_SUFFIXES = {".pyc"}


def _setuptools_config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return dict(tomllib.load(handle)["tool"]["setuptools"])


def _package_folder(package: str, package_dir: dict[str, str]) -> Path:
    """The folder setuptools builds ``package`` from: its own mapping, else its parent's plus its name."""
    parts = package.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in package_dir:
            return ROOT / package_dir[prefix] / Path(*parts[cut:])
    return ROOT / Path(*parts)


def _shipped_folders(folder: Path) -> list[Path]:
    """``folder`` and every folder below it that holds files (what Python could import as a package)."""
    found = []
    for path in [folder, *sorted(p for p in folder.rglob("*") if p.is_dir())]:
        if SKIPPED_DIRS & set(path.relative_to(ROOT).parts) or path.name.startswith("."):
            continue
        if any(child.is_file() for child in path.iterdir()):
            found.append(path)
    return found


def test_license_is_an_spdx_string() -> None:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        project = tomllib.load(handle)["project"]
    assert isinstance(project["license"], str), "project.license must be an SPDX string such as \"MIT\""


def test_every_folder_with_files_is_a_listed_package() -> None:
    config = _setuptools_config()
    packages = set(config["packages"])
    folders = {_package_folder(name, config["package-dir"]): name for name in packages}
    missing = []
    for top in [name for name in packages if "." not in name or name in config["package-dir"]]:
        for folder in _shipped_folders(_package_folder(top, config["package-dir"])):
            if folder not in folders:
                missing.append(str(folder.relative_to(ROOT)))
    assert not missing, f"folders inside a package but not listed in [tool.setuptools] packages: {sorted(set(missing))}"


def test_every_shipped_file_is_matched_by_package_data() -> None:
    config = _setuptools_config()
    package_data: dict[str, list[str]] = config["package-data"]
    unmatched = []
    for name in config["packages"]:
        folder = _package_folder(name, config["package-dir"])
        patterns = package_data.get(name, [])
        for path in folder.iterdir():
            if not path.is_file() or path.suffix in SKIPPED_SUFFIXES or path.name.startswith("."):
                continue
            if path.suffix == ".py" or any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns):
                continue
            unmatched.append(str(path.relative_to(ROOT)))
    assert not unmatched, f"files a `pip install .` would leave out (add a package-data pattern): {unmatched}"
