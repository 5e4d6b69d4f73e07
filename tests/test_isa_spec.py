"""The ISA and config loaders: the shipped files load; each kind of bad spec names file, line and key path.

Bad specs are temporary copies of the shipped YAML with one edit, so the
tests follow the real files as they evolve.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tinynpu.errors import SpecError
from tinynpu.isa import load_config, load_isa
from tinynpu.isa.config import CONFIG_DIR
from tinynpu.isa.spec import DEFAULT_ISA_PATH

ISA_TEXT = DEFAULT_ISA_PATH.read_text(encoding="utf-8")
CFG_TEXT = (CONFIG_DIR / "default.yaml").read_text(encoding="utf-8")


def _line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing ``needle``."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in text")


def _edit(tmp_path: Path, name: str, text: str, old: str, new: str) -> tuple[Path, str]:
    assert old in text, f"the shipped YAML changed: {old!r} is gone; update this test"
    edited = text.replace(old, new, 1)
    path = tmp_path / name
    path.write_text(edited, encoding="utf-8")
    return path, edited


def _place(message: str) -> tuple[str, int]:
    m = re.match(r"^(.*?):(\d+):(\d+)", message)
    assert m, message
    return m.group(1), int(m.group(2))


def test_shipped_spec_loads() -> None:
    isa = load_isa()
    assert len(isa.instructions) == len({i.mnemonic for i in isa.instructions})
    for name in ("default", "fp32"):
        cfg = load_config(name, isa)
        assert cfg.name == name
    # every instruction's fixed bits and fields cover the word once
    for instr in isa.instructions:
        covered = sum(f.mask for f in instr.fields) + sum(f.mask for f in instr.fixed)
        assert covered == (1 << isa.word_bits) - 1, instr.mnemonic


ISA_CASES = [
    # (case id, old, new, line needle, words in message)
    ("schema-type", "word_bits: 128", "word_bits: many", "word_bits: many",
     ["schema violation", "at word_bits", "'many' is not of type 'integer'"]),
    ("schema-extra-key", "  - mnemonic: zero\n    unit: load",
     "  - mnemonic: zero\n    unit: load\n    colour: red",
     "- mnemonic: zero", ["schema violation", "instructions[3]", "'colour' was unexpected"]),
    ("overlapping-encodings", "{name: funct,  <<: *f_funct,  value: 1}",
     "{name: funct,  <<: *f_funct,  value: 0}",
     "- mnemonic: vaddrow", ["encodings of 'vadd' and 'vaddrow' overlap"]),
    ("uncovered-bits", "{name: reserved, lsb: 4, msb: 127, value: 0}",
     "{name: reserved, lsb: 4, msb: 126, value: 0}",
     "- mnemonic: halt", ["halt: encoding bit(s) 127 covered by no field"]),
    ("bits-used-twice", "{name: reserved, lsb: 74, msb: 127, value: 0}",
     "{name: reserved, lsb: 73, msb: 127, value: 0}", "{name: reserved, lsb: 73",
     ["tmm: bit 73 of 'reserved' is already used by 'accumulate'"]),
    ("rows-short-of-a-scope", 'min: 1, summary: "number of rows"}', 'min: 1, max: 8191, summary: "number of rows"}',
     "&f_rows", ["instructions[2].fields[4]", "load: field 'rows' (bits 88..102, 15 bits) holds at most 8191",
                 "must hold a whole scratchpad of 16384 rows (the 14-bit sp_row fields address 16384 rows)",
                 "raise its max (8191) to 16384"]),
    ("tile-address-short-of-a-scope", "{name: a,   lsb: 28, msb: 39,", "{name: a,   lsb: 28, msb: 39, max: 1023,",
     "max: 1023", ["instructions[5].fields[1]", "tmm: field 'a' (bits 28..39, 12 bits) holds at most 1023",
                   "the last tile (4095) of a 16384-row scratchpad at the smallest tile edge 4"]),
    ("unknown-unit", "    unit: tensor\n", "    unit: gpu\n", "unit: gpu", ["unit must be one of", "'gpu'"]),
    ("access-unknown-name", "rows: [src, src + rows], unless", "rows: [src, srcc + rows], unless",
     "srcc + rows", ["instructions[6].accesses[0].rows[1]", "names 'srcc'", "neither an operand (dst, src, rows)"]),
    ("access-bad-operator", "rows: [src, src + 1]", "rows: [src, src % 1]", "src % 1",
     ["accesses[0].rows[1]", "only + - * // are allowed, not Mod"]),
    ("access-bad-call", '"cols * elem_bytes(scope)"]', '"cols * len(scope)"]', "len(scope)",
     ["footprint[3]", "the only calls are elem_bytes(s) and scope_rows(s)"]),
    ("access-bad-scope-name", "elem_bytes('acc')", "elem_bytes('c')", "elem_bytes('c')",
     ["footprint[3]", "scope name of a, b, acc"]),
    ("access-syntax", "unless: src == dst}", "unless: src === dst}", "src === dst",
     ["accesses[0].unless", "is not an expression"]),
    ("access-unknown-space", "{write: scope,", "{write: sram,", "{write: sram",
     ["accesses[1]", "a scope (a, b, acc) or a scope operand (scope), not 'sram'"]),
    ("access-footprint-arity", "footprint: [dram, stride, rows, \"cols", "footprint: [dram, rows, \"cols",
     "footprint: [dram, rows", ["accesses[0]", "`footprint: [addr, stride, rows, row_bytes]` (4 expressions)"]),
    ("check-unknown-field", 'fault: "narrow == 0 and shift != 0"', 'fault: "narrow == 0 and shfit != 0"',
     "shfit != 0", ["instructions[4].checks[1].fault", "names 'shfit'", "neither an operand"]),
    ("check-unknown-field-in-message", "message: \"shift={shift} needs", "message: \"shift={sh} needs",
     "shift={sh} needs", ["instructions[4].checks[1].message", "names 'sh'", "neither an operand"]),
    ("check-unknown-at", "        at: shift\n", "        at: shft\n", "at: shft",
     ["instructions[4].checks[1].at", "'shft' is not an operand", "sp_row, dram, stride"]),
    ("stats-needs-operands", "    stats: tmm\n", "    stats: alu\n", "stats: alu",
     ["instructions[5].stats", "stats class 'alu' needs operand(s) rows"]),
]


@pytest.mark.parametrize(("old", "new", "needle", "words"), [c[1:] for c in ISA_CASES],
                         ids=[c[0] for c in ISA_CASES])
def test_bad_isa(tmp_path: Path, old: str, new: str, needle: str, words: list[str]) -> None:
    path, text = _edit(tmp_path, "isa.yaml", ISA_TEXT, old, new)
    with pytest.raises(SpecError) as info:
        load_isa(path)
    message = info.value.message
    file, line = _place(message)
    assert file == str(path)
    assert line == _line_of(text, needle), message
    for word in words:
        assert word in message, message


def test_bad_isa_yaml_syntax(tmp_path: Path) -> None:
    path = tmp_path / "isa.yaml"
    path.write_text(ISA_TEXT + "\n  - [unclosed\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"isa.yaml:\d+:1: not valid YAML"):
        load_isa(path)


def test_missing_isa_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read the file"):
        load_isa(tmp_path / "nope.yaml")


CONFIG_CASES = [
    ("schema-type", "acc:   {rows: 1024}", "acc:   {rows: lots}", "rows: lots",
     ["schema violation", "scopes.acc.rows", "'lots' is not of type 'integer'"]),
    ("schema-missing", "  latency_cycles: 100\n", "", "dram:", ["'latency_cycles' is a required property"]),
    ("dtype-pair", "acc: int32 ", "acc: float32", "dtypes:", ["int8 -> int32 or float32 -> float32"]),
]


@pytest.mark.parametrize(("old", "new", "needle", "words"), [c[1:] for c in CONFIG_CASES],
                         ids=[c[0] for c in CONFIG_CASES])
def test_bad_config(tmp_path: Path, old: str, new: str, needle: str, words: list[str]) -> None:
    path, text = _edit(tmp_path, "cfg.yaml", CFG_TEXT, old, new)
    with pytest.raises(SpecError) as info:
        load_config(path)
    message = info.value.message
    file, line = _place(message)
    assert file == str(path) and line == _line_of(text, needle), message
    for word in words:
        assert word in message, message


def test_config_too_big_for_fields(tmp_path: Path) -> None:
    path, _ = _edit(tmp_path, "cfg.yaml", CFG_TEXT, "acc:   {rows: 1024}", "acc:   {rows: 65536}")
    with pytest.raises(SpecError, match=r"cfg.yaml:\d+:\d+ \(at scopes.acc.rows\): config .default. does not fit "
                                        r"the ISA: field .sp_row."):
        load_config(path)


def test_unknown_config_name() -> None:
    with pytest.raises(SpecError, match="neither a file nor a built-in config"):
        load_config("no_such_config")
