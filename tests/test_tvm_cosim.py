"""A program lowered from a TVM schedule runs on the RTL as on the simulator: `tinynpu compile tvm`, then
`tinynpu cosim PROGRAM.bin` with the schedule's inputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_rtl_cosim import require_rtl
from tvm_support import ROOT, require_tvm

from tinynpu.cli import main

pytestmark = pytest.mark.rtl

BLOCKED = ROOT / "examples" / "tvm" / "blocked.py"


def test_compile_tvm_then_cosim_the_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The blocked schedule (pipelined A, two accumulator blocks, folded init) at 32 x 64 x 48, on Icarus."""
    require_tvm()
    require_rtl()
    script = tmp_path / "blocked32.py"
    script.write_text("import importlib.util, sys\n"
                      f"spec = importlib.util.spec_from_file_location('blocked32_src', {str(BLOCKED)!r})\n"
                      "blocked = importlib.util.module_from_spec(spec)\n"
                      "sys.modules['blocked32_src'] = blocked\n"
                      "spec.loader.exec_module(blocked)\n\n"
                      "def schedule(config):\n"
                      "    return blocked.blocked_schedule(32, 64, 48, config, bm=1, bn=2)\n")
    out = tmp_path / "out"
    assert main(["compile", "tvm", str(script), "-o", str(out)]) == 0
    capsys.readouterr()
    rng = np.random.default_rng(3)
    inputs = {"A": rng.integers(-128, 128, (32, 48), dtype=np.int8), "B": rng.integers(-128, 128, (64, 48),
                                                                                         dtype=np.int8)}
    args = []
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    assert main(["cosim", str(out / "program.bin"), *args, "--simulator", "icarus", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["outputs_match"] and report["cycle_diff"] == 0 and report["instructions_compared"] > 10
