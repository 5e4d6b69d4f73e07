"""The data-race sanitizer: races are caught and named; synchronized programs are not flagged."""

from __future__ import annotations

import pytest
from test_sim_support import HALT, SYNC, load, machine, scope, units

from tinynpu.simulator import SimFault

pytestmark = pytest.mark.usefixtures("sim_engine")  # each test runs on both simulator cores

TMM = ("tmm", {"acc": 0, "a": 0, "b": 0})


def test_raw_on_scratchpad_is_caught_and_names_both() -> None:
    m = machine([load("a", 0, 0), TMM, HALT])
    with pytest.raises(SimFault) as exc:
        m.run()
    msg = exc.value.message
    assert "data race" in msg and "instruction 1 (pc 0x10, tmm)" in msg
    assert "instruction 0 (pc 0x0, load)" in msg
    assert "a row 0" in msg


def test_war_on_scratchpad_is_caught() -> None:
    prog = [load("a", 0, 0), load("b", 0, 0, signal=units("tensor")), ("tmm", {"acc": 0, "a": 0, "b": 0,
                                                                              "wait": units("load")}),
            load("a", 0, 0x100), HALT]
    with pytest.raises(SimFault, match=r"instruction 3 \(pc 0x30, load\) writes a row 0, which instruction "):
        machine(prog).run()


def test_tokens_and_sync_order_accesses() -> None:
    prog = [load("a", 0, 0), load("b", 0, 0, signal=units("tensor")),
            ("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load"), "signal": units("load")}),
            load("a", 0, 0x100, wait=units("tensor")), SYNC, TMM, HALT]
    assert machine(prog).run().instructions_total == len(prog)


def test_transitive_token_chain_orders() -> None:
    # load -> tensor -> store: the store is ordered after the load through the tensor unit
    prog = [("zero", {"scope": scope("acc"), "sp_row": 0, "rows": 16, "signal": units("tensor")}),
            ("tmm", {"acc": 1, "a": 0, "b": 0, "wait": units("load"), "signal": units("store")}),
            ("store", {"sp_row": 0, "dram": 0, "rows": 16, "stride": 64, "wait": units("tensor")}), HALT]
    machine(prog).run()


def test_dram_race_store_then_load() -> None:
    prog = [("zero", {"scope": scope("acc"), "sp_row": 0, "rows": 1, "signal": units("store")}),
            ("store", {"sp_row": 0, "dram": 0x40, "rows": 1, "wait": units("load")}),
            load("a", 0, 0x48, rows=1), HALT]
    with pytest.raises(SimFault, match=r"reads DRAM byte 0x48, which instruction 1 \(pc 0x10, store\) wrote"):
        machine(prog).run()


def test_dram_same_page_disjoint_bytes_is_not_a_race() -> None:
    prog = [("zero", {"scope": scope("acc"), "sp_row": 0, "rows": 1, "signal": units("store")}),
            ("store", {"sp_row": 0, "dram": 0x40, "rows": 1, "cols": 4, "wait": units("load")}),
            load("a", 0, 0x50, rows=1), HALT]  # the store writes 0x40..0x4f only
    machine(prog).run()


def test_dram_strided_footprints_interleaved_not_a_race() -> None:
    # the bounding ranges overlap but the rows interleave without sharing a byte
    prog = [("zero", {"scope": scope("acc"), "sp_row": 0, "rows": 4, "signal": units("store")}),
            ("store", {"sp_row": 0, "dram": 0, "rows": 4, "cols": 4, "stride": 32, "narrow": 1,
                       "wait": units("load")}),
            load("a", 0, 16, rows=4, stride=32), HALT]
    machine(prog).run()


def test_store_signal_load_orders_dram() -> None:
    prog = [("zero", {"scope": scope("acc"), "sp_row": 0, "rows": 1, "signal": units("store")}),
            ("store", {"sp_row": 0, "dram": 0x40, "rows": 1, "wait": units("load"), "signal": units("load")}),
            load("a", 0, 0x40, rows=1, wait=units("store")), HALT]
    machine(prog).run()


def test_race_check_can_be_switched_off() -> None:
    stats = machine([load("a", 0, 0), TMM, HALT]).run(check_races=False)
    assert stats.to_json()["races_checked"] is False


def test_alu_vs_tensor_race_on_acc() -> None:
    prog = [("tmm", {"acc": 0, "a": 0, "b": 0}), ("vmax", {"dst": 8, "imm": 0, "rows": 1}), HALT]
    with pytest.raises(SimFault, match=r"instruction 1 \(pc 0x10, vmax\) writes acc row 8"):
        machine(prog).run()
