"""The ISA spec, architecture configs and the generators derived from them."""

from tinynpu.isa import encoding, regions
from tinynpu.isa.config import ArchConfig, build_hash, load_config
from tinynpu.isa.spec import Field, Instruction, Isa, load_isa

__all__ = ["ArchConfig", "Field", "Instruction", "Isa", "build_hash", "encoding", "load_config", "load_isa", "regions"]
