"""Sweep workloads from files: the two CSV layer-list formats, ONNX models, and deduplication across sources."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tinynpu.compiler.conv_shape import RESNET50_CONVS, ConvShape
from tinynpu.errors import SpecError
from tinynpu.explore.report import config_totals
from tinynpu.explore.spec import load_sweep
from tinynpu.explore.workloads import read_layer_csv, read_onnx_network

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _spec(tmp_path: Path, workloads: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text("base: default\nparameters:\n  dram.latency_cycles: [100]\nworkloads:\n"
                    + textwrap.indent(textwrap.dedent(workloads), "  ") + "objectives: [cycles]\n")
    return path


def test_shipped_layer_lists() -> None:
    gemms = read_layer_csv(EXAMPLES / "sweep_layers_mnk.csv")
    assert [dict(g.sizes) for g in gemms][0] == {"m": 128, "n": 2304, "k": 768}
    assert all(g.kind == "gemm" and g.count == 1 for g in gemms) and len(gemms) == 4
    convs = read_layer_csv(EXAMPLES / "sweep_layers_scalesim.csv")
    assert all(c.kind == "conv2d" and dict(c.sizes)["pad"] == 0 for c in convs) and len(convs) == 8
    # SCALE-Sim's IFMAP is the padded input: conv1's 230 x 230 is ResNet-50's 224 x 224 with pad 3, and the
    # output is SCALE-Sim's (IFMAP - Filter) / Strides + 1 = 112 rows, as in ResNet-50.
    conv1 = ConvShape(**dict(convs[0].sizes))
    assert (conv1.p, conv1.q) == (RESNET50_CONVS[0].p, RESNET50_CONVS[0].q) == (112, 112)
    assert convs[0].where.endswith("sweep_layers_scalesim.csv:2")
    spec = load_sweep(EXAMPLES / "sweep_layers.yaml")  # both lists and the MLP, on three base configs
    assert len(spec.workloads) == 4 + 8 + 1 and spec.parameters[0].values == ("t8", "default", "t32")


def test_identical_layers_run_once_and_count_twice(tmp_path: Path) -> None:
    (tmp_path / "layers.csv").write_text("Layer,M,N,K\nqkv,128,768,768\nout,128,768,768\nffn,64,64,64\n")
    spec = load_sweep(_spec(tmp_path, "gemm: [[64, 64, 64]]\ncsv: [layers.csv]\nconv2d: resnet50\n"))
    counts = {w.key: w.count for w in spec.workloads}
    assert counts["gemm m=128 n=768 k=768"] == 2 and counts["gemm m=64 n=64 k=64"] == 2
    assert len(spec.workloads) == 2 + len(RESNET50_CONVS)
    # The totals count a layer as often as the workloads have it.
    spec = load_sweep(_spec(tmp_path, "csv: [layers.csv]\n"))
    rows = [{"config": "c", "config_file": "c.yaml", "status": "ok", "kind": "gemm", "run_args": "",
             "dram.latency_cycles": "100", "workload": w.key, "count": str(w.count), "cycles": str(cycles),
             "dram_bytes": "10"} for w, cycles in zip(spec.workloads, (1000, 30), strict=True)]
    [totals], _ = config_totals(spec, rows)
    assert totals.totals["cycles"] == 2 * 1000 + 30 and totals.totals["dram_bytes"] == 30


@pytest.mark.parametrize(("text", "expected"), [
    ("Layer,M,N\nx,1,2\n", r"layers.csv:1:1: the header 'Layer, M, N' is neither"),
    ("Layer, M, N, K\nfc, 64, x, 64\n", r"layers.csv:2:9: N of layer 'fc' must be a positive integer, not 'x'"),
    ("Layer, M, N, K\nfc, 64, 64\n", r"layers.csv:2:11: K of layer 'fc' must be a positive integer, not ''"),
    ("Layer, M, N, K\nfc, 64, 0, 64\n", r"layers.csv:2:9: N of layer 'fc' must be at least 1, not 0"),
    ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
     "c, 2, 8, 3, 3, 4, 4, 1,\n", r"layers.csv:2:1: layer 'c': the filter \(3\) is larger than the"),
    ("\n", r"layers.csv:1:1: the workload CSV is empty"),
])
def test_bad_layer_csv_names_the_place(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "layers.csv").write_text(text)
    with pytest.raises(SpecError, match=expected):
        load_sweep(_spec(tmp_path, "csv: [layers.csv]\n"))


def test_missing_workload_file_names_the_spec_line(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"sweep.yaml:5:10 .*the onnx workload file 'nosuch.onnx' does not exist"):
        load_sweep(_spec(tmp_path, "onnx: [nosuch.onnx]\n"))


def test_an_onnx_model_is_one_network_workload(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    from onnx_models import small_cnn

    model = small_cnn(tmp_path / "cnn.onnx")
    (layer,) = read_onnx_network(model)
    assert (layer.kind, layer.sizes, layer.count, layer.model) == ("onnx", (("batch", 1),), 1, str(model.resolve()))
    # the same model listed twice runs once and counts twice; its key names the file and its content
    spec = load_sweep(_spec(tmp_path, "onnx: [cnn.onnx, ./cnn.onnx]\n"))
    (workload,) = spec.workloads
    assert workload.count == 2 and workload.key == f"onnx cnn.onnx sha256={layer.model_sha256[:16]} batch=1"
    assert workload.cli_args() == f"{model.resolve()} --batch 1"
    small_cnn(tmp_path / "cnn.onnx", seed=1)  # other weights: another workload (not a cached one)
    assert load_sweep(_spec(tmp_path, "onnx: [cnn.onnx]\n")).workloads[0].key != workload.key
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    with pytest.raises(SpecError, match=r"bad.onnx: "):
        load_sweep(_spec(tmp_path, "onnx: [bad.onnx]\n"))
