"""What one leaf statement lowers to: instructions of one mnemonic as columns, with their program-order slots."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinynpu.assembler.image import Tensor
from tinynpu.compiler.tvm.buffers import Placed
from tinynpu.compiler.tvm.intrinsics import Intrinsic
from tinynpu.isa import ArchConfig, Isa


@dataclass(frozen=True)
class Part:
    """Instructions of one mnemonic from one leaf.

    Attributes:
        mnemonic: The ISA mnemonic.
        slots: Each instruction's program-order key (unique across the program).
        fields: Field name -> one value per instruction, or one for all.
        comment: The listing comment, a ``str.format`` template ...
        comment_args: ... and its integer arguments, one array per placeholder.
    """

    mnemonic: str
    slots: np.ndarray
    fields: Mapping[str, np.ndarray | int]
    comment: str = ""
    comment_args: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class Context:
    """What lowering a leaf needs: the function, the machine, the intrinsic, and where buffers live."""

    func: Any
    isa: Isa
    cfg: ArchConfig
    intrinsic: Intrinsic
    placed: Mapping[Any, Placed]  # scratchpad buffers by buffer
    tensors: Mapping[Any, Tensor]  # DRAM tensors by parameter


__all__ = ["Context", "Part"]
