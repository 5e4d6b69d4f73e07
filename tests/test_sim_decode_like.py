"""Loading a relocated program decodes only the words relocation changed: the same columns, the same faults."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tinynpu.compiler.matmul import compile_matmul
from tinynpu.isa import load_config, load_isa
from tinynpu.isa.encoding import field_value
from tinynpu.simulator import Machine
from tinynpu.simulator.decode import Decoded, decode_like, decode_program
from tinynpu.simulator.faults import SimFault

pytest.importorskip("onnx")

from tinynpu.compiler.onnx.runtime.image import relocate  # noqa: E402


def _columns(d: Decoded) -> dict[str, object]:
    return {f.name: getattr(d, f.name) for f in dataclasses.fields(d)}


def _same(a: Decoded, b: Decoded) -> None:
    for (name, x), y in zip(_columns(a).items(), _columns(b).values(), strict=True):
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), name
        else:
            assert x == y, name


def test_a_relocation_decodes_like_a_whole_decode() -> None:
    isa, cfg = load_isa(), load_config("default")
    program = compile_matmul(20, 24, 40).program
    first = relocate(program, isa, cfg, {"A": 1 << 20, "B": 3 << 20, "C": 5 << 20})
    again = relocate(program, isa, cfg, {"A": 7 << 20, "B": 2 << 20, "C": 9 << 20})
    prior = decode_program(isa, cfg, first.words)
    got = decode_like(isa, cfg, again.words, prior)
    _same(got, decode_program(isa, cfg, again.words))
    assert not np.array_equal(got.lo, prior.lo)  # it did change words
    assert decode_like(isa, cfg, first.words, prior) is prior  # nothing changed: nothing decoded


def test_a_relocated_word_that_faults_gives_the_whole_decode_s_fault() -> None:
    isa, cfg = load_isa(), load_config("default")
    words = list(compile_matmul(20, 24, 40).program.words)
    prior = decode_program(isa, cfg, words)
    store = isa.by_mnemonic["store"]
    f = store.field_map["dram"]
    at = [i for i, w in enumerate(words) if w & store.mask == store.match][-1]
    # the last store moved to the last bytes of DRAM: it runs past the end
    words[at] = (words[at] & ~(((1 << f.width) - 1) << f.lsb)) | ((cfg.dram_bytes - 8) << f.lsb)
    with pytest.raises(SimFault) as whole:
        decode_program(isa, cfg, words)
    with pytest.raises(SimFault) as like:
        decode_like(isa, cfg, words, prior)
    assert str(like.value) == str(whole.value) and like.value.index == whole.value.index == at
    assert field_value(words[at], f) == cfg.dram_bytes - 8


def test_machine_load_like_runs_the_same() -> None:
    isa, cfg = load_isa(), load_config("default")
    comp = compile_matmul(20, 24, 40)
    inputs = comp.make_inputs(1)
    bases = {"A": 1 << 20, "B": 3 << 20, "C": 5 << 20}
    base = Machine(cfg)
    base.load(comp.program)
    moved = Machine(cfg)
    moved.load(relocate(comp.program, isa, cfg, bases), like=base)
    for name, arr in comp.to_device(inputs).items():
        moved.write_dram(bases[name], arr)
    assert moved.run().cycles == base.run().cycles
    assert np.array_equal(moved.read_tensor("C"), comp.reference(inputs)["C"])


def test_a_relocated_program_s_columns_are_its_words() -> None:
    """A relocation builds the program from its columns and keeps them: they must be what splitting its
    words gives, read-only, and decode exactly as the words do."""
    from tinynpu.isa.encoding import split

    isa, cfg = load_isa(), load_config("default")
    program = compile_matmul(20, 24, 40).program
    moved = relocate(program, isa, cfg, {"A": 1 << 20, "B": 3 << 20, "C": 5 << 20})
    lo, hi = moved.columns
    want_lo, want_hi = split(moved.words)
    assert np.array_equal(lo, want_lo) and np.array_equal(hi, want_hi) and lo.dtype == np.uint64
    assert not lo.flags.writeable and not hi.flags.writeable and not program.columns[0].flags.writeable
    assert moved.words != program.words
    _same(decode_program(isa, cfg, moved.words, moved.columns), decode_program(isa, cfg, list(moved.words)))
    # a program rebuilt with other words never keeps another's columns
    rebuilt = dataclasses.replace(moved, words=program.words)
    assert np.array_equal(rebuilt.columns[0], split(program.words)[0])


def test_an_isa_hashes_by_its_content() -> None:
    """The ISA's hash (the simulator's caches key on it per program run) agrees with its equality."""
    a, b = load_isa(), load_isa()
    assert a == b and hash(a) == hash(b)
    other = dataclasses.replace(a, name=a.name + "x", digest=a.digest + "x")
    assert other != a and hash(other) != hash(a)


@pytest.mark.parametrize("field", ["sp_row", "dram"])
def test_a_changed_field_is_checked_by_every_access_that_reads_it(field: str) -> None:
    """decode_like evaluates again only the accesses that read a changed field: a load moved past the end
    of its scratchpad (``sp_row``, read by the scratchpad access alone) or of DRAM (``dram``) faults exactly
    as the whole decode does, while its other, unchanged access is not the one that fails."""
    isa, cfg = load_isa(), load_config("default")
    words = list(compile_matmul(20, 24, 40).program.words)
    prior = decode_program(isa, cfg, words)
    load = isa.by_mnemonic["load"]
    f = load.field_map[field]
    at = [i for i, w in enumerate(words) if w & load.mask == load.match][0]
    value = (1 << f.width) - 1 if field == "sp_row" else cfg.dram_bytes - 4
    words[at] = (words[at] & ~(((1 << f.width) - 1) << f.lsb)) | (value << f.lsb)
    with pytest.raises(SimFault) as whole:
        decode_program(isa, cfg, words)
    with pytest.raises(SimFault) as like:
        decode_like(isa, cfg, words, prior)
    assert str(like.value) == str(whole.value) and like.value.index == whole.value.index == at
    assert ("out of range" if field == "sp_row" else "beyond the") in str(like.value)
