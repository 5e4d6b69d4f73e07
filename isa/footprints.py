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
from typing import Any, NamedTuple

import numpy as np

from tinynpu.errors import UsageError
from tinynpu.isa import regions
from tinynpu.isa.config import ArchConfig
from tinynpu.isa.records import Access, Instruction
from tinynpu.isa.spec import Isa


class Region(NamedTuple):  # a tuple: one to three per instruction emitted, a frozen dataclass cost 2 us each
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


def _dram_region(space: str, addr: int, stride: int, rows: int, row_bytes: int, write: bool) -> Region:
    """A DRAM access ``[addr, stride, rows, row_bytes]``: the bytes from the first row to the end of the last."""
    last = addr + (rows - 1) * stride
    return Region(space, min(addr, last), max(addr, last) + row_bytes, write)


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
    @functools.cache  # noqa: B019 (as above)
    def _one_of(self, mnemonic: str) -> Callable[[Mapping[str, int]], tuple[Region, ...]]:
        """One compiled function per mnemonic for :meth:`one`: every access's condition and bounds in one
        Python function, so an instruction costs one call rather than one per expression and access."""
        ins = self.isa.by_mnemonic[mnemonic]
        env: dict[str, Any] = dict(self._env) | {"Region": Region, "dram": _dram_region, "scope": self._scope_name,
                                                 "accesses": ins.accesses}
        body = ["def one(v):", "    out = []"]
        for i, acc in enumerate(ins.accesses):
            pad = "    "
            if acc.unless is not None:
                body.append(f"    if not ({self._source(ins, acc.unless, vector=False)}):")
                pad += "    "
            bounds = ", ".join(f"int({self._source(ins, b, vector=False)})" for b in acc.bounds)
            if acc.dram:
                body.append(f"{pad}out.append(dram({acc.space!r}, {bounds}, {acc.write}))")
            elif acc.space_operand:  # the scope an operand names
                body.append(f"{pad}out.append(Region(scope(accesses[{i}], v), {bounds}, {acc.write}))")
            else:
                body.append(f"{pad}out.append(Region({acc.space!r}, {bounds}, {acc.write}))")
        body.append("    return tuple(out)")
        exec("\n".join(body), env)  # noqa: S102 (generated from the parsed expressions)
        return env["one"]  # type: ignore[no-any-return]

    @functools.cache  # noqa: B019 (as above)
    def _defaults(self, mnemonic: str) -> tuple[dict[str, int], frozenset[str]]:
        """The operands of ``mnemonic`` with a default (name -> value) and those without one."""
        ins = self.isa.by_mnemonic[mnemonic]
        fields = [f for f in ins.fields if f.kind != "units"]
        defaults = {f.name: f.default_at(self.cfg.tile) for f in fields}
        return ({name: d for name, d in defaults.items() if d is not None},
                frozenset(name for name, d in defaults.items() if d is None))

    def one(self, mnemonic: str, fields: Mapping[str, int]) -> tuple[Region, ...]:
        """The regions one ``mnemonic`` instruction with operand values ``fields`` reads and writes.

        Raises:
            UsageError: an operand the accesses need has neither a value nor a default.
        """
        if not self.isa.by_mnemonic[mnemonic].accesses:
            return ()
        defaults, required = self._defaults(mnemonic)
        if required and not required <= fields.keys():
            missing = next(f.name for f in self.isa.by_mnemonic[mnemonic].fields
                           if f.name in required and f.name not in fields)
            raise UsageError(f"{mnemonic}: field {missing} has no value and no default.")
        return self._one_of(mnemonic)({**defaults, **fields})

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

    def _scope_name(self, acc: Access, values: Mapping[str, Any]) -> str:
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
