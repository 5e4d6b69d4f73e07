"""tinynpu: a YAML-defined ML-accelerator ISA and its toolchain.

Subpackages: :mod:`tinynpu.isa` (spec, configs, generators),
:mod:`tinynpu.assembler`, :mod:`tinynpu.simulator`, :mod:`tinynpu.compiler`
and :mod:`tinynpu.rtl`.
"""

from tinynpu.errors import TinyNpuError

__all__ = ["TinyNpuError"]
__version__ = "0.1.0"
