"""The per-layer report of ``tinynpu run onnx``: names from the model, shapes, energy and its total, the CSV,
what a program without MACs reports as utilization, and the same totals as a sweep over the same model."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import small_cnn  # noqa: E402

from tinynpu.cli import main  # noqa: E402
from tinynpu.compiler.onnx.verify.layers_csv import COLUMNS  # noqa: E402
from tinynpu.compiler.onnx.verify.report import format_run  # noqa: E402
from tinynpu.compiler.onnx.verify.totals import LEFT_OUT  # noqa: E402

#: small_cnn's nodes made nameless: its convs and its residual add (their index in the file's graph).
NAMELESS = {"conv1": "Conv_0", "conv2": "Conv_3", "conv3": "Conv_5", "residual": "Add_6"}


def _nameless_cnn(path: Path) -> Path:
    import onnx

    model = onnx.load(str(small_cnn(path)))
    for node in model.graph.node:
        if node.name in NAMELESS:
            node.name = ""
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[dict[str, str]], Path]:
    folder = tmp_path_factory.mktemp("layers")
    model = _nameless_cnn(folder / "cnn.onnx")
    out = folder / "layers.csv"
    capture = io.StringIO()
    with contextlib.redirect_stdout(capture):
        assert main(["run", "onnx", str(model), "--json", "--csv", str(out)]) == 0
    report = json.loads(capture.getvalue())
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return report, rows, model


def test_csv_names_shapes_and_energy_add_up(run: tuple[dict[str, Any], list[dict[str, str]], Path]) -> None:
    report, rows, _ = run
    assert tuple(rows[0]) == COLUMNS
    by_name = {r["layer"]: r for r in rows}
    # nameless nodes are Op_index (their place in the file's graph); named ones keep their names
    assert set(NAMELESS.values()) | {"pool1", "gap", "fc", "softmax"} <= set(by_name)
    assert by_name["Conv_0"]["step"] == "c1" and by_name["Conv_0"]["op"] == "Conv"
    assert (by_name["Conv_0"]["input_shape"], by_name["Conv_0"]["output_shape"]) == ("1x3x20x20", "1x8x20x20")
    assert by_name["Conv_3"]["output_shape"] == "1x16x5x5"  # stride 2
    assert by_name["Add_6"]["input_shape"] == "1x16x5x5 + 1x16x5x5"
    assert (by_name["fc"]["input_shape"], by_name["fc"]["output_shape"]) == ("1x16", "1x10")
    # one row per step, and the columns sum to the network's totals
    assert len(rows) == len(report["layers"])
    assert sum(float(r["energy_pJ"]) for r in rows) == pytest.approx(report["energy_pj"], rel=1e-12)
    assert sum(int(r["cycles"]) for r in rows) == report["cycles"]
    assert sum(int(r["dram_bytes"]) for r in rows) == report["dram_bytes"]
    assert all(float(r["energy_pJ"]) > 0 for r in rows if r["where"] == "npu")


def test_table_has_shapes_energy_and_a_total_line(run: tuple[dict[str, Any], list[dict[str, str]], Path]) -> None:
    report, _, _ = run
    text = format_run(report)
    table = text.split("per layer:\n")[1].splitlines()
    assert table[0].split()[:6] == ["layer", "op", "where", "input", "output", "cycles"]
    conv = next(line for line in table if line.startswith("Conv_0 "))
    assert "1x3x20x20" in conv and "1x8x20x20" in conv and " uJ" in conv
    total = table[-1]
    assert total.startswith("total ") and f"{report['cycles']:,}" in total
    assert f"{report['energy_pj'] / 1e6:.3f} uJ" in total and LEFT_OUT in total
    assert f"not counted{' ' * 10}"[:11] in text and LEFT_OUT in text


def test_residual_add_utilization_is_its_alu_share(run: tuple[dict[str, Any], list[dict[str, str]], Path]) -> None:
    report, rows, _ = run
    add = next(e for e in report["layers"] if e["name"] == "Add_6")
    busy = add["busy_cycles"]
    # docs/onnx.md: a program without MACs reports its vector ALU's busy share of its cycles, no padding ceiling
    assert add["alu_busy"] == busy["alu"] / add["cycles"] and 0 < add["alu_busy"] <= 1
    assert add["busiest_unit_busy"] == max(busy.values()) / add["cycles"]
    row = next(r for r in rows if r["layer"] == "Add_6")
    assert row["utilization_%"] == row["padding_ceiling_%"] == ""
    assert float(row["alu_busy_%"]) == pytest.approx(100 * add["alu_busy"], abs=1e-4)
    line = next(line for line in format_run(report).splitlines() if line.startswith("Add_6 "))
    assert f"alu {100 * add['alu_busy']:.1f} %" in line and "n/a: no MACs" in line and "0.0 %" not in line
    conv = next(r for r in rows if r["layer"] == "Conv_0")  # a layer with MACs keeps MAC utilization
    assert float(conv["utilization_%"]) > 0 and conv["alu_busy_%"] == ""


def test_run_onnx_and_a_sweep_count_the_same_work(run: tuple[dict[str, Any], list[dict[str, str]], Path],
                                                  tmp_path: Path) -> None:
    from tinynpu.explore.spec import design_points, load_sweep
    from tinynpu.explore.task import evaluate

    report, _, model = run
    spec_path = tmp_path / "sweep.yaml"
    spec_path.write_text("base: default\nparameters:\n  dram.bytes_per_cycle: [16]\n"
                         f"workloads:\n  onnx: [{model}]\nobjectives: [cycles]\n")
    spec = load_sweep(spec_path)  # default with its own DRAM port (16 B/cycle): the config run onnx used
    (workload,) = spec.workloads
    assert workload.kind == "onnx" and workload.count == 1
    (config_dir := tmp_path / "configs").mkdir()
    (design,) = design_points(spec, config_dir)
    point = evaluate(design.config_text, design.digest, workload.kind, dict(workload.sizes), workload.model)
    assert point["status"] == "ok", point
    # every accelerator program: convs, the residual add, the GEMM and the softmax, as the network run counts
    assert point["cycles"] == report["cycles"]
    assert point["dram_bytes"] == report["dram_bytes"]
    assert point["energy_pj"] == pytest.approx(report["energy_pj"], rel=1e-12)
    assert point["edp"] == pytest.approx(report["edp"], rel=1e-12)


def test_csv_into_a_directory_or_a_users_file(run: tuple[dict[str, Any], list[dict[str, str]], Path],
                                              tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, _, model = run
    assert main(["run", "onnx", str(model), "--csv", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--csv {tmp_path}: it is a directory" in err and "Traceback" not in err
    mine = tmp_path / "mine.csv"
    mine.write_text("my numbers\n")
    assert main(["run", "onnx", str(model), "--csv", str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"--csv {mine}: the file already exists and was not written by tinynpu" in err and "--force" in err
    assert mine.read_text() == "my numbers\n"
    assert main(["run", "onnx", str(model), "--csv", str(model), "--force"]) == 2
    assert "also an input of this run" in capsys.readouterr().err
    assert main(["run", "onnx", str(model), "--csv", ""]) == 2
    assert "--csv '': give a file name" in capsys.readouterr().err
    assert main(["run", "onnx", str(model), "--csv", str(mine), "--force"]) == 0
    assert mine.read_text().startswith(",".join(COLUMNS))


def test_report_folder_holds_the_csv(run: tuple[dict[str, Any], list[dict[str, str]], Path], tmp_path: Path) -> None:
    from tinynpu.compiler.onnx.verify.layers_csv import layers_csv
    from tinynpu.compiler.onnx.verify.report import REPORT_FILES, write_report

    report, _, _ = run
    write_report(tmp_path / "rep", report)
    assert {p.name for p in (tmp_path / "rep").iterdir()} == set(REPORT_FILES) and "layers.csv" in REPORT_FILES
    assert (tmp_path / "rep" / "layers.csv").read_text() == layers_csv(report)
    index = (tmp_path / "rep" / "index.md").read_text()
    assert "| Add_6 | Add | npu | 1x16x5x5 + 1x16x5x5 |" in index and "| total |" in index
