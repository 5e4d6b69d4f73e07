"""Every bad-assembly class is reported as AsmError with file:line:col and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinynpu.assembler import Program, assemble, disassemble
from tinynpu.errors import AsmError
from tinynpu.isa import ArchConfig, Isa, load_config

BAD_DIR = Path(__file__).parent / "bad"


# (source, expected place, expected words in the message)
CASES = [
    # unknown mnemonic
    ("halt\nfoo a[0]", "t.s:2:1", ["unknown mnemonic 'foo'"]),
    # wrong operand count
    ("load a[0], rows=4", "t.s:1:12", ["wrong operand count", "load takes 2 operands"]),
    ("tmm acc[0], a[0]", "t.s:1:17", ["wrong operand count", "tmm takes 3"]),
    ("halt 3", "t.s:1:6", ["halt takes 0 operands"]),
    ("zero acc[0], a[0], rows=1", "t.s:1:14", ["wrong operand count or kind"]),
    # wrong operand kind
    ("load [0], a[0], rows=1", "t.s:1:6", ["must be a scratchpad address"]),
    ("store [0], a[0], rows=1", "t.s:1:12", ["must be acc[row]", "not scratchpad 'a'"]),
    ("tmm acc[0], b[0], b[0]", "t.s:1:13", ["must be a[row]"]),
    ("vmax acc[0], a[0], rows=1", "t.s:1:14", ["is a number, not a scratchpad address"]),
    ("load a[0], 0, rows=1", "t.s:1:12", ["DRAM address in brackets"]),
    # unknown / duplicate / missing option
    ("load a[0], [0], rows=16, bogus=1", "t.s:1:26", ["unknown option 'bogus'", "rows, cols, stride"]),
    ("zero a[0], rows=1, rows=2", "t.s:1:20", ["given twice"]),
    ("zero a[0]", "t.s:1:1", ["zero needs rows=", "no default"]),
    # value out of range (the range is named)
    ("load a[0], [0], rows=0", "t.s:1:22", ["rows=0 is out of range", "1..32767"]),
    ("load a[0], [0], rows=1, cols=17", "t.s:1:30", ["cols=17", "1..16"]),
    ("vmax acc[0], 1 << 31, rows=1", "t.s:1:14", ["imm=2147483648", "-2147483648..2147483647"]),
    ("vshr acc[0], 32, rows=1", "t.s:1:14", ["shift=32", "0..31"]),
    ("tmm acc[0], a[0], b[0], m=0", "t.s:1:27", ["m=0", "1..127"]),
    ("tmm acc[0], a[0], b[0], accumulate=2", "t.s:1:36", ["accumulate=2", "0..1"]),
    # scratchpad capacity including the extent
    ("load a[2040], [0], rows=16", "t.s:1:6", ["a[2040] spanning 16 rows", "2048 rows"]),
    ("zero acc[1024], rows=1", "t.s:1:6", ["acc[1024]", "1024 rows"]),
    ("vadd acc[1000], acc[0], rows=32", "t.s:1:6", ["acc[1000] spanning 32 rows"]),
    ("vaddrow acc[0], acc[1023], rows=16", None, []),  # the broadcast row is one row: fine
    ("vrequant acc[0], acc[1022], rows=16", None, []),  # the parameter rows are two rows: fine
    ("vrequant acc[0], acc[1023], rows=16", "t.s:1:18", ["acc[1023] spanning 2 rows reaches row 1024"]),
    ("tmm acc[1008], a[0], b[0], m=2", "t.s:1:5", ["acc[1008] spanning 2 tiles", "m=2 * n=1"]),
    ("tmm acc[0], a[2032], b[0], k=2", "t.s:1:13", ["a[2032] spanning 2 tiles"]),
    ("tmm acc[0], a[0], b[1984], n=3, k=2", "t.s:1:19", ["b[1984] spanning 6 tiles"]),
    # misaligned tile / DRAM address
    ("tmm acc[8], a[0], b[0]", "t.s:1:5", ["not aligned to a tile", "multiples of 16"]),
    ("load acc[0], [2], rows=1", "t.s:1:14", ["0x2 is not aligned", "4-byte"]),
    ("load acc[0], [0], rows=2, stride=6", "t.s:1:34", ["stride 6", "4-byte"]),
    ("store [0x802], acc[0], rows=1", "t.s:1:7", ["not aligned"]),
    ("store [0x801], acc[0], rows=1, narrow=1", None, []),  # int8 output: byte aligned is fine
    # DRAM beyond the config (rows and stride included)
    ("load a[0], [0x3ffffff0], rows=16", "t.s:1:12", ["beyond the 67108864 bytes"]),
    ("load a[0], [0x3fff000], rows=16, stride=0x200", "t.s:1:12", ["0x3fff000..0x4000e0f"]),
    ("load a[0], [0x3fff000], rows=16, stride=0x100", None, []),
    ("store [0x3fffff0], acc[0], rows=1, cols=4", None, []),
    ("store [0x3fffff0], acc[0], rows=1, cols=5", "t.s:1:7", ["beyond"]),
    # labels and symbols
    ("x:\nhalt\nx: halt", "t.s:3:1", ["duplicate label 'x'", "t.s:1:1"]),
    (".equ x, 1\nx: halt", "t.s:1:6", ["duplicate symbol 'x'", "label at t.s:2:1"]),
    (".tensor A, 0, int8, [4], input\n.equ A, 1", "t.s:2:6", ["duplicate symbol 'A'", "tensor"]),
    ("load a[0], [Q], rows=1", "t.s:1:13", ["undefined symbol 'Q'"]),
    (".equ X, Y + 1\n.equ Y, 1", "t.s:1:9", ["used before its definition at t.s:2:6"]),
    ("zero a[0], rows=END\nEND: halt", None, []),  # labels may be used before they are defined
    # wait / signal
    ("load a[0], [0], rows=16, wait=load", "t.s:1:31", ["may not wait on its own unit"]),
    ("tmm acc[0], a[0], b[0], signal=load|tensor", "t.s:1:37", ["may not signal its own unit"]),
    ("zero b[0], rows=1, signal=store|bogus", "t.s:1:33", ["unit names joined by '|'"]),
    ("zero b[0], rows=1, signal=control", "t.s:1:27", ["has no token channel"]),
    # .config and directives
    (".config fp32", "t.s:1:9", ["written for config 'fp32'", "assembled for config 'default'"]),
    (".bogus 1", "t.s:1:1", ["unknown directive '.bogus'"]),
    (".tensor A, 0, int16, [4]", "t.s:1:15", ["dtype must be one of"]),
    (".tensor A, 0, int8, [4, 0]", "t.s:1:25", ["dimensions must be positive"]),
    (".tensor A, 0, int8, [4], weights", "t.s:1:26", ["role must be one of"]),
    (".tensor A, 0x3fffff0, int32, [16]", "t.s:1:30", ["ends beyond the 67108864 bytes"]),
    (".tensor A, 0, int8, [64]\n.tensor B, 32, int8, [4]", "t.s:2:12", ["overlaps tensor A"]),
    # lexical and expression errors
    ("zero a[0], rows=1 @", "t.s:1:19", ["unexpected character '@'"]),
    ("zero a[0], rows=0x", "t.s:1:17", ["malformed number"]),
    ("zero a[0], rows=4/0", "t.s:1:19", ["division by zero"]),
    ("zero a[0], rows=(4", "t.s:1:19", ["')'"]),
    ("zero a[0] rows=1", "t.s:1:11", ["expected ','"]),
    ("3: halt", "t.s:1:1", ["expected a mnemonic"]),
    # rules stated in the ISA's prose
    ("store [0], acc[0], rows=1, shift=3", "t.s:1:34",
     ["store: shift=3 needs narrow=1; without narrowing the shift must be 0."]),
    ("vadd acc[0], acc[8], rows=16", "t.s:1:14",
     ["vadd: source rows 8..23 partially overlap destination rows 0..15; they must be identical or disjoint."]),
    ("vadd acc[0], acc[0], rows=16", None, []),
    ("vaddrow acc[0], acc[4], rows=16", "t.s:1:17",
     ["vaddrow: the broadcast row 4 lies inside the destination rows 0..15; it must lie outside them."]),
    ("vrequant acc[16], acc[15], rows=16", "t.s:1:19",
     ["vrequant: the parameter rows 15..16 overlap the destination rows 16..31."]),
    # the transformer instructions' rules (T = 16)
    ("vredsum acc[64], acc[0], rows=17, n=2", "t.s:1:31", ["vredsum: rows=17 is more than the tile edge 16"]),
    ("vredmax acc[32], acc[0], rows=4, n=3", "t.s:1:18",
     ["vredmax: the source rows 0..35 overlap the destination rows 32..35; they must be disjoint."]),
    ("vredmax acc[36], acc[0], rows=4, n=3, cols=16", None, []),
    ("vredmax acc[36], acc[0], rows=4, n=3, cols=17", "t.s:1:44", ["cols=17", "1..16"]),
    ("vsubb acc[8], acc[0], rows=32", "t.s:1:15",
     ["vsubb: the block rows 0..15 overlap the destination rows 8..39; they must be disjoint."]),
    ("vsubb acc[4], acc[0], rows=4", None, []),  # a block of 4 rows when rows < T
    ("vmulb acc[16], acc[0], rows=16, shift=64", "t.s:1:39", ["shift=64", "0..63"]),
    ("vlut acc[15], acc[0], rows=1, base=-128", "t.s:1:15",
     ["vlut: the table rows 0..15 overlap the destination rows 15..15; they must be disjoint."]),
    ("vlut acc[0], acc[1010], rows=1, base=0", "t.s:1:14", ["acc[1010] spanning 16 rows"]),
    ("vrecip acc[0], acc[0], rows=4, shift=63", "t.s:1:38", ["shift=63", "0..62"]),
    ("vrsqrt acc[0], acc[0], rows=4, shift=32", "t.s:1:38", ["shift=32", "0..31"]),
]


@pytest.mark.parametrize(("source", "place", "words"), CASES, ids=[c[0][:40] for c in CASES])
def test_bad_source(isa: Isa, cfg: ArchConfig, source: str, place: str | None, words: list[str]) -> None:
    if place is None:
        assemble(source, filename="t.s", isa=isa, cfg=cfg)
        return
    with pytest.raises(AsmError) as info:
        assemble(source, filename="t.s", isa=isa, cfg=cfg)
    message = info.value.message
    assert message.startswith(place + ":"), message
    for word in words:
        assert word in message, message
    assert "\n" not in message


def test_fp32_rules(isa: Isa) -> None:
    fp32 = load_config("fp32")
    with pytest.raises(AsmError, match=r"t.s:1:35: store: narrow=1 requantizes to int8, which only integer "
                       r"configs support \(config 'fp32' is float32\)\."):
        assemble("store [0], acc[0], rows=1, narrow=1", filename="t.s", isa=isa, cfg=fp32)
    with pytest.raises(AsmError, match=r"t.s:1:1: vshr is for integer configs only"):
        assemble("vshr acc[0], 1, rows=1", filename="t.s", isa=isa, cfg=fp32)
    # fp32 inputs are 4 bytes: a load of a must be 4-byte aligned there, not in default
    with pytest.raises(AsmError, match="not aligned to the 4-byte"):
        assemble("load a[0], [1], rows=1", filename="t.s", isa=isa, cfg=fp32)


def test_include(tmp_path: Path, isa: Isa, cfg: ArchConfig) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "consts.s").write_text(".equ ROWS, 16\nzero acc[0], rows=ROWS\n")
    main = tmp_path / "main.s"
    main.write_text('.include "sub/consts.s"\nzero a[0], rows=ROWS\nhalt\n')
    prog = assemble(main.read_text(), filename=str(main), isa=isa, cfg=cfg)
    assert len(prog.words) == 3
    # errors inside an included file name that file
    (tmp_path / "sub" / "bad.s").write_text("halt\nnope\n")
    main.write_text('.include "sub/bad.s"\n')
    with pytest.raises(AsmError, match=r"sub/bad.s:2:1: unknown mnemonic 'nope'"):
        assemble(main.read_text(), filename=str(main), isa=isa, cfg=cfg)


def test_include_cycle_and_missing(tmp_path: Path, isa: Isa, cfg: ArchConfig) -> None:
    a, b = tmp_path / "a.s", tmp_path / "b.s"
    a.write_text('halt\n.include "b.s"\n')
    b.write_text('.include "a.s"\n')
    with pytest.raises(AsmError, match=r"b.s:1:10: .include cycle: .*a.s -> .*b.s -> .*a.s"):
        assemble(a.read_text(), filename=str(a), isa=isa, cfg=cfg)
    a.write_text('.include "missing.s"\n')
    with pytest.raises(AsmError, match=r"a.s:1:10: cannot include 'missing.s'"):
        assemble(a.read_text(), filename=str(a), isa=isa, cfg=cfg)


@pytest.mark.parametrize("path", sorted(BAD_DIR.glob("*.s")), ids=lambda p: p.name)
def test_bad_files(path: Path, isa: Isa, cfg: ArchConfig) -> None:
    """Each tests/bad/*.s names its expected error in a first-line comment `; error: <place>: <text>`."""
    first = path.read_text().splitlines()[0]
    assert first.startswith("; error: "), f"{path} must start with '; error: <place>: <text>'"
    expected = first[len("; error: "):]
    with pytest.raises(AsmError) as info:
        assemble(path.read_text(), filename=path.name, isa=isa, cfg=cfg)
    assert info.value.message.startswith(expected), info.value.message


def test_disassemble_undecodable_word(isa: Isa, cfg: ArchConfig) -> None:
    good = assemble("sync\nhalt", isa=isa, cfg=cfg)
    bad = Program.build(isa, cfg, [good.words[0], 0xF])  # opcode 15 is no instruction
    with pytest.raises(AsmError, match=r"instruction 1 \(byte 64\): word 0x0+f matches no instruction"):
        disassemble(bad, isa)
