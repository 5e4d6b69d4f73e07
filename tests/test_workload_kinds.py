"""The one registry from a workload kind to its compile function gives exactly the direct calls' programs."""

from __future__ import annotations

import pytest

from tinynpu.compiler.conv2d import compile_conv2d
from tinynpu.compiler.kinds import KINDS, compile_workload
from tinynpu.compiler.matmul import compile_matmul
from tinynpu.compiler.mlp import compile_mlp
from tinynpu.errors import UsageError
from tinynpu.isa import load_config


def test_each_kind_compiles_the_program_of_its_direct_call() -> None:
    cfg = load_config("default")
    pairs = [
        (compile_workload("matmul", {"m": 40, "n": 24, "k": 32, "layout": "nn"}, cfg=cfg, schedule="naive"),
         compile_matmul(40, 24, 32, layout="nn", cfg=cfg, schedule="naive")),
        (compile_workload("conv2d", {"n": 1, "c": 4, "h": 6, "w": 6, "k": 8, "r": 3, "s": 3, "pad": 1}, cfg=cfg),
         compile_conv2d(1, 4, 6, 6, 8, 3, 3, pad=1, cfg=cfg)),
        (compile_workload("mlp", {"batch": 2}), compile_mlp(2)),
    ]
    assert [kind for kind in KINDS] == ["matmul", "conv2d", "mlp"]
    for via_registry, direct in pairs:
        assert via_registry.program.to_bytes() == direct.program.to_bytes()


def test_an_unknown_kind_names_the_kinds() -> None:
    with pytest.raises(UsageError, match="unknown workload kind 'attention'; the kinds are matmul, conv2d, mlp"):
        compile_workload("attention", {})


def test_a_kind_without_schedules_refuses_one() -> None:
    with pytest.raises(UsageError, match="mlp: takes no schedule"):
        compile_workload("mlp", {"batch": 1}, schedule="naive")


def test_a_parameter_of_another_kind_is_the_callers_bug() -> None:
    with pytest.raises(TypeError, match="matmul: batch is not a parameter"):
        compile_workload("matmul", {"m": 16, "n": 16, "k": 16, "batch": 2})
