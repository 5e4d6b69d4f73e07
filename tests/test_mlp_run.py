"""The MLP end to end on the simulator: bit-exact int8, fp32 within rtol 1e-5, both batch sizes."""

from __future__ import annotations

import numpy as np
import pytest

from tinynpu.compiler.mlp import compile_mlp, mlp_data
from tinynpu.compiler.quant import mlp_int8_reference
from tinynpu.compiler.run import run_compiled


@pytest.mark.parametrize("batch", [1, 64])
def test_int8_mlp_is_bit_exact(batch: int) -> None:
    comp = compile_mlp(batch)
    report = run_compiled(comp)  # raises VerificationError on any differing element
    assert report["verified"] is True
    # Traffic is exactly the best tiling's: every tensor moved once, hidden written and read once.
    assert report["dram_bytes"] == comp.bounds.best_tiling_bytes
    assert report["cycles"] >= comp.bounds.roofline_cycles


def test_int8_reference_is_the_one_checked() -> None:
    # The oracle run_compiled compares with is quant.py's reference on the seeded data.
    comp = compile_mlp(3)
    inputs = comp.make_inputs(5)
    d = mlp_data(3, integer=True, seed=5)
    hidden, logits = mlp_int8_reference(d.x, d.w1, d.b1, d.w2, d.b2, comp.workload["shift"])
    ref = comp.reference(inputs)
    np.testing.assert_array_equal(ref["hidden"], hidden)
    np.testing.assert_array_equal(ref["logits"], logits)
    assert run_compiled(comp, seed=5)["verified"] is True


@pytest.mark.parametrize("batch", [1, 64])
def test_fp32_mlp_within_rtol(batch: int) -> None:
    comp = compile_mlp(batch, dtype="fp32")
    assert not comp.exact
    assert run_compiled(comp)["verified"] is True


def test_odd_batch_spans_several_blocks() -> None:
    assert run_compiled(compile_mlp(37))["verified"] is True


def test_cli_mlp(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tinynpu.cli import main

    assert main(["run", "mlp", "--batch", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] is True and report["workload"]["kind"] == "mlp"
    rc = main(["run", "mlp", "--batch", "0"])
    err = capsys.readouterr().err
    assert rc != 0 and "batch must be a positive integer, not 0" in err and "Traceback" not in err


@pytest.mark.parametrize("dtype", ["int8", "fp32"])
def test_listing_reassembles_to_the_same_binary(dtype: str) -> None:
    from tinynpu.assembler import assemble
    from tinynpu.isa import load_config, load_isa

    comp = compile_mlp(3, dtype=dtype)
    cfg = load_config(comp.workload["config"])
    again = assemble(comp.asm(cfg), filename="mlp.s", isa=load_isa(), cfg=cfg)
    assert again.words == comp.program.words and again.tensors == comp.program.tensors
