"""Program -> assembly source that reassembles to the identical binary.

Options equal to their default are left out (the assembler fills them back
in), so the output reads like hand-written code; DRAM addresses inside a
manifest tensor are written relative to the tensor's name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tinynpu.assembler.image import HEADER_BYTES, Program, Tensor
from tinynpu.errors import AsmError, SpecError, TinyNpuError
from tinynpu.isa import ArchConfig, Field, Instruction, Isa, build_hash, load_config
from tinynpu.isa.syntax import Operand, Syntax, syntax_table


def _default_tile(isa: Isa) -> int:
    # The tile edge lives in the config, not the ISA; without a config, the
    # built-in default config's tile is the one every shipped config uses.
    return load_config("default", isa).tile


Spans = Sequence[tuple[int, int, str]]  # (first byte, end byte, name) of each manifest tensor


def _spans(tensors: Sequence[Tensor]) -> list[tuple[int, int, str]]:
    # Tensor.nbytes goes through numpy; work it out once per program, not once per address.
    return [(t.addr, t.addr + t.nbytes, t.name) for t in tensors]


def _dram_text(addr: int, spans: Spans) -> str:
    for start, end, name in spans:
        if start <= addr < end:
            off = addr - start
            return name if off == 0 else f"{name} + 0x{off:x}"
    return f"0x{addr:x}"


def _units_text(isa: Isa, mask: int) -> str:
    names = [u.name for u in sorted(isa.units, key=lambda u: u.id) if mask >> u.id & 1]
    return "|".join(names) if names else "none"


def _value_text(isa: Isa, fld: Field, value: int, tile: int, spans: Spans) -> str:
    if fld.kind == "units":
        return _units_text(isa, value)
    if fld.kind == "dram_addr":
        return _dram_text(value, spans)
    if fld.kind == "sp_tile":
        return str(value * tile)
    return str(value)


def _operand_text(isa: Isa, op: Operand, fields: Mapping[str, int], tile: int, spans: Spans) -> str:
    if op.address is not None:
        if op.address.scope is not None:
            scope = op.address.scope
        else:
            assert op.scope_field is not None
            sid = fields[op.scope_field.name]
            if sid not in isa.scope_by_id:
                raise AsmError(f"{op.scope_field.name}={sid} names no scratchpad.")
            scope = isa.scope_by_id[sid].name
        return f"{scope}[{_value_text(isa, op.address, fields[op.address.name], tile, spans)}]"
    text = _value_text(isa, op.value_field, fields[op.value_field.name], tile, spans)
    return f"[{text}]" if op.bracket else text


def _format(isa: Isa, syntax: Syntax, fields: Mapping[str, int], tile: int, spans: Spans = ()) -> str:
    parts = [_operand_text(isa, op, fields, tile, spans) for op in syntax.operands]
    for fld in syntax.options:
        value = fields[fld.name]
        if fld.default_at(tile) is None or value != fld.default_at(tile):
            parts.append(f"{fld.name}={_value_text(isa, fld, value, tile, spans)}")
    mnemonic = syntax.instruction.mnemonic
    return f"{mnemonic} {', '.join(parts)}" if parts else mnemonic


def format_instruction(isa: Isa, instr: Instruction, fields: Mapping[str, int], *,
                       cfg: ArchConfig | None = None) -> str:
    """One instruction in assembly syntax, e.g. ``tmm acc[0], a[0], b[0]``.

    Args:
        isa: The ISA the instruction belongs to.
        instr: The decoded instruction.
        fields: Its field values as :meth:`Isa.decode` returns them (tiles as tile indices).
        cfg: The config, for the tile edge of ``sp_tile`` operands (default: the built-in default config).
    """
    syntax = syntax_table(isa)[instr.mnemonic]
    return _format(isa, syntax, fields, cfg.tile if cfg is not None else _default_tile(isa))


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
    # Looked up once here: syntax_table's cache hashes the whole Isa on every call.
    table = syntax_table(isa)
    spans = _spans(program.tensors)
    # Generated programs repeat many words (every tmm of a tile loop): format each distinct word once.
    seen: dict[int, str] = {}
    for index, word in enumerate(program.words):
        text = seen.get(word)
        if text is None:
            try:
                instr, fields = isa.decode(word)
            except SpecError as exc:
                offset = HEADER_BYTES + index * isa.word_bytes
                raise AsmError(f"instruction {index} (byte {offset}): {exc.message}") from None
            text = seen[word] = _format(isa, table[instr.mnemonic], fields, cfg.tile, spans)
        note = " ".join(comments.get(index, "").split())  # one line, or it would not reassemble
        lines.append(f"    {text}" + (f"  ; {note}" if note else ""))
    return "\n".join(lines) + "\n"


__all__ = ["disassemble", "format_instruction"]
