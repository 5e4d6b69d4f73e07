"""The columnar GEMM lowering emits the program of the call-by-call one, word for word.

``lower_gemm`` takes :func:`~tinynpu.compiler.lower_columns.lower_gemm_columns`
for dense operands; :func:`~tinynpu.compiler.lower.lower_gemm_by_calls` is the
loop nest written out one emitter call per instruction.  Both go through the
same emitter, token derivation and encoder, so any difference in an
instruction's fields, its position or its comment changes the words or the
listing.  Tilings are drawn from every combination of the schedule's knobs
(a fixed sample in CI, all behind the slow flag) at tile edges 8, 16 and 32,
on shapes with edge tiles in every dimension.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from tinynpu.compiler.comments import Comments
from tinynpu.compiler.emitter import Columns, Emitter
from tinynpu.compiler.lower import lower_gemm_by_calls
from tinynpu.compiler.lower_columns import lower_gemm_columns
from tinynpu.compiler.operands import DenseOperand, DenseOutput
from tinynpu.compiler.schedule import Tiling, fits
from tinynpu.errors import UsageError
from tinynpu.isa import load_config, load_isa

ISA = load_isa()
CONFIGS = ("t8", "default", "t32")


def _tilings() -> list[Tiling]:
    out = []
    for bm, bn, bk, order, db, accb, init, resident, panels in itertools.product(
            (1, 2, 3), (1, 2, 3), (1, 2), ("mn", "nm"), (True, False), (1, 2), ("fold", "fill_zero"),
            ("none", "a", "b"), (1, 2)):
        out.append(Tiling(bm=bm, bn=bn, bk=bk, order=order, double_buffer=db, acc_buffers=accb, init=init,
                          resident=resident, panel_buffers=panels))
    return sorted(set(out), key=Tiling.key)


ALL = _tilings()
SAMPLE = random.Random(13).sample(ALL, 24)
#: Rings of streamed chunks (3 or 4 buffers), with and without a resident panel.
RINGS = sorted({Tiling(bm=bm, bn=bn, bk=bk, order=order, acc_buffers=accb, resident=resident, panel_buffers=panels,
                       stream_buffers=ring)
                for bm, bn, bk, order, accb, resident, panels, ring in itertools.product(
                    (1, 2), (1, 3), (1, 2), ("mn", "nm"), (1, 2), ("none", "a", "b"), (1, 2), (3, 4))},
               key=Tiling.key)


def _both(cfg_name: str, m: int, n: int, k: int, t: Tiling, *, narrow: bool) -> tuple[object, object]:
    cfg = load_config(cfg_name)
    e = cfg.tile
    results = []
    for lower in (lower_gemm_columns, lower_gemm_by_calls):
        emit = Emitter(ISA, cfg)
        emit.zero("a", 0, rows=1, comment="something before")  # the columns land after earlier instructions
        issued = lower(emit, m=m, n=n, k=k, a=DenseOperand(64, m, k, 1, "A"),
                       b=DenseOperand(64 + m * k + 7, n, k, 1, "B{x}"),
                       c=DenseOutput(1 << 20, n, 1 if narrow else 4, narrow=narrow, shift=5 if narrow else 0,
                                     relu=narrow), tiling=t)
        emit.store(0, 1 << 22, rows=e, cols=e, stride=4 * e, comment="something after")
        words, comments = emit.finish()
        results.append((issued, words, dict(comments)))
    return results[0], results[1]


@pytest.mark.parametrize("cfg_name", CONFIGS)
@pytest.mark.parametrize("t", SAMPLE, ids=lambda t: "-".join(map(str, t.key())))
def test_columns_match_calls(cfg_name: str, t: Tiling) -> None:
    cfg = load_config(cfg_name)
    e = cfg.tile
    m, n, k = 3 * e + 5, 4 * e - 3, 5 * e + 1
    if not fits(t, cfg, k=k):
        pytest.skip("tiling does not fit this config")
    columns, calls = _both(cfg_name, m, n, k, t, narrow=cfg_name != "t32")
    assert columns == calls


@pytest.mark.parametrize("t", random.Random(5).sample(RINGS, 12), ids=lambda t: "-".join(map(str, t.key())))
def test_columns_match_calls_with_a_ring(t: Tiling) -> None:
    cfg = load_config("default")
    e = cfg.tile
    for m, n, k in ((3 * e + 5, 4 * e - 3, 5 * e + 1), (1, 5 * e + 3, 7 * e)):  # and a batch-1 GEMV
        if fits(t, cfg, k=k):
            columns, calls = _both("default", m, n, k, t, narrow=True)
            assert columns == calls, (m, n, k)


@pytest.mark.slow
@pytest.mark.parametrize("cfg_name", CONFIGS)
def test_columns_match_calls_every_tiling(cfg_name: str) -> None:
    cfg = load_config(cfg_name)
    e = cfg.tile
    for m, n, k in ((3 * e + 5, 4 * e - 3, 5 * e + 1), (2 * e, e, 3 * e), (1, 1, 1)):
        for t in ALL + RINGS:
            if fits(t, cfg, k=k):
                columns, calls = _both(cfg_name, m, n, k, t, narrow=True)
                assert columns == calls, t


def test_extend_refuses_repeated_positions() -> None:
    emit = Emitter(ISA, load_config("default"))
    one = np.zeros(1, dtype=np.int64)
    zero = Columns("zero", one, {"scope": 0, "sp_row": one, "rows": one + 1})
    with pytest.raises(UsageError, match="not distinct positions in 0..1"):
        emit.extend([zero, zero])


def test_extend_names_the_instruction_outside_its_scratchpad() -> None:
    cfg = load_config("default")
    emit = Emitter(ISA, cfg)
    emit.zero("a", 0, rows=1)
    rows = cfg.rows("a_reg")
    row = np.array([0, rows - 1], dtype=np.int64)
    n = np.array([1, 2], dtype=np.int64)
    bad = Columns("zero", np.array([1, 0]), {"scope": 0, "sp_row": row, "rows": n})
    with pytest.raises(UsageError, match=rf"instruction 1 \(zero\): rows {rows - 1}..{rows} of scratchpad 'a'"):
        emit.extend([bad])


def test_extend_refuses_a_field_the_instruction_lacks() -> None:
    emit = Emitter(ISA, load_config("default"))
    one = np.zeros(1, dtype=np.int64)
    emit.extend([Columns("zero", one, {"scope": 0, "sp_row": one, "rows": one + 1, "bogus": 3})])
    with pytest.raises(UsageError, match="zero has no field 'bogus'"):
        emit.finish()


def test_comments_are_formatted_on_lookup() -> None:
    c = Comments({0: "first", 5: "last"}, [(np.array([3, 1]), "x{}+{}", (np.array([30, 10]), np.array([3, 1])))])
    assert list(c) == [0, 1, 3, 5] and len(c) == 4
    assert c[1] == "x10+1" and c[3] == "x30+3" and c[5] == "last" and c.get(2) is None
    with pytest.raises(KeyError):
        c[2]
