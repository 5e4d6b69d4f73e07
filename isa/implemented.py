"""Which of an instruction's three hand-written implementations exist (``tinynpu isa check``).

What an instruction computes is written three times, once per engine, and the
differential tests compare them; everything else about it is derived from
isa.yaml.  The conventions checked here, by reading the sources (the ISA is
the bottom layer: it imports neither the simulator nor the RTL tools):

* Python: a method of ``simulator/semantics.py`` decorated ``@semantics`` and
  named after the mnemonic (instructions of queued units; ``halt`` and
  ``sync`` are the dispatcher's).
* C: a ``case K_<MNEMONIC>:`` in ``simulator/core.c`` (the build also fails
  on a kind without a case in ``execute()``).
* RTL: the module of the instruction's unit (``rtl/tinynpu_<unit>_unit.sv``,
  or ``rtl/tinynpu_dispatch.sv`` for the dispatcher's own) decodes it: its
  code (comments aside) compares the word with the instruction's generated
  ``TNPU_<MNEMONIC>_FUNCT``, ``_OPCODE``, ``_MATCH`` or ``_ALU_OP`` constant.  A unit need
  not compare what nothing else could be: the sole instruction of its unit, or
  the one instruction a unit leaves as its fall-through when its opcode is
  the unit's alone (``load``: the load unit tells ``zero`` apart by opcode).
  An instruction sharing its opcode with others of its unit (the ALU's
  functs) is always compared, so a new ALU op the unit does not decode is
  reported rather than silently run as another op.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tinynpu.isa.gen_c import kind_name
from tinynpu.isa.spec import Instruction, Isa

ROOT = Path(__file__).resolve().parent.parent
CORE_C = ROOT / "simulator" / "core.c"
SEMANTICS_PY = ROOT / "simulator" / "semantics.py"
RTL_DIR = ROOT / "rtl"
# rtl/generated/tinynpu_isa.vh names that identify an instruction (ALU_OP: the vector ALU's operation number)
DECODE_CONSTANTS = ("FUNCT", "OPCODE", "MATCH", "ALU_OP")


def _unit_module(isa: Isa, instr: Instruction) -> Path:
    queued = next(u for u in isa.units if u.name == instr.unit).queue
    return RTL_DIR / (f"tinynpu_{instr.unit}_unit.sv" if queued else "tinynpu_dispatch.sv")


def python_semantics(path: Path = SEMANTICS_PY) -> set[str]:
    """Names of the methods ``path`` decorates with ``@semantics`` (read, not imported)."""
    if not path.exists():
        return set()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
            and any(isinstance(d, ast.Name) and d.id == "semantics" for d in node.decorator_list)}


def _without_comments(sv: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", sv, flags=re.S))


def decodes(module_text: str, instr: Instruction) -> bool:
    """Whether the SystemVerilog ``module_text`` compares a word with ``instr``'s decode constants."""
    prefix = "TNPU_" + instr.mnemonic.upper().replace(".", "_") + "_"
    return re.search(rf"\b{prefix}(?:{'|'.join(DECODE_CONSTANTS)})\b", _without_comments(module_text)) is not None


def _opcode(instr: Instruction) -> int:
    return next(fx.value for fx in instr.fixed if fx.name == "opcode")


def rtl_decoded(isa: Isa) -> dict[str, bool]:
    """Per mnemonic, whether the RTL module of its unit decodes it (the rules in the module docstring)."""
    out: dict[str, bool] = {}
    for unit in isa.units:
        members = [i for i in isa.instructions if i.unit == unit.name]
        if not members:
            continue
        module = _unit_module(isa, members[0])
        text = module.read_text(encoding="utf-8") if module.exists() else None
        compared = {i.mnemonic: text is not None and decodes(text, i) for i in members}
        uncompared = [i for i in members if not compared[i.mnemonic]]
        for i in members:
            alone = sum(_opcode(j) == _opcode(i) for j in members) == 1
            fall_through = text is not None and len(uncompared) == 1 and alone
            out[i.mnemonic] = compared[i.mnemonic] or fall_through
    return out


def missing(isa: Isa) -> dict[str, list[str]]:
    """Per mnemonic, what is missing (empty lists when every implementation is there)."""
    core = CORE_C.read_text(encoding="utf-8") if CORE_C.exists() else ""
    python = python_semantics()
    decoded = rtl_decoded(isa)
    out: dict[str, list[str]] = {}
    for instr in isa.instructions:
        gaps: list[str] = []
        queued = next(u for u in isa.units if u.name == instr.unit).queue
        if queued and instr.mnemonic not in python:
            gaps.append(f"Python semantics (a @semantics method {instr.mnemonic}() of State in "
                        "simulator/semantics.py)")
        if not re.search(rf"\bcase {kind_name(instr)}\b", core):
            gaps.append(f"C semantics (case {kind_name(instr)}: in simulator/core.c)")
        module = _unit_module(isa, instr)
        if not module.exists():
            gaps.append(f"an RTL unit for unit {instr.unit!r} ({module.relative_to(ROOT)})")
        elif not decoded[instr.mnemonic]:
            prefix = "TNPU_" + instr.mnemonic.upper().replace(".", "_") + "_"
            gaps.append(f"RTL decode ({module.relative_to(ROOT)} compares no word with "
                        f"{prefix}{'/'.join(DECODE_CONSTANTS)})")
        out[instr.mnemonic] = gaps
    return out


__all__ = ["decodes", "missing", "python_semantics", "rtl_decoded"]
