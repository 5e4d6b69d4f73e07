"""Loading a program costs the memory it keeps, plus temporaries that do not grow with the program.

The simulator's peak memory is a target (`tinynpu bench sim`: peak RSS at most 2x DRAM + program). A
naive 1024^3 program has 794K words; a whole-program temporary of Python objects (a bytes object or an int
per word, ~60 bytes each) costs ~50 MB there, and one such temporary (splitting every word into its 64-bit
columns at once) took the peak from 1.90x to 2.85x. These tests measure, with tracemalloc (exact byte
counts, not timing), the peak of each loading step above what it keeps, and fail if it grows with the
word count.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from tinynpu.assembler.image import Program, Tensor
from tinynpu.isa import ArchConfig, Isa, load_config, load_isa
from tinynpu.isa.encoding import encode_columns, split, to_ints
from tinynpu.simulator import Machine

T = TypeVar("T")

N_WORDS = 1 << 18  # large enough that a per-word temporary (>= 8 MiB at 32 bytes a word) dwarfs the slack
SLACK = 4 << 20  # bytes: chunk-sized temporaries, numpy's and the decoder's small arrays


def _peak_above(step: Callable[[], T]) -> tuple[T, int, int]:
    """``step``'s result, the bytes it keeps allocated, and its peak above what was allocated before it."""
    gc.collect()
    tracemalloc.start()
    try:
        result = step()
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, kept, peak


def _image(isa: Isa, cfg: ArchConfig, n: int) -> bytes:
    """An image of ``n`` words: ``n - 1`` tile loads that walk a 1024 x 1024 tensor's tiles (distinct words,
    several fields varied), then a halt."""
    t, size = cfg.tile, 1024
    j = np.arange(n - 1)
    row, col = (j % (size // t) ** 2) // (size // t), j % (size // t)
    fields = {"scope": np.where(j % 2, isa.scope_by_name["b"].id, isa.scope_by_name["a"].id), "sp_row": 0,
              "dram": row * t * size + col * t, "stride": size, "rows": t, "cols": t}
    lo, hi = encode_columns(isa.by_mnemonic["load"], fields, n - 1, cfg.tile)
    halt = isa.encode("halt", {})
    lo, hi = np.append(lo, np.uint64(halt & (2**64 - 1))), np.append(hi, np.uint64(halt >> 64))
    return Program.from_columns(isa, cfg, lo, hi, [Tensor("X", 0, (size, size), "int8")]).to_bytes()


def test_loading_a_large_program_keeps_its_peak_to_what_it_keeps() -> None:
    """Reading an image and decoding it (what `tinynpu sim` and `bench sim` do) peak at what the program and
    its decoding keep (the words, their columns, the decoded columns) plus at most 8 bytes a word (the list
    the words' tuple is built from) and a constant: no whole-program temporary of per-word objects."""
    isa, cfg = load_isa(), load_config("default")
    data = _image(isa, cfg, N_WORDS)
    machine = Machine(cfg, isa)  # its DRAM and scratchpads are the machine's, not the loading's

    def load() -> Program:
        program = Program.from_bytes(data)
        machine.load(program)
        return program

    program, kept, peak = _peak_above(load)
    dec = machine._decoded
    assert dec is not None and dec.n == N_WORDS
    words_bytes = sys.getsizeof(program.words) + sum(sys.getsizeof(w) for w in program.words)
    columns = [getattr(dec, name) for name in ("op", "unit", "wait", "signal", "lo", "hi", "occ", "lat", "beats",
                                               "dram_read", "dram_write")]
    assert dec.lo is program.columns[0] and dec.hi is program.columns[1]  # shared, not copied
    needed = words_bytes + sum(c.nbytes for c in columns)
    assert kept <= needed + SLACK, (kept, needed)
    assert peak <= needed + 8 * N_WORDS + SLACK, (peak, needed)


def test_splitting_and_joining_words_make_no_per_word_temporaries() -> None:
    """`split` (words -> columns) peaks at its two columns and `to_ints` (columns -> words) at its list and
    ints, each plus a constant: both convert in chunks."""
    isa, cfg = load_isa(), load_config("default")
    program = Program.from_bytes(_image(isa, cfg, N_WORDS))
    (lo, hi), kept, peak = _peak_above(lambda: split(program.words))
    assert np.array_equal(lo, program.columns[0]) and np.array_equal(hi, program.columns[1])
    assert peak <= lo.nbytes + hi.nbytes + SLACK, (peak, lo.nbytes + hi.nbytes)
    words, kept, peak = _peak_above(lambda: to_ints(lo, hi))
    assert tuple(words) == program.words
    assert peak <= kept + SLACK, (peak, kept)
