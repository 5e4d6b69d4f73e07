"""``llm:`` sweep workloads: a 2-point sweep of the tiny decoder (its figures are `run llm`'s), each bad field
one message with the spec's file:line:col, and the totals of the LLM objectives."""

from __future__ import annotations

import csv
import hashlib
import json
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_models import tiny_decoder  # noqa: E402

from tinynpu.cli import main  # noqa: E402
from tinynpu.errors import SpecError  # noqa: E402
from tinynpu.explore import llm_workload, quantities  # noqa: E402
from tinynpu.explore.report import ConfigTotals, best_configs, pareto_front  # noqa: E402
from tinynpu.explore.spec import load_sweep  # noqa: E402

TINY_RUN = "{layers: 2, hidden: 64, heads: 2, ffn: 256, vocab: 100, positions: 64, prompt_tokens: 2, generate: 2}"
SPEC = f"""\
base: default
parameters:
  dram.bytes_per_cycle: [8, 32]
workloads:
  llm:
    - {TINY_RUN}
objectives: [time_per_output_token_s, time_to_first_token_s, tokens_per_second, energy_per_token_pj, cycles, edp]
"""


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_two_point_sweep_of_the_tiny_decoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Each point's figures are `run llm`'s on that config; more bandwidth, less time per token."""
    from tinynpu.compiler.onnx.llm import run_llm
    from tinynpu.isa import load_config

    monkeypatch.setenv("TINYNPU_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    assert main(["sweep", str(_spec(tmp_path, SPEC)), "-o", str(out), "--workers", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["points"], summary["failed"], summary["computed"]) == (2, 0, 2)
    with (out / "results.csv").open() as fh:
        rows = {int(r["dram.bytes_per_cycle"]): r for r in csv.DictReader(fh)}
    assert all(r["status"] == "ok" and r["kind"] == "llm" for r in rows.values())
    model = out / "models" / "decoder-L2-H64-A2-KV2-F256-V100-P64.onnx"
    assert rows[8]["run_args"] == f"{model} --prompt-tokens 2 --generate 2 --batch 1 --seed 0"
    run = run_llm(model, prompt_tokens=2, generate_tokens=2, cfg=load_config(rows[8]["config_file"]))
    assert float(rows[8]["time_per_output_token_s"]) == run["time_per_output_token_s"]
    assert float(rows[8]["time_to_first_token_s"]) == run["time_to_first_token_s"]
    assert float(rows[8]["tokens_per_second"]) == run["tokens_per_second"]
    assert float(rows[8]["energy_per_token_pj"]) == run["decode_energy_per_token_pj"]
    assert int(rows[8]["cycles"]) == sum(s["cycles"] for s in run["steps"])
    assert float(rows[32]["time_per_output_token_s"]) < float(rows[8]["time_per_output_token_s"])
    best = summary["best"]
    assert best["tokens_per_second"]["value"] == max(float(r["tokens_per_second"]) for r in rows.values())
    assert best["time_per_output_token_s"]["value"] == min(float(r["time_per_output_token_s"]) for r in rows.values())
    assert best["tokens_per_second"]["command"].startswith(f"tinynpu run llm {model} --prompt-tokens 2")
    index = (out / "index.md").read_text()
    assert "| config | cycles | DRAM traffic | energy | EDP | time to first token | time per token |" in index
    assert (out / "pareto-energy_per_token_pj-vs-time_per_output_token_s.png").is_file()
    # the same points again: every one from the cache
    assert main(["sweep", str(tmp_path / "sweep.yaml"), "-o", str(out), "--force", "--workers", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cached"] == 2


def test_a_point_that_does_not_fit_fails_with_the_sizes(tmp_path: Path) -> None:
    """The cache and weights larger than the config's DRAM: the point's error, before any work."""
    import yaml

    from tinynpu.isa.config import CONFIG_DIR

    data = yaml.safe_load((CONFIG_DIR / "default.yaml").read_text())
    data["dram"]["bytes"] = 65536
    params = {**llm_workload.shape_defaults(), "prompt_tokens": 4, "generate": 3, "batch": 1, "seed": 0,
              "model": str(tiny_decoder(tmp_path / "tiny.onnx"))}
    text = yaml.safe_dump(data)
    result = llm_workload.evaluate_llm(text, hashlib.sha256(text.encode()).hexdigest(), params)
    assert result["status"] == "failed" and result["cacheable"]
    assert "more than the 65536 bytes of DRAM" in result["error"]


def test_a_model_file_workload_is_keyed_by_its_contents(tmp_path: Path) -> None:
    model = tiny_decoder(tmp_path / "tiny.onnx")
    spec = load_sweep(_spec(tmp_path, SPEC.replace(TINY_RUN, "{model: tiny.onnx, prompt_tokens: 4, generate: 3}")))
    (workload,) = spec.workloads
    assert workload.model == str(model)
    assert workload.key.startswith(f"llm tiny.onnx sha256={llm_workload._file_digest(model)} prompt_tokens=4")
    assert llm_workload.run_args(workload, tmp_path) == f"{model} --prompt-tokens 4 --generate 3 --batch 1 --seed 0"


@pytest.mark.parametrize(("edit", "expected"), [
    (("layers: 2,", "layers: 2, model: tiny.onnx,"), r"sweep.yaml:6:\d+ .*\(at workloads.llm\[0\].layers\): an llm "
                                                     r"workload gives either a model file or a decoder's shape"),
    (("hidden: 64", "hidden: 63"), r"sweep.yaml:6:\d+ .*llm\[0\].heads\): heads 2 must divide hidden 63"),
    (("heads: 2,", "heads: 2, kv_heads: 3,"),
     r"sweep.yaml:6:\d+ .*llm\[0\].kv_heads\): kv_heads 3 must divide heads 2"),
    (("positions: 64", "positions: 2"),
     r"sweep.yaml:6:\d+ .*llm\[0\].positions\): a prompt of 2 tokens and 2 generated tokens need 3 positions, but the "
     r"decoder has 2"),
    (("generate: 2", "generate: 1"), r"sweep.yaml:6:\d+ .*schema violation .*1 is less than the minimum of 2"),
    (("prompt_tokens: 2", "prompt_tokens: 70000"), r"sweep.yaml:6:\d+ .*prompt_tokens\): prompt_tokens must be at "
                                                   r"most 65536, not 70000"),
    ((", prompt_tokens: 2", ""), r"sweep.yaml:6:\d+ .*schema violation .*'prompt_tokens' is a required property"),
    (("layers: 2", "layer: 2"), r"sweep.yaml:6:\d+ .*llm\[0\].layer\): schema violation .*'layer' was unexpected"),
    (("  llm:\n    - " + TINY_RUN, "  gemm: [[16, 16, 16]]"), r"sweep.yaml:6:14 .*objective 'time_per_output_token_s' "
                                                              r"is measured on llm workloads only"),
    ((TINY_RUN, "{model: nosuch.onnx, prompt_tokens: 4, generate: 3}"),
     r"sweep.yaml:6:\d+ .*llm\[0\].model\): the llm model file 'nosuch.onnx' does not exist"),
])
def test_bad_llm_field_names_the_place(tmp_path: Path, edit: tuple[str, str], expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        load_sweep(_spec(tmp_path, SPEC.replace(*edit)))


def test_a_model_that_is_no_decoder_is_refused_at_its_key(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(tmp_path / "relu.onnx"))
    with pytest.raises(SpecError, match=r"sweep.yaml:6:\d+ .*llm\[0\].model\): .*relu.onnx"):
        load_sweep(_spec(tmp_path, SPEC.replace(TINY_RUN, "{model: relu.onnx, prompt_tokens: 4, generate: 3}")))


def _totals(name: str, **values: float) -> ConfigTotals:
    return ConfigTotals(config=name, label=name, config_file="", overrides=(), totals=values, feasible=True,
                        first_workload=("llm", ""))


def test_tokens_per_second_is_maximized_and_combined_as_a_rate() -> None:
    rows = [{"kind": "llm", "count": "1", "time_to_first_token_s": "1e-5", "time_per_output_token_s": "2e-5",
             "tokens_per_second": "50000", "energy_per_token_pj": "10"},
            {"kind": "llm", "count": "2", "time_to_first_token_s": "3e-5", "time_per_output_token_s": "1e-5",
             "tokens_per_second": "100000", "energy_per_token_pj": "5"},
            {"kind": "gemm", "count": "1"}]
    totals = llm_workload.config_totals(rows)
    assert totals["time_per_output_token_s"] == pytest.approx(4e-5)
    assert totals["energy_per_token_pj"] == pytest.approx(20.0)
    assert totals["tokens_per_second"] == pytest.approx(3 / (1 / 50000 + 2 / 100000))  # one token of each in turn
    slow, fast = _totals("slow", tokens_per_second=10.0, area_mm2=1.0), _totals("fast", tokens_per_second=20.0,
                                                                              area_mm2=2.0)
    assert [c.config for c in pareto_front([slow, fast], "area_mm2", "tokens_per_second")] == ["slow", "fast"]
    assert [c.config for c in pareto_front([slow, _totals("worse", tokens_per_second=5.0, area_mm2=1.5)],
                                           "area_mm2", "tokens_per_second")] == ["slow"]

    class Spec:
        objectives = ("tokens_per_second", "area_mm2")

    best = best_configs(Spec(), [slow, fast])  # type: ignore[arg-type]
    assert (best["tokens_per_second"].config, best["area_mm2"].config) == ("fast", "slow")
    assert quantities.objective("time_per_output_token_s", 2.5e-5) == "25 µs"
    assert quantities.objective("tokens_per_second", 40000.4) == "40,000 tokens/s"
    assert quantities.objective("energy_per_token_pj", 2.5e7) == "25 µJ"
