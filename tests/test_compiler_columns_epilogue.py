"""The columnar GEMM lowering with a bias or a layer epilogue emits the call-by-call program, word for word.

Every ONNX and LLM weight layer is a GEMM with an epilogue (its parameter rows loaded with each block's
first chunk, its ALU steps on each output column before the int8 store); ``lower_gemm`` takes the
columnar path for them.  :func:`~tinynpu.compiler.lower.lower_gemm_by_calls` is the readable statement
of that program; both go through the same emitter, token derivation and encoder, so any difference in
an instruction's fields, its position or its comment shows in the words or the listing.  Shapes have
edge tiles in every dimension (and a batch-1 GEMV); tilings are sampled from every knob at T = 8, 16, 32.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import pytest

from tinynpu.compiler.cost import _Blocks
from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.epilogue import Epilogue, quantize_multiplier
from tinynpu.compiler.lower import Bias, EpilogueRows, lower_gemm, lower_gemm_by_calls
from tinynpu.compiler.lower_columns import lower_gemm_columns
from tinynpu.compiler.operands import DenseOperand, DenseOutput
from tinynpu.compiler.schedule import Tiling, fits
from tinynpu.isa import load_config, load_isa

ISA = load_isa()
CONFIGS = ("t8", "default", "t32")

#: Epilogue forms: which parameter rows a column tile has and which ALU steps it runs.
FORMS: dict[str, dict[str, Any]] = {
    "binary32-bias": {"requantizer": "binary32"},
    "binary32-zp-relu-clip": {"requantizer": "binary32", "zero_point": 7, "lo": 7, "hi": 120},
    "binary32-relu-no-bias": {"requantizer": "binary32", "bias": False, "lo": 0},
    "q31-bias": {},
    "q31-zp": {"zero_point": -5},
    "q31-clip-no-bias": {"bias": False, "lo": -30, "hi": 60},
    "q31-zp-low-clamp": {"zero_point": 3, "lo": -100, "hi": 127},
}


def _epilogue(n: int, *, requantizer: str = "q31", bias: bool = True, zero_point: int = 0, lo: int = -128,
              hi: int = 127) -> Epilogue:
    rng = np.random.default_rng(n)
    real = rng.uniform(2e-5, 4e-4, n)
    requant: dict[str, Any] = {"scale": real.astype(np.float32)}
    if requantizer == "q31":
        m, s = quantize_multiplier(real)
        requant = {"multiplier": m, "shift": s}
    return Epilogue(requantizer=requantizer, **requant, zero_point=zero_point, lo=lo, hi=hi,
                    bias=rng.integers(-20000, 20000, n, dtype=np.int32) if bias else None)


def _tilings(rings: bool) -> list[Tiling]:
    out = set()
    for bm, bn, bk, order, db, accb, init, resident, panels in itertools.product(
            (1, 2, 3), (1, 2, 3), (1, 2), ("mn", "nm"), (True, False), (1, 2), ("fold", "fill_zero"),
            ("none", "a", "b"), (1, 2)):
        ring: dict[str, int] = {}
        for ring in ({"stream_buffers": 3}, {"stream_buffers": 4}) if rings and db else ({},):
            out.add(Tiling(bm=bm, bn=bn, bk=bk, order=order, double_buffer=db, acc_buffers=accb, init=init,
                           resident=resident, panel_buffers=panels, **ring))
    return sorted(out, key=Tiling.key)


SAMPLE = random.Random(27).sample(_tilings(rings=False), 6)
RINGS = random.Random(28).sample([t for t in _tilings(rings=True) if t.stream_buffers > 2], 6)


def _program(lower: Any, cfg_name: str, m: int, n: int, k: int, t: Tiling, *, bias: Bias | None = None,
             epilogue: Epilogue | None = None) -> tuple[int, list[int], dict[int, str]]:
    cfg = load_config(cfg_name)
    e = cfg.tile
    emit = Emitter(ISA, cfg)
    emit.zero("a", 0, rows=1, comment="something before")  # the columns land after earlier instructions
    rows = None if epilogue is None else EpilogueRows(1 << 21, epilogue)
    relu = epilogue is not None and epilogue.store_relu
    issued = lower(emit, m=m, n=n, k=k, a=DenseOperand(64, m, k, 1, "A"), b=DenseOperand(64 + m * k + 7, n, k, 1, "B"),
                   c=DenseOutput(1 << 20, n, 1, narrow=True, shift=0 if epilogue else 4, relu=relu), tiling=t,
                   bias=bias, epilogue=rows)
    emit.store(0, 1 << 22, rows=e, cols=e, stride=4 * e, comment="something after")
    words, comments = emit.finish()
    return issued, words, dict(comments)


def _same(cfg_name: str, m: int, n: int, k: int, t: Tiling, **params: Any) -> None:
    columns = _program(lower_gemm_columns, cfg_name, m, n, k, t, **params)
    calls = _program(lower_gemm_by_calls, cfg_name, m, n, k, t, **params)
    assert columns[0] == calls[0]
    assert len(columns[1]) == len(calls[1])
    first = next((i for i, (x, y) in enumerate(zip(columns[1], calls[1], strict=True))
                  if x != y or columns[2].get(i) != calls[2].get(i)), None)
    assert first is None, (f"instruction {first}: columns {columns[2].get(first)!r} {columns[1][first]:#x}, "
                           f"calls {calls[2].get(first)!r} {calls[1][first]:#x}")
    assert columns[2] == calls[2]


def _shapes(e: int) -> list[tuple[int, int, int]]:
    return [(3 * e + 5, 4 * e - 3, 5 * e + 1), (2 * e, 3 * e, 2 * e), (1, 5 * e + 3, 7 * e)]


@pytest.mark.parametrize("cfg_name", CONFIGS)
@pytest.mark.parametrize("form", list(FORMS))
def test_epilogue_columns_match_calls(cfg_name: str, form: str) -> None:
    cfg = load_config(cfg_name)
    tried = 0
    for m, n, k in _shapes(cfg.tile):
        epi = _epilogue(n, **FORMS[form])
        for t in SAMPLE:
            if fits(t, cfg, bias=epi.param_rows, k=k):
                _same(cfg_name, m, n, k, t, epilogue=epi)
                tried += 1
    assert tried


@pytest.mark.parametrize("cfg_name", CONFIGS)
def test_bias_columns_match_calls(cfg_name: str) -> None:
    cfg = load_config(cfg_name)
    tried = 0
    for m, n, k in _shapes(cfg.tile):
        for t in SAMPLE:
            if fits(t, cfg, bias=1, k=k):
                _same(cfg_name, m, n, k, t, bias=Bias(1 << 21, n))
                tried += 1
    assert tried


@pytest.mark.parametrize("t", RINGS, ids=lambda t: "-".join(map(str, t.key())))
def test_epilogue_columns_match_calls_with_a_ring(t: Tiling) -> None:
    cfg = load_config("default")
    for form in ("binary32-bias", "q31-zp-low-clamp"):
        for m, n, k in _shapes(cfg.tile):
            epi = _epilogue(n, **FORMS[form])
            if fits(t, cfg, bias=epi.param_rows, k=k):
                _same("default", m, n, k, t, epilogue=epi)


@pytest.mark.slow
@pytest.mark.parametrize("cfg_name", CONFIGS)
def test_epilogue_columns_match_calls_every_tiling(cfg_name: str) -> None:
    """Every tiling (rings too), each with the next form and shape in turn."""
    cfg = load_config(cfg_name)
    forms, shapes = list(FORMS), _shapes(cfg.tile)
    for i, t in enumerate(_tilings(rings=True)):
        m, n, k = shapes[i % len(shapes)]
        epi = _epilogue(n, **FORMS[forms[i % len(forms)]])
        if fits(t, cfg, bias=epi.param_rows, k=k):
            _same(cfg_name, m, n, k, t, epilogue=epi)


def test_lower_gemm_takes_the_columns_for_an_epilogue() -> None:
    """No instruction of an epilogue GEMM is emitted one call at a time (the path the LLM's layers take)."""
    cfg = load_config("default")
    emit = Emitter(ISA, cfg)
    m, n, k = 33, 70, 50
    lower_gemm(emit, m=m, n=n, k=k, a=DenseOperand(0, m, k, 1), b=DenseOperand(1 << 16, n, k, 1),
               c=DenseOutput(1 << 20, n, 1, narrow=True), tiling=Tiling(bm=2, bn=2, bk=2),
               epilogue=EpilogueRows(1 << 21, _epilogue(n)))
    assert emit.ops == [] or all(op.comment == "edge-tile padding rows" for op in emit.ops)
    assert emit.count("vrequant") == 2 * 5 and emit.count("vaddrow") == 2 * 5  # per row block and column tile


@pytest.mark.parametrize("tiles, block", [(1, 1), (1, 4), (7, 3), (9, 3), (10, 1), (3141, 5), (4, 4), (5, 4)])
@pytest.mark.parametrize("split_first", [False, True])
def test_block_groups_count_every_block(tiles: int, block: int, split_first: bool) -> None:
    """The cost model's grouping of equal blocks, against listing every block (what it did before)."""
    listed: dict[tuple[int, int, bool], int] = {}
    starts = range(0, tiles, block)
    for idx, s0 in enumerate(starts):
        nn = min(block, tiles - s0)
        key = (s0 if nn < block or s0 + nn == tiles else 0, nn, split_first and idx == 0)
        listed[key] = listed.get(key, 0) + 1
    blocks = _Blocks(tiles, block)
    assert dict(blocks.groups(split_first=split_first)) == listed
    assert blocks.count == len(starts) and blocks.last == (starts[-1], min(block, tiles - starts[-1]))
