"""Generate the Verilog package of the ISA and one architecture config.

:func:`generate_verilog` is a pure function of the loaded :class:`Isa` and an
:class:`ArchConfig`.  The default config's output is committed as
``rtl/generated/tinynpu_isa.vh`` (a test checks it is not stale); the
co-simulation generates the chosen config's copy into its build directory.
The header declares the package ``tinynpu_isa_pkg`` behind an include guard:
every RTL file includes it before its module and imports the package in the
module header, so port widths, the number of queued units, row widths and
every size of the config come from here, and the dispatcher's
instruction-to-unit table (:func:`tnpu_unit_of`) comes from each
instruction's ``unit`` in the YAML.
"""

from __future__ import annotations

from pathlib import Path

from tinynpu.intmath import ceil_div
from tinynpu.isa.alu_shapes import ALU_UNIT, ShapeError, alu_ops, alu_shapes
from tinynpu.isa.config import ArchConfig
from tinynpu.isa.gen_verilog_checks import checks_lines
from tinynpu.isa.spec import Isa

RTL_HEADER_PATH = Path(__file__).resolve().parent.parent / "rtl" / "generated" / "tinynpu_isa.vh"
PACKAGE = "tinynpu_isa_pkg"


def _ceil_log2(value: int) -> int:
    """Bits needed to index ``value`` items (at least 1)."""
    return max(1, (value - 1).bit_length())


def _bits_for(value: int) -> int:
    """Bits needed to hold the unsigned number ``value`` (at least 1)."""
    return max(1, value.bit_length())


def _ident(text: str) -> str:
    return text.upper()


def _common_fixed(isa: Isa, name: str) -> tuple[int, int]:
    """(lsb, width) of a fixed field (opcode, funct) that sits at one position in every instruction."""
    spots = {(f.lsb, f.msb - f.lsb + 1) for i in isa.instructions for f in i.fixed if f.name == name}
    if len(spots) != 1:
        raise ValueError(f"the RTL decodes `{name}` at one position, but the ISA places it at {sorted(spots)}")
    return spots.pop()


def _common_field(isa: Isa, name: str) -> tuple[int, int]:
    """(lsb, width) of an operand field (wait, signal) that sits at one position wherever it appears."""
    spots = {(f.lsb, f.width) for i in isa.instructions for f in i.fields if f.name == name}
    if len(spots) != 1:
        raise ValueError(f"the RTL decodes `{name}` at one position, but the ISA places it at {sorted(spots)}")
    return spots.pop()


def _max_occupancy(isa: Isa, cfg: ArchConfig) -> int:
    """The longest a unit can stay busy with one instruction (sizes the occupancy counters)."""
    def field_hi(mnemonic: str, name: str) -> int:
        return isa.by_mnemonic[mnemonic].field_map[name].hi

    rows = field_hi("load", "rows")
    widest_row = cfg.tile * max(cfg.elem_bytes(s.config_key) for s in isa.scopes)
    dma = rows * ceil_div(widest_row, cfg.dram_bytes_per_cycle)
    tmm = field_hi("tmm", "m") * field_hi("tmm", "n") * field_hi("tmm", "k") * cfg.tmm_interval_cycles
    # the ALU's longest: a whole-scratchpad row walk, a reduction of T rows of the most segments, a lookup's
    # table and rows, or the sequential units' rows at their cycles per row
    segments = max((f.hi for i in isa.instructions if i.unit == ALU_UNIT for f in i.fields if f.name == "n"),
                   default=1)
    per_row = max((t.cycles_per_row or 1 for t in isa.timing_classes), default=1)
    entries = max((i.count for i in alu_shapes(isa) if i.kind == "table"), default=0)
    steps = max(rows, cfg.tile * segments, rows + ceil_div(entries, cfg.tile))
    alu = max(ceil_div(steps, cfg.alu_rows_per_cycle), rows * per_row) + cfg.alu_latency_cycles
    return max(dma, tmm, alu)


#: Tile edges the RTL is built and co-simulated for (the MAC array, lanes, row widths and banks follow T).
RTL_TILES = (8, 16, 32)


def rtl_unsupported(cfg: ArchConfig) -> list[str]:
    """What of ``cfg`` the RTL cannot implement (empty when it can), each naming the key and the range."""
    problems = []
    if not cfg.is_integer:
        problems.append(f"dtypes {cfg.input_dtype} -> {cfg.acc_dtype}: the RTL is integer only (int8 -> int32); "
                        "float configs run on the simulator")
    if cfg.tile not in RTL_TILES:
        problems.append(f"tile {cfg.tile}: the RTL is built for T in {{{', '.join(map(str, RTL_TILES))}}}")
    if cfg.tmm_interval_cycles < cfg.tile:
        problems.append(f"tensor.tmm_interval_cycles {cfg.tmm_interval_cycles}: a {cfg.tile} x {cfg.tile} MAC "
                        f"array does {cfg.tile ** 2} multiply-adds per cycle, so a step of {cfg.tile ** 3} takes at "
                        f"least T = {cfg.tile} cycles; a shorter interval is the timing of a larger array, which "
                        "only the simulator models")
    if cfg.alu_rows_per_cycle != 1:
        problems.append(f"alu.rows_per_cycle {cfg.alu_rows_per_cycle}: the RTL's ALU has one row of {cfg.tile} "
                        "lanes (rows_per_cycle 1); a wider ALU only the simulator models")
    if cfg.dram_latency_cycles < 3:
        problems.append(f"dram.latency_cycles {cfg.dram_latency_cycles}: the RTL's DRAM interface is built for "
                        "latencies of 3 cycles and more")
    return problems


def generate_verilog(isa: Isa, cfg: ArchConfig) -> str:
    """The header text: opcodes, functs, field positions, unit/scope ids, config sizes, the unit table.

    Raises:
        ValueError: the config is one the RTL cannot implement (see :func:`rtl_unsupported`).
    """
    problems = rtl_unsupported(cfg)
    if problems:
        raise ValueError(f"config {cfg.name!r} cannot be built as RTL: " + "; ".join(problems) + ".")
    queued = [u.id for u in isa.queued_units]
    if queued != list(range(len(queued))):
        raise ValueError(f"the RTL needs the queued units numbered 0..{len(queued) - 1}, not {queued}")
    unit_bits = _ceil_log2(len(isa.units))
    out: list[str] = [
        f"// Generated by isa/gen_verilog.py from {isa.source.name} (ISA {isa.name} v{isa.version}) and",
        f"// config {cfg.name!r}.  Do not edit: run `python -m tinynpu.isa.gen_verilog` "
        "(or `tinynpu isa verilog --config NAME`) instead.",
        f"// ISA digest {isa.digest}",
        f"// config digest {cfg.digest}",
        "// Include before a module and import the package in its header:",
        f"//   `include \"tinynpu_isa.vh\"  module m import {PACKAGE}::*; #(...) (...);",
        "`ifndef TINYNPU_ISA_VH",
        "`define TINYNPU_ISA_VH",
        "// The package is named for what it holds, not for this file (one header, several configs).",
        "/* verilator lint_off DECLFILENAME */",
        f"package {PACKAGE};",
        "// Every module imports the whole package but uses a subset of it.",
        "/* verilator lint_off UNUSEDPARAM */",
        "",
        f"localparam int TNPU_WORD_BITS = {isa.word_bits};",
    ]
    for name, (lsb, width) in [(n, _common_fixed(isa, n)) for n in ("opcode", "funct")] + [
            (n, _common_field(isa, n)) for n in ("wait", "signal")]:
        out.append(f"localparam int TNPU_{_ident(name)}_LSB = {lsb};")
        out.append(f"localparam int TNPU_{_ident(name)}_W = {width};")
    out += ["", "// Functional units (id = bit in the wait/signal masks; queued units are 0..N-1)."]
    for unit in isa.units:
        out.append(f"localparam int TNPU_UNIT_{_ident(unit.name)} = {unit.id};")
    out.append(f"localparam int TNPU_NUM_QUEUED_UNITS = {len(queued)};")
    out.append(f"localparam int TNPU_UNIT_BITS = {unit_bits};")
    out += ["", "// Scratchpad scopes (value of the `scope` field)."]
    for scope in isa.scopes:
        out.append(f"localparam int TNPU_SCOPE_{_ident(scope.name)} = {scope.id};")
    out += ["", "// Instructions: opcode/funct values and operand field positions."]
    word_hex = isa.word_bits // 4
    for instr in isa.instructions:
        name = _ident(instr.mnemonic)
        out.append(f"// {instr.mnemonic} ({instr.unit}, timing {instr.timing}): {instr.summary}")
        out.append(f"localparam logic [{isa.word_bits - 1}:0] TNPU_{name}_MASK = "
                   f"{isa.word_bits}'h{instr.mask:0{word_hex}x};")
        out.append(f"localparam logic [{isa.word_bits - 1}:0] TNPU_{name}_MATCH = "
                   f"{isa.word_bits}'h{instr.match:0{word_hex}x};")
        for fixed in instr.fixed:
            if fixed.name in ("opcode", "funct"):
                out.append(f"localparam int TNPU_{name}_{_ident(fixed.name)} = {fixed.value};")
        for field in instr.fields:
            fname = f"TNPU_{name}_{_ident(field.name)}"
            out.append(f"localparam int {fname}_LSB = {field.lsb};")
            out.append(f"localparam int {fname}_W = {field.width};")
            if field.max is not None and field.max < (1 << field.width) - 1:  # a narrower range than the bits
                out.append(f"localparam int {fname}_MAX = {field.max};")
    out += _alu_shapes(isa)
    out += _config_params(isa, cfg)
    out += ["", "/* verilator lint_on UNUSEDPARAM */", ""]
    out += _unit_table(isa, unit_bits)
    out += checks_lines(isa, cfg)
    out += ["", "endpackage", "/* verilator lint_on DECLFILENAME */", "`endif  // TINYNPU_ISA_VH"]
    return "\n".join(out) + "\n"


def _alu_shapes(isa: Isa) -> list[str]:
    """The ALU's source shapes per funct (:mod:`tinynpu.isa.alu_shapes`), for the ALU unit's walk of its source.

    Raises:
        ValueError: an ALU instruction the RTL cannot decode: its operands at other positions than the
            other ALU instructions', or a source shape the RTL does not implement.
    """
    alu = [i for i in isa.instructions if i.unit == ALU_UNIT]
    for name in ("dst", "src", "imm", "shift", "rows", "n", "cols", "base", "wait", "signal"):
        for width in {f.width for i in alu for f in i.fields if f.name == name}:  # vshr's shift is 5 bits, 6 elsewhere
            spots = {(f.lsb, f.msb) for i in alu for f in i.fields if f.name == name and f.width == width}
            if len(spots) > 1:
                raise ValueError(f"the RTL's ALU decodes a {width}-bit `{name}` at one position, but the ALU "
                                 f"instructions place it at bits {sorted(spots)}")
    try:
        shapes = alu_shapes(isa)
    except ShapeError as exc:
        raise ValueError(f"the RTL's ALU cannot run {exc}") from None
    first, op_w, ops = alu_ops(isa)
    n = 1 << op_w

    def mask(kind: str) -> int:
        return sum(1 << s.op for s in shapes if s.kind == kind)

    entries = {s.count for s in shapes if s.kind == "table"}
    if len(entries) > 1:
        raise ValueError(f"the RTL's ALU has one lookup register, but the ALU's tables have {sorted(entries)} entries")
    opcode_lsb, opcode_w = _common_fixed(isa, "opcode")
    funct_lsb, funct_w = _common_fixed(isa, "funct")
    out = ["", "// The vector ALU's operation numbers (isa/alu_shapes.py alu_ops): the funct, above it the opcode's",
           "// offset from the ALU's first opcode when the ALU has more than one.  Its units compare them.",
           f"localparam int TNPU_ALU_OP_W = {op_w};"]
    out += [f"localparam int TNPU_{_ident(m)}_ALU_OP = {op};" for m, op in ops.items()]
    spread = op_w - funct_w
    high = f"{spread}'(word[{opcode_lsb} +: {opcode_w}] - {opcode_w}'d{first}), " if spread else ""
    out += ["/* verilator lint_off UNUSEDSIGNAL */  // the opcode and funct bits of a whole word",
            f"function automatic logic [{op_w - 1}:0] tnpu_alu_op(input logic [{isa.word_bits - 1}:0] word);",
            f"  return {{{high}word[{funct_lsb} +: {funct_w}]}};", "endfunction",
            "/* verilator lint_on UNUSEDSIGNAL */"]
    out += ["", "// The vector ALU's source shapes by operation (isa/alu_shapes.py: each ALU instruction's accesses",
           "// and checks), for the ALU unit's walk of the source rows (the dispatcher's range checks are the",
           "// YAML's own, in tnpu_checks): `walk` (none of these) reads `rows` source rows advancing with dst;",
           "// `fixed` reads the same rows from src for every dst row; `block` reads row src + i % T for dst",
           "// row i; `segments` reads rows src + i + j*T, j < n, for dst row i; `table` reads",
           "// ceil(TNPU_ALU_LUT_ENTRIES / T) rows into the lookup register first.",
           f"localparam logic [{n - 1}:0] TNPU_ALU_SRC_FIXED = {n}'b{mask('fixed'):0{n}b};",
           f"localparam logic [{n - 1}:0] TNPU_ALU_SRC_BLOCK = {n}'b{mask('block'):0{n}b};",
           f"localparam logic [{n - 1}:0] TNPU_ALU_SRC_SEGMENTS = {n}'b{mask('segments'):0{n}b};",
           f"localparam logic [{n - 1}:0] TNPU_ALU_SRC_TABLE = {n}'b{mask('table'):0{n}b};"]
    if entries:
        out.append(f"localparam int TNPU_ALU_LUT_ENTRIES = {entries.pop()};  // entries of the lookup register")
    for cls in isa.timing_classes:  # the sequential units' fixed cycles per row (vrecip, vrsqrt)
        if cls.cycles_per_row is not None:
            out.append(f"localparam int TNPU_{_ident(cls.name)}_CYCLES_PER_ROW = {cls.cycles_per_row};"
                       f"  // timing class {cls.name}")
    return out


def _config_params(isa: Isa, cfg: ArchConfig) -> list[str]:
    """The config's sizes and timing, and the row and port widths that follow from them."""
    in_bits = 8 * cfg.elem_bytes("a_reg")
    acc_bits = 8 * cfg.elem_bytes("acc")
    row_bytes_max = cfg.tile * max(cfg.elem_bytes(s.config_key) for s in isa.scopes)
    params: list[tuple[str, int, str]] = [
        ("TILE", cfg.tile, "tile edge T: a T x T MAC array, T elements per scratchpad row"),
        ("TILE_BITS", _ceil_log2(cfg.tile), "bits of a row's index within its tile"),
        ("INPUT_BITS", in_bits, "bits of an a_reg/b_reg element"),
        ("ACC_BITS", acc_bits, "bits of an accumulator element"),
        ("IN_ROW_WIDTH", cfg.tile * in_bits, "bits of an a_reg/b_reg row"),
        ("ACC_ROW_WIDTH", cfg.tile * acc_bits, "bits of an accumulator row (the DRAM data ports)"),
        ("ROW_BYTES_MAX", row_bytes_max, "bytes of the widest row a DMA request carries"),
        ("ROW_BYTES_BITS", _bits_for(row_bytes_max), "bits of a DMA request's byte count"),
    ]
    for scope in isa.scopes:
        key = _ident(scope.config_key)
        rows = cfg.rows(scope.config_key)
        params.append((f"{key}_ROWS", rows, f"rows of {scope.config_key}"))
        params.append((f"{key}_ADDR_BITS", _ceil_log2(rows), f"bits of a row address in {scope.config_key}"))
        params.append((f"{key}_ELEM_BYTES", cfg.elem_bytes(scope.config_key),
                       f"bytes of an element of {scope.config_key}"))
    params += [
        ("DRAM_BYTES", cfg.dram_bytes, "DRAM size"),
        ("DRAM_BYTES_PER_CYCLE", cfg.dram_bytes_per_cycle, "DRAM port bandwidth"),
        ("DRAM_LATENCY", cfg.dram_latency_cycles, "DRAM latency in cycles"),
        ("TMM_INTERVAL", cfg.tmm_interval_cycles, "cycles between tmm steps"),
        ("TMM_LATENCY", cfg.tmm_latency_cycles, "tmm completion delay after its last step"),
        ("ALU_ROWS_PER_CYCLE", cfg.alu_rows_per_cycle, "accumulator rows the ALU processes per cycle"),
        ("ALU_LATENCY", cfg.alu_latency_cycles, "ALU latency in cycles"),
        ("QUEUE_DEPTH", cfg.queue_depth, "instructions waiting per unit queue"),
        ("TOKEN_MAX", cfg.token_max_count, "tokens a channel may hold"),
        ("TOKEN_BITS", _bits_for(cfg.token_max_count), "bits of a token count"),
        ("CYCLE_BITS", _bits_for(cfg.max_cycles), "bits of the cycle counter (limits.max_cycles)"),
        ("OCC_BITS", _bits_for(_max_occupancy(isa, cfg)), "bits of the longest occupancy of any instruction"),
    ]
    out = ["", f"// Architecture config {cfg.name!r} and the widths that follow from it."]
    width = max(len(name) for name, _, _ in params)
    digits = max(len(str(value)) for _, value, _ in params)
    for name, value, what in params:
        out.append(f"localparam int TNPU_{name:<{width}} = {f'{value};':<{digits + 1}}  // {what}")
    return out


def _unit_table(isa: Isa, unit_bits: int) -> list[str]:
    """The dispatcher's instruction-to-unit table, one line per instruction of the YAML."""
    out = [
        "// The unit each instruction word is dispatched to, from each instruction's `unit`",
        "// in the YAML; valid is low for a word that decodes as no instruction.",
        f"function automatic logic [{unit_bits}:0] tnpu_unit_of(input logic [{isa.word_bits - 1}:0] word);",
    ]
    for instr in isa.instructions:
        name = _ident(instr.mnemonic)
        out.append(f"  if ((word & TNPU_{name}_MASK) == TNPU_{name}_MATCH) "
                   f"return {{1'b1, {unit_bits}'(TNPU_UNIT_{_ident(instr.unit)})}};")
    out += ["  return '0;", "endfunction"]
    return out


def main() -> None:
    """Regenerate the committed header from the default ISA and config."""
    from tinynpu.isa import load_config, load_isa

    isa = load_isa()
    RTL_HEADER_PATH.write_text(generate_verilog(isa, load_config("default", isa)), encoding="utf-8")
    print(RTL_HEADER_PATH)


if __name__ == "__main__":
    main()
