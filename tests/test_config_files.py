"""Every command that takes ``--config`` takes a user's YAML file, whatever the ``name:`` inside it says.

Two files: ``mine8.yaml`` (``t8`` renamed: a name no built-in has) and ``t8.yaml``
(``t8``'s own name with another DRAM latency, so its build hash is not the
built-in's).  A file given as ``--config`` is that file everywhere; a program
built for a file's config and run without ``--config`` is refused by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_rtl_cosim import require_rtl

from tinynpu.cli import main
from tinynpu.isa import build_hash, load_config, load_isa
from tinynpu.isa.config import CONFIG_DIR

T8 = (CONFIG_DIR / "t8.yaml").read_text(encoding="utf-8")
MATMUL = ["matmul", "--m", "16", "--n", "16", "--k", "16"]


@pytest.fixture(params=["mine8", "t8"])
def config_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """``mine8``: t8 under a new name; ``t8``: t8's name with a DRAM latency of 50 (another build hash)."""
    if request.param == "mine8":
        text = T8.replace("name: t8", "name: mine8")
    else:
        assert "dram:\n" in T8
        text = T8.replace("dram:\n", "dram:\n  latency_cycles: 50\n")
    path = tmp_path / f"{request.param}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _hash_of(path: Path | str) -> str:
    isa = load_isa()
    return build_hash(isa, load_config(path, isa))


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_the_two_files_are_not_the_builtin(config_file: Path) -> None:
    assert _hash_of(config_file) != _hash_of("t8")


def test_run_takes_the_file(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _json(["run", *MATMUL, "--config", str(config_file), "--json", "--no-race-check"], capsys)
    assert report["verified"] and report["workload"]["tiling"]
    latency = 50 if config_file.stem == "t8" else 100
    assert load_config(config_file).dram_latency_cycles == latency


def test_compile_then_sim_take_the_file(config_file: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mm"
    assert main(["compile", *MATMUL, "--config", str(config_file), "-o", str(out)]) == 0
    capsys.readouterr()
    stats = _json(["sim", str(out / "program.bin"), "--config", str(config_file), "--json"], capsys)
    assert stats["cycles"] > 0
    # Without --config the program's config is looked up by its name: refused in one paragraph, not run on
    # a built-in of the same name.
    for command in ("sim", "cosim"):
        assert main([command, str(out / "program.bin")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("tinynpu: error: ") and err.count("\n") == 1
        assert f"{out / 'program.bin'}: built for config {config_file.stem!r}" in err
        assert "pass the config file it was built from as --config FILE" in err or (
            "If it was built from a config file that reuses the name 't8', pass that file as --config FILE" in err)


def test_asm_and_disasm_take_the_file(config_file: Path, tmp_path: Path) -> None:
    source = tmp_path / "p.s"
    source.write_text("halt\n", encoding="utf-8")
    binary = tmp_path / "p.bin"
    assert main(["asm", str(source), "-o", str(binary), "--config", str(config_file)]) == 0
    assert main(["disasm", str(binary), "--config", str(config_file), "-o", str(tmp_path / "back.s")]) == 0


def test_tune_takes_the_file(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _json(["tune", *MATMUL, "--config", str(config_file), "--trials", "2", "--simulate-best", "1",
                    "--json"], capsys)
    assert result["best"]["cycles"] > 0


def test_synth_takes_the_file(config_file: Path, capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The config synth would synthesize is the file's (Yosys itself is tested in test_rtl_synth.py)."""
    import tinynpu.rtl.synth as synth

    seen = []

    def fake_synthesize(cfg: Any, default: Any) -> Any:
        seen.append(cfg)
        raise SystemExit(0)

    monkeypatch.setattr(synth, "synthesize", fake_synthesize)
    with pytest.raises(SystemExit):
        main(["synth", "--config", str(config_file)])
    assert [cfg for cfg in seen] == [load_config(config_file)]


@pytest.mark.rtl
def test_cosim_takes_the_file(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The program is compiled for the file and the RTL is built for the file: no build-hash mismatch."""
    require_rtl()
    out = _json(["cosim", *MATMUL, "--config", str(config_file), "--simulator", "icarus", "--json"], capsys)
    assert out["verified"] and out["outputs_match"] and out["cycle_diff"] == 0
