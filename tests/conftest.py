"""Shared pytest options and fixtures: ``--runslow`` (or TINYNPU_SLOW=1) enables tests marked slow; ``isa``
and ``cfg`` are the shipped ISA and the default config; ``sim_engine`` runs a test on each simulator core."""

from __future__ import annotations

import os

import pytest

from tinynpu.isa import ArchConfig, Isa, load_config, load_isa


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_configure(config: pytest.Config) -> None:
    # Test modules size their random runs from TINYNPU_SLOW at import time, so --runslow sets it first.
    if config.getoption("--runslow"):
        os.environ["TINYNPU_SLOW"] = "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow") or os.environ.get("TINYNPU_SLOW") == "1":
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow or TINYNPU_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(params=["python", "auto"])
def sim_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once per simulator core, through ``$TINYNPU_ENGINE``: the Python reference, and the
    default (the native core wherever it can run), so hand-checked expectations hold for both."""
    monkeypatch.setenv("TINYNPU_ENGINE", request.param)
    return str(request.param)


@pytest.fixture(scope="session")
def isa() -> Isa:
    """The shipped ISA (isa/isa.yaml)."""
    return load_isa()


@pytest.fixture(scope="session")
def cfg() -> ArchConfig:
    """The default config (isa/configs/default.yaml)."""
    return load_config("default")
