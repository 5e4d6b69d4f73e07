"""Program -> assembly source that reassembles to the identical binary.

Options equal to their default are left out (the assembler fills them back
in), so the output reads like hand-written code; DRAM addresses inside a
manifest tensor are written relative to the tensor's name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tinynpu.assembler.image import HEADER_BYTES, Program, Tensor
from tinynpu.assembler.syntax import Operand, syntax_table
from tinynpu.errors import AsmError, SpecError, TinyNpuError
from tinynpu.isa import ArchConfig, Field, Instruction, Isa, build_hash, load_config


def _default_tile(isa: Isa) -> int:
    # The tile edge lives in the config, not the ISA; without a config, the
    # built-in default config's tile is the one every shipped config uses.
    return load_config("default", isa).tile


def _dram_text(addr: int, tensors: Sequence[Tensor]) -> str:
    for t in tensors:
        if t.addr <= addr < t.addr + t.nbytes:
            off = addr - t.addr
            return t.name if off == 0 else f"{t.name} + 0x{off:x}"
    return f"0x{addr:x}"


def _units_text(isa: Isa, mask: int) -> str:
    names = [u.name for u in sorted(isa.units, key=lambda u: u.id) if mask >> u.id & 1]
    return "|".join(names) if names else "none"


def _value_text(isa: Isa, fld: Field, value: int, tile: int, tensors: Sequence[Tensor]) -> str:
    if fld.kind == "units":
        return _units_text(isa, value)
    if fld.kind == "dram_addr":
        return _dram_text(value, tensors)
    if fld.kind == "sp_tile":
        return str(value * tile)
    return str(value)


def _operand_text(isa: Isa, op: Operand, fields: Mapping[str, int], tile: int,
                  tensors: Sequence[Tensor]) -> str:
    if op.address is not None:
        if op.address.scope is not None:
            scope = op.address.scope
        else:
            assert op.scope_field is not None
            sid = fields[op.scope_field.name]
            if sid not in isa.scope_by_id:
                raise AsmError(f"{op.scope_field.name}={sid} names no scratchpad.")
            scope = isa.scope_by_id[sid].name
        return f"{scope}[{_value_text(isa, op.address, fields[op.address.name], tile, tensors)}]"
    text = _value_text(isa, op.value_field, fields[op.value_field.name], tile, tensors)
    return f"[{text}]" if op.bracket else text


def _format(isa: Isa, instr: Instruction, fields: Mapping[str, int], tile: int,
            tensors: Sequence[Tensor] = ()) -> str:
    syntax = syntax_table(isa)[instr.mnemonic]
    parts = [_operand_text(isa, op, fields, tile, tensors) for op in syntax.operands]
    for fld in syntax.options:
        value = fields[fld.name]
        if fld.default is None or value != fld.default:
            parts.append(f"{fld.name}={_value_text(isa, fld, value, tile, tensors)}")
    return f"{instr.mnemonic} {', '.join(parts)}" if parts else instr.mnemonic


def format_instruction(isa: Isa, instr: Instruction, fields: Mapping[str, int], *,
                       cfg: ArchConfig | None = None) -> str:
    """One instruction in assembly syntax, e.g. ``tmm acc[0], a[0], b[0]``.

    Args:
        isa: The ISA the instruction belongs to.
        instr: The decoded instruction.
        fields: Its field values as :meth:`Isa.decode` returns them (tiles as tile indices).
        cfg: The config, for the tile edge of ``sp_tile`` operands (default: the built-in default config).
    """
    return _format(isa, instr, fields, cfg.tile if cfg is not None else _default_tile(isa))


def _resolve_cfg(program: Program, isa: Isa) -> ArchConfig:
    try:
        cfg = load_config(program.config_name, isa)
    except TinyNpuError:
        cfg = None
    if cfg is None or build_hash(isa, cfg) != program.build_hash:
        raise AsmError(f"the program was built for config {program.config_name!r} (hash "
                       f"{program.build_hash.hex()}), which is not a built-in config of this ISA; "
                       "pass the config it was built for.")
    return cfg


def disassemble(program: Program, isa: Isa, *, comments: Mapping[int, str] | None = None,
                cfg: ArchConfig | None = None) -> str:
    """The full source of ``program``: ``.config``, ``.tensor`` lines, one instruction per line.

    Args:
        program: The program image.
        isa: Its ISA.
        comments: Optional ``; comment`` text to append after instruction ``i``.
        cfg: Its config; if omitted, the built-in config named in the image (its hash must match).

    Raises:
        AsmError: a word that decodes to no instruction (naming its index and byte offset),
            or an image whose config cannot be found.
    """
    cfg = cfg or _resolve_cfg(program, isa)
    comments = comments or {}
    lines = [f"; tinynpu program: {len(program.words)} instructions, ISA {isa.name} v{isa.version}",
             f".config {program.config_name}"]
    for t in program.tensors:
        shape = ", ".join(str(d) for d in t.shape)
        lines.append(f".tensor {t.name}, 0x{t.addr:x}, {t.dtype}, [{shape}], {t.role}")
    if program.tensors:
        lines.append("")
    for index, word in enumerate(program.words):
        try:
            instr, fields = isa.decode(word)
        except SpecError as exc:
            offset = HEADER_BYTES + index * isa.word_bytes
            raise AsmError(f"instruction {index} (byte {offset}): {exc.message}") from None
        text = _format(isa, instr, fields, cfg.tile, program.tensors)
        note = " ".join(comments.get(index, "").split())  # one line, or it would not reassemble
        lines.append(f"    {text}" + (f"  ; {note}" if note else ""))
    return "\n".join(lines) + "\n"


__all__ = ["disassemble", "format_instruction"]
