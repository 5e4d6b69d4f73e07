"""A lowered TIR function as a loop nest of leaf statements, each with its place in program order.

After TVM's own passes (:mod:`~tinynpu.compiler.tvm.passes`) a tensorized
schedule is ``for`` loops, sequences, ``if`` guards and buffer allocations
around three kinds of leaf: a copy or fill (``BufferStore``) and an intrinsic
call (``Evaluate``).  :func:`walk` finds every leaf with the loops around it,
the guards on it, and an affine formula for the program-order slot of each
of its instances: ``offset + sum(coef * (var - start))``.  Slots are in
program order (a loop iteration's body takes as many slots as it has leaf
instances), so sorting instructions by slot gives the program order without
ever visiting the instances one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tinynpu.errors import UsageError


@dataclass(frozen=True)
class Loop:
    """A ``for`` loop: its variable, first value and trip count."""

    var: Any
    start: int
    extent: int


@dataclass(frozen=True)
class Leaf:
    """A leaf statement and where it sits.

    Attributes:
        stmt: The ``BufferStore`` or ``Evaluate``.
        loops: The loops around it, outermost first.
        coefs: Program-order slots one iteration of each loop takes (its body's size).
        offset: The slot of the first instance.
        perfect: How many of the innermost loops nest perfectly around it (each one's body is the next).
        guards: ``if`` conditions that hold where it runs (an ``else`` branch's negated).
    """

    stmt: Any
    loops: tuple[Loop, ...]
    coefs: tuple[int, ...]
    offset: int
    perfect: int
    guards: tuple[Any, ...]


@dataclass(frozen=True)
class Allocation:
    """A buffer allocated inside the function, and the loops around its allocation (one buffer per iteration)."""

    buffer: Any
    loops: tuple[Loop, ...]


@dataclass(frozen=True)
class Nest:
    """Every leaf in program order, the buffers allocated inside the function, and the slots in all."""

    leaves: tuple[Leaf, ...]
    allocations: tuple[Allocation, ...]
    slots: int


def describe(stmt: Any) -> str:
    """A TIR statement in one line of TVMScript (shortened), for messages."""
    kind = type(stmt).__name__
    if kind == "BufferStore":
        text = f"{stmt.buffer.name}[{', '.join(str(i) for i in stmt.indices)}] = {stmt.value}"
    elif kind == "Evaluate":
        text = str(stmt.value)
    elif kind == "For":
        text = f"for {stmt.loop_var} in range({stmt.min}, {stmt.min} + {stmt.extent}): ..."
    else:
        text = str(stmt).strip().splitlines()[0] if str(stmt).strip() else kind
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."


def _int(value: Any, what: str, stmt: Any) -> int:
    if type(value).__name__ != "IntImm":
        raise UsageError(f"TIR statement `{describe(stmt)}`: the loop's {what} is {value}, not a constant; "
                         "the lowering needs loops of constant bounds (specialize the function's shapes).")
    return int(value.value)


@dataclass
class _Walker:
    leaves: list[Leaf] = field(default_factory=list)
    allocations: list[Allocation] = field(default_factory=list)
    sizes: dict[Any, int] = field(default_factory=dict)

    def size(self, stmt: Any) -> int:
        """Leaf instances one execution of ``stmt`` runs (the slots it takes)."""
        if stmt in self.sizes:
            return self.sizes[stmt]
        kind = type(stmt).__name__
        if kind == "SeqStmt":
            n = sum(self.size(s) for s in stmt.seq)
        elif kind == "For":
            n = _int(stmt.extent, "extent", stmt) * self.size(stmt.body)
        elif kind == "IfThenElse":
            n = self.size(stmt.then_case) + (self.size(stmt.else_case) if stmt.else_case is not None else 0)
        elif kind in ("AttrStmt", "DeclBuffer") and getattr(stmt, "body", None) is not None:
            n = self.size(stmt.body)
        elif kind in ("BufferStore", "Evaluate"):
            n = 1
        else:
            n = 0
        self.sizes[stmt] = n
        return n

    def walk(self, stmt: Any, loops: tuple[Loop, ...], coefs: tuple[int, ...], offset: int, perfect: int,
             guards: tuple[Any, ...]) -> None:
        kind = type(stmt).__name__
        if kind == "SeqStmt":
            for s in stmt.seq:
                self.walk(s, loops, coefs, offset, 0, guards)
                offset += self.size(s)
        elif kind == "For":
            if stmt.thread_binding is not None:
                raise UsageError(f"TIR statement `{describe(stmt)}`: a loop bound to a GPU thread axis; tinynpu "
                                 "runs one instruction stream, so schedules may not bind threads.")
            loop = Loop(stmt.loop_var, _int(stmt.min, "start", stmt), _int(stmt.extent, "extent", stmt))
            self.walk(stmt.body, (*loops, loop), (*coefs, self.size(stmt.body)), offset, perfect + 1, guards)
        elif kind == "IfThenElse":
            self.walk(stmt.then_case, loops, coefs, offset, 0, (*guards, stmt.condition))
            if stmt.else_case is not None:
                from tvm import tirx

                self.walk(stmt.else_case, loops, coefs, offset + self.size(stmt.then_case), 0,
                          (*guards, tirx.Not(stmt.condition)))
        elif kind == "AllocBuffer":
            self.allocations.append(Allocation(stmt.buffer, loops))
        elif kind in ("AttrStmt", "DeclBuffer"):
            if getattr(stmt, "body", None) is not None:
                self.walk(stmt.body, loops, coefs, offset, perfect, guards)
        elif kind in ("BufferStore", "Evaluate"):
            self.leaves.append(Leaf(stmt, loops, coefs, offset, perfect, guards))
        else:
            raise UsageError(f"TIR statement `{describe(stmt)}` ({kind}): not one the lowering maps to tinynpu "
                             "(it maps loops, sequences, if-guards, buffer allocations, copies, fills and "
                             "tmm calls).")


def walk(func: Any) -> Nest:
    """The leaves of a lowered PrimFunc's body (see the module docstring).

    Raises:
        UsageError: a statement of a kind the lowering does not map, or a loop of non-constant bounds.
    """
    w = _Walker()
    w.walk(func.body, (), (), 0, 0, ())
    return Nest(tuple(w.leaves), tuple(w.allocations), w.size(func.body))


__all__ = ["Allocation", "Leaf", "Loop", "Nest", "describe", "loaded", "walk"]


def loaded(value: Any) -> tuple[Any, Any] | None:
    """The buffer and indices an expression reads, if it is a plain element read (TVM 0.27: ``TensorLoad``)."""
    kind = type(value).__name__
    if kind == "TensorLoad":
        return value.source, value.indices
    if kind == "BufferLoad":
        return value.buffer, value.indices
    return None
