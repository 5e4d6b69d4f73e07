"""Module-level cocotb benches of the MAC array and the requantizer (numpy is the reference)."""

from __future__ import annotations

import pytest
from test_rtl_cosim import CFG, ISA, require_rtl

from tinynpu.rtl.cosim import run_unit_benches

pytestmark = pytest.mark.rtl


def test_mac_array_and_requantizer_benches_pass() -> None:
    require_rtl()
    total, failed, log = run_unit_benches(ISA, CFG)
    assert total == 2, log
    assert failed == 0, log
