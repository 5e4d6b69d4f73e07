"""A decode step's work outside the simulator, done once where it can be: the figures stay those of doing it
every time.

- a machine run again prices its run with the energy it kept (the same as a fresh machine's);
- an LLM run's step networks share what they derive from their own epilogues and shapes (programs, parameter
  rows), and every step's cycles, energy, DRAM and host bytes are those of deriving it in every step;
- onnxruntime's int8 session is made once for the free-running and the teacher-forced passes.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_energy import MIXED
from test_sim_support import HALT, load, machine, program

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import tiny_decoder  # noqa: E402

from tinynpu.compiler.onnx.llm.compile import CompiledDecoder, compile_llm  # noqa: E402
from tinynpu.compiler.onnx.llm.generate import Generation, generate  # noqa: E402
from tinynpu.compiler.onnx.runtime import layers  # noqa: E402


def _run_json(program: list[Any], dram: np.ndarray, again: int = 1) -> list[dict[str, Any]]:
    m = machine(program)
    out = []
    for _ in range(again):
        m.write_dram(0, dram)
        out.append({k: v for k, v in m.run().to_json().items() if k != "wall_seconds"})
    return out


@pytest.mark.usefixtures("sim_engine")
def test_a_machine_run_again_reports_what_a_fresh_machine_does() -> None:
    dram = np.random.default_rng(5).integers(-128, 128, 512).astype(np.int8)
    first, second = _run_json(MIXED, dram, again=2)
    assert second == first == _run_json(MIXED, dram)[0]
    # a program loaded after another on the same machine is priced for its own cycles
    short = [load("a", 0, 0), HALT]
    m = machine(MIXED)
    m.write_dram(0, dram)
    m.run()
    m.load(program(short))
    m.write_dram(0, dram)
    later = {k: v for k, v in m.run().to_json().items() if k != "wall_seconds"}
    assert later == _run_json(short, dram)[0] and later["energy_pj"] < first["energy_pj"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> CompiledDecoder:
    model = tiny_decoder(tmp_path_factory.mktemp("steps") / "tiny_decoder.onnx")
    return compile_llm(model, prompt_tokens=6, generate=5)


def _figures(gen: Generation) -> list[dict[str, Any]]:
    """Every step's tokens and every figure of each of its steps' runs (timings left out)."""
    timed = {"sim_seconds", "load_seconds"}
    return [{"tokens": r.tokens, "written": r.cache_bytes_written, "read": r.cache_bytes_read,
             "runs": {name: {f.name: getattr(run, f.name) for f in fields(run) if f.name not in timed}
                      for name, run in r.execution.runs.items()}}
            for r in gen.steps]


def test_steps_share_derivations_and_report_the_same_figures(compiled: CompiledDecoder,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    views = list(compiled.image.views.values())
    assert all(v.shared is views[0].shared for v in views)
    shared = generate(compiled)
    built: list[tuple[int, int, int]] = []
    real = layers.gemm_program

    def counted(cache: Any, m: int, n: int, k: int, **kw: Any) -> Any:
        built.append((m, n, k))
        return real(cache, m, n, k, **kw)

    monkeypatch.setattr(layers, "gemm_program", counted)
    assert _figures(generate(compiled)) == _figures(shared)
    assert built == []  # a second run of the same steps derives nothing again
    for view in views:  # each step network deriving its own, as every step did before they shared
        view.shared = {}
    alone = generate(compiled)
    assert _figures(alone) == _figures(shared) and alone.tokens == alone.reference_tokens
    # each step derived its weight layers' programs itself: the shared run built them once per network built
    assert len(built) > len(views) * 2


def test_the_int8_model_gets_one_onnxruntime_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinynpu.compiler.onnx.llm.run import run_llm
    from tinynpu.compiler.onnx.verify import checks

    made: list[Any] = []
    real = checks.session

    def counted(model: Any, *args: Any, **kw: Any) -> Any:
        made.append(model)
        return real(model, *args, **kw)

    monkeypatch.setattr(checks, "session", counted)
    report = run_llm(tiny_decoder(tmp_path / "tiny.onnx"), prompt_tokens=4, generate_tokens=3)
    assert report["verified"] and len(report["onnxruntime_int8_teacher_forced"]["steps"]) == 3
    # the float model's calibration run, then the int8 model's one session for both of its passes
    assert len(made) == 2 and made[0] is not made[1]
