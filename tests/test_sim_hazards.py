"""The data-race sanitizer: races are caught and named; synchronized programs are not flagged.

The races on scratchpad rows and tiles run on the t8, default and t32 configs
(:func:`test_sim_support.over_tiles`): the rows a tile covers follow T.
"""

from __future__ import annotations

import pytest
from test_sim_support import HALT, SYNC, load, machine, over_tiles, scope, units

from tinynpu.isa import ArchConfig
from tinynpu.simulator import SimFault

pytestmark = pytest.mark.usefixtures("sim_engine")  # each test runs on both simulator cores

TMM = ("tmm", {"acc": 0, "a": 0, "b": 0})


@over_tiles(ci=True)
def test_raw_on_scratchpad_is_caught_and_names_both(cfg: ArchConfig) -> None:
    m = machine([load("a", 0, 0, cfg=cfg), TMM, HALT], cfg)
    with pytest.raises(SimFault) as exc:
        m.run()
    msg = exc.value.message
    assert "data race" in msg and "instruction 1 (pc 0x10, tmm)" in msg
    assert "instruction 0 (pc 0x0, load)" in msg
    assert "a row 0" in msg


@over_tiles()
def test_war_on_scratchpad_is_caught(cfg: ArchConfig) -> None:
    prog = [load("a", 0, 0, cfg=cfg), load("b", 0, 0, signal=units("tensor"), cfg=cfg),
            ("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load")}),
            load("a", cfg.tile - 1, 0x100, rows=1, cfg=cfg), HALT]  # the tile's last row
    with pytest.raises(SimFault, match=rf"instruction 3 \(pc 0x30, load\) writes a row {cfg.tile - 1}, which "
                                       r"instruction "):
        machine(prog, cfg).run()


@over_tiles()
def test_tokens_and_sync_order_accesses(cfg: ArchConfig) -> None:
    prog = [load("a", 0, 0, cfg=cfg), load("b", 0, 0, signal=units("tensor"), cfg=cfg),
            ("tmm", {"acc": 0, "a": 0, "b": 0, "wait": units("load"), "signal": units("load")}),
            load("a", 0, 0x100, wait=units("tensor"), cfg=cfg), SYNC, TMM, HALT]
    assert machine(prog, cfg).run().instructions_total == len(prog)


@over_tiles(ci=True)
def test_transitive_token_chain_orders(cfg: ArchConfig) -> None:
    # load -> tensor -> store: the store is ordered after the load through the tensor unit
    t = cfg.tile
    zero = ("zero", {"scope": scope("acc"), "sp_row": 0, "rows": t, "signal": units("tensor")})
    tmm = ("tmm", {"acc": 1, "a": 0, "b": 0, "wait": units("load"), "signal": units("store")})
    store = ("store", {"sp_row": 0, "dram": 0, "rows": t, "stride": 4 * t, "wait": units("tensor")})
    machine([zero, tmm, store, HALT], cfg).run()
    # without the link load -> tensor, nothing orders the store after the zero
    broken = [("zero", {**zero[1], "signal": 0}), ("tmm", {**tmm[1], "wait": 0}), store, HALT]
    with pytest.raises(SimFault, match=r"store\) reads acc row 0, which instruction 0 \(pc 0x0, zero\) wrote"):
        machine(broken, cfg).run()


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


@over_tiles(ci=True)
def test_alu_vs_tensor_race_on_acc(cfg: ArchConfig) -> None:
    last = cfg.tile - 1  # the last row of the tmm's one output tile
    prog = [("tmm", {"acc": 0, "a": 0, "b": 0}), ("vmax", {"dst": last, "imm": 0, "rows": 1}), HALT]
    with pytest.raises(SimFault, match=rf"instruction 1 \(pc 0x10, vmax\) writes acc row {last}"):
        machine(prog, cfg).run()
    machine([prog[0], ("vmax", {"dst": last + 1, "imm": 0, "rows": 1}), HALT], cfg).run()  # the next tile
