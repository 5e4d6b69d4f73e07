"""Area of the RTL for a config: Yosys for the logic, an analytical model for the scratchpads.

* **Logic** (dispatcher, queues, token channels, DMA engines, tensor unit,
  ALU, requantizer): ``tinynpu_top`` synthesized by Yosys (``synth``, generic
  gates through ABC) with the MAC array, the scratchpads and the instruction
  memory as black boxes, per module.
* **MAC array**: ``tinynpu_mac_array`` synthesized on its own for the
  config's tile edge T.  Arrays above :data:`MAX_SYNTH_TILE` take far more
  than a few minutes here; their area is extrapolated from the arrays
  synthesized at :data:`FIT_TILES` by a quadratic fit in T (T^2 multipliers
  and adders, T-wide edges), and the output says so.
* **Scratchpads and instruction memory** (a real chip uses SRAM macros, not
  flip-flops): bits x a 45 nm 6T bit cell / an array efficiency
  (:data:`SRAM_BITCELL_UM2`, :data:`SRAM_ARRAY_EFFICIENCY`), 6 transistors a bit.

Gates become transistors and area through :data:`GATES`: each Yosys gate as
the NanGate FreePDK45 Open Cell Library X1 cell (or cells) that implements it.
Everything synthesized is cached under ``$TINYNPU_CACHE/synth`` by a hash of
what the synthesis reads (the Verilog sources, the definitions of the generated
header they use: :func:`header_inputs`) and this model, so a sweep never
synthesizes the same thing twice, and neither a config's name nor an ISA
change or a config size the synthesized modules do not read re-synthesizes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.errors import TinyNpuError, UsageError
from tinynpu.isa import ArchConfig
from tinynpu.isa.config import BUFFERS_PER_SCOPE, TILES
from tinynpu.progress import announce
from tinynpu.rtl.header_deps import header_inputs
from tinynpu.rtl.runner import RTL_DIR, cache_root
from tinynpu.rtl.transformer_area import transformer_share

#: Bumped whenever the flow or a figure below changes, so cached results are recomputed.
MODEL_VERSION = 1

#: Intel 45 nm high-k/metal-gate 6T SRAM bit cell, 0.346 um^2 (K. Mistry et al., "A 45nm logic technology
#: with high-k + metal gate transistors, strained silicon, 9 Cu interconnect layers, 193nm dry patterning,
#: and 100% Pb-free packaging", IEDM 2007).
SRAM_BITCELL_UM2 = 0.346
#: Share of a macro's area that is bit cells (the rest: decoders, sense amplifiers, drivers).  An
#: assumption for macros of 8-64 KiB, not a measured figure; docs/area.md says how the result scales with it.
SRAM_ARRAY_EFFICIENCY = 0.6
SRAM_TRANSISTORS_PER_BIT = 6

#: Largest MAC array synthesized directly; larger ones are extrapolated.
MAX_SYNTH_TILE = 32
#: The arrays the extrapolation is fitted to: every edge the RTL builds (8x8 and 16x16 take seconds to a minute
#: and a half of Yosys here, 32x32 several minutes, once: it is cached).  A fit through 8 and 16 alone predicted
#: 1.14 mm^2 for the 32x32 array, which synthesizes to 0.906 (its area per MAC is 18% below the 16x16's), so the
#: largest synthesized array is in the fit.
FIT_TILES = (8, 16, 32)

#: Yosys gate -> (area in um^2, transistors) of the NanGate FreePDK45 X1 cell(s) that implement it:
#: INV 0.532, NAND2/NOR2 0.798, AND2/OR2/AOI21/OAI21 1.064, AOI22/OAI22 1.330, XOR2/XNOR2 1.596,
#: MUX2 1.862, DFF 4.522, DFFR (async reset) 5.320, DFFRS 6.384.
_INV, _NAND2, _AND2, _AOI22, _XOR2, _MUX2 = (0.532, 2), (0.798, 4), (1.064, 6), (1.330, 8), (1.596, 12), (1.862, 12)
GATES: dict[str, tuple[float, int]] = {
    "$_NOT_": _INV, "$_BUF_": (2 * _INV[0], 2 * _INV[1]),
    "$_NAND_": _NAND2, "$_NOR_": _NAND2, "$_AND_": _AND2, "$_OR_": _AND2,
    "$_ANDNOT_": (_INV[0] + _NAND2[0], _INV[1] + _NAND2[1]),  # NOR2 with one input inverted
    "$_ORNOT_": (_INV[0] + _NAND2[0], _INV[1] + _NAND2[1]),   # NAND2 with one input inverted
    "$_XOR_": _XOR2, "$_XNOR_": _XOR2, "$_MUX_": _MUX2, "$_NMUX_": (_MUX2[0] + _INV[0], _MUX2[1] + _INV[1]),
    "$_AOI3_": _AND2, "$_OAI3_": _AND2, "$_AOI4_": _AOI22, "$_OAI4_": _AOI22,
}
_DFF, _DFFR, _DFFRS, _LATCH = (4.522, 24), (5.320, 28), (6.384, 32), (2.660, 16)


class SynthError(TinyNpuError):
    """Synthesis could not run or failed."""


def gate_cost(cell: str) -> tuple[float, int]:
    """(area um^2, transistors) of one Yosys gate-level cell.

    Raises:
        SynthError: a cell type the model has no figure for.
    """
    if cell in GATES:
        return GATES[cell]
    m = re.fullmatch(r"\$_(S?DFF|DFFSR|ALDFF|DLATCH)(C?E?)_([NP01]+)_", cell)
    if m is None:
        raise SynthError(f"the area model has no figure for the Yosys cell {cell!r}; "
                         "add it to tinynpu.rtl.synth.GATES.")
    kind, enable, pol = m.groups()
    if kind == "DLATCH":
        area, tr = _LATCH
    elif kind == "DFFSR":
        area, tr = _DFFRS
    elif kind == "DFF" and len(pol) >= 3:  # clock, async reset polarity, reset value
        area, tr = _DFFR
    else:
        area, tr = _DFF
    if kind == "SDFF":  # synchronous reset: a gate in front of D
        area, tr = area + _AND2[0], tr + _AND2[1]
    if enable:  # clock enable: a mux in front of D
        area, tr = area + _MUX2[0], tr + _MUX2[1]
    return area, tr


# ---- records --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModuleArea:
    """One row of the report: a module (all its instances) or a memory."""

    name: str
    instances: int
    cells: int          # gate-level cells (0 for memories)
    transistors: int
    area_um2: float
    how: str            # "synthesized", "extrapolated" or "SRAM model"
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "instances": self.instances, "cells": self.cells, "transistors": self.transistors,
                "area_um2": self.area_um2, "how": self.how, "note": self.note}


@dataclass(frozen=True)
class SynthReport:
    """Area of one config."""

    config: str
    tile: int
    modules: tuple[ModuleArea, ...]
    seconds: float
    synthesized: tuple[str, ...]  # what Yosys ran for this report (empty: everything came from the cache)

    @property
    def cells(self) -> int:
        return sum(m.cells for m in self.modules)

    @property
    def transistors(self) -> int:
        return sum(m.transistors for m in self.modules)

    @property
    def area_um2(self) -> float:
        return sum(m.area_um2 for m in self.modules)

    @property
    def extrapolated(self) -> bool:
        return any(m.how == "extrapolated" for m in self.modules)

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config, "tile": self.tile, "modules": [m.to_json() for m in self.modules],
            "total": {"cells": self.cells, "transistors": self.transistors, "area_um2": self.area_um2,
                      "area_mm2": self.area_um2 / 1e6},
            "transformer_units": transformer_share(self.modules).to_json(),
            "extrapolated": self.extrapolated, "synthesized": list(self.synthesized), "seconds": self.seconds,
            "model": {"cells": "NanGate FreePDK45 Open Cell Library X1 cells per Yosys gate",
                      "sram_bitcell_um2": SRAM_BITCELL_UM2, "sram_array_efficiency": SRAM_ARRAY_EFFICIENCY,
                      "sram_transistors_per_bit": SRAM_TRANSISTORS_PER_BIT, "max_synth_tile": MAX_SYNTH_TILE,
                      "fit_tiles": list(FIT_TILES)},
        }


# ---- Yosys ------------------------------------------------------------------------------------------

BLACK_BOXES = ("tinynpu_spad_in", "tinynpu_spad_acc", "tinynpu_imem", "tinynpu_mac_array")


def yosys_missing_reason() -> str | None:
    """Why Yosys cannot run here, or None."""
    for tool in ("yosys", "yosys-abc"):
        if shutil.which(tool) is None:
            return (f"Yosys is not installed ({tool} not on PATH); install it with "
                    "apt-get install yosys berkeley-abc (scripts/bootstrap.sh does)")
    return None


def _module_file(name: str) -> Path:
    return RTL_DIR / f"{name}.sv"


def _returns_as_assignments(match: re.Match[str]) -> str:
    """A function body of ``if (c) return x;`` lines and a last ``return y;`` as one assignment (?: chain)."""
    head, name, body = match.group(1), match.group(2), match.group(3)
    cases = re.findall(r"^\s*if \((.*)\) return (.*);\s*$", body, re.M)
    last = re.findall(r"^\s*return (.*);\s*$", body, re.M)
    if len(cases) + len(last) != len(re.findall(r"\breturn\b", body)) or len(last) != 1:
        raise SynthError(f"function {name}: its returns are not a chain of `if (c) return x;` that Yosys 0.23 "
                         "can be given as one assignment.")
    chain = "".join(f"({c}) ? {v} :\n    " for c, v in cases) + last[0]
    return f"{head}\n  {name} = {chain};\nendfunction"


def yosys_text(text: str) -> str:
    """SystemVerilog as Yosys 0.23 reads it.

    0.23 has no packages imported in a module header, no ``return`` and no ``int'(x)`` cast, so: the
    package wrapper of the generated header is dropped (its localparams and functions become global, which
    Yosys reads in SystemVerilog mode) with the imports, each function's returns become one assignment to
    the function's name, and ``int'(x)`` becomes ``$signed(32'(x))``.
    """
    text = re.sub(r"^(package|endpackage)\b.*$", "", text, flags=re.M)
    text = re.sub(r"\s+import \w+::\*;", "", text)
    text = re.sub(r"(function automatic [^;]*?(\w+)\s*\([^;]*\);)\n(.*?)\n\s*endfunction",
                  _returns_as_assignments, text, flags=re.S)
    out, i = [], 0
    while (j := text.find("int'(", i)) >= 0:
        if j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_"):
            out.append(text[i:j + 5])
            i = j + 5
            continue
        depth, k = 1, j + 5
        while depth and k < len(text):
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            k += 1
        out.append(text[i:j] + "$signed(32'(" + text[j + 5:k] + ")")
        i = k
    out.append(text[i:])
    return "".join(out)


def _yosys_source(path: Path) -> str:
    return yosys_text(path.read_text())


def _run_yosys(script: str, files: dict[str, str], what: str) -> dict[str, Any]:
    """Run a Yosys script over ``files`` (name -> text, written to a temp dir); returns ``stat -json``."""
    reason = yosys_missing_reason()
    if reason:
        raise SynthError(reason)
    with tempfile.TemporaryDirectory(prefix="tinynpu-synth-") as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text)
        (Path(tmp) / "run.ys").write_text(script + "\ntee -q -o stat.json stat -json\n")
        proc = subprocess.run(["yosys", "-q", "-l", "yosys.log", "run.ys"], cwd=tmp, capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0 or not (Path(tmp) / "stat.json").exists():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise SynthError(f"Yosys failed on {what}:\n{tail}")
        return parse_stat((Path(tmp) / "stat.json").read_text())


def parse_stat(text: str) -> dict[str, Any]:
    """``stat -json`` output as a dict with its ``modules``.

    Yosys 0.23 prints the text of the design hierarchy into the JSON of a hierarchical design (between the
    ``modules`` and ``design`` objects); only ``modules`` is needed, so the text is cut after it.
    """
    try:
        return dict(json.loads(text))
    except json.JSONDecodeError:
        end = text.find("\n   },\n")
        if end < 0:
            raise SynthError("Yosys wrote statistics that are not JSON and have no modules section.") from None
        return dict(json.loads(text[:end] + "\n   }\n}"))


def _base_name(yosys_name: str) -> str:
    """``$paramod$...\\tinynpu_queue\\DEPTH=8`` or ``\\tinynpu_top`` -> the module's source name."""
    parts = [p for p in yosys_name.split("\\") if p and not p.startswith("$") and "=" not in p]
    return parts[0] if parts else yosys_name


def _hierarchy_rows(stat: dict[str, Any], top: str) -> tuple[list[ModuleArea], dict[str, int]]:
    """Per source module: instances, gate cells, transistors, area; and the black boxes' instance counts."""
    modules = stat["modules"]
    by_base = {_base_name(name): name for name in modules}
    totals: dict[str, list[Any]] = {}  # base name -> [instances, cells, transistors, area]
    boxes: dict[str, int] = {}

    def walk(name: str, count: int) -> None:
        base = _base_name(name)
        row = totals.setdefault(base, [0, 0, 0, 0.0])
        row[0] += count
        for cell, n in modules[name]["num_cells_by_type"].items():
            if cell.startswith("$_"):
                area, tr = gate_cost(cell)
                row[1] += count * n
                row[2] += count * n * tr
                row[3] += count * n * area
            elif _base_name(cell) in BLACK_BOXES:
                boxes[_base_name(cell)] = boxes.get(_base_name(cell), 0) + count * n
            elif cell in modules:
                walk(cell, count * n)
            elif _base_name(cell) in by_base:
                walk(by_base[_base_name(cell)], count * n)
            else:
                raise SynthError(f"Yosys left the cell {cell!r} in {base} unmapped to gates.")

    walk(by_base[top], 1)
    rows = [ModuleArea(name, int(v[0]), int(v[1]), int(v[2]), float(v[3]), "synthesized")
            for name, v in totals.items()]
    return rows, boxes


# ---- cache ------------------------------------------------------------------------------------------

def synth_key(sources: Mapping[str, str], header: str) -> str:
    """Cache key of one synthesis: the sources it reads (name -> text), the header definitions they use
    (:func:`header_inputs`) and the area model."""
    h = hashlib.sha256()
    for name in sorted(sources):
        h.update(f"{name}\0{sources[name]}\0".encode())
    h.update(header_inputs(header, sources.values()).encode())
    h.update(repr((MODEL_VERSION, GATES)).encode())
    return h.hexdigest()[:16]


def _cached(kind: str, key: str, compute: Callable[[], dict[str, Any]], ran: list[str], *,
            what: str, expect: str) -> dict[str, Any]:
    path = cache_root().parent / "synth" / f"{kind}-{key}.json"
    if path.exists():
        return dict(json.loads(path.read_text()))
    announce(f"synthesizing {what} with Yosys", f"{expect} on a 2-core machine; once, then cached in {path.parent}")
    result = compute()
    ran.append(kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(result))
    tmp.replace(path)
    return result


# ---- the parts --------------------------------------------------------------------------------------

def _header(cfg: ArchConfig) -> str:
    from tinynpu.isa import load_isa
    from tinynpu.isa.gen_verilog import generate_verilog

    return generate_verilog(load_isa(), cfg)


def module_stat(module: str, cfg: ArchConfig, ran: list[str]) -> dict[str, Any]:
    """Yosys ``stat -json`` of one RTL module synthesized alone, with the ISA header generated for ``cfg``.

    Cached by the module's source and the header definitions it uses (:func:`synth_key`); ``ran``
    collects what actually went through Yosys.
    """
    header = _header(cfg)
    name = f"{module}.sv"
    sources = {name: _yosys_source(_module_file(module))}

    def compute() -> dict[str, Any]:
        return _run_yosys(f"read_verilog -sv {name}\nsynth -top {module}",
                          {**sources, "tinynpu_isa.vh": yosys_text(header)}, f"{module} at T = {cfg.tile}")
    return _cached(f"{module}-T{cfg.tile}", synth_key(sources, header), compute, ran,
                   what=f"{module} at T = {cfg.tile}", expect="seconds at T = 8, minutes at T = 32")


def _mac_array_row(cfg: ArchConfig, instances: int, ran: list[str]) -> ModuleArea:
    def measure(tile: int) -> tuple[int, int, float]:
        at_tile = dataclasses.replace(cfg, tile=tile, tmm_interval_cycles=tile)
        [row], _ = _hierarchy_rows(module_stat("tinynpu_mac_array", at_tile, ran), "tinynpu_mac_array")
        return row.cells, row.transistors, row.area_um2

    t = cfg.tile
    if t <= MAX_SYNTH_TILE:
        cells, tr, area = measure(t)
        return ModuleArea("tinynpu_mac_array", instances, instances * cells, instances * tr, instances * area,
                          "synthesized", f"{t}x{t}")
    points = np.array([measure(f) for f in FIT_TILES], dtype=float)
    # a T^2 + b T through the synthesized arrays: T^2 multipliers and adders, T-wide edges.
    basis = np.array([[f * f, f] for f in FIT_TILES], dtype=float)
    coef = np.linalg.lstsq(basis, points, rcond=None)[0]
    fit_cells, fit_tr, fit_area = (float(v) for v in np.array([t * t, t], dtype=float) @ coef)
    note = (f"{t}x{t} extrapolated from synthesized {', '.join(f'{f}x{f}' for f in FIT_TILES)} arrays "
            "(a T^2 + b T fit in the tile edge T)")
    return ModuleArea("tinynpu_mac_array", instances, round(instances * fit_cells), round(instances * fit_tr),
                      instances * fit_area, "extrapolated", note)


def with_tile(cfg: ArchConfig, tile: int) -> ArchConfig:
    """``cfg`` at tile edge ``tile``: the same scratchpad rows (so ``tile``-wide rows), one step per ``tile`` cycles.

    This is how ``t32`` relates to ``default``; it lets ``tinynpu synth --tile`` report arrays no built-in
    config has (T = 64, 128).

    Raises:
        UsageError: ``tile`` is not a supported edge, or a scratchpad of ``cfg`` cannot hold whole tiles of it.
    """
    if tile not in TILES:
        raise UsageError(f"--tile must be a power of two from {TILES[0]} to {TILES[-1]}, not {tile}.")
    for key, rows in cfg.scope_rows:
        if rows % tile or rows < BUFFERS_PER_SCOPE * tile:
            raise UsageError(f"--tile {tile}: scratchpad {key} of config {cfg.name!r} ({cfg.source}) has {rows} "
                             f"rows, not a multiple of {tile} from {BUFFERS_PER_SCOPE * tile} (whole tiles, one "
                             "per buffer).")
    if tile == cfg.tile:
        return cfg
    return dataclasses.replace(cfg, name=f"{cfg.name}-t{tile}", tile=tile,
                               tmm_interval_cycles=cfg.tmm_interval_cycles * tile // cfg.tile)


def rtl_supports(cfg: ArchConfig) -> str | None:
    """Why the RTL cannot be built for ``cfg``, or None."""
    from tinynpu.isa.gen_verilog import rtl_unsupported

    problems = rtl_unsupported(cfg)
    return f"the RTL cannot be built for config {cfg.name!r}: " + "; ".join(problems) if problems else None


def _logic_sources() -> dict[str, str]:
    """Every RTL source (the black boxes too: ``tinynpu_top`` instantiates them through their ports)."""
    return {p.name: _yosys_source(p) for p in sorted(RTL_DIR.glob("*.sv"))}


def logic_key(cfg: ArchConfig) -> str:
    """What :func:`_logic_stat` caches ``cfg``'s logic under: equal for configs whose RTL is the same."""
    return synth_key(_logic_sources(), _header(cfg))


def _logic_stat(cfg: ArchConfig, ran: list[str]) -> dict[str, Any]:
    sources, header = _logic_sources(), _header(cfg)

    def compute() -> dict[str, Any]:
        boxes = " ".join(f"{b}.sv" for b in BLACK_BOXES)
        rest = " ".join(n for n in sources if n[:-3] not in BLACK_BOXES)
        script = (f"read_verilog -sv -lib {boxes}\nread_verilog -sv {rest}\n"
                  "hierarchy -top tinynpu_top\nsynth -top tinynpu_top")
        return _run_yosys(script, {**sources, "tinynpu_isa.vh": yosys_text(header)},
                          f"tinynpu_top for config {cfg.name!r}")
    return _cached(f"logic-T{cfg.tile}", synth_key(sources, header), compute, ran,
                   what=f"the accelerator's logic for config {cfg.name!r}", expect="about 5 to 10 minutes")


def _sram_rows(cfg: ArchConfig, imem_words: int) -> list[ModuleArea]:
    rows = []
    memories = [(f"{scope} scratchpad (SRAM)", 8 * cfg.scope_bytes(scope)) for scope in ("a_reg", "b_reg", "acc")]
    memories.append((f"instruction memory, {imem_words} words (SRAM)", imem_words * 128))
    for name, bits in memories:
        rows.append(ModuleArea(name, 1, 0, SRAM_TRANSISTORS_PER_BIT * bits,
                               bits * SRAM_BITCELL_UM2 / SRAM_ARRAY_EFFICIENCY, "SRAM model",
                               f"{bits:,} bits; bit-cell transistors only"))
    return rows


def _scaled(row: ModuleArea, factor: float, note: str) -> ModuleArea:
    return ModuleArea(row.name, row.instances, round(row.cells * factor), round(row.transistors * factor),
                      row.area_um2 * factor, "extrapolated", note)


def synthesize(cfg: ArchConfig, base: ArchConfig, *, imem_words: int = 1 << 14) -> SynthReport:
    """Cells, transistors and area of the RTL for ``cfg``, per module and in total.

    Args:
        cfg: the config to report.
        base: the config the RTL is generated for; when the RTL cannot be built for ``cfg``, its logic is
            synthesized for ``base`` and scaled by the ratio of tile edges (datapath widths), and the rows say so.

    Raises:
        SynthError: Yosys is missing or failed, or the RTL is built for neither config.
    """
    t0 = time.perf_counter()
    ran: list[str] = []
    if rtl_supports(cfg) is None:
        logic_rows, boxes = _hierarchy_rows(_logic_stat(cfg, ran), "tinynpu_top")
    else:
        reason = rtl_supports(base)
        if reason is not None:
            raise SynthError(f"tinynpu synth: {reason}.")
        base_rows, boxes = _hierarchy_rows(_logic_stat(base, ran), "tinynpu_top")
        note = (f"the RTL is generated for config {base.name!r} (T = {base.tile}): synthesized there and "
                f"scaled by T {cfg.tile}/{base.tile}")
        logic_rows = [_scaled(r, cfg.tile / base.tile, note) for r in base_rows]
    rows = sorted(logic_rows, key=lambda r: -r.area_um2)
    rows.append(_mac_array_row(cfg, boxes.get("tinynpu_mac_array", 1), ran))
    rows += _sram_rows(cfg, imem_words)
    return SynthReport(cfg.name, cfg.tile, tuple(rows), time.perf_counter() - t0, tuple(ran))
