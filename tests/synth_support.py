"""Helper for the tests that run Yosys (no tests here)."""

from __future__ import annotations

import os

import pytest

from tinynpu.rtl.synth import yosys_missing_reason


def require_yosys() -> None:
    """Skip without Yosys, unless ``TINYNPU_REQUIRE_YOSYS=1`` (CI: bootstrap installs it) makes that a failure."""
    reason = yosys_missing_reason()
    if reason is None:
        return
    if os.environ.get("TINYNPU_REQUIRE_YOSYS") == "1":
        pytest.fail(f"{reason}; TINYNPU_REQUIRE_YOSYS=1 says it must be here")
    pytest.skip(reason)
