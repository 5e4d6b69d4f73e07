"""Config inheritance (``base: NAME`` plus overrides): the built-ins load exactly as before, errors name the place."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tinynpu.errors import SpecError
from tinynpu.isa import load_config, load_isa
from tinynpu.isa.config import CONFIG_DIR, config_source

# Every built-in config as it loaded when each file was complete, before the configs inherited from `default`:
# its YAML data, its ArchConfig (all but the source path) and its digest.
GOLDEN = json.loads((Path(__file__).parent / "golden" / "builtin_configs.json").read_text(encoding="utf-8"))


def _fields(cfg: Any) -> Any:
    fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name != "source"}
    fields["energy"] = dataclasses.asdict(cfg.energy)
    return json.loads(json.dumps(fields))


def test_the_golden_file_covers_every_builtin() -> None:
    assert sorted(GOLDEN) == sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_a_builtin_loads_to_the_same_config_and_hash(name: str) -> None:
    isa = load_isa()
    cfg = load_config(name, isa)
    want = GOLDEN[name]
    assert json.loads(json.dumps(config_source(CONFIG_DIR / f"{name}.yaml").data)) == want["data"]
    assert _fields(cfg) == want["config"]
    # the config's own digest, the half of a program's build hash a config decides (the ISA's is the other)
    assert cfg.digest == want["digest"]


def test_only_default_is_complete() -> None:
    """A new config key goes into default.yaml (and the schema) only: every other built-in inherits it."""
    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        assert ("base: default" in text) == (path.stem != "default"), path.name


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_user_config_inherits_and_overrides(tmp_path: Path) -> None:
    _write(tmp_path, "parent.yaml", "base: t8\nname: parent\ndram:\n  latency_cycles: 50\n")
    child = _write(tmp_path, "child.yaml", "base: parent.yaml\nname: child\nqueues: {depth: 4}\n")
    cfg = load_config(child)
    assert (cfg.name, cfg.tile, cfg.dram_latency_cycles, cfg.queue_depth) == ("child", 8, 50, 4)
    assert cfg.dram_bytes_per_cycle == load_config("t8").dram_bytes_per_cycle and cfg.source == child


def _error(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_config(path)
    message = info.value.message
    assert "\n" not in message
    return message


def test_an_unknown_base_names_the_builtins(tmp_path: Path) -> None:
    path = _write(tmp_path, "mine.yaml", "name: mine\nbase: defualt\n")
    message = _error(path)
    assert message.startswith(f"{path}:2:1 (at base): base 'defualt' is neither a built-in config (acc2x, default"), \
        message


def test_a_missing_base_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "mine.yaml", "base: nowhere.yaml\nname: mine\n")
    assert _error(path).startswith(f"{path}:1:1 (at base): base config file {tmp_path / 'nowhere.yaml'} does not "
                                   "exist")


def test_a_cycle_of_bases(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.yaml", "base: b.yaml\nname: a\n")
    b = _write(tmp_path, "b.yaml", "name: b\nbase: a.yaml\n")
    message = _error(a)
    assert message.startswith(f"{b}:2:1 (at base): the bases make a cycle ({a.resolve()} -> {b.resolve()} -> "
                              f"{a.resolve()})"), message


def test_an_override_of_a_key_the_base_lacks(tmp_path: Path) -> None:
    path = _write(tmp_path, "mine.yaml", "base: default\nname: mine\ndram:\n  bytes: 4096\n  latncy_cycles: 3\n")
    message = _error(path)
    assert message.startswith(f"{path}:5:3 (at dram.latncy_cycles): dram.latncy_cycles is not a key of the base "
                              f"config {CONFIG_DIR / 'default.yaml'} (dram has bytes, bytes_per_cycle, interface, "
                              "latency_cycles)"), message


def test_a_config_with_a_base_names_itself(tmp_path: Path) -> None:
    path = _write(tmp_path, "mine.yaml", "base: t8\ntile: 16\n")
    assert "a config with a base gives its own name" in _error(path)


def test_an_override_still_meets_the_rules(tmp_path: Path) -> None:
    """The merged config is validated as a whole file is: a bad value points at the override's line."""
    path = _write(tmp_path, "mine.yaml", "base: default\nname: mine\ntile: 37\n")
    assert _error(path).startswith(f"{path}:3:1 (at tile): tile must be a power of two from 4 to 128, not 37")


def write_golden() -> None:
    """Record every built-in's resolved data, ArchConfig and digest (after a deliberate config change)."""
    isa = load_isa()
    out = {}
    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        cfg = load_config(path.stem, isa)
        out[path.stem] = {"digest": cfg.digest, "config": _fields(cfg),
                          "data": json.loads(json.dumps(config_source(path).data))}
    target = Path(__file__).parent / "golden" / "builtin_configs.json"
    target.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":  # python tests/test_config_inherit.py: rewrite the golden file, then review its diff
    write_golden()
