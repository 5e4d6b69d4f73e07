"""A machine counts a loaded program's run-independent stats once: a second run reports what a fresh machine
reports, and loading another program counts afresh."""

from __future__ import annotations

from typing import Any

from tinynpu.compiler.matmul import compile_matmul
from tinynpu.isa import load_config
from tinynpu.simulator import Machine


def _without_wall(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stats.items() if k != "wall_seconds"}


def _fresh(program: Any, inputs: dict[str, Any], to_device: Any) -> dict[str, Any]:
    m = Machine(load_config("default"))
    m.load(program)
    for name, arr in to_device(inputs).items():
        m.write_tensor(name, arr)
    return _without_wall(m.run().to_json())


def test_a_second_run_reports_what_a_fresh_machine_reports() -> None:
    small, big = compile_matmul(20, 24, 40), compile_matmul(36, 16, 24)
    m = Machine(load_config("default"))
    m.load(small.program)
    for name, arr in small.to_device(small.make_inputs(1)).items():
        m.write_tensor(name, arr)
    first = m.run()
    kept = m._counts
    second = m.run()
    assert m._counts is kept  # counted once
    want = _fresh(small.program, small.make_inputs(1), small.to_device)
    assert _without_wall(first.to_json()) == _without_wall(second.to_json()) == want
    second.tensor_traffic["C"]["write"] += 1  # a caller's edit never reaches the kept counts
    assert _without_wall(m.run().to_json()) == want
    m.load(big.program)  # another program: counted afresh, not the kept counts
    for name, arr in big.to_device(big.make_inputs(2)).items():
        m.write_tensor(name, arr)
    assert _without_wall(m.run().to_json()) == _fresh(big.program, big.make_inputs(2), big.to_device)
