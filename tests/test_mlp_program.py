"""The MLP program's structure: one program, bias-initialised layers, a store -> load token between layers."""

from __future__ import annotations

import numpy as np
import pytest

from tinynpu.compiler.mlp import CLASSES, HIDDEN, IN_FEATURES, compile_mlp, min_traffic_bytes, mlp_data
from tinynpu.compiler.quant import linear_int32, requantize
from tinynpu.errors import UsageError
from tinynpu.isa import load_config, load_isa


def decoded(batch: int, dtype: str = "int8") -> list[tuple[str, dict[str, int]]]:
    isa = load_isa()
    prog = compile_mlp(batch, dtype=dtype).program
    out = []
    for w in prog.words:
        instr, fields = isa.decode(w)
        out.append((instr.mnemonic, fields))
    return out


@pytest.mark.parametrize("batch", [1, 64])
def test_layer_boundary_is_a_store_to_load_token(batch: int) -> None:
    comp = compile_mlp(batch)
    isa = load_isa()
    ops = decoded(batch)
    hidden = comp.program.tensor("hidden")
    uid = isa.unit_ids
    hidden_loads = [i for i, (m, f) in enumerate(ops)
                    if m == "load" and hidden.addr <= f["dram"] < hidden.addr + hidden.nbytes]
    hidden_stores = [i for i, (m, f) in enumerate(ops)
                     if m == "store" and hidden.addr <= f["dram"] < hidden.addr + hidden.nbytes]
    assert hidden_loads and hidden_stores and max(hidden_stores) < min(hidden_loads)
    first = ops[min(hidden_loads)][1]
    assert first["wait"] & (1 << uid["store"]), "layer 2's first read of hidden must wait on a store token"
    assert ops[max(hidden_stores)][1]["signal"] & (1 << uid["load"]), "the last hidden store must signal load"
    assert all(m != "sync" for m, _ in ops), "the layers are ordered by tokens, not a barrier"
    assert ops[-1][0] == "halt"
    # Every hidden store is a requantization with relu and the calibrated shift.
    for i in hidden_stores:
        f = ops[i][1]
        assert (f["narrow"], f["relu"], f["shift"]) == (1, 1, comp.workload["shift"])


def test_fp32_hidden_is_stored_raw_with_relu() -> None:
    comp = compile_mlp(1, dtype="fp32")
    hidden = comp.program.tensor("hidden")
    stores = [f for m, f in decoded(1, "fp32") if m == "store" and f["dram"] >= hidden.addr
              and f["dram"] < hidden.addr + hidden.nbytes]
    assert stores and all((f["narrow"], f["relu"], f["shift"]) == (0, 1, 0) for f in stores)
    assert hidden.dtype == "float32" and not comp.exact


def test_calibrated_shift_saturates_nothing_and_is_minimal() -> None:
    d = mlp_data(64, integer=True)
    pre = linear_int32(d.x, d.w1, d.b1)
    assert np.maximum(pre, 0).max() >> d.shift <= 127
    assert d.shift > 0 and (np.maximum(pre, 0).max() + (1 << (d.shift - 2))) >> (d.shift - 1) > 127
    h = requantize(pre, d.shift, relu=True)
    assert 0 < h.max() <= 127 and (h > 0).mean() > 0.2  # the hidden layer carries information


def test_bounds_hand_computed_batch1() -> None:
    comp = compile_mlp(1)
    b = comp.bounds
    # x + w1 + b1 (int32) + w2 + b2 (int32) + logits (int32)
    compulsory = 784 + 128 * 784 + 128 * 4 + 10 * 128 + 10 * 4 + 10 * 4
    assert b.io_lower_bound_bytes == compulsory and b.bound_kind == "compulsory"
    assert b.best_tiling_bytes == compulsory + 2 * 128  # hidden written once and read once
    assert min_traffic_bytes(1, load_config("default")) == b.best_tiling_bytes
    assert b.useful_macs == 784 * 128 + 128 * 10
    assert b.issued_macs == (1 * 8 * 49 + 1 * 1 * 8) * 16**3
    assert comp.outputs == ("hidden", "logits")
    assert (HIDDEN, CLASSES, IN_FEATURES) == (128, 10, 784)


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"batch": 0}, "batch must be a positive integer, not 0"),
    ({"batch": -2}, "batch must be a positive integer, not -2"),
    ({"batch": 1, "dtype": "int4"}, "dtype must be one of int8, fp32, not 'int4'"),
    ({"batch": 1, "dtype": "fp32", "cfg": load_config("default")}, "dtype 'fp32' is not supported by config"),
])
def test_bad_input(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        compile_mlp(**kwargs)  # type: ignore[arg-type]


def test_absurd_batch_is_refused_before_allocating() -> None:
    with pytest.raises(UsageError, match="bytes of DRAM"):
        compile_mlp(10**9)
