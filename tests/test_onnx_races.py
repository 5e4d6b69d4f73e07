"""Every program the test networks compile runs under the simulator's data-race sanitizer, on both cores.

A network run skips the sanitizer for speed (``execute(check_races=False)``); here every
accelerator layer of each network, relocated into its DRAM image as a real run places it,
runs with it on: a program whose tokens let two units touch the same rows out of order
(a conv, a GEMM, an attention matmul, a residual add, a softmax, a norm, a table lookup) faults naming
the instruction.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import small_cnn  # noqa: E402
from test_onnx_encoder import encoder_block  # noqa: E402
from test_onnx_ops import CASES, build  # noqa: E402

from tinynpu.compiler.onnx import compile_onnx  # noqa: E402
from tinynpu.compiler.onnx.runtime.execute import execute  # noqa: E402
from tinynpu.compiler.onnx.verify.checks import verify_exact  # noqa: E402

#: name -> (the model written into a folder, the program kinds it must have)
NETWORKS: dict[str, tuple[Callable[[Path], Path], set[str]]] = {
    "small_cnn": (lambda d: small_cnn(d / "cnn.onnx"), {"conv2d", "matmul", "add"}),
    "encoder": (lambda d: encoder_block(d / "enc.onnx", gelu_op=False), {"matmul", "softmax", "norm", "lut"}),
    "depthwise_groups": (lambda d: build(CASES["conv_depthwise_48ch_stride2"], d / "dw.onnx"), {"conv2d"}),
    "attention_heads": (lambda d: build(CASES["matmul_heads"], d / "heads.onnx"), {"matmul"}),
    "residual_add_relu": (lambda d: build(CASES["add_relu"], d / "add.onnx"), {"conv2d", "add"}),
    "residual_sum3": (lambda d: build(CASES["sum3"], d / "sum3.onnx"), {"conv2d", "add"}),
}


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_network_programs_run_race_free(name: str, tmp_path: Path, sim_engine: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from tinynpu.simulator import Machine

    make, kinds = NETWORKS[name]
    cn = compile_onnx(make(tmp_path))
    assert kinds <= {cn.cache.programs[key].workload["kind"] for keys in cn.programs.values() for key in keys}
    sanitized = []
    real_run = Machine.run

    def run(self: Machine, **kwargs: object) -> object:
        sanitized.append(kwargs.get("check_races"))
        return real_run(self, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Machine, "run", run)
    feeds = cn.make_inputs(0)
    got = execute(cn.net, feeds, cache=cn.cache, image=cn.image, check_races=True)  # a race faults here
    verify_exact(cn.net, got, execute(cn.net, feeds, cache=None))
    assert sanitized and all(sanitized)  # every program ran with the sanitizer on
    assert len(sanitized) == sum(run.programs for run in got.runs.values())
