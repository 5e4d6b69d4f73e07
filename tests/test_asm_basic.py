"""Assembler basics: the syntax of the brief assembles, round-trips, and encodes what it says."""

from __future__ import annotations

import pytest

from tinynpu.assembler import Program, assemble, disassemble, format_instruction
from tinynpu.isa import ArchConfig, Isa

SOURCE = """\
; comment (also '#')
.config default                 ; optional
.equ TILE, 16                   # named constant
.tensor A, 0x0, int8, [32, 32], input
.tensor C, 0x1000, int32, [32, 32], output
start:
load a[0], [A + 0x10], rows=16, cols=16, stride=32, wait=tensor, signal=tensor|alu
zero acc[0], rows=TILE
tmm acc[0], a[0], b[0], m=1, n=1, k=1, accumulate=1
store [C], acc[0], rows=16, cols=16, stride=128, narrow=1, shift=7, relu=1, wait=tensor
vaddrow acc[0], acc[1008], rows=16
vmax acc[0], 0, rows=16
vmul acc[0], -3, rows=(TILE * 2) // 2
sync
end: halt
"""


def test_assembles_and_decodes(isa: Isa, cfg: ArchConfig) -> None:
    prog = assemble(SOURCE, isa=isa, cfg=cfg)
    assert len(prog.words) == 9
    instr, fields = isa.decode(prog.words[0])
    assert instr.mnemonic == "load"
    assert fields["dram"] == 0x10 and fields["stride"] == 32 and fields["rows"] == 16
    assert fields["wait"] == 1 << isa.unit_ids["tensor"]
    assert fields["signal"] == (1 << isa.unit_ids["tensor"]) | (1 << isa.unit_ids["alu"])
    instr, fields = isa.decode(prog.words[3])
    assert instr.mnemonic == "store" and fields["dram"] == 0x1000 and fields["shift"] == 7
    instr, fields = isa.decode(prog.words[6])
    assert fields["imm"] == -3 and fields["rows"] == 16
    assert [t.name for t in prog.tensors] == ["A", "C"]
    assert prog.tensor("C").role == "output"


def test_round_trip_identical_bytes(isa: Isa, cfg: ArchConfig) -> None:
    prog = assemble(SOURCE, isa=isa, cfg=cfg)
    text = disassemble(prog, isa, comments={0: "first load", 8: "the end"})
    assert "; first load" in text
    again = assemble(text, isa=isa, cfg=cfg)
    assert again.to_bytes() == prog.to_bytes()
    assert Program.from_bytes(prog.to_bytes()) == prog


def test_format_instruction_tile_rows(isa: Isa, cfg: ArchConfig) -> None:
    word = assemble("tmm acc[32], a[16], b[48], m=2, accumulate=0", isa=isa, cfg=cfg).words[0]
    instr, fields = isa.decode(word)
    assert fields["acc"] == 2 and fields["a"] == 1 and fields["b"] == 3
    assert format_instruction(isa, instr, fields) == "tmm acc[32], a[16], b[48], m=2, accumulate=0"


def test_docs_example_assembles(isa: Isa, cfg: ArchConfig) -> None:
    """The first example of docs/assembly.md is real, assembling code."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "assembly.md").read_text(encoding="utf-8")
    block = doc.split("```asm\n", 1)[1].split("```", 1)[0]
    prog = assemble(block, filename="docs/assembly.md", isa=isa, cfg=cfg)
    assert len(prog.words) == 6 and [t.name for t in prog.tensors] == ["A", "B", "C"]


def test_disassemble_needs_known_config(isa: Isa, cfg: ArchConfig) -> None:
    from tinynpu.errors import AsmError

    prog = assemble("halt", isa=isa, cfg=cfg)
    alien = Program(words=prog.words, tensors=(), config_name="custom", build_hash=b"\1" * 16)
    with pytest.raises(AsmError, match="config 'custom'.*not a built-in config"):
        disassemble(alien, isa)
    assert "halt" in disassemble(alien, isa, cfg=cfg)  # with the config given, it disassembles
