"""``compiler.tokens._dram_deps`` (vectorized) against the per-candidate loop it replaced, on random DRAM spans."""

from __future__ import annotations

import numpy as np
import pytest

from tinynpu.compiler import tokens
from tinynpu.compiler.tokens import Accesses, _dram_deps


def _loop_deps(acc: Accesses) -> set[tuple[int, int]]:
    """The definition: per segment, each load's latest earlier overlapping store and each store's latest load."""
    pairs = set()
    for i in range(len(acc.dram_op)):
        latest = None
        for j in range(len(acc.dram_op)):
            if (acc.segment[acc.dram_op[j]] == acc.segment[acc.dram_op[i]] and acc.dram_store[j] != acc.dram_store[i]
                    and acc.dram_op[j] < acc.dram_op[i] and acc.dram_lo[i] < acc.dram_hi[j]
                    and acc.dram_lo[j] < acc.dram_hi[i]):
                latest = j
        if latest is not None:
            pairs.add((int(acc.dram_op[i]), int(acc.dram_op[latest])))
    return pairs


def _accesses(rng: np.random.Generator, n_ops: int, span: int) -> Accesses:
    empty = np.zeros(0, np.int64)
    ops = np.sort(rng.choice(n_ops, size=n_ops // 2, replace=False)).astype(np.int64)
    lo = rng.integers(0, span, size=len(ops))
    return Accesses(unit=rng.integers(0, 3, size=n_ops), segment=np.cumsum(rng.random(n_ops) < 0.02),
                    range_op=empty, range_scope=empty, range_first=empty, range_last=empty, range_write=empty,
                    dram_op=ops, dram_lo=lo, dram_hi=lo + rng.integers(1, span // 8, size=len(ops)),
                    dram_store=(rng.random(len(ops)) < 0.3).astype(np.int64), extra_consumer=empty,
                    extra_producer=empty)


@pytest.mark.parametrize("seed", range(6))
def test_dram_deps_equal_the_loop(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # a small pass size makes the chunking itself part of what is checked
    monkeypatch.setattr(tokens, "_PAIRS_PER_PASS", 7 * (seed + 1))
    acc = _accesses(np.random.default_rng(seed), 400, 2000)
    consumers, producers = _dram_deps(acc)
    assert len(consumers) == len(set(consumers))  # one producer per consumer: the latest
    want = _loop_deps(acc)
    assert set(zip(consumers, producers, strict=True)) == want and want
