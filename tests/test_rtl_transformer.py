"""The transformer instructions on the RTL at their edges, cycle for cycle against the simulator, at T = 8, 16, 32.

One program per config loads accumulator rows holding the edge cases, runs every new instruction
on them (back to back on the ALU, so each starts the cycle the previous one's occupancy ends) and
stores every row: all-equal rows and rows of -128 (ties of the maximum), sums that saturate and
sums of squares past 64 bits, the smallest and largest shifts, x <= 0 and x = 1 for vrecip and
vrsqrt, lookups clamped at both ends with base at the int32 extremes.  The simulator's results
are checked against exact integer references in tests/test_transformer_ops.py; here the RTL must
agree with it on every output byte and every instruction's dispatch, start and completion cycle.
The default config on Verilator is in the default suite; T = 8 and 32 and Icarus are slow.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_rtl_cosim import require_simulator

from tinynpu.assembler.image import Program, Tensor
from tinynpu.isa import ArchConfig, load_config, load_isa
from tinynpu.rtl.compare import CosimCase, cosimulate

pytestmark = pytest.mark.rtl
ISA = load_isa()
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


class _Layout:
    """Accumulator rows of the program's input, appended block by block."""

    def __init__(self, tile: int) -> None:
        self.t = tile
        self.blocks: list[np.ndarray] = []
        self.rows = 0

    def put(self, block: np.ndarray) -> int:
        first = self.rows
        self.blocks.append(np.asarray(block, dtype=np.int64).reshape(-1, self.t))
        self.rows += len(self.blocks[-1])
        return first

    def out(self, rows: int) -> int:
        return self.put(np.full((rows, self.t), 0x5A5A5A5A))  # overwritten by the instruction


def _program(cfg: ArchConfig) -> tuple[CosimCase, int]:
    """The edge-case program for ``cfg`` and its number of new-instruction steps."""
    t = cfg.tile
    rng = np.random.default_rng(t)
    lay = _Layout(t)
    edges = np.array([I32_MIN, I32_MAX, -128, -1, 0, 1, 127, 1 << 30], dtype=np.int64)
    # four segments per logical row: all 2^31 - 1, all -2^31, all -128, then edge values mixed
    seg = lay.put(np.concatenate([np.full((t, t), I32_MAX), np.full((t, t), I32_MIN), np.full((t, t), -128),
                                  rng.choice(edges, (t, t))]))
    ops: list[tuple[str, dict[str, int]]] = []
    for mnemonic, n, cols, shift, rows in [("vredsum", 4, t, 0, t), ("vredsum", 1, t, 0, t), ("vredsum", 4, 3, 63, t),
                                           ("vredsq", 4, t, 0, t), ("vredsq", 4, t, 63, t), ("vredsq", 2, 1, 40, 5),
                                           ("vredsum", 3, 5, 3, t - 1)]:
        ops.append((mnemonic, {"dst": lay.out(rows), "src": seg, "n": n, "rows": rows, "cols": cols, "shift": shift}))
    for n, cols, rows, src in [(4, t, t, seg), (1, t, t, seg + 2 * t), (2, 1, 3, seg + 1), (3, 2, t, seg)]:
        ops.append(("vredmax", {"dst": lay.out(rows), "src": src, "n": n, "rows": rows, "cols": cols}))
    # block broadcast: extremes times extremes, every shift end
    block = lay.put(rng.choice(edges, (t, t)))
    for shift in (0, 31, 62, 63):
        ops.append(("vmulb", {"dst": lay.put(rng.choice(edges, (2 * t + 3, t))), "src": block, "rows": 2 * t + 3,
                              "shift": shift}))
    ops.append(("vsubb", {"dst": lay.put(rng.choice(edges, (t + 1, t))), "src": block, "rows": t + 1}))
    ops.append(("vsubb", {"dst": lay.put(rng.choice(edges, (2, t))), "src": block, "rows": 2}))
    # table lookups: junk above the low 16 bits of each entry; inputs at and past both clamps
    table = lay.put(np.resize((np.arange(256) << 16) + np.arange(256) * 257 - 32768, (-(-256 // t)) * t))
    for base in (-128, I32_MIN, I32_MAX, I32_MAX - 255, 0):
        x = np.resize(np.array([I32_MIN, base - 1, base, base + 1, base + 254, base + 255, base + 256, I32_MAX]),
                      (3 * t,)).clip(I32_MIN, I32_MAX)
        ops.append(("vlut", {"dst": lay.put(x), "src": table, "rows": 3, "base": base}))
    # the sequential units: column 0 of each row, the rest ignored
    xs = lay.put(np.array([[v] + [7] * (t - 1) for v in (I32_MIN, -1, 0, 1, 2, 3, 1000, I32_MAX)]))
    for mnemonic in ("vrecip", "vrsqrt"):
        for shift in (0, 31, ISA.by_mnemonic[mnemonic].field_map["shift"].hi):
            ops.append((mnemonic, {"dst": lay.out(8), "src": xs, "rows": 8, "shift": shift}))
    ops.append(("vrecip", {"dst": xs, "src": xs, "rows": 8, "shift": 45}))  # in place
    x = np.concatenate(lay.blocks).astype(np.int32)
    X = Tensor("X", 0, x.shape, "int32")
    Y = Tensor("Y", x.nbytes, x.shape, "int32", "output")
    alu, load, store = (1 << ISA.unit_ids[u] for u in ("alu", "load", "store"))
    words = [ISA.encode("load", {"scope": ISA.scope_by_name["acc"].id, "sp_row": 0, "dram": 0, "stride": t * 4,
                                 "rows": len(x), "cols": t, "signal": alu}, tile=t)]
    for i, (mnemonic, fields) in enumerate(ops):
        words.append(ISA.encode(mnemonic, {**fields, "wait": load if i == 0 else 0,
                                           "signal": store if i == len(ops) - 1 else 0}, tile=t))
    words.append(ISA.encode("store", {"sp_row": 0, "dram": Y.addr, "stride": t * 4, "rows": len(x), "cols": t,
                                      "wait": alu}, tile=t))
    words.append(ISA.encode("halt", {}))
    return CosimCase(f"transformer-t{t}", Program.build(ISA, cfg, words, [X, Y]), {"X": x}), len(ops)


@pytest.mark.parametrize(("config", "simulator"), [
    ("default", "verilator"),  # the build tests/test_rtl_cosim.py makes anyway; Icarus takes minutes here
    pytest.param("t8", "verilator", marks=pytest.mark.slow), pytest.param("t32", "verilator", marks=pytest.mark.slow),
    pytest.param("default", "icarus", marks=pytest.mark.slow),
    pytest.param("t8", "icarus", marks=pytest.mark.slow), pytest.param("t32", "icarus", marks=pytest.mark.slow)])
def test_transformer_edges_agree_cycle_for_cycle(config: str, simulator: str) -> None:
    require_simulator(simulator)
    cfg = load_config(config, ISA)
    case, n_ops = _program(cfg)
    [report] = cosimulate(ISA, cfg, [case], simulator=simulator)
    assert report.model_error is None and report.rtl_error is None, report.to_json()
    assert report.agree, report.to_json()
    assert report.instructions_compared == n_ops + 3  # the load, every op, the store
