"""The area the transformer instructions add to a synthesized design: their units' total and share.

The target is "the area the new operations add to the 16x16 design, in
mm^2 and as a share, printed by ``tinynpu synth``".  The eight instructions
(docs/transformer_ops.md) add three units of their own to the ALU; this module
sums their rows of a :class:`~tinynpu.rtl.synth.SynthReport`.  What they add
inside ``tinynpu_alu_unit`` itself (the block operands, ``vmulb``'s rounding,
the sequencing: +0.013 mm^2 at T = 8, docs/area.md) is not a module of its own
and is not counted, so the figure is a lower bound of what they add.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: The RTL modules only the transformer instructions use: the reductions' running maximum and exact sums,
#: vlut's table, and the sequential reciprocal / reciprocal square root.
TRANSFORMER_UNITS = ("tinynpu_alu_reduce", "tinynpu_lut", "tinynpu_recip_rsqrt")


class _Row(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def area_um2(self) -> float: ...


@dataclass(frozen=True)
class UnitsShare:
    """The transformer units' area in one synthesized design."""

    modules: tuple[str, ...]  # the units the design has (all of TRANSFORMER_UNITS in today's RTL)
    area_um2: float
    design_um2: float

    @property
    def share(self) -> float:
        return self.area_um2 / self.design_um2 if self.design_um2 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"modules": list(self.modules), "area_mm2": self.area_um2 / 1e6, "share": self.share}

    def line(self) -> str:
        if not self.modules:
            return "transformer units: none in this design"
        return (f"transformer units ({', '.join(self.modules)}): {self.area_um2 / 1e6:.4f} mm^2, "
                f"{100 * self.share:.1f}% of the design's {self.design_um2 / 1e6:.4f} mm^2 (their logic inside "
                "tinynpu_alu_unit not counted)")


def transformer_share(rows: Sequence[_Row]) -> UnitsShare:
    """The transformer units among ``rows`` (a report's modules, every row of the design)."""
    units = [r for r in rows if r.name in TRANSFORMER_UNITS]
    return UnitsShare(tuple(r.name for r in units), sum(r.area_um2 for r in units), sum(r.area_um2 for r in rows))


__all__ = ["TRANSFORMER_UNITS", "UnitsShare", "transformer_share"]
