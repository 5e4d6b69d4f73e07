"""The one encoder: one word at a time and whole columns give the same words, and decode inverts both."""

from __future__ import annotations

import numpy as np
import pytest

from tinynpu.errors import SpecError
from tinynpu.isa import encoding, load_isa

ISA = load_isa()


@pytest.mark.parametrize("mnemonic", [i.mnemonic for i in ISA.instructions])
def test_columns_equal_single_words_and_decode_back(mnemonic: str) -> None:
    instr = ISA.by_mnemonic[mnemonic]
    rng = np.random.default_rng(instr.index)
    n = 200
    columns = {f.name: rng.integers(f.lo, f.hi, n, endpoint=True) for f in instr.fields}
    for f in instr.fields:  # the extremes of every field, signed ones included
        columns[f.name][:2] = (f.lo, f.hi)
    lo, hi = encoding.encode_columns(instr, columns, n)
    words = encoding.to_ints(lo, hi)
    singles = [encoding.encode(instr, {k: int(v[i]) for k, v in columns.items()}) for i in range(n)]
    assert words == singles
    assert all(ISA.decode(w)[0] is instr for w in words)
    slo, shi = encoding.split(words)
    assert np.array_equal(slo, lo) and np.array_equal(shi, hi)
    for f in instr.fields:
        assert np.array_equal(encoding.field_column(lo, hi, f), columns[f.name]), f.name
        assert [encoding.field_value(w, f) for w in words] == columns[f.name].tolist()


def test_columns_take_defaults_and_scalars() -> None:
    tmm = ISA.by_mnemonic["tmm"]
    lo, hi = encoding.encode_columns(tmm, {"acc": np.arange(3), "a": 0, "b": 1}, 3)
    assert encoding.to_ints(lo, hi) == [ISA.encode("tmm", {"acc": i, "a": 0, "b": 1}) for i in range(3)]


def test_column_errors_name_field_range_and_instruction() -> None:
    vmax = ISA.by_mnemonic["vmax"]
    with pytest.raises(SpecError, match=r"vmax field 'rows' must be in 1\.\.32767, not 0 \(instruction 2 of"):
        encoding.encode_columns(vmax, {"dst": 0, "imm": 0, "rows": np.array([1, 1, 0, 5])}, 4)
    with pytest.raises(SpecError, match="vmax needs a value for field 'dst'"):
        encoding.encode_columns(vmax, {"imm": 0, "rows": 1}, 1)
    with pytest.raises(SpecError, match="vmax has no field 'src'"):
        encoding.encode_columns(vmax, {"dst": 0, "imm": 0, "rows": 1, "src": 3}, 1)
