"""The fast path for plain instruction lines reads exactly what the full parser reads.

Every source here is assembled twice, ``fast=True`` and ``fast=False`` (the
full lexer and parser for every line), and must give the same words or the
same message.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_asm_errors import CASES

from tinynpu.assembler import assemble, disassemble
from tinynpu.assembler.fastline import FAST_LINE, eval_sum, split_line
from tinynpu.errors import AsmError
from tinynpu.isa import ArchConfig, Isa

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [*sorted((ROOT / "tests" / "golden").glob("*.s")), *sorted((ROOT / "tests" / "bad").glob("*.s")),
           *sorted((ROOT / "examples").glob("*.s"))]

PRELUDE = ".equ R, 16\n.tensor A, 0x0, int8, [64, 64]\n.tensor C, 0x10000, int32, [64, 64], output\n"


def _both(source: str, isa: Isa, cfg: ArchConfig, filename: str = "t.s") -> tuple[object, object]:
    """(words or message) from the fast and the full reading."""
    out = []
    for fast in (True, False):
        try:
            out.append(assemble(source, filename=filename, isa=isa, cfg=cfg, fast=fast).words)
        except AsmError as exc:
            out.append(exc.message)
    return out[0], out[1]


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_files_agree(path: Path, isa: Isa, cfg: ArchConfig) -> None:
    fast, full = _both(path.read_text(), isa, cfg, filename=str(path))
    assert fast == full


@pytest.mark.parametrize("source", [c[0] for c in CASES], ids=[c[0][:40] for c in CASES])
def test_error_cases_agree(source: str, isa: Isa, cfg: ArchConfig) -> None:
    fast, full = _both(source, isa, cfg)
    assert fast == full


# Lines the fast pattern takes; each is also checked to assemble the same both ways.
FAST_LINES = [
    "    load a[0], [A + 16], rows=16, stride=64, wait=tensor    ; A[0:+16, 16:+16]",
    "load a [ 0 ] , [ A+0x10 ] ,rows = R,stride=64",
    "\ttmm acc[0], a[0], b[0], wait=load, signal=load  # comment",
    "tmm acc[16], a[0], b[0], m=2, accumulate=0",
    "store [C + 0b100 - 4], acc[0], rows=R, stride=256, wait=tensor, signal=load|none",
    "zero acc[0], rows=16, signal=0",
    "vmax acc[0], R - 16, rows=1",
    "vshr acc[0], 3, rows=2",
    "halt",
    "halt ; stop",
    'zero a[0], rows=1 ; "a quote in a comment"',
    "vmax acc[0], -1, rows=1",
    "vmax acc[0], - A + 3 - R, rows=1",
]
# Lines the fast pattern leaves to the full parser (they may still be valid).
SLOW_LINES = [
    "x: halt",
    "zero a[0], rows=0x_10",
    "zero a[0], rows=010",
    "zero a[0], rows=1_0",
    "zero a[0], rows=(16)",
    "zero a[0], rows=4*4",
    "vmax acc[0], A + -1, rows=1",
    ".equ Q, 1",
    "zero a[0], rows=1 @",
    "zero a[0],, rows=1",
    "zero a[0], rows=1,",
    "load[A], rows=1",
]


@pytest.mark.parametrize("line", FAST_LINES)
def test_fast_lines(line: str, isa: Isa, cfg: ArchConfig) -> None:
    assert FAST_LINE.fullmatch(line)
    fast, full = _both(PRELUDE + line, isa, cfg)
    assert fast == full
    assert not isinstance(fast, str), fast


@pytest.mark.parametrize("line", SLOW_LINES)
def test_slow_lines(line: str, isa: Isa, cfg: ArchConfig) -> None:
    assert not FAST_LINE.fullmatch(line)
    fast, full = _both(PRELUDE + line, isa, cfg)
    assert fast == full


# Lines the fast pattern takes but the full parser must reject or read differently;
# the fast path has to give them up, so the message is the full parser's.
FAST_BUT_WRONG = [
    "load a[0], [Q], rows=1",  # undefined symbol
    "load b[0], [A], rows=16, wait=load",  # own unit
    "zero a[0], rows=1, rows=2",  # given twice
    "zero a[0], rows=1, bogus=2",  # unknown option
    "zero a[0], b[0], rows=1",  # an operand too many
    "tmm acc[0], a[0]",  # an operand too few
    "tmm acc[0], a[0], rows=1",  # an option where an operand belongs
    "tmm b[0], a[0], b[0]",  # wrong scratchpad
    "load a[0], A, rows=1",  # DRAM address without brackets
    "load [A], a[0], rows=1",  # operands swapped
    "vmax acc[0], a[0], rows=1",  # address where a number belongs
    "zero a[0], rows=1|2",  # '|' outside a unit mask
    "zero a[0], rows=1, signal=load+1",  # sum in a unit mask
    "zero a[0], rows=1, signal=0x0",  # 0 written in hex (the full parser accepts it)
    "zero a[0], rows=1, signal=bogus",
    "zero a[0], rows=32768",  # out of range
    "tmm acc[8], a[0], b[0]",  # misaligned tile
    "nope a[0]",  # unknown mnemonic
    "halt 3",
]


@pytest.mark.parametrize("line", FAST_BUT_WRONG)
def test_fast_lines_the_parser_decides(line: str, isa: Isa, cfg: ArchConfig) -> None:
    assert FAST_LINE.fullmatch(line)
    fast, full = _both(PRELUDE + line, isa, cfg)
    assert fast == full


def test_repeated_items_keep_their_meaning(isa: Isa, cfg: ArchConfig) -> None:
    # The same item text is remembered per mnemonic and slot: it must not leak into
    # another instruction's option or another operand position.
    source = PRELUDE + "zero acc[0], rows=R\nvmax acc[0], R, rows=R\nzero acc[16], rows=R\nvmax acc[16], R, rows=1\n"
    fast, full = _both(source, isa, cfg)
    assert fast == full and not isinstance(fast, str)


def test_disassembly_reassembles_through_the_fast_path(isa: Isa, cfg: ArchConfig) -> None:
    # Random spacing around the tokens of a disassembled program: same words both ways.
    golden = (ROOT / "tests" / "golden" / "all_instructions.s").read_text()
    text = disassemble(assemble(golden, filename="g.s", isa=isa, cfg=cfg), isa, cfg=cfg)
    rng = random.Random(7)
    spaced = []
    for line in text.splitlines():
        if line.startswith((";", ".")) or not line.strip():
            spaced.append(line)
            continue
        out = ""
        for ch in line:
            out += ch
            if ch in ",[]=+-|" and rng.random() < 0.5:
                out += " " * rng.randint(1, 2)
        spaced.append(out)
    fast, full = _both("\n".join(spaced), isa, cfg)
    assert fast == full and not isinstance(fast, str)
    fast_lines = [ln for ln in spaced if ln.startswith("    ")]
    assert fast_lines and all(FAST_LINE.fullmatch(ln) for ln in fast_lines)


def test_split_and_sum() -> None:
    assert split_line("   load a[0], [A + 0x10],rows=16 ; c") == ("load", 4, ["a[0]", "[A + 0x10]", "rows=16"])
    assert split_line("halt") == ("halt", 1, [])
    values = {"A": 100, "B": 7}
    assert eval_sum("A + 0x10 - B+0b11", values.__getitem__) == 100 + 16 - 7 + 3
    assert eval_sum("0", values.__getitem__) == 0
    assert eval_sum("-A + 3", values.__getitem__) == -97
    assert eval_sum("- 0x10", values.__getitem__) == -16
