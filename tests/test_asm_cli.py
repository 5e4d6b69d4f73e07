"""`tinynpu asm`, `disasm` and `isa check|doc|verilog`: exit codes and messages, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinynpu.assembler import Program
from tinynpu.cli import main
from tinynpu.isa import load_isa
from tinynpu.isa.gen_markdown import ISA_MD_PATH
from tinynpu.isa.spec import DEFAULT_ISA_PATH

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SEED_32 = EXAMPLES / "seed_32.s"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, " ".join(err.split())  # the CLI wraps messages at 100 columns


def test_asm_disasm_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary, listing, again = tmp_path / "seed.bin", tmp_path / "seed.s", tmp_path / "again.bin"
    code, out, _ = _run(capsys, "asm", str(SEED_32), "-o", str(binary))
    assert code == 0 and "33 instructions" in out
    code, _, _ = _run(capsys, "disasm", str(binary), "-o", str(listing))
    assert code == 0
    code, _, _ = _run(capsys, "asm", str(listing), "-o", str(again))
    assert code == 0
    assert again.read_bytes() == binary.read_bytes()
    # disasm to stdout, and rebuilding over our own outputs needs no --force
    code, out, _ = _run(capsys, "disasm", str(binary))
    assert code == 0 and out == listing.read_text()
    assert _run(capsys, "asm", str(SEED_32), "-o", str(binary))[0] == 0
    assert _run(capsys, "disasm", str(binary), "-o", str(listing))[0] == 0


def test_asm_bad_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.s"
    src.write_text("zero acc[0], rows=16\nfrobnicate\n")
    code, _, err = _run(capsys, "asm", str(src), "-o", str(tmp_path / "bad.bin"))
    assert code == 2
    assert f"{src}:2:1: unknown mnemonic 'frobnicate'" in err
    assert not (tmp_path / "bad.bin").exists()


def test_asm_missing_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "asm", str(tmp_path / "nope.s"))
    assert code == 2 and "cannot read the assembly source" in err


def test_output_not_ours_is_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    precious = tmp_path / "notes.bin"
    precious.write_text("my thesis")
    code, _, err = _run(capsys, "asm", str(SEED_32), "-o", str(precious))
    assert code == 2 and "already exists and was not written by tinynpu" in err
    assert precious.read_text() == "my thesis"
    assert _run(capsys, "asm", str(SEED_32), "-o", str(precious), "--force")[0] == 0
    assert precious.read_bytes().startswith(b"TNPU")
    # the same for disassembly output
    listing = tmp_path / "notes.s"
    listing.write_text("my notes")
    code, _, err = _run(capsys, "disasm", str(precious), "-o", str(listing))
    assert code == 2 and listing.read_text() == "my notes"


def test_disasm_refuses_other_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = tmp_path / "seed.bin"
    assert _run(capsys, "asm", str(SEED_32), "-o", str(binary))[0] == 0
    code, _, err = _run(capsys, "disasm", str(binary), "--config", "fp32")
    assert code == 2 and "built for config 'default'" in err and "config 'fp32'" in err


def test_disasm_bad_binaries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = tmp_path / "seed.bin"
    assert _run(capsys, "asm", str(SEED_32), "-o", str(binary))[0] == 0
    data = binary.read_bytes()
    truncated = tmp_path / "truncated.bin"
    truncated.write_bytes(data[:100])
    code, _, err = _run(capsys, "disasm", str(truncated))
    assert code == 2 and "truncated binary" in err and "33 instructions" in err
    short = tmp_path / "short.bin"
    short.write_bytes(data[:10])
    code, _, err = _run(capsys, "disasm", str(short))
    assert code == 2 and "shorter than the 48-byte header" in err
    corrupted = tmp_path / "corrupted.bin"
    corrupted.write_bytes(data[:60] + bytes([data[60] ^ 1]) + data[61:])
    code, _, err = _run(capsys, "disasm", str(corrupted))
    assert code == 2 and "byte 44: checksum mismatch" in err
    foreign = tmp_path / "foreign.bin"
    foreign.write_bytes(b"\x7fELF" + data[4:])
    code, _, err = _run(capsys, "disasm", str(foreign))
    assert code == 2 and "byte 0: not a tinynpu binary" in err
    # an image whose build hash matches no known (ISA, config) pair
    prog = Program.from_bytes(data)
    other = Program(words=prog.words, tensors=prog.tensors, config_name="default", build_hash=b"\0" * 16)
    wrong = tmp_path / "wrong_hash.bin"
    wrong.write_bytes(other.to_bytes())
    code, _, err = _run(capsys, "disasm", str(wrong))
    assert code == 2 and "build hash 00000000" in err


def test_isa_check(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "isa", "check")
    assert code == 0 and f"{len(load_isa().instructions)} instructions" in out and "config fp32" in out
    code, out, _ = _run(capsys, "isa", "check", "--json", "--config", "default")
    info = json.loads(out)
    assert code == 0 and [c["name"] for c in info["configs"]] == ["default"]
    assert len(info["instructions"]) == len({i["match"] for i in info["instructions"]})


def test_isa_check_bad_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "isa.yaml"
    bad.write_text("name: [unclosed\n")
    code, _, err = _run(capsys, "isa", "check", "--isa", str(bad))
    assert code == 2 and f"{bad}:" in err and "not valid YAML" in err
    code, _, err = _run(capsys, "isa", "check", "--config", "nonexistent")
    assert code == 2 and "neither a file nor a built-in config" in err
    # a `checks:` entry naming a field the instruction does not have
    typo = tmp_path / "typo.yaml"
    text = DEFAULT_ISA_PATH.read_text(encoding="utf-8")
    typo.write_text(text.replace('"dst <= src and src < dst + rows"', '"dst <= srcc and srcc < dst + rows"'))
    code, _, err = _run(capsys, "isa", "check", "--isa", str(typo))
    assert code == 2 and f"{typo}:" in err and "checks[0].fault" in err and "names 'srcc'" in err, err
    assert "Traceback" not in err


def test_isa_doc_check_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The committed reference is current (the generator-staleness test).
    code, out, _ = _run(capsys, "isa", "doc", "--check")
    assert code == 0, f"{ISA_MD_PATH} is stale: run `tinynpu isa doc`"
    target = tmp_path / "ISA.md"
    assert _run(capsys, "isa", "doc", "-o", str(target))[0] == 0
    assert target.read_text() == ISA_MD_PATH.read_text()
    target.write_text(target.read_text().replace("vmax", "vmaximum"))  # ours, but stale now
    code, out, _ = _run(capsys, "isa", "doc", "-o", str(target), "--check")
    assert code == 1 and "stale" in out
    assert _run(capsys, "isa", "doc", "-o", str(target))[0] == 0  # ours: regenerated without --force
    mine = tmp_path / "mine.md"
    mine.write_text("# my notes\n")
    code, _, err = _run(capsys, "isa", "doc", "-o", str(mine))
    assert code == 2 and mine.read_text() == "# my notes\n"


def test_isa_verilog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "isa.vh"
    code, out, err = _run(capsys, "isa", "verilog", "-o", str(target))
    if code == 3:  # the RTL engineer's generator is not in this build
        assert "not available" in err
        return
    assert code == 0 and "localparam" in target.read_text()
    assert _run(capsys, "isa", "verilog", "-o", str(target), "--check")[0] == 0


def test_usage_error_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["asm"])
    assert info.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_isa_check_bad_config_file(capsys: pytest.CaptureFixture[str]) -> None:
    bad = Path(__file__).parent / "bad" / "config_negative_dram.yaml"
    code, _, err = _run(capsys, "isa", "check", "--config", str(bad))
    assert code == 2
    assert f"{bad}:16:3 (at dram.bytes): schema violation" in err and "-5 is less than the minimum" in err


def test_bench_asm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "bench", "asm", str(SEED_32), "--json")
    assert code == 0
    result = json.loads(out)  # exactly one JSON object
    assert result["instructions"] == 33 and result["identical_words"] is True
    assert result["asm_speedup"] == pytest.approx(result["asm_full_parser_s"] / result["asm_fast_s"], rel=0.05)
    code, out, _ = _run(capsys, "bench", "asm", str(SEED_32))
    assert code == 0 and "speed-up" in out
    code, _, err = _run(capsys, "bench", "asm", str(tmp_path / "missing.s"))
    assert code != 0 and "missing.s: cannot read the assembly source" in err
    (tmp_path / "bad.s").write_text("halt\nnope\n")
    code, _, err = _run(capsys, "bench", "asm", str(tmp_path / "bad.s"))
    assert code != 0 and "bad.s:2:1: unknown mnemonic 'nope'" in err
