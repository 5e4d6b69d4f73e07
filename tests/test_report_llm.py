"""`tinynpu report llm`: the roofline of prefill and decode and the time per token as the context grows, each
figure's plotted values the run's own figures; each bad option one message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import tiny_decoder  # noqa: E402

from tinynpu.cli import main  # noqa: E402
from tinynpu.isa import load_config  # noqa: E402

PROMPT, GENERATE = 2, 3


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """One report from a model (its summary), and the run it reports (`report.json`'s ``run``: the JSON of
    `tinynpu run llm --json`), saved as ``run.json`` beside it."""
    import contextlib
    import io

    folder = tmp_path_factory.mktemp("report-llm")
    model = tiny_decoder(folder / "tiny.onnx")
    out = folder / "report"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["report", "llm", "--model", str(model), "--prompt-tokens", str(PROMPT), "--generate",
                     str(GENERATE), "-o", str(out), "--json"]) == 0
    summary = json.loads(buf.getvalue())
    (folder / "run.json").write_text(json.dumps(summary["run"]))
    return out, summary, summary["run"]


def test_files_are_written_and_plot_the_runs_figures(reported: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    out, summary, run = reported
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["llm_roofline.png", "llm_time_per_token.png"]
    assert json.loads((out / "report.json").read_text())["figures"] == summary["figures"]
    index = (out / "index.md").read_text()
    assert "![Prefill and decode on the roofline](figures/llm_roofline.png)" in index
    assert f"{run['time_per_output_token_s'] * 1e6:.2f} us" in index
    assert run["model"] == str(out.parent / "tiny.onnx") and len(run["generated"][0]) == GENERATE
    cfg = load_config("default")
    roof = summary["figures"]["llm_roofline"]["data"]
    assert (roof["macs_per_cycle"], roof["bytes_per_cycle"]) == (cfg.macs_per_cycle, cfg.dram_bytes_per_cycle)
    assert [p["phase"] for p in roof["points"]] == ["prefill"] + ["decode"] * (GENERATE - 1)
    for point, step in zip(roof["points"], run["steps"], strict=True):
        assert (point["macs"], point["dram_bytes"], point["cycles"]) == (step["macs"], step["dram_bytes"],
                                                                         step["cycles"])
        assert point["achieved_mac_per_cycle"] == step["macs"] / step["cycles"]
        assert point["intensity_mac_per_byte"] == step["macs"] / step["dram_bytes"]
    per_token = summary["figures"]["llm_time_per_token"]["data"]
    assert per_token["time_per_output_token_s"] == run["time_per_output_token_s"]
    assert [s["context_tokens"] for s in per_token["steps"]] == list(range(PROMPT + 1, PROMPT + GENERATE))
    clock = run["clock_mhz"] * 1e6
    for drawn, step in zip(per_token["steps"], run["steps"][1:], strict=True):
        assert drawn["seconds"] == step["seconds"] == step["cycles"] / clock
        assert drawn["seconds_by_kind"] == {k: c / clock for k, c in step["cycles_by_kind"].items()}
        assert drawn["lower_bound_seconds"] == step["lower_bound_cycles"] / clock


def test_from_a_saved_run_the_same_figures(reported: tuple[Path, dict[str, Any], dict[str, Any]], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out, summary, run = reported
    assert main(["report", "llm", "--from-run", str(out.parent / "run.json"), "-o", str(tmp_path / "r"),
                 "--json"]) == 0
    again = json.loads(capsys.readouterr().out)["figures"]
    assert {name: f["data"] for name, f in again.items()} == {name: f["data"] for name, f in summary["figures"].items()}


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(("argv", "expected"), [
    (["report", "llm", "--prompt-tokens", "2", "--generate", "2"], "give either --model DECODER.onnx"),
    (["report", "llm", "--model", "m.onnx", "--from-run", "r.json"], "both were given"),
    (["report", "llm", "--model", "m.onnx", "--generate", "2"], "--prompt-tokens and --generate are needed"),
    (["report", "matmul", "--model", "m.onnx"], "--model is an option of `tinynpu report llm`"),
    (["report", "llm", "--from-run", "r.json", "--batch", "2"], "are options of --model"),
    (["report", "llm", "--from-run", "nosuch.json"], "--from-run nosuch.json: cannot read the file"),
])
def test_bad_options(argv: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert expected in _error(capsys, [*argv, "-o", str(tmp_path / "out")])


def test_a_saved_run_lacking_a_field_or_on_another_config(reported: tuple[Path, dict[str, Any], dict[str, Any]],
                                                          tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, _, run = reported
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({k: v for k, v in run.items() if k != "steps"}))
    assert "lacks the field 'steps'" in _error(capsys, ["report", "llm", "--from-run", str(bad), "-o",
                                                        str(tmp_path / "a")])
    bad.write_text(json.dumps(run | {"steps": [{k: v for k, v in run["steps"][0].items() if k != "macs"}]}))
    assert "step 0 lacks the field 'macs'" in _error(capsys, ["report", "llm", "--from-run", str(bad), "-o",
                                                              str(tmp_path / "b")])
    bad.write_text("[1, 2]")
    assert "expected the JSON object of `tinynpu run llm ... --json`" in _error(
        capsys, ["report", "llm", "--from-run", str(bad), "-o", str(tmp_path / "c")])
    bad.write_text(json.dumps(run))
    err = _error(capsys, ["report", "llm", "--from-run", str(bad), "--config", "t8", "-o", str(tmp_path / "d")])
    assert "the run was on config 'default' at 1000.0 MHz, but the report's config is 't8'" in err
    bad.write_text(json.dumps(run | {"config": "nosuch"}))
    assert "the run's config 'nosuch' cannot be loaded" in _error(
        capsys, ["report", "llm", "--from-run", str(bad), "-o", str(tmp_path / "e")])
