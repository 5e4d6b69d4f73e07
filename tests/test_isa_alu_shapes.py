"""The ALU's source shapes come from the YAML, and an instruction the RTL cannot run is refused by name."""

from __future__ import annotations

import dataclasses
import itertools
import re

import pytest

from tinynpu.isa import load_config, load_isa
from tinynpu.isa.alu_shapes import AluShape, ShapeError, alu_shapes, refused
from tinynpu.isa.gen_c import generate_core_header
from tinynpu.isa.gen_verilog import generate_verilog
from tinynpu.isa.records import Access, Check

ISA = load_isa()


def _with(**changes: object) -> object:
    """The ISA with one more ALU instruction: vaddrow's encoding at the first free opcode and funct (opcode 7,
    funct 0, as the ALU's functs at opcode 6 are all taken: its operation number 16), with ``changes``."""
    base = ISA.by_mnemonic["vaddrow"]
    used = {(i.fixed_value("opcode"), i.fixed_value("funct")) for i in ISA.instructions if i.unit == "alu"}
    opcode, funct = min(set(itertools.product(range(6, 16), range(16))) - used)
    values = {"opcode": opcode, "funct": funct}
    fixed = tuple(dataclasses.replace(fx, value=values[fx.name]) if fx.name in values else fx for fx in base.fixed)
    extra = dataclasses.replace(base, mnemonic="vfoo", index=len(ISA.instructions), fixed=fixed,
                                match=base.match & ~0xFF | funct << 4 | opcode, **changes)
    return dataclasses.replace(ISA, instructions=(*ISA.instructions, extra))


def test_every_builtin_alu_instruction_has_a_shape() -> None:
    shapes = {s.mnemonic: s for s in alu_shapes(ISA)}
    assert set(shapes) == {i.mnemonic for i in ISA.instructions if i.unit == "alu"}
    assert shapes["vadd"].kind == "walk" and shapes["vmax"].kind == "none"
    assert (shapes["vaddrow"].kind, shapes["vaddrow"].count) == ("fixed", 1)
    assert (shapes["vrequant"].kind, shapes["vrequant"].count) == ("fixed", 2)


def test_the_fixed_rule_refuses_rows_overlapping_the_destination() -> None:
    two = AluShape("x", 0, "fixed", 2)
    assert refused(two, src=3, dst=4, rows=2, acc_rows=16)      # src + 1 is dst
    assert not refused(two, src=2, dst=4, rows=2, acc_rows=16)
    assert refused(two, src=15, dst=0, rows=1, acc_rows=16)     # src + 1 past the end


def test_a_new_instruction_of_a_known_shape_is_generated_without_rtl_edits() -> None:
    isa = _with()
    text = generate_verilog(isa, load_config("default", isa))  # type: ignore[arg-type]
    vfoo = isa.by_mnemonic["vfoo"]  # type: ignore[attr-defined]
    assert vfoo.fixed_value("opcode") == 7  # opcode 6's functs are all taken
    op = 16 | vfoo.fixed_value("funct")  # the funct, above it the opcode's offset from opcode 6
    assert "TNPU_ALU_OP_W = 5;" in text and f"TNPU_VFOO_ALU_OP = {op};" in text  # opcode 7: a second opcode bit
    fixed = int(re.search(r"TNPU_ALU_SRC_FIXED = 32'b([01]{32});", text).group(1), 2)  # type: ignore[union-attr]
    for name in ("vaddrow", "vrequant", "vrequantf", "vfoo"):  # vfoo has vaddrow's broadcast row
        assert fixed >> int(re.search(rf"TNPU_{name.upper()}_ALU_OP = (\d+);", text).group(1)) & 1, name  # type: ignore[union-attr]
    assert bin(fixed).count("1") == 1 + sum(s.kind == "fixed" for s in alu_shapes(ISA))
    assert "case K_VFOO:" in generate_core_header(isa).split("#define TNPU_ALU_KINDS", 1)[1].splitlines()[0]


def test_checks_that_differ_from_the_shapes_rule_are_refused_by_name() -> None:
    lenient = _with(checks=())  # a broadcast row allowed inside the destination rows
    with pytest.raises(ValueError, match=r"cannot run vfoo: its checks accept src=0, dst=0"):
        generate_verilog(lenient, load_config("default", lenient))  # type: ignore[arg-type]


def test_a_check_stricter_than_the_shapes_rule_is_the_dispatchers_with_no_rtl_edit() -> None:
    """The dispatcher enforces the YAML's checks (generated), so a new rule between fields needs no RTL line."""
    overlap = ISA.by_mnemonic["vaddrow"].checks[0]
    strict = _with(checks=(overlap, Check(fault="rows > T", at="rows", message="rows={rows} above T")))
    text = generate_verilog(strict, load_config("default", strict))  # type: ignore[arg-type]
    body = text.split("function automatic logic [2:0] tnpu_vfoo_checks(")[1].split("endfunction")[0]
    field = body.split("return {", 1)[1].rsplit("}", 1)[0].split(", ")[2]
    assert field == "(word[88 +: 15] == '0) || ((15'(word[88 +: 15]) > 15'(TNPU_TILE)))"
    assert "return tnpu_vfoo_checks(word);" in text


def test_a_source_the_rtl_has_no_shape_for_is_refused_by_name() -> None:
    odd = _with(accesses=(Access(False, "acc", False, ("src", "src + 2 * rows")),
                          Access(True, "acc", False, ("dst", "dst + rows"))),
                checks=(Check(fault="src < dst + rows and dst < src + 2 * rows", at="src", message="overlap"),))
    with pytest.raises(ShapeError, match=r"vfoo: its source rows \[src, src \+ 2 \* rows\)"):
        alu_shapes(odd)  # type: ignore[arg-type]


def test_the_transformer_instructions_shapes_and_rules() -> None:
    shapes = {s.mnemonic: s for s in alu_shapes(ISA)}
    assert {m: shapes[m].kind for m in ("vredmax", "vredsum", "vredsq", "vsubb", "vmulb", "vlut", "vrecip",
                                        "vrsqrt")} == {
        "vredmax": "segments", "vredsum": "segments", "vredsq": "segments", "vsubb": "block", "vmulb": "block",
        "vlut": "table", "vrecip": "walk", "vrsqrt": "walk"}
    assert shapes["vlut"].count == 256
    seg, block, table = shapes["vredsum"], shapes["vsubb"], shapes["vlut"]
    assert refused(seg, src=0, dst=40, rows=9, acc_rows=64, n=2, tile=8)       # rows > T
    assert refused(seg, src=0, dst=16, rows=8, acc_rows=64, n=3, tile=8)       # dst inside the span 0..23
    assert not refused(seg, src=0, dst=24, rows=8, acc_rows=64, n=3, tile=8)
    assert refused(seg, src=48, dst=0, rows=8, acc_rows=64, n=3, tile=8)       # span past the end
    assert not refused(block, src=0, dst=3, rows=3, acc_rows=64, tile=8)       # 3 block rows when rows < T
    assert refused(block, src=0, dst=3, rows=20, acc_rows=64, tile=8)          # 8 block rows
    assert refused(table, src=0, dst=31, rows=1, acc_rows=64, tile=8)          # 32 table rows at T = 8
    assert not refused(table, src=0, dst=16, rows=1, acc_rows=64, tile=16)
