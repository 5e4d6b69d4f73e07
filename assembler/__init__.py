"""tinynpu.assembler: assembly source <-> binary program image.

Public API::

    assemble(source, *, filename="<source>", isa, cfg) -> Program
    disassemble(program, isa, *, comments=None) -> str
    format_instruction(isa, instr, fields) -> str
"""

from tinynpu.assembler.assemble import assemble
from tinynpu.assembler.disasm import disassemble, format_instruction
from tinynpu.assembler.image import Program, Tensor

__all__ = ["Program", "Tensor", "assemble", "disassemble", "format_instruction"]
