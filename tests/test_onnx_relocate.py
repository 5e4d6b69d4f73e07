"""Relocation, vectorized: each moved word is the word-by-word rewrite of its DRAM address (and pitched stride),
and a program cache's decoding of a compiled program loads its relocations exactly as a whole decode does."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tinynpu.assembler.image import Program
from tinynpu.compiler.matmul import compile_matmul
from tinynpu.errors import OnnxError, UsageError
from tinynpu.isa import Isa, load_config, load_isa
from tinynpu.isa.encoding import field_value
from tinynpu.simulator import Machine
from tinynpu.simulator.decode import decode_program

pytest.importorskip("onnx")

from tinynpu.compiler.onnx.lower.programs import ProgramCache  # noqa: E402
from tinynpu.compiler.onnx.runtime.relocate import relocate  # noqa: E402


def _expected(program: Program, isa: Isa, bases: dict[str, int], pitches: dict[str, int]) -> list[int]:
    """The relocation rule applied one word at a time with Python integers (the reference)."""
    owners = sorted((t for t in program.tensors if t.nbytes), key=lambda t: t.addr)
    out = []
    for word in program.words:
        for mnemonic in ("load", "store"):
            ins = isa.by_mnemonic[mnemonic]
            if word & ins.mask != ins.match:
                continue
            f, fs = ins.field_map["dram"], ins.field_map["stride"]
            addr = field_value(word, f)
            t = next(t for t in owners if t.addr <= addr < t.addr + t.nbytes)
            offset = addr - t.addr
            if t.name in pitches:
                row_bytes = t.nbytes // int(np.prod(t.shape[:-1]))
                row, col = divmod(offset, row_bytes)
                offset = row * pitches[t.name] + col
                stride = field_value(word, fs) // row_bytes * pitches[t.name]
                word = (word & ~(((1 << fs.width) - 1) << fs.lsb)) | (stride << fs.lsb)
            word = (word & ~(((1 << f.width) - 1) << f.lsb)) | ((bases.get(t.name, t.addr) + offset) << f.lsb)
        out.append(word)
    return out


@pytest.mark.parametrize("pitches", [{}, {"C": 64}, {"A": 96, "C": 80}])
def test_relocation_is_the_word_by_word_rewrite(pitches: dict[str, int]) -> None:
    isa, cfg = load_isa(), load_config("default")
    program = compile_matmul(20, 24, 40).program
    bases = {"A": 1 << 20, "B": 3 << 20, "C": 5 << 20}
    moved = relocate(program, isa, cfg, bases, pitches)
    assert list(moved.words) == _expected(program, isa, bases, pitches)
    assert {t.name: t.addr for t in moved.tensors} == bases


def test_a_relocated_address_too_wide_for_its_field_is_refused() -> None:
    isa, cfg = load_isa(), load_config("default")
    program = compile_matmul(20, 24, 40).program
    width = isa.by_mnemonic["load"].field_map["dram"].width
    with pytest.raises(OnnxError, match=rf"relocated dram {1 << width}\d* does not fit the {width}-bit field"):
        relocate(program, isa, cfg, {"A": 1 << width})


def test_the_program_cache_decodes_each_program_once_and_loads_relocations_like_a_whole_decode() -> None:
    isa, cfg = load_isa(), load_config("default")
    cache = ProgramCache(cfg)
    comp = cache.get(("mm", 20, 24, 40), lambda: compile_matmul(20, 24, 40))
    assert cache.get(("mm", 20, 24, 40), lambda: pytest.fail("compiled twice")) is comp
    decoded = cache.decoded(comp.program)
    assert decoded is not None and cache.decode_seconds > 0
    assert cache.decoded(compile_matmul(20, 24, 40).program) is None  # not one of the cache's programs
    bases = {"A": 1 << 20, "B": 3 << 20, "C": 5 << 20}
    moved = relocate(comp.program, isa, cfg, bases)
    like, whole = Machine(cfg), Machine(cfg)
    like.load(moved, like=decoded)
    whole.load(moved)
    for f in dataclasses.fields(decoded):
        a, b = getattr(like._decoded, f.name), getattr(whole._decoded, f.name)
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b, f.name
    inputs = comp.make_inputs(2)
    for m in (like, whole):
        for name, arr in comp.to_device(inputs).items():
            m.write_dram(bases[name], arr)
    assert like.run().cycles == whole.run().cycles
    assert np.array_equal(like.read_tensor("C"), comp.reference(inputs)["C"])
    assert decode_program(isa, cfg, comp.program.words).n == decoded.n


def test_a_machine_shares_only_a_state_of_its_own_config() -> None:
    default = Machine(load_config("default"))
    assert Machine(load_config("default"), default.isa, default.state).state is default.state
    with pytest.raises(UsageError, match="cannot share the state of a machine of config 'default'"):
        Machine(load_config("t8"), default.isa, default.state)
