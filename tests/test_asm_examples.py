"""The seed program: the hand-written 32^3 version and the generator agree and keep their tokens balanced."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from tinynpu.assembler import Program, assemble
from tinynpu.isa import Isa, load_config, load_isa

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _seed_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tinynpu_examples_seed", EXAMPLES / "seed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


seed = _seed_module()


def _channels(isa: Isa, program: Program) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """Tokens signalled into and waited from each (src, dst) channel."""
    names = {u.id: u.name for u in isa.units}
    signalled: Counter[tuple[str, str]] = Counter()
    waited: Counter[tuple[str, str]] = Counter()
    for word in program.words:
        instr, fields = isa.decode(word)
        for bit, other in names.items():
            if fields.get("signal", 0) >> bit & 1:
                signalled[(instr.unit, other)] += 1
            if fields.get("wait", 0) >> bit & 1:
                waited[(other, instr.unit)] += 1
    return signalled, waited


def _check_tokens(isa: Isa, program: Program) -> None:
    """Every wait has a matching earlier signal, and no token is left at halt."""
    names = {u.id: u.name for u in isa.units}
    held: Counter[tuple[str, str]] = Counter()
    for index, word in enumerate(program.words):
        instr, fields = isa.decode(word)
        for bit, other in names.items():
            if fields.get("wait", 0) >> bit & 1:
                channel = (other, instr.unit)
                assert held[channel] > 0, f"instruction {index} waits on {channel} before any signal"
                held[channel] -= 1
        for bit, other in names.items():
            if fields.get("signal", 0) >> bit & 1:
                held[(instr.unit, other)] += 1
    assert +held == Counter(), f"tokens left at halt: {dict(+held)}"


def test_seed_32_assembles_and_matches_generator() -> None:
    isa, cfg = load_isa(), load_config("default")
    path = EXAMPLES / "seed_32.s"
    hand = assemble(path.read_text(), filename=str(path), isa=isa, cfg=cfg)
    generated = assemble(seed.seed_source(32, 32, 32), isa=isa, cfg=cfg)
    assert hand.to_bytes() == generated.to_bytes()
    mnemonics = Counter(isa.decode(w)[0].mnemonic for w in hand.words)
    assert mnemonics == Counter({"load": 16, "tmm": 8, "zero": 4, "store": 4, "halt": 1})
    assert isa.decode(hand.words[-1])[0].mnemonic == "halt"
    assert [t.name for t in hand.tensors] == ["A", "B", "C"]
    _check_tokens(isa, hand)


@pytest.mark.parametrize(("m", "n", "k", "config"), [(16, 16, 16, "default"), (48, 32, 64, "default"),
                                                     (32, 16, 48, "fp32")])
def test_generator_shapes(m: int, n: int, k: int, config: str) -> None:
    isa, cfg = load_isa(), load_config(config)
    program = assemble(seed.seed_source(m, n, k, config), isa=isa, cfg=cfg)
    t = cfg.tile
    assert len(program.words) == (m // t) * (n // t) * (3 * (k // t) + 2) + 1
    assert program.tensor("C").shape == (m, n) and program.tensor("C").dtype == cfg.acc_dtype
    _check_tokens(isa, program)
    # every tile of A and B the loop nest names is loaded exactly (n/t) resp. (m/t) times
    loads = Counter()
    for word in program.words:
        instr, fields = isa.decode(word)
        if instr.mnemonic == "load":
            loads[fields["dram"]] += 1
    assert sum(loads.values()) == 2 * (m // t) * (n // t) * (k // t)


def test_generator_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="multiple of 16, not 40"):
        seed.seed_source(32, 40, 32)


def test_generator_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "seed_64.s"
    assert seed.main(["64", "-o", str(out)]) == 0
    assert out.read_text() == seed.seed_source(64, 64, 64)
    assert seed.main(["64", "-o", str(out)]) == 0  # its own earlier output may be replaced
    keep = tmp_path / "keep.s"
    keep.write_text("; mine\n")
    with pytest.raises(SystemExit):
        seed.main(["64", "-o", str(keep)])
    assert keep.read_text() == "; mine\n"


@pytest.mark.parametrize(("size", "config"), [(32, "default"), (48, "fp32")])
def test_seed_runs_on_simulator(tmp_path: Path, capsys: pytest.CaptureFixture[str], size: int,
                                config: str) -> None:
    """End to end through the CLI: the seed's tokens order it race-free and C = A @ B.T."""
    import numpy as np

    pytest.importorskip("tinynpu.simulator.cli")
    from tinynpu.cli import main

    cfg = load_config(config)
    src = tmp_path / "seed.s"
    src.write_text(seed.seed_source(size, size, size, config))
    binary = tmp_path / "seed.bin"
    assert main(["asm", str(src), "-o", str(binary), "--config", config]) == 0
    rng = np.random.default_rng(size)
    dtype = cfg.dtype("a_reg")
    if cfg.is_integer:
        a = rng.integers(-128, 128, (size, size)).astype(dtype)
        b = rng.integers(-128, 128, (size, size)).astype(dtype)
    else:
        a = rng.standard_normal((size, size)).astype(dtype)
        b = rng.standard_normal((size, size)).astype(dtype)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "c.npy"
    code = main(["sim", str(binary), "--input", f"A={tmp_path / 'a.npy'}",
                 "--input", f"B={tmp_path / 'b.npy'}", "--output", f"C={out}"])
    assert code == 0, capsys.readouterr().err
    expected = a.astype(cfg.dtype("acc")) @ b.astype(cfg.dtype("acc")).T
    if cfg.is_integer:
        np.testing.assert_array_equal(np.load(out), expected)
    else:
        np.testing.assert_allclose(np.load(out), expected, rtol=1e-5, atol=1e-5)
