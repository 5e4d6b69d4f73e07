"""The committed worked example (docs/sweep/resnet50/, docs/sweep.md, the README's figures) follows from its
committed results, which follow from the current spec; the one command that regenerates it."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest

from tinynpu.explore import figures, worked_example
from tinynpu.explore.execute import AREA, RESULTS, area_key, read_results
from tinynpu.explore.task import evaluate
from tinynpu.explore.worked_example import OUT, SPEC, check, default_repo, regenerate

REPO = default_repo()


def _copy_repo(tmp_path: Path) -> Path:
    """The files the worked example reads and writes, in a scratch repository."""
    repo = tmp_path / "repo"
    for rel in (SPEC, worked_example.DOCS, worked_example.README):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, repo / rel)
    shutil.copytree(REPO / OUT, repo / OUT)
    return repo


def _write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buf.getvalue())


def _edit_results(repo: Path, column: str, factor: float) -> None:
    rows = read_results(repo / OUT / RESULTS)
    rows[0][column] = str(int(float(rows[0][column]) * factor))
    _write_rows(repo / OUT / RESULTS, rows)


def test_the_committed_worked_example_is_current() -> None:
    assert check(REPO) == []


def test_check_finds_results_the_figures_and_docs_do_not_show(tmp_path: Path) -> None:
    repo = _copy_repo(tmp_path)
    assert check(repo) == []
    _edit_results(repo, "cycles", 2.0)  # one layer twice as slow: every figure and table moves
    problems = "\n".join(check(repo))
    assert "pareto-energy_pj-vs-cycles.png does not plot the data of" in problems
    assert "index.md is not what" in problems
    assert "docs/sweep.md: a generated worked-example section does not follow" in problems


def test_check_finds_results_of_another_spec(tmp_path: Path) -> None:
    repo = _copy_repo(tmp_path)
    spec = repo / SPEC
    spec.write_text(spec.read_text().replace("[t8, default, t32]", "[t8, default]"))
    assert any("was produced by another spec" in p for p in check(repo))
    # Comments and layout are not the spec's content.
    shutil.copy(REPO / SPEC, spec)
    spec.write_text("# a new comment\n" + spec.read_text())
    assert check(repo) == []


def test_figure_data_digest_round_trip(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    fig.add_subplot().plot([1, 2], [3, 4])
    figures.save(tmp_path / "a.png", fig, {"x": [1.0, 2.0]}, dpi=50)
    assert figures.embedded_digest(tmp_path / "a.png") == figures.data_digest({"x": [1.0, 2.0]})
    assert figures.data_digest({"x": [1.0, 2.0]}) == figures.data_digest({"x": [1.0, 2.0 + 1e-15]})
    assert figures.data_digest({"x": [1.0, 2.0]}) != figures.data_digest({"x": [1.0, 2.001]})
    fig.savefig(tmp_path / "plain.png", format="png")
    assert figures.embedded_digest(tmp_path / "plain.png") is None


TINY_SPEC = """\
# A stand-in for the worked example: two arrays, one small conv.
base: [t8, default]
parameters: {}
workloads:
  conv2d: [{c: 16, h: 8, w: 8, k: 16, r: 3, s: 3, pad: 1}]
objectives: [cycles, energy_pj, area_mm2]
"""


def _tiny_repo(tmp_path: Path) -> Path:
    """A scratch repository whose worked example is :data:`TINY_SPEC`, its documents with empty sections."""
    repo = tmp_path / "repo"
    (repo / SPEC).parent.mkdir(parents=True)
    (repo / SPEC).write_text(TINY_SPEC)
    (repo / "docs").mkdir()
    for rel, parts in ((worked_example.DOCS, 2), (worked_example.README, 1)):
        markers = [worked_example.TABLE_MARKERS, worked_example.FIGURE_MARKERS][-parts:]
        (repo / rel).write_text("# doc\n\n" + "\n\n".join(f"{b}\nold\n{e}" for b, e in markers) + "\n\nend\n")
    return repo


def test_regenerate_writes_what_check_accepts(tmp_path: Path) -> None:
    repo = _tiny_repo(tmp_path)
    written = regenerate(repo, with_area=False, workers=2)
    assert repo / worked_example.README in [repo / p for p in written]
    assert check(repo) == []
    docs = (repo / worked_example.DOCS).read_text()
    assert "| 8x8 (`t8`) |" in docs and "| 16x16 (`default`) |" in docs and "not synthesized" in docs
    assert "old" not in docs and docs.endswith("\n\nend\n")
    readme = (repo / worked_example.README).read_text()
    assert "docs/sweep/resnet50/pareto-energy_pj-vs-cycles.png" in readme and "area_mm2" not in readme
    rows = read_results(repo / OUT / RESULTS)
    assert {r["config_file"] for r in rows} <= {f"{OUT}/configs/{p.name}" for p in (repo / OUT / "configs").iterdir()}


def test_results_with_areas_give_the_area_figure_and_table(tmp_path: Path) -> None:
    """What the command writes once the areas are synthesized (the areas here are made up: the run has none)."""
    repo = _tiny_repo(tmp_path)
    regenerate(repo, with_area=False, workers=1)
    spec = worked_example.load_spec(repo, with_area=True)
    rows = read_results(repo / OUT / RESULTS)
    for row in rows:
        row.update({AREA: {"t8": "1.25", "default": "2.5"}[row["base"]], "area_error": "", "spec_digest": spec.digest})
    _write_rows(repo / OUT / RESULTS, rows)
    assert not any("was produced by another spec" in p for p in check(repo))
    assert any("does not follow from" in p for p in check(repo))  # the pages still show the run without area
    worked_example.redraw(repo, spec)
    assert check(repo) == []
    docs = (repo / worked_example.DOCS).read_text()
    assert "| 8x8 (`t8`) |" in docs and "| 1.250 mm^2 |" in docs and "| 2.500 mm^2 |" in docs
    readme = (repo / worked_example.README).read_text()
    assert readme.index(worked_example.AREA_FIGURE) < readme.index(worked_example.ENERGY_FIGURE)
    assert (repo / OUT / worked_example.AREA_FIGURE).exists()


def test_regenerate_refuses_documents_without_markers(tmp_path: Path) -> None:
    repo = _tiny_repo(tmp_path)
    (repo / worked_example.DOCS).write_text("no markers\n")
    (repo / worked_example.README).write_text("no markers\n")
    assert worked_example.main(["--repo", str(repo), "--without-area"]) == 2
    assert not (repo / OUT).exists()  # refused before the sweep ran


def test_check_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert worked_example.main(["--check"]) == 0
    repo = _copy_repo(tmp_path)
    _edit_results(repo, "energy_pj", 3.0)
    assert worked_example.main(["--check", "--repo", str(repo)]) == 1
    err = capsys.readouterr().err
    assert "stale:" in err and f"regenerate with: {worked_example.COMMAND}" in err
    assert worked_example.main(["--check", "--repo", str(tmp_path / "nowhere")]) == 2
    assert "--repo must be a tinynpu checkout" in capsys.readouterr().err


def test_an_edited_rtl_source_changes_every_area_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinynpu.rtl import runner

    before = area_key("abc")
    rtl = tmp_path / "rtl"
    shutil.copytree(runner.RTL_DIR, rtl, ignore=shutil.ignore_patterns("generated", "tb", "__pycache__"))
    monkeypatch.setattr(runner, "RTL_DIR", rtl)
    assert area_key("abc") == before
    alu = rtl / "tinynpu_alu_unit.sv"
    alu.write_text(alu.read_text() + "\n// an edit\n")
    assert area_key("abc") != before


@pytest.mark.slow
def test_the_committed_results_are_what_the_simulator_gives() -> None:
    """Every committed point, simulated again: the docs' cycles and energy are this tinynpu's."""
    spec = worked_example.load_spec(REPO, with_area=False)
    rows = {(r["config_file"], r["workload"]): r for r in read_results(REPO / OUT / RESULTS)}
    workloads = {w.key: w for w in spec.workloads}
    for (config_file, key), row in rows.items():
        text = (REPO / config_file).read_text()
        result = evaluate(text, f"docs-{Path(config_file).stem}", workloads[key].kind, dict(workloads[key].sizes))
        assert (result["status"], result["cycles"], result["dram_bytes"]) == ("ok", int(row["cycles"]),
                                                                               int(row["dram_bytes"])), key
        assert result["energy_pj"] == pytest.approx(float(row["energy_pj"]), rel=1e-12), key
