"""Module-level cocotb benches of the MAC array, the requantizer and a vrequantf lane (numpy is the reference)."""

from __future__ import annotations

import pytest
from test_rtl_cosim import CFG, ISA, require_rtl

from tinynpu.rtl.cosim import run_unit_benches

pytestmark = pytest.mark.rtl


def test_mac_array_requantizer_and_requantf_lane_benches_pass() -> None:
    require_rtl()
    total, failed, log = run_unit_benches(ISA, CFG)
    assert total == 3, log
    assert failed == 0, log
