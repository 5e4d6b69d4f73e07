"""Architecture configs: sizes, dtypes and timing parameters, from YAML.

:func:`load_config` validates a config against ``config.schema.json`` and
against the ISA (every field wide enough for the config's address ranges and
sizes).  :func:`build_hash` names the (ISA, config) pair a binary was built for.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinynpu.errors import SpecError
from tinynpu.isa.spec import ISA_DIR, Isa, _fail, _schema_check, load_isa
from tinynpu.isa.yamlsrc import load_yaml

CONFIG_DIR = ISA_DIR / "configs"

_DTYPE_BYTES = {"int8": 1, "int32": 4, "float32": 4}


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
    source: Path
    digest: str

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
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        return candidate
    builtin = CONFIG_DIR / f"{name_or_path}.yaml"
    if not builtin.exists():
        names = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise SpecError(f"config {str(name_or_path)!r} is neither a file nor a built-in config ({', '.join(names)}).")
    return builtin


@functools.lru_cache(maxsize=16)
def load_config(name_or_path: str | Path = "default", isa: Isa | None = None) -> ArchConfig:
    """Load a built-in config by name (``default``, ``fp32``) or a YAML file by path.

    Raises:
        SpecError: with file:line:col and key path of the first problem.
    """
    isa = isa or load_isa()
    src = load_yaml(_resolve(name_or_path))
    if not isinstance(src.data, dict):
        raise _fail(src, (), "an architecture config must be a YAML mapping.")
    _schema_check(src, "config.schema.json")
    d = src.data
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
        scope_rows=tuple((key, d["scopes"][key]["rows"]) for key in ("a_reg", "b_reg", "acc")),
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
        source=src.path,
        digest=hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest(),
    )
    _check_fields_fit(isa, cfg, src)
    return cfg


def _check_fields_fit(isa: Isa, cfg: ArchConfig, src: object) -> None:
    """Every address/count field must reach the whole range the config gives it."""
    max_rows = max(rows for _, rows in cfg.scope_rows)
    need: dict[str, tuple[int, str]] = {
        "sp_row": (max_rows - 1, f"the largest scratchpad row ({max_rows - 1})"),
        "sp_tile": (max_rows // cfg.tile - 1, f"the largest scratchpad tile ({max_rows // cfg.tile - 1})"),
        "dram_addr": (cfg.dram_bytes - 1, f"the last DRAM byte ({cfg.dram_bytes - 1})"),
    }
    for instr in isa.instructions:
        for field in instr.fields:
            required = need.get(field.kind)
            if field.kind == "count" and field.name == "rows":
                required = (max_rows, f"a whole scratchpad of rows ({max_rows})")
            if required is not None and field.hi < required[0]:
                raise SpecError(
                    f"{cfg.source}: config {cfg.name!r} does not fit the ISA: field {field.name!r} of "
                    f"{instr.mnemonic} ({field.width} bits, {isa.source}) cannot hold {required[1]}."
                )


def build_hash(isa: Isa, cfg: ArchConfig) -> bytes:
    """16-byte identity of an (ISA, config) pair, stored in every binary header."""
    return hashlib.sha256(f"{isa.digest}:{cfg.digest}".encode()).digest()[:16]


__all__ = ["CONFIG_DIR", "ArchConfig", "build_hash", "load_config"]
