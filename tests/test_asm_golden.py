"""Golden files: tests/golden/*.s carry the expected encoding of each instruction in a `; => 0x...` comment.

The expected words were produced once and checked by hand against the bit
layout in isa.yaml (see test_hand_encoded_words); from then on any change to
an encoding or to the assembler's reading of the syntax shows up here.
"""

from __future__ import annotations

import re
from pathlib import Path

import golden_dis
import pytest

from tinynpu.assembler import assemble, disassemble
from tinynpu.isa import load_config, load_isa

GOLDEN = Path(__file__).parent / "golden"
_EXPECT = re.compile(r";\s*=>\s*(0x[0-9a-fA-F]+)\s*$")


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.s")), ids=lambda p: p.name)
def test_golden_encodings(path: Path) -> None:
    isa, cfg = load_isa(), load_config("default")
    text = path.read_text(encoding="utf-8")
    expected = [int(m.group(1), 16) for line in text.splitlines() if (m := _EXPECT.search(line))]
    program = assemble(text, filename=str(path), isa=isa, cfg=cfg)
    assert len(expected) == len(program.words), "every instruction line needs a `; => 0x...` comment"
    for index, (want, got) in enumerate(zip(expected, program.words, strict=True)):
        assert got == want, f"{path.name}: instruction {index}: 0x{got:032x} != expected 0x{want:032x}"
    # The golden disassembly pins the disassembler's output format, and it reassembles identically.
    dis_path = path.with_suffix(".dis")
    listing = disassemble(program, isa)
    assert listing == dis_path.read_text(encoding="utf-8"), (
        f"{dis_path.name} is stale: run `{golden_dis.COMMAND}` and review the diff")
    assert assemble(listing, isa=isa, cfg=cfg).to_bytes() == program.to_bytes()


def test_golden_listing_command_checks_and_rewrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "p.s").write_text("vmax acc[0], 1, rows=2\nhalt\n", encoding="utf-8")
    monkeypatch.setattr(golden_dis, "GOLDEN", tmp_path)
    assert golden_dis.main(["--check"]) == 1  # no .dis yet
    assert golden_dis.main([]) == 0
    assert "vmax acc[0], 1, rows=2" in (tmp_path / "p.dis").read_text(encoding="utf-8")
    assert golden_dis.main(["--check"]) == 0
    assert golden_dis.main(["--bogus"]) == 2


def test_hand_encoded_words() -> None:
    """A few words built from isa.yaml's bit positions by hand, independent of the assembler."""
    isa, cfg = load_isa(), load_config("default")
    src = "\n".join([
        "halt",
        "sync",
        "zero acc[0], rows=16",
        "tmm acc[32], a[16], b[48], m=2, n=3, k=4, accumulate=0",
        "vmax acc[5], -1, rows=2, wait=tensor",
        "load b[16], [0x2010], rows=16, cols=8, stride=64, signal=tensor",
    ])
    words = assemble(src, isa=isa, cfg=cfg).words
    assert words[0] == 0                                       # opcode 0, all reserved bits zero
    assert words[1] == 1                                       # opcode 1
    assert words[2] == 3 | 2 << 16 | 16 << 88                  # opcode 3, scope acc=2, rows at 88
    assert words[3] == 5 | 2 << 16 | 1 << 28 | 3 << 40 | 2 << 52 | 3 << 59 | 4 << 66  # tiles = row / 16
    assert words[4] == 6 | 2 << 4 | 1 << 9 | 5 << 18 | 0xFFFFFFFF << 32 | 2 << 88   # funct 2, wait bit 1
    assert words[5] == 2 | (1 << 1) << 12 | 1 << 16 | 16 << 18 | 0x2010 << 32 | 64 << 64 | 16 << 88 | 8 << 103
