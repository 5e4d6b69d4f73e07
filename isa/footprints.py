"""Where instructions read and write, evaluated from isa.yaml ``accesses`` for given operand values.

The race checker (``simulator/hazards.py``), the native core's access table
and the run statistics read an instruction's regions from its ``accesses``
expressions; the compiler's emitter needs the same regions to derive the
synchronization tokens it writes.  It evaluates them here, from the same
parsed expressions (:mod:`tinynpu.isa.regions`), so an instruction added to
the YAML is tokenized correctly by the compiler without a table of its own
to keep in step (a forgotten entry there used to give wrong tokens, and the
ONNX runs, which skip the race check, wrong results without an error).

Two forms: :meth:`Footprints.one` for one instruction (plain Python, a few
microseconds: the emitter calls it per instruction) and
:meth:`Footprints.columns` for many instructions of one mnemonic given as
numpy columns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinynpu.errors import UsageError
from tinynpu.isa import regions
from tinynpu.isa.config import ArchConfig
from tinynpu.isa.records import Access, Instruction
from tinynpu.isa.spec import Isa


@dataclass(frozen=True)
class Region:
    """One region of one instruction: scratchpad rows ``[first, end)`` or a DRAM byte span ``[first, end)``.

    ``space`` is a scope name or ``dram`` (:data:`~tinynpu.isa.records.DRAM_SPACE`).
    """

    space: str
    first: int
    end: int
    write: bool


@dataclass(frozen=True)
class RegionColumns:
    """One access of many instructions of one mnemonic (int64 columns, one entry per instruction).

    ``made`` is False where the access's ``unless`` condition holds (the access is not made); ``scope``
    is the scope id of a scratchpad access (-1 for DRAM).
    """

    dram: bool
    write: bool
    scope: np.ndarray
    first: np.ndarray
    end: np.ndarray
    made: np.ndarray


_Scalar = Callable[[Mapping[str, int]], Any]
_Vector = Callable[[Mapping[str, np.ndarray]], Any]


class Footprints:
    """The regions of instructions of ``isa`` on the machine ``cfg``, compiled once per access expression."""

    def __init__(self, isa: Isa, cfg: ArchConfig) -> None:
        self.isa = isa
        self.cfg = cfg
        self._env: dict[str, Any] = {"np": np, "tile": cfg.tile,
                                     "eb": isa.per_scope(lambda s: cfg.elem_bytes(s.config_key)),
                                     "srows": isa.per_scope(lambda s: cfg.rows(s.config_key))}
        self._vector_env = {**self._env, "eb": np.asarray(self._env["eb"], dtype=np.int64),
                            "srows": np.asarray(self._env["srows"], dtype=np.int64)}

    # -- compiled expressions ---------------------------------------------------------------------------
    def _source(self, ins: Instruction, text: str, *, vector: bool) -> str:
        return regions.to_python(self.isa.region_expr(ins, text), self.isa.scope_ids,
                                 lambda n: "tile" if n == regions.TILE else f"v[{n!r}]", vector=vector)

    @functools.cache  # noqa: B019 (one Footprints per emitter; the cache lives as long as it does)
    def _scalar(self, mnemonic: str, text: str) -> _Scalar:
        code = self._source(self.isa.by_mnemonic[mnemonic], text, vector=False)
        return eval(f"lambda v: {code}", dict(self._env))  # type: ignore[no-any-return]  # noqa: S307 (parsed)

    @functools.cache  # noqa: B019 (as above)
    def _vector(self, mnemonic: str, text: str) -> _Vector:
        code = self._source(self.isa.by_mnemonic[mnemonic], text, vector=True)
        return eval(f"lambda v: {code}", dict(self._vector_env))  # type: ignore[no-any-return]  # noqa: S307

    def _values(self, ins: Instruction, given: Mapping[str, Any]) -> dict[str, Any]:
        """``given`` completed with the defaults of the operands it leaves out.

        Raises:
            UsageError: an operand the accesses need has neither a value nor a default.
        """
        values = dict(given)
        for f in ins.fields:
            if f.name not in values and f.kind != "units":
                default = f.default_at(self.cfg.tile)
                if default is None:
                    raise UsageError(f"{ins.mnemonic}: field {f.name} has no value and no default.")
                values[f.name] = default
        return values

    # -- evaluation -------------------------------------------------------------------------------------
    def one(self, mnemonic: str, fields: Mapping[str, int]) -> tuple[Region, ...]:
        """The regions one ``mnemonic`` instruction with operand values ``fields`` reads and writes."""
        ins = self.isa.by_mnemonic[mnemonic]
        if not ins.accesses:
            return ()
        v = self._values(ins, fields)
        out: list[Region] = []
        for acc in ins.accesses:
            if acc.unless is not None and self._scalar(mnemonic, acc.unless)(v):
                continue
            bounds = [int(self._scalar(mnemonic, b)(v)) for b in acc.bounds]
            if acc.dram:  # [addr, stride, rows, row_bytes]: the bytes from the first row to the end of the last
                addr, stride, rows, row_bytes = bounds
                last = addr + (rows - 1) * stride
                out.append(Region(acc.space, min(addr, last), max(addr, last) + row_bytes, acc.write))
            else:
                out.append(Region(self._scope_name(acc, v), bounds[0], bounds[1], acc.write))
        return tuple(out)

    def columns(self, mnemonic: str, fields: Mapping[str, np.ndarray | int], n: int) -> tuple[RegionColumns, ...]:
        """The accesses of ``n`` ``mnemonic`` instructions whose operands are the columns ``fields``."""
        ins = self.isa.by_mnemonic[mnemonic]
        v = {name: np.broadcast_to(np.asarray(col, dtype=np.int64), (n,))
             for name, col in self._values(ins, fields).items()}
        out: list[RegionColumns] = []
        for acc in ins.accesses:
            made = np.ones(n, dtype=bool)
            if acc.unless is not None:
                made = ~np.broadcast_to(np.asarray(self._vector(mnemonic, acc.unless)(v), dtype=bool), (n,))
            bounds = [np.broadcast_to(np.asarray(self._vector(mnemonic, b)(v), dtype=np.int64), (n,))
                      for b in acc.bounds]
            if acc.dram:
                addr, stride, rows, row_bytes = bounds
                last = addr + (rows - 1) * stride
                out.append(RegionColumns(True, acc.write, np.full(n, -1, dtype=np.int64), np.minimum(addr, last),
                                         np.maximum(addr, last) + row_bytes, made))
            else:
                scope = (v[acc.space] if acc.space_operand
                         else np.full(n, self.isa.scope_ids[acc.space], dtype=np.int64))
                out.append(RegionColumns(False, acc.write, scope, bounds[0], bounds[1], made))
        return tuple(out)

    def _scope_name(self, acc: Access, values: Mapping[str, int]) -> str:
        """The scope an access names, directly or (``space_operand``) by an operand's scope id.

        Raises:
            UsageError: the operand holds no scope id.
        """
        if not acc.space_operand:
            return acc.space
        scope = self.isa.scope_by_id.get(int(values[acc.space]))
        if scope is None:
            raise UsageError(f"operand {acc.space} = {values[acc.space]} names no scratchpad "
                             f"({', '.join(f'{s.name}={s.id}' for s in self.isa.scopes)}).")
        return scope.name


__all__ = ["Footprints", "Region", "RegionColumns"]
