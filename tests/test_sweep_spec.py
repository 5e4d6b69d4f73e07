"""Sweep specs: every mistake is one message naming the spec's file:line:col; points are validated configs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tinynpu.cli import main
from tinynpu.errors import SpecError
from tinynpu.explore.spec import design_points, load_sweep

GOOD = """\
base: default
parameters:
  dram.bytes_per_cycle: [8, 16]
  dram.latency_cycles: {from: 50, to: 150, step: 50}
workloads:
  gemm: [[64, 64, 64], [64, 64, 64], [32, 48, 16]]
  mlp: [1]
objectives: [cycles, dram_bytes]
constraints: ["cycles <= 1e9"]
"""


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_grid_expands_dedups_and_validates(tmp_path: Path) -> None:
    spec = load_sweep(_spec(tmp_path, GOOD))
    assert [w.key for w in spec.workloads] == ["gemm m=64 n=64 k=64", "gemm m=32 n=48 k=16", "mlp batch=1"]
    points = design_points(spec, tmp_path)
    assert len(points) == 6
    assert {(p.config.dram_bytes_per_cycle, p.config.dram_latency_cycles) for p in points} == {
        (bw, lat) for bw in (8, 16) for lat in (50, 100, 150)}
    assert len({p.digest for p in points}) == 6


def test_sample_is_seeded_subset(tmp_path: Path) -> None:
    spec = load_sweep(_spec(tmp_path, GOOD + "sample: {points: 3, seed: 7}\n"))
    first = [p.overrides for p in design_points(spec, tmp_path)]
    again = [p.overrides for p in design_points(spec, tmp_path)]
    assert len(first) == 3 and first == again


@pytest.mark.parametrize(("edit", "expected"), [
    (("dram.bytes_per_cycle", "dram.bandwidth"), r"sweep.yaml:3:3 .*'dram.bandwidth' is not a key of the base "
                                                 r"config .*dram has no key 'bandwidth'.*bytes_per_cycle"),
    (("dram.bytes_per_cycle", "dram"), r"sweep.yaml:3:3 .*'dram' is a section"),
    (("{from: 50, to: 150, step: 50}", "{from: 150, to: 50}"), r"sweep.yaml:4:3 .*range from 150 to 50 is empty"),
    (("[cycles, dram_bytes]", "[cycles, area]"), r"sweep.yaml:8:22 .*schema violation .*'area' is not one of"),
    (("  dram.bytes_per_cycle: [8, 16]", "  base: [t8]"), r"sweep.yaml:3:3 .*'base' is not a config key"),
    (("base: default", "base: [default, nosuch]"), r"sweep.yaml:1:17 .*base config 'nosuch' is neither"),
    (("cycles <= 1e9", "dram_bytes <= 1e9"), r"sweep.yaml:9:15 .*constraint 'dram_bytes <= 1e9' is on"),
    (("base: default", "base: nosuch"), r"sweep.yaml:1:1 .*base config 'nosuch' is neither"),
    (("  mlp: [1]", "  mlps: [1]"), r"sweep.yaml:7:3 .*schema violation"),
])
def test_bad_spec_names_the_place(tmp_path: Path, edit: tuple[str, str], expected: str) -> None:
    text = GOOD.replace("objectives: [cycles, dram_bytes]", "objectives: [cycles]") if "dram_bytes <=" in edit[1] \
        else GOOD
    with pytest.raises(SpecError, match=expected):
        load_sweep(_spec(tmp_path, text.replace(*edit)))


def test_empty_grid(tmp_path: Path) -> None:
    spec = load_sweep(_spec(tmp_path, GOOD.replace(
        "  dram.bytes_per_cycle: [8, 16]\n  dram.latency_cycles: {from: 50, to: 150, step: 50}\n", "  {}\n")
        .replace("parameters:\n  {}", "parameters: {}")))
    with pytest.raises(SpecError, match=r"sweep.yaml:2:\d+ .*the grid is empty"):
        design_points(spec, tmp_path)


def test_invalid_point_names_the_values(tmp_path: Path) -> None:
    spec = load_sweep(_spec(tmp_path, GOOD.replace("[8, 16]", "[8, 0]")))
    with pytest.raises(SpecError, match=r"sweep.yaml:2:\d+ .*design point dram.bytes_per_cycle=0, "
                                        r"dram.latency_cycles=50 is not a valid config: .*bytes_per_cycle"):
        design_points(spec, tmp_path)


def test_cli_unknown_key_is_one_paragraph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec(tmp_path, GOOD.replace("dram.latency_cycles", "dram.latncy_cycles"))
    assert main(["sweep", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert f"{spec}:4:3 (at parameters.dram.latncy_cycles)" in err


def test_several_bases_are_a_grid_dimension(tmp_path: Path) -> None:
    spec = load_sweep(_spec(tmp_path, GOOD.replace("base: default", "base: [t8, default, t32]")))
    assert spec.parameters[0].key == "base" and spec.parameters[0].values == ("t8", "default", "t32")
    points = design_points(spec, tmp_path)
    assert len(points) == 18
    # Each base brings its own tile, MAC rate and scratchpad energies; the parameters override the rest.
    assert {(p.config.tile, p.config.tmm_interval_cycles) for p in points} == {(8, 8), (16, 16), (32, 32)}
    assert {p.config.dram_bytes_per_cycle for p in points} == {8, 16}
    assert all(p.config.name.startswith(dict(p.overrides)["base"]) for p in points)


def test_latin_hypercube_uses_every_stratum_once(tmp_path: Path) -> None:
    text = GOOD.replace("  dram.latency_cycles: {from: 50, to: 150, step: 50}\n",
                        "  dram.latency_cycles: [50, 75, 100, 150]\n  queues.depth: [2, 4, 8, 16]\n"
                        ).replace("[8, 16]", "[8, 16, 32, 64]")
    spec = load_sweep(_spec(tmp_path, text + "sample: {points: 4, seed: 3, method: latin-hypercube}\n"))
    points = [dict(p.overrides) for p in design_points(spec, tmp_path)]
    # As many points as values: each value of each parameter exactly once (a random pick of 4 of the 64
    # grid points repeats a value with probability 1 - (4! / 4^4)^3 > 99%).
    assert len(points) == 4
    for key, values in (("dram.bytes_per_cycle", [8, 16, 32, 64]), ("dram.latency_cycles", [50, 75, 100, 150]),
                        ("queues.depth", [2, 4, 8, 16])):
        assert sorted(p[key] for p in points) == values
    again = load_sweep(_spec(tmp_path, text + "sample: {points: 4, seed: 3, method: latin-hypercube}\n"))
    assert [dict(p.overrides) for p in design_points(again, tmp_path)] == points
    other = load_sweep(_spec(tmp_path, text + "sample: {points: 4, seed: 4, method: latin-hypercube}\n"))
    assert [dict(p.overrides) for p in design_points(other, tmp_path)] != points


def test_random_sample_of_a_huge_grid(tmp_path: Path) -> None:
    """10^11 grid points are never listed: the sample decodes the drawn indices."""
    text = GOOD.replace("  dram.bytes_per_cycle: [8, 16]\n", "  limits.max_cycles: {from: 1000000, to: 1999999}\n"
                        ).replace("{from: 50, to: 150, step: 50}", "{from: 1, to: 100000}")
    spec = load_sweep(_spec(tmp_path, text + "sample: {points: 3, seed: 1}\n"))
    points = design_points(spec, tmp_path)
    assert len({p.overrides for p in points}) == 3
    assert all(1 <= v < 2000000 for p in points for _, v in p.overrides)
