"""The native core's generated C header, and the completeness check of `tinynpu isa check`."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tinynpu.cli import main
from tinynpu.isa import implemented, load_isa
from tinynpu.isa.gen_c import CORE_HEADER_PATH, generate_core_header


def test_committed_core_header_is_not_stale() -> None:
    assert CORE_HEADER_PATH.read_text(encoding="utf-8") == generate_core_header(load_isa()), (
        f"{CORE_HEADER_PATH} is stale: run `tinynpu isa cheader` and commit the result")


def test_header_enumerates_every_instruction_in_opcode_order() -> None:
    isa = load_isa()
    text = generate_core_header(isa)
    enum = text.split("enum Kind {", 1)[1].split("}", 1)[0]
    kinds = [k.strip() for k in enum.split(",")]
    assert kinds == [f"K_{i.mnemonic.upper()}" for i in isa.instructions] + ["N_KINDS"]
    for instr in isa.instructions:
        assert f"case K_{instr.mnemonic.upper()}:" in text


def test_every_builtin_instruction_is_implemented(capsys: pytest.CaptureFixture[str]) -> None:
    assert all(not gaps for gaps in implemented.missing(load_isa()).values())
    assert main(["isa", "check", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["missing"] == {}


def test_check_names_what_a_new_instruction_lacks(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    isa = load_isa()
    vmax = isa.by_mnemonic["vmax"]
    extra = dataclasses.replace(vmax, mnemonic="vfoo", index=len(isa.instructions))
    fake = dataclasses.replace(isa, instructions=(*isa.instructions, extra))
    gaps = implemented.missing(fake)["vfoo"]
    assert any("Python semantics" in g and "vfoo()" in g for g in gaps)
    assert any("case K_VFOO:" in g for g in gaps)
    assert any("TNPU_VFOO_" in g for g in gaps)
    monkeypatch.setattr("tinynpu.isa.cli.load_isa", lambda path: fake)
    assert main(["isa", "check"]) == 1
    out = capsys.readouterr().out
    assert "vfoo has no Python semantics" in out and out.count("\n") == 1


def test_a_mention_of_an_instructions_constants_is_not_a_decode() -> None:
    vmax = load_isa().by_mnemonic["vmax"]
    assert implemented.decodes("assign hit = funct_q == TNPU_FUNCT_W'(TNPU_VMAX_FUNCT);", vmax)
    assert not implemented.decodes("// vmax: funct_q == TNPU_VMAX_FUNCT, see above", vmax)
    assert not implemented.decodes("/* TNPU_VMAX_FUNCT */ logic [TNPU_VMAX_IMM_W-1:0] imm;", vmax)


def test_an_alu_op_sharing_the_opcode_must_be_decoded_by_the_unit() -> None:
    """A new ALU instruction the ALU never compares with its funct is reported, though it is the only one."""
    isa = load_isa()
    extra = dataclasses.replace(isa.by_mnemonic["vmax"], mnemonic="vfoo", index=len(isa.instructions))
    fake = dataclasses.replace(isa, instructions=(*isa.instructions, extra))
    decoded = implemented.rtl_decoded(fake)
    assert not decoded["vfoo"]
    assert decoded["load"] and decoded["zero"] and decoded["tmm"]  # the fall-through and a sole instruction


def test_reading_semantics_py_finds_what_importing_it_registers() -> None:
    from tinynpu.simulator.semantics import SEMANTICS

    assert implemented.python_semantics() == set(SEMANTICS)
