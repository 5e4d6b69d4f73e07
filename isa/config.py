"""Architecture configs: sizes, dtypes and timing parameters, from YAML.

:func:`load_config` validates a config against ``config.schema.json`` and the
ISA (every field wide enough for the config's address ranges and sizes), and
derives its energy table from its sizes (``energy_model.py``; the config's
``energy:`` key may override a figure).
:func:`build_hash` names the (ISA, config) pair a binary was built for.

A config may inherit: ``base: default`` (a built-in's name, or a YAML path
relative to the config's folder) and then only the keys it changes, mappings
merged key by key.  :func:`config_source` applies the chain of bases; every
config then loads from its resolved data exactly as a complete file would.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.errors import SpecError
from tinynpu.isa.energy_model import EnergyTable, Sizes, energy_table, pricing_classes, scope_bytes_of
from tinynpu.isa.spec import ISA_DIR, TILES, Isa, _fail, _schema_check, load_isa
from tinynpu.isa.yamlsrc import KeyPath, YamlSource, format_key_path, load_yaml

CONFIG_DIR = ISA_DIR / "configs"
BASE_KEY = "base"  # a config's parent: a built-in name or a YAML path relative to the config's folder

_DTYPE_BYTES = {"int8": 1, "int32": 4, "float32": 4}
_SCOPE_KEYS = ("a_reg", "b_reg", "acc")
BUFFERS_PER_SCOPE = 2  # double buffering: every scratchpad holds at least one tile per buffer

@dataclass(frozen=True)
class ArchConfig:
    """One accelerator instance.  Derived quantities are properties, never stored twice."""

    name: str
    tile: int
    input_dtype: str
    acc_dtype: str
    scope_rows: tuple[tuple[str, int], ...]  # (config key, rows) for a_reg, b_reg, acc
    dram_bytes: int
    dram_bytes_per_cycle: int
    dram_latency_cycles: int
    tmm_interval_cycles: int
    tmm_latency_cycles: int
    alu_rows_per_cycle: int
    alu_latency_cycles: int
    queue_depth: int
    token_max_count: int
    max_cycles: int
    clock_mhz: float
    energy: EnergyTable
    source: Path
    digest: str  # of the architecture only: clock_mhz and energy change no binary, cycle or value

    @property
    def is_integer(self) -> bool:
        return self.acc_dtype == "int32"

    @property
    def macs_per_cycle(self) -> int:
        """Peak MAC rate: one tile x tile x tile step per tmm interval."""
        return self.tile**3 // self.tmm_interval_cycles

    def rows(self, config_key: str) -> int:
        """Rows of scratchpad ``config_key`` (``a_reg``, ``b_reg`` or ``acc``)."""
        return dict(self.scope_rows)[config_key]

    def dtype(self, config_key: str) -> np.dtype:
        """numpy element type of a scratchpad."""
        return np.dtype(self.acc_dtype if config_key == "acc" else self.input_dtype)

    def elem_bytes(self, config_key: str) -> int:
        return _DTYPE_BYTES[self.acc_dtype if config_key == "acc" else self.input_dtype]

    def scope_bytes(self, config_key: str) -> int:
        return self.rows(config_key) * self.tile * self.elem_bytes(config_key)

    @property
    def onchip_elements(self) -> int:
        """S of the I/O lower bound: every on-chip element, all scopes together."""
        return sum(rows for _, rows in self.scope_rows) * self.tile


def _resolve(name_or_path: str | Path) -> Path:
    """A built-in config's file, or the user's: built-in names win unless the argument looks like a path.

    A file named ``default`` in the working directory must not silently replace the built-in
    ``default``: an argument is a path when it has a ``/`` or a ``.yaml``/``.yml`` suffix.
    """
    candidate = Path(name_or_path)
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or "/" in text or candidate.suffix in (".yaml", ".yml"):
        return candidate
    builtin = CONFIG_DIR / f"{text}.yaml"
    if candidate.exists() and not builtin.exists():
        return candidate
    if not builtin.exists():
        names = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise SpecError(f"config {str(name_or_path)!r} is neither a file nor a built-in config ({', '.join(names)}).")
    return builtin


def _builtin_names() -> str:
    return ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))


def _base_path(src: YamlSource, base: Any) -> Path:
    """The file ``base:`` names: a built-in config, or a YAML path relative to ``src``'s folder."""
    if not isinstance(base, str) or not base:
        raise _fail(src, (BASE_KEY,), f"base must name a built-in config ({_builtin_names()}) or a .yaml file, "
                                      f"not {base!r}.")
    if "/" in base or base.endswith((".yaml", ".yml")):
        path = src.path.parent / base
        if not path.is_file():
            raise _fail(src, (BASE_KEY,), f"base config file {path} does not exist.")
        return path
    path = CONFIG_DIR / f"{base}.yaml"
    if not path.is_file():
        raise _fail(src, (BASE_KEY,), f"base {base!r} is neither a built-in config ({_builtin_names()}) nor a "
                                      "file (a path has a / or ends in .yaml).")
    return path


def _override(src: YamlSource, base_path: Path, target: dict[str, Any], overrides: dict[str, Any],
              at: KeyPath) -> None:
    """Set each of ``overrides`` in ``target`` (the base's data), merging mappings key by key."""
    for key, value in overrides.items():
        where = (*at, key)
        # energy: takes any figure the base did not give (the energy model checks the names).
        if key not in target and where[0] != "energy":
            known = ", ".join(sorted(map(str, target))) or "none"
            raise _fail(src, where, f"{format_key_path(where)} is not a key of the base config {base_path} "
                                    f"({format_key_path(at)} has {known}); an override changes a key the base "
                                    "has: check its spelling.")
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _override(src, base_path, target[key], value, where)
        else:
            target[key] = copy.deepcopy(value)


def config_source(path: Path, _chain: tuple[Path, ...] = ()) -> YamlSource:
    """The YAML of config file ``path`` with its ``base:`` chain applied (unchanged when it has none).

    The result has the data of the complete config and the marks of ``path``
    itself, so a message about a key the file sets points at its line.

    Raises:
        SpecError: with file:line:col: an unknown base, a cycle of bases, an override of a key the base does
            not have, or a config with a base and no name of its own.
    """
    src = load_yaml(path)
    if isinstance(src.data, dict) and {"parameters", "workloads"} <= set(src.data):
        raise _fail(src, ("parameters",), "this is a sweep spec (it has parameters: and workloads:), not an "
                                          f"architecture config; run it with: tinynpu sweep {path}")
    if not isinstance(src.data, dict) or BASE_KEY not in src.data:
        return src
    base_path = _base_path(src, src.data[BASE_KEY])
    chain = (*_chain, src.path.resolve())
    if base_path.resolve() in chain:
        cycle = " -> ".join(str(p) for p in (*chain, base_path.resolve()))
        raise _fail(src, (BASE_KEY,), f"the bases make a cycle ({cycle}); a config cannot inherit from itself.")
    if "name" not in src.data:
        raise _fail(src, (), f"a config with a base gives its own name (name: ...), or it would be taken for "
                             f"{src.data[BASE_KEY]!r}.")
    base = config_source(base_path, chain)
    if not isinstance(base.data, dict):
        raise _fail(src, (BASE_KEY,), f"base config {base_path} is not a YAML mapping.")
    data = copy.deepcopy(base.data)
    _override(src, base_path, data, {k: v for k, v in src.data.items() if k != BASE_KEY}, ())
    return YamlSource(path=src.path, data=data, marks=src.marks)


@functools.lru_cache(maxsize=16)
def load_config(name_or_path: str | Path = "default", isa: Isa | None = None) -> ArchConfig:
    """Load a built-in config by name (``default``, ``fp32``) or a YAML file by path.

    Raises:
        SpecError: with file:line:col and key path of the first problem.
    """
    isa = isa or load_isa()
    src = config_source(_resolve(name_or_path))
    if not isinstance(src.data, dict):
        raise _fail(src, (), "an architecture config must be a YAML mapping.")
    _check_clock(src)
    _schema_check(src, "config.schema.json")
    d = src.data
    _check_tile(src, d)
    if (d["dtypes"]["input"] == "int8") != (d["dtypes"]["acc"] == "int32"):
        raise _fail(src, ("dtypes",), "dtypes must be int8 -> int32 or float32 -> float32.")
    if d["tensor"]["tmm_latency_cycles"] > d["tensor"]["tmm_interval_cycles"] * d["tile"]:
        raise _fail(
            src,
            ("tensor", "tmm_latency_cycles"),
            "tmm latency must not exceed one tile step (interval x tile), or a tile's rows could be read "
            "before the previous step wrote them.",
        )
    cfg = ArchConfig(
        name=d["name"],
        tile=d["tile"],
        input_dtype=d["dtypes"]["input"],
        acc_dtype=d["dtypes"]["acc"],
        scope_rows=tuple((key, d["scopes"][key]["rows"]) for key in _SCOPE_KEYS),
        dram_bytes=d["dram"]["bytes"],
        dram_bytes_per_cycle=d["dram"]["bytes_per_cycle"],
        dram_latency_cycles=d["dram"]["latency_cycles"],
        tmm_interval_cycles=d["tensor"]["tmm_interval_cycles"],
        tmm_latency_cycles=d["tensor"]["tmm_latency_cycles"],
        alu_rows_per_cycle=d["alu"]["rows_per_cycle"],
        alu_latency_cycles=d["alu"]["latency_cycles"],
        queue_depth=d["queues"]["depth"],
        token_max_count=d["tokens"]["max_count"],
        max_cycles=d["limits"]["max_cycles"],
        clock_mhz=float(d["clock_mhz"]),
        energy=_energy_table(src, d, isa),
        source=src.path,
        digest=hashlib.sha256(json.dumps(_architecture(d), sort_keys=True).encode()).hexdigest(),
    )
    _check_fields_fit(isa, cfg, src)
    return cfg


def _check_tile(src: YamlSource, d: dict[str, Any]) -> None:
    """The tile edge is supported and every scratchpad holds whole tiles, one per buffer at least."""
    tile = d["tile"]
    if tile not in TILES:
        raise _fail(src, ("tile",), f"tile must be a power of two from {TILES[0]} to {TILES[-1]}, not {tile}.")
    for key in _SCOPE_KEYS:
        rows = d["scopes"][key]["rows"]
        if rows % tile or rows < BUFFERS_PER_SCOPE * tile:
            raise _fail(
                src, ("scopes", key, "rows"),
                f"scratchpad {key} must hold whole {tile}-row tiles, at least {BUFFERS_PER_SCOPE} (one per "
                f"buffer): rows must be a multiple of {tile} from {BUFFERS_PER_SCOPE * tile}, not {rows}.",
            )


def _architecture(d: dict[str, Any]) -> dict[str, Any]:
    """The keys a binary, a cycle count or a value can depend on: everything but the energy model (the clock,
    the energy overrides and the DRAM interface, which prices the bytes but does not move them)."""
    arch = {k: v for k, v in d.items() if k not in ("clock_mhz", "energy")}
    arch["dram"] = {k: v for k, v in d["dram"].items() if k != "interface"}
    return arch


def _check_clock(src: YamlSource) -> None:
    """``clock_mhz`` is a number above 0 (before the schema, to say what it is for)."""
    clock = src.data.get("clock_mhz")
    meaning = "the clock frequency in MHz (turns cycles into seconds, and leakage power into energy per cycle)"
    if clock is None:
        raise _fail(src, (), f"clock_mhz is missing; expected {meaning}, a number above 0.")
    if isinstance(clock, bool) or not isinstance(clock, (int, float)) or not math.isfinite(clock) or clock <= 0:
        raise _fail(src, ("clock_mhz",), f"clock_mhz must be {meaning}, a number above 0 MHz, not {clock!r}.")


def _energy_table(src: YamlSource, d: dict[str, Any], isa: Isa) -> EnergyTable:
    """The per-action energies, derived from the config's sizes unless its ``energy:`` gives them."""
    sizes = Sizes(tile=d["tile"], input_dtype=d["dtypes"]["input"], acc_dtype=d["dtypes"]["acc"],
                  scope_bytes=scope_bytes_of(d), dram_interface=d["dram"].get("interface", ""),
                  dram_bytes_per_cycle=d["dram"]["bytes_per_cycle"], clock_mhz=float(d["clock_mhz"]),
                  alu_classes=pricing_classes(isa))
    return energy_table(src, sizes)


def _check_fields_fit(isa: Isa, cfg: ArchConfig, src: YamlSource) -> None:
    """Every address/count field must reach the whole range the config gives it."""
    biggest, max_rows = max(cfg.scope_rows, key=lambda kv: kv[1])
    rows_key: KeyPath = ("scopes", biggest, "rows")
    need: dict[str, tuple[int, str, KeyPath]] = {
        "sp_row": (max_rows - 1, f"the largest scratchpad row ({max_rows - 1})", rows_key),
        "sp_tile": (max_rows // cfg.tile - 1, f"the largest scratchpad tile ({max_rows // cfg.tile - 1})",
                    rows_key),
        "dram_addr": (cfg.dram_bytes - 1, f"the last DRAM byte ({cfg.dram_bytes - 1})", ("dram", "bytes")),
    }
    for instr in isa.instructions:
        for field in instr.fields:
            required = need.get(field.kind)
            if field.kind == "count" and field.name == "rows":
                required = (max_rows, f"a whole scratchpad of rows ({max_rows})", rows_key)
            if field.max_is_tile:
                required = (cfg.tile, f"a whole row ({cfg.tile} elements, the tile edge)", ("tile",))
            if required is not None and field.hi < required[0]:
                raise _fail(
                    src, required[2],
                    f"config {cfg.name!r} does not fit the ISA: field {field.name!r} of {instr.mnemonic} "
                    f"({field.width} bits, {isa.source}) holds at most {field.hi} and cannot hold {required[1]}.",
                )


def build_hash(isa: Isa, cfg: ArchConfig) -> bytes:
    """16-byte identity of an (ISA, config) pair, stored in every binary header."""
    return hashlib.sha256(f"{isa.digest}:{cfg.digest}".encode()).digest()[:16]


__all__ = ["BASE_KEY", "CONFIG_DIR", "TILES", "ArchConfig", "EnergyTable", "build_hash",
           "config_source", "load_config"]
