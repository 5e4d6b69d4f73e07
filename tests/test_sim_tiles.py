"""The tile edge T from the config: semantics, assembly, native vs Python and compiled runs for every T.

T = 8, 16, 32 (the shipped t8, default and t32 configs) run in CI; T = 4, 64
and 128 (configs derived from t32.yaml, :func:`test_sim_support.derived_tile_configs`)
run with the slow tests.  Every
expectation is computed from T, so the same test checks every array size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_isa_spec import _edit, _line_of, _place
from test_sim_support import HALT, ISA, SYNC, load, machine, native_reason, over_tiles, scope

from tinynpu.assembler import assemble
from tinynpu.assembler.image import Program
from tinynpu.compiler.matmul import compile_matmul
from tinynpu.compiler.run import run_compiled
from tinynpu.errors import AsmError, SpecError
from tinynpu.isa import ArchConfig, load_config
from tinynpu.isa.config import CONFIG_DIR
from tinynpu.isa.spec import DEFAULT_ISA_PATH
from tinynpu.simulator import Machine, SimFault

T32_TEXT = (CONFIG_DIR / "t32.yaml").read_text(encoding="utf-8")


@over_tiles(ci=True, every_tile=True)
@pytest.mark.usefixtures("sim_engine")
def test_tmm_block_matches_numpy(cfg: ArchConfig) -> None:
    t, (mm, nn, kk) = cfg.tile, (2, 1, 3)
    rng = np.random.default_rng(t)
    a = rng.integers(-128, 128, (mm * kk * t, t)).astype(np.int8)
    b = rng.integers(-128, 128, (nn * kk * t, t)).astype(np.int8)
    a[:t] = b[:t] = -128  # the largest products, summed over a whole tile
    b_at = a.nbytes
    m = machine([load("a", 0, 0, len(a), cfg=cfg), load("b", 0, b_at, len(b), cfg=cfg), SYNC,
                 ("tmm", {"acc": 0, "a": 0, "b": 0, "m": mm, "n": nn, "k": kk, "accumulate": 0}), HALT], cfg)
    m.write_dram(0, a)
    m.write_dram(b_at, b)
    stats = m.run()
    at, bt = a.reshape(mm, kk, t, t).astype(np.int64), b.reshape(nn, kk, t, t).astype(np.int64)
    want = np.einsum("ikrq,jkcq->ijrc", at, bt)
    got = m.state.acc[: mm * nn * t].reshape(mm, nn, t, t)
    assert np.array_equal(got, want.astype(np.int32))
    assert stats.macs == mm * nn * kk * t**3
    # every step of the block is one tile x tile x tile step of tmm_interval_cycles
    assert stats.busy_cycles["tensor"] == mm * nn * kk * cfg.tmm_interval_cycles


@over_tiles(ci=True, every_tile=True)
@pytest.mark.usefixtures("sim_engine")
def test_short_rows_zero_fill_and_narrow_store(cfg: ArchConfig) -> None:
    t = cfg.tile
    cols = t // 2 + 1
    x = (np.arange(4 * t, dtype=np.int64) * 37 % 251 - 125).astype(np.int32).reshape(4, t)
    out = 0x10000
    m = machine([("zero", {"scope": scope("acc"), "sp_row": 0, "rows": 4}),
                 load("acc", 0, 0, 4, cols=cols, stride=t * 4, cfg=cfg), SYNC,
                 ("vadd", {"dst": 0, "src": 0, "rows": 4}), SYNC,
                 ("store", {"sp_row": 0, "dram": out, "rows": 4, "stride": t, "narrow": 1, "shift": 1,
                            "relu": 1}), HALT], cfg)
    m.write_dram(0, x)
    m.run()
    acc = np.zeros((4, t), np.int64)
    acc[:, :cols] = 2 * x[:, :cols]
    want = np.clip(np.maximum((acc + 1) >> 1, 0), -128, 127).astype(np.int8)
    got = np.frombuffer(m.read_dram(out, 4 * t), np.int8).reshape(4, t)
    assert np.array_equal(got, want)


@over_tiles(ci=True, every_tile=True)
def test_native_and_python_agree_on_random_programs(cfg: ArchConfig) -> None:
    reason = native_reason()
    if reason:
        pytest.skip(reason)
    t = cfg.tile
    rng = np.random.default_rng(t * 7 + 1)
    for _ in range(6):
        prog: list[tuple[str, dict[str, Any]]] = []
        for _ in range(int(rng.integers(4, 14))):
            kind = rng.integers(0, 5)
            if kind == 0:
                sc = str(rng.choice(["a", "b", "acc"]))
                prog.append(load(sc, int(rng.integers(0, 4)) * t, int(rng.integers(0, 64)) * 16,
                                 int(rng.integers(1, 2 * t)), cols=int(rng.integers(1, t + 1)), cfg=cfg))
            elif kind == 1:
                prog.append(("tmm", {"acc": 0, "a": 0, "b": 0, "m": int(rng.integers(1, 3)),
                                     "n": int(rng.integers(1, 3)), "k": int(rng.integers(1, 3)),
                                     "accumulate": int(rng.integers(0, 2))}))
            elif kind == 2:
                prog.append(("vmul", {"dst": int(rng.integers(0, t)), "imm": int(rng.integers(-9, 9)),
                                      "rows": int(rng.integers(1, t))}))
            elif kind == 3:
                prog.append(("store", {"sp_row": int(rng.integers(0, t)), "dram": 0x80000, "rows": 2,
                                       "cols": int(rng.integers(1, t + 1)), "stride": 4 * t,
                                       "narrow": 1, "shift": int(rng.integers(0, 8))}))
            prog.append(SYNC)
        prog.append(HALT)
        dram = rng.integers(-128, 128, 0x2000).astype(np.int8)
        seen = []
        for engine in ("python", "native"):
            m = machine(prog, cfg)
            m.write_dram(0, dram)
            stats = m.run(engine=engine)
            js = stats.to_json()
            js.pop("wall_seconds"), js.pop("engine")
            seen.append((js, stats.timeline, m.read_dram(0x80000, 2 * 4 * t), m.state.acc.tobytes()))
        assert seen[0] == seen[1]


@over_tiles(ci=True, every_tile=True)
def test_compiled_matmul_verifies(cfg: ArchConfig) -> None:
    t = cfg.tile
    report = run_compiled(compile_matmul(3 * t + 5, 2 * t - 3, t + 7, dtype="int8", cfg=cfg), cfg=cfg)
    assert report["verified"] is True
    assert report["issued_macs"] % t**3 == 0 and report["energy_pj"] > 0


@over_tiles(ci=True, every_tile=True)
def test_assembler_uses_the_tile_edge(cfg: ArchConfig) -> None:
    t = cfg.tile
    src = (f".config {cfg.name}\n"
           f"load a[{t}], [0], rows={t}\n"
           f"tmm acc[{2 * t}], a[{t}], b[0]\n"
           "halt\n")
    prog = assemble(src, filename="t.s", isa=ISA, cfg=cfg)
    _, load_fields = ISA.decode(prog.words[0])
    _, tmm_fields = ISA.decode(prog.words[1])
    assert load_fields["cols"] == t  # the default: a whole row
    assert (tmm_fields["acc"], tmm_fields["a"]) == (2, 1)  # rows encoded as tile indices
    with pytest.raises(AsmError, match=rf"tile addresses must be multiples of {t}"):
        assemble(src.replace(f"a[{t}], b[0]", f"a[{t + 2}], b[0]"), filename="t.s", isa=ISA, cfg=cfg)
    with pytest.raises(AsmError, match=rf"cols={t + 1} is out of range.*1..{t} \(at most the tile edge"):
        assemble(src.replace(f"rows={t}\n", f"rows={t}, cols={t + 1}\n", 1), filename="t.s", isa=ISA, cfg=cfg)


def test_simulator_faults_on_cols_beyond_the_tile() -> None:
    cfg = load_config("t8")
    word = ISA.encode("load", {"scope": scope("a"), "sp_row": 0, "dram": 0, "rows": 1, "cols": 9, "stride": 9})
    m = Machine(cfg, ISA)
    with pytest.raises(SimFault, match=r"instruction 0 \(pc 0x0\).*field 'cols' holds 9, above the tile edge 8 of "
                                       r"config 't8'"):
        m.load(Program.build(ISA, cfg, [word, ISA.encode("halt", {})], ()))
        m.run()


BAD_TILE = [
    # (case id, old, new, line needle, words)
    ("not-a-power-of-two", "tile: 32 ", "tile: 37 ", "tile: 37", ["tile must be a power of two from 4 to 128, not 37"]),
    ("too-big", "tile: 32 ", "tile: 256 ", "tile: 256", ["tile must be a power of two from 4 to 128, not 256"]),
    ("rows-not-whole-tiles", "acc:   {rows: 1024}", "acc:   {rows: 1000}", "acc:   {rows: 1000}",
     ["scratchpad acc must hold whole 32-row tiles", "a multiple of 32 from 64, not 1000"]),
    ("one-tile-only", "a_reg: {rows: 2048}", "a_reg: {rows: 32}", "a_reg: {rows: 32}",
     ["at least 2 (one per buffer)", "not 32"]),
]


@pytest.mark.parametrize(("old", "new", "needle", "words"), [c[1:] for c in BAD_TILE], ids=[c[0] for c in BAD_TILE])
def test_bad_tile_config(tmp_path: Path, old: str, new: str, needle: str, words: list[str]) -> None:
    path, text = _edit(tmp_path, "cfg.yaml", T32_TEXT, old, new)
    with pytest.raises(SpecError) as info:
        load_config(path)
    message = info.value.message
    file, line = _place(message)
    assert file == str(path) and line == _line_of(text, needle), message
    for word in words:
        assert word in message, message


def test_field_too_narrow_for_the_tile(tmp_path: Path) -> None:
    isa_text = DEFAULT_ISA_PATH.read_text(encoding="utf-8")
    narrow = isa_text.replace("{name: cols,   lsb: 103, msb: 110,", "{name: cols,   lsb: 103, msb: 107,")
    narrow = narrow.replace("{name: reserved, lsb: 111, msb: 127, value: 0}",
                            "{name: reserved, lsb: 108, msb: 127, value: 0}")
    narrow = narrow.replace("{name: narrow, lsb: 111, msb: 111,", "{name: narrow, lsb: 108, msb: 108,")
    narrow = narrow.replace("{name: relu,   lsb: 112, msb: 112,", "{name: relu,   lsb: 109, msb: 109,")
    narrow = narrow.replace("{name: shift,  lsb: 113, msb: 117,", "{name: shift,  lsb: 110, msb: 114,")
    narrow = narrow.replace("{name: reserved_hi, lsb: 118, msb: 127, value: 0}",
                            "{name: reserved_hi, lsb: 115, msb: 127, value: 0}")
    assert narrow.count("msb: 107,") == 2, "the shipped cols fields moved; update this test"
    isa_path = tmp_path / "isa.yaml"
    isa_path.write_text(narrow, encoding="utf-8")
    from tinynpu.isa import load_isa

    isa = load_isa(isa_path)
    assert load_config(CONFIG_DIR / "default.yaml", isa).tile == 16  # 5 bits hold 16
    with pytest.raises(SpecError) as info:
        load_config(CONFIG_DIR / "t32.yaml", isa)
    message = info.value.message
    assert "t32.yaml:" in message and "(at tile)" in message, message
    assert "field 'cols' of load (5 bits" in message and "holds at most 31" in message, message
    assert "cannot hold a whole row (32 elements, the tile edge)" in message, message
