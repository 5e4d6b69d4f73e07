"""The compiler's emitter records, for every instruction of the ISA, exactly what the race checker sees.

Both read an instruction's regions from its isa.yaml ``accesses``; the
emitter has no table of its own (such a table once missed an instruction and
gave wrong tokens, silently in ONNX runs, which skip the race check).  The
instructions here come from the loaded ISA, so one added to the YAML is
covered without touching this file.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from tinynpu.compiler.emitter import Columns, Emitter
from tinynpu.errors import UsageError
from tinynpu.isa import Isa, load_config, load_isa
from tinynpu.isa.records import Instruction
from tinynpu.simulator.hazards import DRAM, access_functions

ISA = load_isa()
WITH_ACCESSES = [ins for ins in ISA.instructions if ins.accesses]

Region = tuple[str, int, int, bool]  # space, first, end, write


def _random_operands(ins: Instruction, rng: random.Random, tile: int) -> dict[str, int]:
    """Operand values small enough that every region stays inside the default config's scratchpads."""
    values: dict[str, int] = {}
    for f in ins.fields:
        pick = {
            "scope": lambda: rng.choice([s.id for s in ISA.scopes]),
            "sp_row": lambda: rng.randrange(0, 64),
            "sp_tile": lambda: rng.randrange(0, 4),
            "dram_addr": lambda: 4 * rng.randrange(0, 1024),
            "stride": lambda: rng.randrange(0, 256),
            "shift": lambda: rng.randrange(0, 32),
            "flag": lambda: rng.randrange(0, 2),
            "imm": lambda: rng.randrange(-1000, 1000),
        }.get(f.kind)
        if f.kind == "units":
            continue
        if pick is not None:
            values[f.name] = pick()
        else:  # a count: rows, cols, m, n, k
            values[f.name] = rng.randrange(max(f.lo, 1), min(f.hi_at(tile), 4 if f.name in "mnk" else tile) + 1)
    if "src" in values and "dst" in values and rng.random() < 0.3:
        values["src"] = values["dst"]  # exercises `unless: src == dst`
    return values


def _checker_regions(isa: Isa, ins: Instruction, values: dict[str, int], fn) -> set[Region]:  # type: ignore[no-untyped-def]
    seen: set[Region] = set()

    def access(unit: int, index: int, res: int, lo: int, hi: int, write: bool, fp: object = None) -> None:
        seen.add(("dram" if res == DRAM else isa.scope_by_id[res].name, lo, hi, write))

    fn(access, 0, 0, [values[name] for name in ins.operands])
    return seen


def _emitter_regions(emit: Emitter) -> set[Region]:
    op = emit.ops[-1]
    found = {(scope, first, first + rows, write) for scope, first, rows, write in op.access}
    if op.dram is not None:
        found.add(("dram", op.dram[0], op.dram[1], op.dram_write))
    return found


@pytest.mark.parametrize("ins", WITH_ACCESSES, ids=lambda ins: ins.mnemonic)
def test_emitter_records_the_race_checkers_regions(ins: Instruction) -> None:
    cfg = load_config("default")
    checker = access_functions(ISA, cfg)[ins.index]
    rng = random.Random(ins.mnemonic)
    for _ in range(40):
        values = _random_operands(ins, rng, cfg.tile)
        emit = Emitter(ISA, cfg)
        emit.emit(ins.mnemonic, values)
        assert _emitter_regions(emit) == _checker_regions(ISA, ins, values, checker), values


@pytest.mark.parametrize("ins", WITH_ACCESSES, ids=lambda ins: ins.mnemonic)
def test_column_form_gives_the_same_tokens_as_one_at_a_time(ins: Instruction) -> None:
    """A program of this instruction and its neighbours, emitted both ways, gets identical words."""
    cfg = load_config("default")
    rng = random.Random(f"columns {ins.mnemonic}")
    rows = [_random_operands(ins, rng, cfg.tile) for _ in range(12)]
    tile = cfg.tile
    one, many = Emitter(ISA, cfg), Emitter(ISA, cfg)
    for e in (one, many):  # a producer on another unit, so the tokens are not all zero
        e.load("acc", 0, 0, rows=64, cols=tile, stride=4 * tile)
    for values in rows:
        one.emit(ins.mnemonic, values)
    many.extend([Columns(ins.mnemonic, np.arange(len(rows)),
                         {name: np.array([v[name] for v in rows]) for name in rows[0]})])
    assert one.finish()[0] == many.finish()[0]


def test_an_alu_op_without_its_source_is_an_error_not_a_guess() -> None:
    emit = Emitter(ISA, load_config("default"))
    with pytest.raises(UsageError, match="field src has no value and no default"):
        emit.alu("vaddrow", 0, rows=4)
