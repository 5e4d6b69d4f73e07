"""Residual adds and products on the accelerator: each program equals its numpy arithmetic, which is the real-valued
sum's (product's)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from tinynpu.compiler.onnx.lower.eltwise import (
    FRACTION_BITS,
    GATED_PRODUCT_BITS,
    add_compiled,
    add_reference,
    chunk_rows,
    gate_table,
    product_compiled,
    product_reference,
    product_scale,
    term_scales,
)
from tinynpu.intmath import ceil_div, round_up
from tinynpu.isa import load_config, load_isa
from tinynpu.simulator import Machine


@pytest.mark.parametrize(("config", "pixels", "channels", "ratios", "relu"), [
    ("default", 37, 40, [0.8, 1.7], True),           # channels past one tile, a partial tile of pixels
    ("default", 200, 16, [0.05, 3.3, 1.0], False),   # three inputs (a Sum)
    ("default", 1100, 24, [1.23, 0.91], True),       # more pixels than one pass holds
    ("t8", 90, 11, [0.37, 2.9], False),
])
def test_program_is_its_reference(config: str, pixels: int, channels: int, ratios: list[float],
                                  relu: bool) -> None:
    cfg = load_config(config)
    scales = term_scales(ratios)
    assert scales is not None
    comp = add_compiled(cfg, pixels, channels, scales, relu=relu)
    rows = min(chunk_rows(cfg, len(ratios)), round_up(pixels, cfg.tile))
    stores = [w for w in comp.program.words if load_isa().decode(w)[0].mnemonic == "store"]
    assert len(stores) == ceil_div(pixels, rows) * ceil_div(channels, cfg.tile)  # a store per pass and column tile
    inputs = comp.make_inputs(3)
    machine = Machine(cfg)
    machine.load(comp.program)
    for name, value in inputs.items():
        machine.write_tensor(name, value)
    stats = machine.run(check_races=True).to_json()  # the syncs leave no race
    assert stats["cycles"] > 0
    np.testing.assert_array_equal(machine.read_tensor("Y"), comp.reference(inputs)["Y"])


def test_reference_is_the_real_sum_but_within_a_hair_of_a_tie() -> None:
    """Away from rounding ties the arithmetic is round(sum x_i r_i) itself; near one, off by one at most."""
    rng = np.random.default_rng(1)
    ratios = [0.7431, 1.3187]
    xs = [rng.integers(-128, 128, 50_000, dtype=np.int8) for _ in ratios]
    real = sum(x.astype(np.float64) * r for x, r in zip(xs, ratios, strict=True))
    scales = term_scales(ratios)
    assert scales is not None
    got = add_reference(xs, scales, relu=False).astype(np.int64)
    want = np.clip(np.floor(real + 0.5), -128, 127)
    off = got != want
    assert np.all(np.abs(got - want) <= 1)
    assert np.all(np.abs(real[off] - np.round(real[off] - 0.5) - 0.5) < 2.0 ** -(FRACTION_BITS - 2))


def test_scales_that_cannot_be_held_are_refused() -> None:
    assert term_scales([0.5, 1.5]) is not None
    assert term_scales([5000.0, 1.0]) is None  # the scaled int8 sum would leave int32
    assert term_scales([0.0, 1.0]) is None


@pytest.mark.slow
@pytest.mark.parametrize("config", ["t8", "t32"])
def test_program_agrees_on_the_rtl_of_other_tile_edges(config: str) -> None:
    """The token-ordered add and product programs on the RTL built for T = 8 and 32: cycle-exact and equal to numpy
    (the default config's run is in test_rtl_cosim, on Icarus and Verilator)."""
    from test_rtl_cosim import require_simulator

    from tinynpu.rtl.compare import CosimCase, cosimulate

    require_simulator("verilator")
    cfg = load_config(config)
    cases = []
    for pixels, channels, ratios, relu in [(37, 20, [0.8, 1.7], True), (70, 9, [0.05, 3.3, 1.0], False)]:
        scales = term_scales(ratios)
        assert scales is not None
        comp = add_compiled(cfg, pixels, channels, scales, relu=relu)
        inputs = comp.make_inputs(1)
        cases.append((CosimCase(f"add{len(ratios)}", comp.program, comp.to_device(inputs)), comp.reference(inputs)))
    for pixels, channels, ratio, gated in [(37, 20, 0.0123, False), (20, 9, 3.7, False), (21, 13, 0.5, True)]:
        # the product with and without a vmul, and with a SiLU gate table (vlut first)
        scale = product_scale(ratio / 256 if gated else ratio, bits=GATED_PRODUCT_BITS if gated else 14)
        assert scale is not None
        comp = product_compiled(cfg, pixels, channels, scale, _silu_gate() if gated else None)
        inputs = comp.make_inputs(1)
        cases.append((CosimCase(f"product{pixels}", comp.program, comp.to_device(inputs)), comp.reference(inputs)))
    for report, (_, want) in zip(cosimulate(load_isa(), cfg, [c for c, _ in cases], simulator="verilator"), cases,
                                 strict=True):
        assert report.rtl_error is None and report.model_error is None and report.agree, report.to_json()
        np.testing.assert_array_equal(report.outputs["Y"].reshape(want["Y"].shape), want["Y"])


@pytest.mark.parametrize(("pixels", "channels", "ratios", "cycles"), [
    (49, 256, [0.7, 1.3], 7837),       # ResNet-50's last stage: 16 column tiles, one pass of pixels each
    (3136, 64, [0.5, 0.9], 91732),     # its first stage: many passes of pixels
    (100, 20, [0.3, 0.4, 0.5], 2608),  # a Sum of three
])
def test_emitted_program_keeps_the_cycles_of_the_hand_tokened_one(pixels: int, channels: int, ratios: list[float],
                                                                  cycles: int, sim_engine: str) -> None:
    """The program as the Emitter derives its tokens runs as the hand-tokened assembly it replaced did
    (these cycles, measured on that program): the one extra wait it carries is already satisfied."""
    cfg = load_config("default")
    scales = term_scales(ratios)
    assert scales is not None
    comp = add_compiled(cfg, pixels, channels, scales, relu=True)
    machine = Machine(cfg)
    machine.load(comp.program)
    for name, value in comp.make_inputs(0).items():
        machine.write_tensor(name, value)
    assert machine.run(check_races=True).to_json()["cycles"] == cycles


# -- the product of two activations (SwiGLU's silu(gate) * up) ------------------------------------------------


def _silu_gate() -> np.ndarray:
    codes = np.arange(-128, 128) * 0.05
    hit = gate_table(codes / (1 + np.exp(-codes)))
    assert hit is not None
    return hit[0]


@pytest.mark.parametrize("gated", [False, True], ids=["int8", "gated"])
@pytest.mark.parametrize(("config", "pixels", "channels", "ratio"), [
    ("default", 16, 64, 0.0123),     # Llama's SwiGLU shape: one pass, four column tiles
    ("default", 1100, 24, 0.37),     # more pixels than one pass holds, a partial column tile
    ("t8", 90, 11, 3.7),             # a ratio above 1: a vmul by 2^g first
    ("t32", 45, 70, 2.0**-20),       # a tiny ratio (most products round to 0 or +-1)
])
def test_product_program_is_its_reference(config: str, pixels: int, channels: int, ratio: float,
                                          gated: bool) -> None:
    """Plain, and with a SiLU gate table looked up first (vlut, 16-bit entries: products up to 2^22)."""
    cfg = load_config(config)
    scale = product_scale(ratio / 256 if gated else ratio, bits=GATED_PRODUCT_BITS if gated else 14)
    assert scale is not None
    comp = product_compiled(cfg, pixels, channels, scale, _silu_gate() if gated else None)
    inputs = comp.make_inputs(5)
    inputs["X0"][0, 0] = inputs["X1"][0, 0] = -128  # the largest product, 2^14
    machine = Machine(cfg)
    machine.load(comp.program)
    for name, value in inputs.items():
        machine.write_tensor(name, value)
    assert machine.run(check_races=True).to_json()["cycles"] > 0  # the syncs and tokens leave no race
    np.testing.assert_array_equal(machine.read_tensor("Y"), comp.reference(inputs)["Y"])


@pytest.mark.parametrize("ratio", [0.0123, 0.5, 0.999, 1.0, 3.7, 60000.0 / 2**14, 2.0**-40])
def test_product_reference_is_the_exact_product_rounded_once(ratio: float) -> None:
    """Against Python integers and Fractions: ``round(x u r')`` (ties up), saturated, with ``r'`` the q31
    multiplier's scale (within 2^-31 relative of ``r``): one rounding, no other error."""
    scale = product_scale(ratio)
    assert scale is not None
    held = Fraction(scale.multiplier << scale.prescale, 2 ** (31 + scale.shift))
    assert abs(held / Fraction(ratio) - 1) < Fraction(1, 2**30)
    rng = np.random.default_rng(2)
    x = np.concatenate([np.array([-128, -128, 127, 0, 1, -1], np.int8), rng.integers(-128, 128, 2000, dtype=np.int8)])
    u = np.concatenate([np.array([-128, 127, 127, 5, -1, -1], np.int8), rng.integers(-128, 128, 2000, dtype=np.int8)])
    got = product_reference(x, u, scale)
    for a, b, y in zip(x.tolist(), u.tolist(), got.tolist(), strict=True):
        exact = a * b * held
        want = math.floor(exact + Fraction(1, 2))  # round to nearest, ties toward +infinity
        assert y == max(-128, min(127, want)), (a, b)


def test_gated_reference_is_the_table_entry_times_u_rounded_once() -> None:
    """With a gate: ``round(table[x] u r')`` (ties up), saturated, against Fractions; and the table within half a
    step of ``s_t`` of the float function."""
    codes = np.arange(-128, 128) * 0.05
    silu = codes / (1 + np.exp(-codes))
    hit = gate_table(silu)
    assert hit is not None
    gate, s_t = hit
    assert int(np.max(np.abs(gate))) == 2**15 - 1 and np.all(np.abs(gate * s_t - silu) <= s_t / 2 + 1e-12)
    scale = product_scale(s_t * 0.04 / 0.01, bits=GATED_PRODUCT_BITS)
    assert scale is not None
    held = Fraction(scale.multiplier << scale.prescale, 2 ** (31 + scale.shift))
    x = np.repeat(np.arange(-128, 128, dtype=np.int8), 3)
    u = np.tile(np.array([-128, 1, 127], np.int8), 256)
    got = product_reference(x, u, scale, gate)
    for a, b, y in zip(x.tolist(), u.tolist(), got.tolist(), strict=True):
        want = math.floor(int(gate[a + 128]) * b * held + Fraction(1, 2))
        assert y == max(-128, min(127, want)), (a, b)
    assert gate_table(np.zeros(256)) is None and gate_table(np.full(256, np.inf)) is None


def test_product_scales_that_cannot_be_held_are_refused() -> None:
    assert product_scale(0.01) is not None
    assert product_scale(2.0**15) is not None  # 2^14 * 2^16 = 2^30: still inside int32
    assert product_scale(2.0**16) is None  # would need a vmul by 2^17
    assert product_scale(0.0) is None
    assert product_scale(float("nan")) is None
    assert product_scale(-0.5) is None
    assert product_scale(2.0**7, bits=GATED_PRODUCT_BITS) is not None  # 2^22 * 2^8 = 2^30
    assert product_scale(2.0**8, bits=GATED_PRODUCT_BITS) is None
