"""Benchmark target lines name the target, the figure measured and met / not met (and why for --quick)."""

from __future__ import annotations

import re
from typing import Any

from tinynpu.compiler.bench import TARGETS, target_lines
from tinynpu.simulator.bench import _summary

LINE_RE = re.compile(r"^target:? .+: .*\d.*[: (](met|not met)\b")


def _compiler_result(*, quick: bool, conv_util: float, design_seconds: float = 0.1) -> dict[str, Any]:
    gemm = {"util_over_ceiling": 0.97, "traffic_over_best": 1.0, "search_gap": 0.01, "search_seconds": 0.1}
    seed = {"shape": [1024, 1024, 1024], "utilization": 0.999, "traffic_over_best": 1.0, "compile_cpu_seconds": 0.5,
            "compile_instructions_per_second": 1.5e6}
    return {"targets": TARGETS, "gemm": [gemm], "seed": seed, "conv": [{"util_over_ceiling": conv_util}],
            "quick": quick, "design_point": {"median_seconds": design_seconds}}


def test_compiler_target_lines_say_figure_and_verdict() -> None:
    lines = target_lines(_compiler_result(quick=False, conv_util=0.95))
    assert len(lines) == 10 and all(LINE_RE.match(line) and line.endswith(": met") for line in lines), lines
    assert any("worst 95.00%" in line and "conv utilization >= 80%" in line for line in lines)


def test_cost_per_design_point_lines_say_figure_and_verdict() -> None:
    lines = target_lines(_compiler_result(quick=False, conv_util=0.95, design_seconds=0.35))
    rate = next(line for line in lines if "instructions/s" in line)
    assert "1,500,000 instructions/s: met" in rate and ">= 1,000,000 instructions/s" in rate
    point = next(line for line in lines if "compile + simulate" in line)
    assert point.endswith("0.350 s: not met") and "<= 0.2 s CPU" in point


def test_a_quick_run_says_why_a_utilization_target_is_not_met() -> None:
    lines = target_lines(_compiler_result(quick=True, conv_util=0.6))
    conv = next(line for line in lines if "conv utilization" in line)
    assert conv.endswith("not met (expected with --quick, see below)")
    assert "--quick runs small shapes" in lines[-1] and "run without --quick" in lines[-1]


def test_simulator_target_lines_say_each_modes_figure_and_verdict() -> None:
    def run(schedule: str, races: bool, ratio: float, ips: float, peak: float, engine: str = "native",
            cpu: float = 1.0) -> dict:
        return {"schedule": schedule, "engine": engine, "races_checked": races, "ratio_to_numpy": ratio,
                "instructions_per_second": ips, "peak_rss_over_image": peak, "cpu_seconds": cpu}

    runs = [run("auto", True, 3.5, 1e6, 1.2, cpu=1.3), run("auto", False, 1.5, 1e6, 1.1),
            run("naive", True, 2.0, 5.5e6, 1.3, cpu=1.6), run("naive", False, 2.0, 4e6, 1.0),
            run("loads", True, 2.0, 9e5, 1.0), run("loads", False, 2.0, 2e6, 1.0),
            run("naive", False, 2.0, 1e5, 2.02, engine="python")]
    lines = _summary(runs)
    assert all(LINE_RE.match(line) for line in lines), lines
    tuned, naive, loads, races, peak = lines
    assert races == ("target races on <= 1.5x races off (CPU time): tuned 1.30x met; naive 1.60x not met; "
                     "loads 1.00x met [native core]")
    assert "<= 2x numpy (races off): 1.50x met; <= 3x numpy (races on): 3.50x not met [native core]" in tuned
    assert naive == "target naive >= 5,000,000 instr/s (races on): 5,500,000 met [native core]"
    assert "(races on): 900,000 not met; (races off): 2,000,000 met" in loads
    assert peak.endswith("native core, races on: 1.30x met; native core, races off: 1.10x met; "
                         "python core, races off: 2.02x not met")
