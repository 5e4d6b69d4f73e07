"""Attention's head split and merge folded into its matmuls (compiler/onnx/frontend/heads.py) and read or
written by strided DMA in the DRAM image (compiler/onnx/runtime/attention.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from tinynpu.compiler.onnx import compile_onnx, run_network  # noqa: E402
from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource  # noqa: E402
from tinynpu.compiler.onnx.ir import MatmulStep  # noqa: E402
from tinynpu.compiler.onnx.runtime.attention import _rows  # noqa: E402

MODELS = Path(__file__).resolve().parent / "models"
SEQ, HEADS, DIM = 16, 2, 16


def _attention_model(path: Path, *, keys_out: bool = False) -> Path:
    """x (1, S, H*d) -> Q, K, V projections -> head split (Reshape, Transpose) -> scores -> Softmax ->
    context -> head merge (Transpose, Reshape) -> output projection; ``keys_out``: the split keys are a
    graph output too (so their moves must stay)."""
    rng = np.random.default_rng(0)
    hidden = HEADS * DIM

    def weight(name: str) -> onnx.TensorProto:
        return helper.make_tensor(name, TensorProto.FLOAT, (hidden, hidden),
                                  (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).reshape(-1).tolist())

    inits = [weight(n) for n in ("wq", "wk", "wv", "wo")]
    inits += [helper.make_tensor("split", TensorProto.INT64, (4,), [1, SEQ, HEADS, DIM]),
              helper.make_tensor("merge", TensorProto.INT64, (3,), [1, SEQ, hidden])]
    nodes = [helper.make_node("MatMul", ["x", f"w{n}"], [n], name=f"proj_{n}") for n in "qkv"]
    for n in "qkv":
        nodes.append(helper.make_node("Reshape", [n, "split"], [f"{n}4"], name=f"split_{n}"))
        perm = [0, 2, 3, 1] if n == "k" else [0, 2, 1, 3]
        nodes.append(helper.make_node("Transpose", [f"{n}4"], [f"{n}h"], perm=perm, name=f"heads_{n}"))
    nodes += [helper.make_node("MatMul", ["qh", "kh"], ["scores"], name="scores"),
              helper.make_node("Softmax", ["scores"], ["p"], axis=-1, name="softmax"),
              helper.make_node("MatMul", ["p", "vh"], ["ctx"], name="context"),
              helper.make_node("Transpose", ["ctx"], ["ctx4"], perm=[0, 2, 1, 3], name="merge_heads"),
              helper.make_node("Reshape", ["ctx4", "merge"], ["merged"], name="merge_rows"),
              helper.make_node("MatMul", ["merged", "wo"], ["y"], name="proj_o")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, SEQ, hidden))]
    if keys_out:
        outputs.append(helper.make_tensor_value_info("kh", TensorProto.FLOAT, (1, HEADS, DIM, SEQ)))
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  (1, SEQ, hidden))],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def _moves(cn: object) -> list[str]:
    return [s.op for s in cn.net.steps if s.kind == "move"]  # type: ignore[attr-defined]


def test_head_split_and_merge_leave_no_host_move(tmp_path: Path) -> None:
    cn = compile_onnx(_attention_model(tmp_path / "attn.onnx"))
    assert _moves(cn) == []
    scores, context = [s for s in cn.net.steps if isinstance(s, MatmulStep)]
    assert scores.views[0] is not None and scores.views[0].moves == ("split_q", "heads_q")
    assert context.views[2] is not None and context.views[2].moves == ("merge_heads", "merge_rows")
    r = run_network(cn)
    assert r["verified"] is True  # the strided reads and writes give the integer reference bit for bit
    notes = {layer["name"]: layer["note"] for layer in r["layers"]}
    # Q and K each come from their own projection's output: both read by strided DMA, and the context
    # stored by strided DMA into the merged rows; V's heads are the tmm's B transposed: staged by the host
    assert "A from q_QuantizeLinear_Output (strided DMA" in notes[scores.name]
    assert "B from k_QuantizeLinear_Output (strided DMA" in notes[scores.name]
    assert "B from v_QuantizeLinear_Output (host-staged" in notes[context.name]
    assert "output into merged_QuantizeLinear_Output (strided DMA" in notes[context.name]
    assert r["outputs"][0]["ort_float"]["cosine"] > 0.99


def test_a_move_whose_output_is_a_graph_output_stays(tmp_path: Path) -> None:
    cn = compile_onnx(_attention_model(tmp_path / "attn.onnx", keys_out=True))
    assert _moves(cn) == ["Reshape", "Transpose"]  # the keys' split, which the user reads
    assert run_network(cn)["verified"] is True


def test_fused_projection_reads_q_by_dma_and_stages_k() -> None:
    """GPT-2's fused QKV: Q and K are columns of one tensor, so a program's manifest would hold them as
    overlapping spans; Q is read in place, K staged (its copy, as before the fold)."""
    name = "gpt2_eager"
    with np.load(MODELS / f"{name}.inputs.npz") as data:
        feeds = {k: data[k] for k in data.files}
    cn = compile_onnx(MODELS / f"{name}.onnx", calibration=CalibrationSource((feeds,), "committed"))
    r = run_network(cn, feeds=feeds)
    assert r["verified"] is True
    assert "Transpose" not in _moves(cn) and "Split" not in _moves(cn)
    notes = [layer["note"] for layer in r["layers"] if layer["name"] in ("node_matmul", "node_matmul_1")]
    assert "A from addmm_QuantizeLinear_Output (strided DMA" in notes[0]
    assert "B from addmm_QuantizeLinear_Output (host-staged" in notes[0]
    assert "output into view_6_QuantizeLinear_Output (strided DMA" in notes[1]


@pytest.mark.parametrize(("offsets", "expected"), [
    (np.arange(12).reshape(3, 4), (100, None)),  # back to back
    (np.arange(4) + 32 * np.arange(3)[:, None], (100, 32)),  # rows 32 bytes apart
    (np.arange(4) * 2 + 8 * np.arange(3)[:, None], None),  # elements 2 apart: not a DMA row
    (np.arange(4) + 2 * np.arange(3)[:, None], None),  # rows overlapping
    (np.arange(4) + np.array([0, 32, 96])[:, None], None),  # rows unevenly apart
])
def test_rows_of_a_block(offsets: np.ndarray, expected: tuple[int, int | None] | None) -> None:
    assert _rows(offsets, 100) == expected
