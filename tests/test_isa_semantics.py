"""The YAML's ``semantics`` text is executable, and it is what both simulator cores compute.

For every instruction of a queued unit (read from the loaded ISA, so a new
one is covered without touching this file), random operands that pass its
static checks run once as a program on the simulator (both cores, through the
``sim_engine`` fixture) and once as the YAML's Python text on a copy of the
same random state; every scratchpad and the DRAM window must agree.  The
environment the text sees is described at the top of isa/isa.yaml.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tinynpu.assembler.image import Program
from tinynpu.isa import load_config, load_isa, regions
from tinynpu.isa.records import Instruction
from tinynpu.simulator import Machine

pytestmark = pytest.mark.usefixtures("sim_engine")  # each test runs on both simulator cores

ISA = load_isa()
CFG = load_config("default", ISA)
EXECUTED = [i for i in ISA.instructions if next(u for u in ISA.units if u.name == i.unit).queue]
WINDOW = 1 << 16  # DRAM bytes the operands reach (random, compared)
ROW_SPAN = 64  # scratchpad rows the operands start in


def _expr(instr: Instruction, text: str, values: dict[str, int]) -> int:
    return int(regions.evaluate(ISA.region_expr(instr, text), ISA.scope_ids, values, tile=CFG.tile,
                                elem_bytes=ISA.per_scope(lambda s: CFG.elem_bytes(s.config_key)),
                                scope_rows=ISA.per_scope(lambda s: CFG.rows(s.config_key))))


def _operands(instr: Instruction, rng: np.random.Generator) -> dict[str, int]:
    """Random operand values inside the scratchpads and the DRAM window, passing every check."""
    values: dict[str, int] = {}
    for f in instr.fields:
        if f.kind == "units":
            values[f.name] = 0
        elif f.kind == "scope":
            values[f.name] = int(rng.choice([s.id for s in ISA.scopes if f.lo <= s.id <= f.hi]))
        elif f.kind == "sp_row":
            values[f.name] = int(rng.integers(0, ROW_SPAN))
        elif f.kind == "sp_tile":
            values[f.name] = int(rng.integers(0, 4))
        elif f.kind == "dram_addr":
            values[f.name] = 4 * int(rng.integers(0, WINDOW // 8))
        elif f.kind == "stride":
            values[f.name] = 4 * int(rng.integers(0, 16))
        elif f.kind == "count":
            values[f.name] = int(rng.integers(max(f.lo, 1), min(f.hi_at(CFG.tile), 3 if f.name in "mnk" else 16) + 1))
        elif f.kind == "imm":
            values[f.name] = int(rng.integers(-(1 << 31), 1 << 31)) if f.signed else int(rng.integers(0, 1 << 16))
        else:  # shift, flag
            values[f.name] = int(rng.integers(f.lo, f.hi_at(CFG.tile) + 1))
    for _ in range(len(instr.checks) + 1):  # move the operand a broken check names until none is broken
        broken = [c for c in instr.checks if _expr(instr, c.fault, values)]
        if not broken:
            return values
        at = instr.field_map[broken[0].at or ""]
        if at.kind == "sp_row":
            values[at.name] = next(r for r in range(2 * ROW_SPAN)
                                   if not _expr(instr, broken[0].fault, {**values, at.name: r}))
        else:
            values[at.name] = at.default if at.default is not None else at.lo
    raise AssertionError(f"{instr.mnemonic}: no operands pass its checks: {values}")


def _environment(state: dict[int, np.ndarray], dram: np.ndarray, values: dict[str, int]) -> dict[str, Any]:
    sp: dict[int | str, np.ndarray] = {}
    for s in ISA.scopes:
        sp[s.id] = sp[s.name] = state[s.id]
    env: dict[str, Any] = {"np": np, "T": CFG.tile, "sp": sp, "DRAM": dram, "acc_dtype": sp["acc"].dtype,
                           "acc": sp["acc"], "a_reg": sp["a"], "b_reg": sp["b"],
                           "dtype": lambda s: sp[s].dtype, "elem_bytes": lambda s: sp[s].itemsize}
    return env | values  # an operand's name wins (tmm's acc tile)


@pytest.mark.parametrize("instr", EXECUTED, ids=lambda i: i.mnemonic)
def test_yaml_semantics_is_what_the_simulator_computes(instr: Instruction) -> None:
    rng = np.random.default_rng(instr.index)
    halt = ISA.encode("halt", {})
    for trial in range(6):
        values = _operands(instr, rng)
        machine = Machine(CFG, ISA)
        machine.load(Program.build(ISA, CFG, [ISA.encode(instr.mnemonic, values), halt]))
        st = machine.state
        for sp in st.sp.values():
            sp.view(np.uint8)[...] = rng.integers(0, 256, sp.nbytes, dtype=np.uint8).reshape(sp.view(np.uint8).shape)
        if instr.mnemonic.startswith("vrequantf"):  # mostly ordinary scales: random bits are mostly huge or tiny
            scales = rng.uniform(-2, 2, st.acc.shape).astype(np.float32).view(np.int32)
            st.acc[...] = np.where(rng.random(st.acc.shape) < 0.8, scales, st.acc)
        st.dram[:WINDOW] = rng.integers(0, 256, WINDOW, dtype=np.uint8)
        expected = {sid: sp.copy() for sid, sp in st.sp.items()}
        dram = st.dram[:WINDOW].copy()
        with np.errstate(over="ignore", invalid="ignore"):  # vrequantf: a product past binary32 is inf
            exec(instr.semantics, _environment(expected, dram, values))  # noqa: S102 (the ISA's own text)
        machine.run()
        for sid, sp in st.sp.items():
            assert np.array_equal(sp, expected[sid]), (instr.mnemonic, trial, values, ISA.scope_by_id[sid].name)
        assert np.array_equal(st.dram[:WINDOW], dram), (instr.mnemonic, trial, values, "DRAM")
