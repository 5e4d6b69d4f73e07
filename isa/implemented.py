"""Which of an instruction's three hand-written implementations exist (``tinynpu isa check``).

What an instruction computes is written three times, once per engine, and the
differential tests compare them; everything else about it is derived from
isa.yaml.  The conventions checked here:

* Python: a ``@semantics`` method of ``simulator/semantics.py``'s ``State``
  named after the mnemonic (instructions of queued units; ``halt`` and
  ``sync`` are the dispatcher's).
* C: a ``case K_<MNEMONIC>:`` in ``simulator/core.c`` (the build also fails
  on a kind without a case in ``execute()``).
* RTL: the module of the instruction's unit (``rtl/tinynpu_<unit>_unit.sv``,
  or ``rtl/tinynpu_dispatch.sv`` for the dispatcher's own), and a reference
  to the instruction's generated ``TNPU_<MNEMONIC>_...`` constants in a
  hand-written ``rtl/*.sv`` file, which is how the RTL decodes it.
"""

from __future__ import annotations

import re
from pathlib import Path

from tinynpu.isa.gen_c import kind_name
from tinynpu.isa.spec import Instruction, Isa

ROOT = Path(__file__).resolve().parent.parent
CORE_C = ROOT / "simulator" / "core.c"
RTL_DIR = ROOT / "rtl"


def _unit_module(isa: Isa, instr: Instruction) -> Path:
    queued = next(u for u in isa.units if u.name == instr.unit).queue
    return RTL_DIR / (f"tinynpu_{instr.unit}_unit.sv" if queued else "tinynpu_dispatch.sv")


def missing(isa: Isa) -> dict[str, list[str]]:
    """Per mnemonic, what is missing (empty lists when every implementation is there)."""
    from tinynpu.simulator.semantics import SEMANTICS  # the simulator depends on the ISA, not the reverse

    core = CORE_C.read_text(encoding="utf-8") if CORE_C.exists() else ""
    rtl = "\n".join(p.read_text(encoding="utf-8") for p in sorted(RTL_DIR.glob("*.sv")))
    out: dict[str, list[str]] = {}
    for instr in isa.instructions:
        gaps: list[str] = []
        queued = next(u for u in isa.units if u.name == instr.unit).queue
        if queued and instr.mnemonic not in SEMANTICS:
            gaps.append(f"Python semantics (a @semantics method {instr.mnemonic}() of State in "
                        "simulator/semantics.py)")
        if not re.search(rf"\bcase {kind_name(instr)}\b", core):
            gaps.append(f"C semantics (case {kind_name(instr)}: in simulator/core.c)")
        module = _unit_module(isa, instr)
        if not module.exists():
            gaps.append(f"an RTL unit for unit {instr.unit!r} ({module.relative_to(ROOT)})")
        prefix = "TNPU_" + instr.mnemonic.upper().replace(".", "_") + "_"
        if not re.search(rf"\b{prefix}", rtl):
            gaps.append(f"RTL decode (no hand-written rtl/*.sv file uses {prefix}*)")
        out[instr.mnemonic] = gaps
    return out


__all__ = ["missing"]
