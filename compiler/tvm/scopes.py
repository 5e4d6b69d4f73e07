"""The memory scopes TensorIR schedules name, and the tinynpu scratchpads they are.

The course's lesson caches into ``global.A_reg``, ``global.B_reg`` and
``global.accumulator``; they are the ISA's scratchpads ``a``, ``b`` and ``acc``
(their ``config_key`` in isa.yaml: ``a_reg``, ``b_reg``, ``acc``).  Every
other scope but ``global`` (the DRAM tensors) is refused by the lowering.
"""

from __future__ import annotations

from tinynpu.isa import Isa

# TVM scope name -> the ISA scope's config_key.
TVM_SCOPES = {"global.A_reg": "a_reg", "global.B_reg": "b_reg", "global.accumulator": "acc"}
DRAM_SCOPES = ("global", "")


def isa_scope_name(isa: Isa, tvm_scope: str) -> str | None:
    """The ISA scratchpad name (``a``, ``b``, ``acc``) of a TVM scope, or None for any other scope."""
    key = TVM_SCOPES.get(tvm_scope)
    if key is None:
        return None
    return next(s.name for s in isa.scopes if s.config_key == key)


def tvm_scope_of(config_key: str) -> str:
    """The TVM scope name of the ISA scratchpad with ``config_key``."""
    return next(name for name, key in TVM_SCOPES.items() if key == config_key)


__all__ = ["DRAM_SCOPES", "TVM_SCOPES", "isa_scope_name", "tvm_scope_of"]
