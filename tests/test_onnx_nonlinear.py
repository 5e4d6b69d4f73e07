"""Transformer nonlinearities as accelerator programs: each program bit-exact against its integer
reference on the simulator, the encoder block with ``nonlinear`` npu and host, and the refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tinynpu.compiler.onnx.lower import lut, norm, softmax
from tinynpu.compiler.onnx.lower.rowwise import RowShape, row_compiled
from tinynpu.compiler.run import run_compiled
from tinynpu.errors import OnnxError
from tinynpu.isa import load_config

SHAPES = [("t8", 13, 21), ("default", 40, 37), ("default", 16, 128), ("t8", 8, 3)]


def _run(cfg_name: str, rows: int, width: int, params: np.ndarray, blocks: int, body, ref) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(cfg_name)
    shape = RowShape(rows, width, cfg.tile)
    comp = row_compiled(cfg, shape, params, blocks, body, ref, kind="test", what="test")
    report = run_compiled(comp, cfg=cfg, seed=5, check_races=True)  # raises on a difference or a race
    assert report["cycles"] > 0


@pytest.mark.parametrize(("config", "rows", "width"), SHAPES)
def test_lut_program_is_its_reference(config: str, rows: int, width: int) -> None:
    table = np.clip(np.rint(np.tanh(np.arange(-128, 128) / 40.0) * 127), -128, 127).astype(np.int64)
    tile = load_config(config).tile
    _run(config, rows, width, lut.lut_rows(table, tile), 0, lut.lut_body(), lambda x: lut.lut_reference(x, table))


@pytest.mark.parametrize(("config", "rows", "width"), SHAPES)
@pytest.mark.parametrize("zero_point", [0, -7])
def test_softmax_program_is_its_reference(config: str, rows: int, width: int, zero_point: int) -> None:
    p = softmax.softmax_params(0.07, 1 / 127, zero_point, what="test")
    tile = load_config(config).tile
    _run(config, rows, width, softmax.softmax_rows(p, tile), 2, softmax.softmax_body(p, tile),
         lambda x: softmax.softmax_reference(x, p))


@pytest.mark.parametrize(("config", "rows", "width"), SHAPES)
@pytest.mark.parametrize(("center", "z_in"), [(True, 0), (False, 0), (False, 5)])
def test_norm_program_is_its_reference(config: str, rows: int, width: int, center: bool, z_in: int) -> None:
    rng = np.random.default_rng(width)
    gamma, beta = rng.normal(1, 0.3, width), rng.normal(0, 0.3, width)
    gamma[0] = 1e-9  # beta after the requantization in that column
    p = norm.norm_params(width, center=center, s_in=0.03, z_in=z_in, eps=1e-5, gamma=gamma, beta=beta, s_out=0.02,
                         z_out=3, what="test")
    cfg = load_config(config)
    shape = RowShape(rows, width, cfg.tile)
    _run(config, rows, width, norm.norm_rows(p, shape), p.blocks, norm.norm_body(p),
         lambda x: norm.norm_reference(x, p))


def test_row_too_long_is_refused() -> None:
    cfg = load_config("default")
    p = softmax.softmax_params(0.1, 1 / 127, 0, what="x")
    with pytest.raises(OnnxError, match=r"Softmax 'wide': a row of 4096 elements is 256 segments.*too large"):
        row_compiled(cfg, RowShape(16, 4096, cfg.tile), softmax.softmax_rows(p, cfg.tile), 2,
                     softmax.softmax_body(p, cfg.tile), lambda x: x, kind="softmax", what="Softmax 'wide'")


# -- networks ------------------------------------------------------------------------------------------

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def _steps(cn):  # type: ignore[no-untyped-def]
    return {s.name: s for s in cn.net.steps}


@pytest.mark.parametrize("config", ["t8", "default"])
@pytest.mark.parametrize("gelu", ["erf", "tanh", "op"])
def test_encoder_block_on_the_accelerator(tmp_path: Path, config: str, gelu: str) -> None:
    from tinynpu.compiler.onnx import compile_onnx, run_network
    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps
    from tinynpu.compiler.onnx.encoder_block import encoder_block
    from tinynpu.compiler.onnx.ir import NonlinearStep
    from tinynpu.compiler.onnx.runtime.execute import execute
    from tinynpu.compiler.onnx.runtime.nonlinear import host_chain

    cn = compile_onnx(encoder_block(tmp_path / "enc.onnx", gelu=gelu), cfg=load_config(config))
    r = run_network(cn)
    assert r["verified"] is True  # (a): the simulator equals the integer references bit for bit
    assert host_compute_steps(cn.net) == []
    where = {e["name"]: e["where"] for e in r["layers"]}
    for name in ("softmax", "ln1", "ln2", "q_kt", "proj_q"):
        assert where[name] == "npu", name
    assert r["ort_float"]["cosine"] >= 0.99
    # every table lookup gives what the host-float path gives on the same input, by construction
    ex = execute(cn.net, cn.make_inputs(3), cache=None)
    for step in cn.net.steps:
        if isinstance(step, NonlinearStep) and step.kind == "lut":
            np.testing.assert_array_equal(ex.values[step.outputs[0]], host_chain(step, ex.values, cn.net)[0])


def test_encoder_block_host_path_is_unchanged(tmp_path: Path) -> None:
    from tinynpu.compiler.onnx import compile_onnx, run_network
    from tinynpu.compiler.onnx.encoder_block import encoder_block

    cn = compile_onnx(encoder_block(tmp_path / "enc.onnx", gelu="erf"), nonlinear="host")
    r = run_network(cn)
    where = {e["name"]: e["where"] for e in r["layers"]}
    assert where["softmax"] == where["ln1"] == where["gelu_erf"] == where["bias_q"] == "host"
    assert r["ort_quantized"]["equal_fraction"] == 1.0  # onnxruntime's integer kernels and float operators


def _model(path: Path, nodes, x_shape: list[int], inits: list,  # type: ignore[no-untyped-def]
           y_shape: list[int] | None = None) -> Path:
    """A float model of ``nodes`` (one node, or a list) from input ``x`` to output ``y`` (opset 17)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape or x_shape)
    graph = helper.make_graph(nodes if isinstance(nodes, list) else [nodes], "g", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_softmax_not_along_the_last_axis_stays_on_the_host(tmp_path: Path) -> None:
    from onnx import helper

    from tinynpu.compiler.onnx import compile_onnx, run_network

    node = helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)
    cn = compile_onnx(_model(tmp_path / "sm.onnx", node, [1, 6, 10], []))
    step = _steps(cn)["sm"]
    assert step.where == "host" and "softmax along axis 1" in step.reason and "not the last" in step.reason
    assert run_network(cn)["verified"] is True


def test_layernorm_too_large_stays_on_the_host(tmp_path: Path) -> None:
    from onnx import helper, numpy_helper

    from tinynpu.compiler.onnx import compile_onnx

    n = 4096
    inits = [numpy_helper.from_array(np.ones(n, np.float32), "g"),
             numpy_helper.from_array(np.zeros(n, np.float32), "b")]
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="ln_wide", axis=-1)
    cn = compile_onnx(_model(tmp_path / "ln.onnx", node, [1, 2, n], inits))
    step = _steps(cn)["ln_wide"]
    assert step.where == "host"
    assert "LayerNormalization 'ln_wide': a row of 4096 elements" in step.reason and "too large" in step.reason


def test_cli_nonlinear_switch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tinynpu.cli import main
    from tinynpu.compiler.onnx.encoder_block import encoder_block

    path = encoder_block(tmp_path / "enc.onnx")
    for mode in ("host", "npu"):
        assert main(["run", "onnx", str(path), "--nonlinear", mode, "--json"]) == 0
        layers = {e["name"]: e["where"] for e in json.loads(capsys.readouterr().out)["layers"]}
        assert layers["softmax"] == mode
    with pytest.raises(SystemExit) as exc:
        main(["run", "onnx", str(path), "--nonlinear", "gpu"])
    assert exc.value.code == 2
    assert "invalid choice: 'gpu'" in capsys.readouterr().err


def test_decomposed_rmsnorm_is_one_norm_program(tmp_path: Path) -> None:
    """Llama's RMSNorm as exporters write it (Pow, ReduceMean, Add eps, Sqrt, Reciprocal, Mul x, Mul gamma),
    Q/DQ pairs between the nodes: one norm step on the accelerator."""
    from onnx import helper, numpy_helper

    from tinynpu.compiler.onnx import compile_onnx, run_network

    n = 40
    rng = np.random.default_rng(2)
    mk = helper.make_node
    inits = [numpy_helper.from_array(np.float32(2.0), "two"), numpy_helper.from_array(np.float32(1e-5), "eps"),
             numpy_helper.from_array((1 + 0.2 * rng.normal(size=n)).astype(np.float32), "gamma")]
    nodes = [mk("Pow", ["x", "two"], ["sq"], name="pow"), mk("ReduceMean", ["sq"], ["ms"], name="mean", axes=[-1]),
             mk("Add", ["ms", "eps"], ["mse"], name="add_eps"), mk("Sqrt", ["mse"], ["rms"], name="sqrt"),
             mk("Reciprocal", ["rms"], ["inv"], name="rsqrt"), mk("Mul", ["x", "inv"], ["xn"], name="normed"),
             mk("Mul", ["gamma", "xn"], ["y"], name="scaled")]
    cn = compile_onnx(_model(tmp_path / "rms.onnx", nodes, [1, 12, n], inits))
    norms = [s for s in cn.net.steps if s.kind == "norm"]
    assert len(norms) == 1 and norms[0].where == "npu" and norms[0].op == "RMSNorm"
    assert [s.op for s in cn.net.steps if s.where == "host"] == ["QuantizeLinear", "DequantizeLinear"]
    r = run_network(cn)
    assert r["verified"] is True and r["ort_float"]["cosine"] >= 0.99


def test_programs_are_loaded_once_per_image(tmp_path: Path) -> None:
    """A second run reuses every relocated, decoded program; loading is reported apart from the host's work."""
    from tinynpu.compiler.onnx import compile_onnx, run_network
    from tinynpu.compiler.onnx.encoder_block import encoder_block

    cn = compile_onnx(encoder_block(tmp_path / "enc.onnx"))
    first = run_network(cn)
    loaded = dict(cn.image.loaded)
    second = run_network(cn, seed=1)
    # every program run is loaded once (programs relocated alike, such as the heads' matmuls, share one): the
    # second run loads none (its loading time is not compared: both are small once linked, and timing is noise)
    assert cn.image.loaded == loaded and 0 < len(loaded) <= sum(e["programs"] for e in first["layers"])
    for r in (first, second):
        s = r["seconds"]
        assert r["host_share_of_wall_time"] == pytest.approx(
            s["host_steps"] / (s["host_steps"] + s["simulate"] + s["program_load"]))


def test_bench_nonlinear_small(capsys: pytest.CaptureFixture[str]) -> None:
    """The benchmark on the small block: every operator within its bound of the float operator (a table lookup
    exactly as far as the host path), every run bit-exact, no host compute step with the lowerings."""
    import json

    from tinynpu.compiler.onnx.bench_nonlinear import main

    assert main(["--small", "--inputs", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    bound = {"Softmax": 0.52, "LayerNormalization": 1.02}
    for op in result["operators"]:
        assert op["where"] == "npu"
        if op["op"] in bound:
            assert op["npu_lsb"] <= bound[op["op"]], op
        else:
            assert op["npu_lsb"] == op["host_lsb"], op
    for net in result["networks"]:
        assert net["verified"] is True and min(net["cosine_vs_float"].values()) >= 0.99
        assert (net["host_compute_steps"] == []) == (net["nonlinear"] == "npu")


def test_softmax_guard_is_a_table(tmp_path: Path) -> None:
    """``Where(IsNaN(p), 0, p)`` after a softmax (the exporters' guard) before the matmul with the values: one
    table lookup on the accelerator, no host compute."""
    from onnx import helper, numpy_helper

    from tinynpu.compiler.onnx import compile_onnx
    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps
    from tinynpu.compiler.onnx.runtime.execute import execute
    from tinynpu.compiler.onnx.verify.checks import verify_exact

    mk = helper.make_node
    nodes = [mk("Softmax", ["x"], ["p"], name="sm", axis=-1), mk("IsNaN", ["p"], ["nan"], name="isnan"),
             mk("Where", ["nan", "zero", "p"], ["g"], name="guard"), mk("MatMul", ["g", "w"], ["y"], name="mm")]
    inits = [numpy_helper.from_array(np.float32(0), "zero"),
             numpy_helper.from_array(np.random.default_rng(0).normal(size=(24, 8)).astype(np.float32), "w")]
    cn = compile_onnx(_model(tmp_path / "guard.onnx", nodes, [1, 4, 24], inits, [1, 4, 8]))
    luts = [s for s in cn.net.steps if s.kind == "lut"]
    assert [s.op for s in luts] == ["IsNaN+Where"] and luts[0].where == "npu"
    assert host_compute_steps(cn.net) == []
    feeds = cn.make_inputs(0)  # (run_network would compare the softmax's input: the network's last softmax)
    verify_exact(cn.net, execute(cn.net, feeds, cache=cn.cache, image=cn.image), execute(cn.net, feeds, cache=None))


@pytest.mark.parametrize("bias_first", [False, True])
def test_bias_add_folds_in_either_operand_order(tmp_path: Path, bias_first: bool) -> None:
    """``Add(MatMul, bias)`` and ``Add(bias, MatMul)`` (TorchScript's order for a Linear) and a scaling
    ``Mul(c, x)`` all fold into the matmul's epilogue: no host step besides the input and output conversions."""
    from onnx import helper, numpy_helper

    from tinynpu.compiler.onnx import compile_onnx, run_network

    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.normal(size=(24, 40)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(size=40).astype(np.float32), "bias"),
             numpy_helper.from_array(np.float32(0.25), "c")]
    mk = helper.make_node
    add_in, mul_in = (["bias", "mm"], ["c", "biased"]) if bias_first else (["mm", "bias"], ["biased", "c"])
    nodes = [mk("MatMul", ["x", "w"], ["mm"], name="proj"), mk("Add", add_in, ["biased"], name="bias_add"),
             mk("Mul", mul_in, ["y"], name="scale")]
    cn = compile_onnx(_model(tmp_path / "lin.onnx", nodes, [1, 12, 24], inits, y_shape=[1, 12, 40]))
    proj = _steps(cn)["proj"]
    assert proj.where == "npu" and "'bias_add' folded" in proj.reason and "'scale' folded" in proj.reason
    assert [s.op for s in cn.net.steps if s.where == "host"] == ["QuantizeLinear", "DequantizeLinear"]
    r = run_network(cn)
    assert r["verified"] is True and r["ort_float"]["cosine"] >= 0.99
