"""Schedules as in the course: a replayable trace of primitive applications.

A GEMM ``C[i, j] += A[i, k] * B[j, k]`` starts as three loops ``i, j, k`` over
elements.  A schedule is a list of steps, each a JSON object with an ``op``:

``split``                 ``{"op": "split", "loop": "i", "factors": [null, 128]}`` -> loops ``i0, i1``
                          (inner factor in elements, a multiple of the tile edge)
``reorder``               ``{"op": "reorder", "order": ["i0", "j0", "k0", "i1", "j1", "k1"]}``
``cache_write``           ``{"op": "cache_write", "tensor": "C", "scope": "acc"}``
``cache_read``            ``{"op": "cache_read", "tensor": "A", "scope": "a_reg"}``
``compute_at``            ``{"op": "compute_at", "stage": "A_reg", "loop": "k0"}``
``decompose_reduction``   ``{"op": "decompose_reduction", "loop": "k0", "init": "fill_zero" | "fold"}``
``tensorize``             ``{"op": "tensorize", "loop": "i1", "intrinsic": "tmm16"}`` (``tmm<T>`` for tile edge T)
``double_buffer``         ``{"op": "double_buffer", "stage": "A_reg" | "B_reg" | "acc"}``
``multi_buffer``          ``{"op": "multi_buffer", "stage": "A_reg" | "B_reg", "buffers": 3}`` (a ring of
                          streamed chunks: loads run ``buffers - 1`` chunks ahead of ``tmm``)

Replaying a trace against a workload (:func:`apply`) yields a :class:`Tiling`,
the handful of numbers the lowering needs, after checking every step applies
and every buffer fits its scope.  The space the lowering supports is output
stationary: the reduction block loop ``k0`` is innermost of the block loops,
an ``acc`` block of ``i1 x j1`` stays resident while ``k0`` streams ``A`` and
``B`` chunks of ``k1`` through ``a_reg``/``b_reg``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinynpu import fsio
from tinynpu.errors import UsageError
from tinynpu.intmath import ceil_div, round_up
from tinynpu.isa import ArchConfig, load_isa

Step = dict[str, Any]


ORDERS = ("mn", "nm")
INITS = ("fold", "fill_zero")
RESIDENTS = ("none", "a", "b")
#: Buffers a streamed operand may rotate through: 1 (single), 2 (double) or a ring of 3 or 4 chunks,
#: which lets a chunk's loads start while the chunk before the current one is still read when
#: loading a chunk takes about as long as computing one (batch-1 GEMVs: one weight tile per ``tmm``).
STREAM_BUFFERS = (1, 2, 3, 4)


@dataclass(frozen=True, kw_only=True)
class Tiling:
    """What a schedule means for the lowering (all sizes in tiles).

    Construct with keywords; every field is checked and a bad value is refused
    with the field, what it must be and the value given.

    Attributes:
        bm: Output block rows (tiles) held in ``acc``.
        bn: Output block columns (tiles) held in ``acc``.
        bk: Reduction tiles per chunk loaded into ``a_reg``/``b_reg``.
        order: ``"mn"`` (i0 outer) or ``"nm"`` (j0 outer) over output blocks.
        double_buffer: Two ``a_reg``/``b_reg`` buffers so loads overlap ``tmm``.
        acc_buffers: 1 or 2 ``acc`` blocks (2: stores overlap the next block's ``tmm``).
        init: ``"fold"`` (first tmm of a block overwrites) or ``"fill_zero"`` (explicit ``zero``).
        resident: ``"none"``, ``"a"`` or ``"b"``: that operand's whole panel (block rows x all of
            K) stays in its scope across the inner block loop, loaded once per outer block
            (``compute_at`` at the outer block loop, with the matching order); the panel holds all
            of K while the other operand streams in chunks of ``bk``.
        panel_buffers: Buffers of the resident panel (2: the next panel loads while the current
            one is used); ``double_buffer`` then applies to the streamed operand only.  0 (the
            default) means as ``double_buffer``; without a resident panel it always does.
        stream_buffers: Buffers the streamed operands' chunks rotate through (:data:`STREAM_BUFFERS`);
            3 or 4 need ``double_buffer``.  0 (the default) means as ``double_buffer`` (2 or 1).
    """

    bm: int
    bn: int
    bk: int
    order: str = "mn"
    double_buffer: bool = True
    acc_buffers: int = 1
    init: str = "fold"
    resident: str = "none"
    panel_buffers: int = 0
    stream_buffers: int = 0

    def __post_init__(self) -> None:
        for name in ("bm", "bn", "bk"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise UsageError(f"tiling: {name} must be a positive integer, not {value!r}.")
        for name, allowed in (("order", ORDERS), ("init", INITS), ("resident", RESIDENTS)):
            value = getattr(self, name)
            if value not in allowed:
                raise UsageError(f"tiling: {name} must be one of {', '.join(allowed)}, not {value!r}.")
        if not isinstance(self.double_buffer, bool):
            raise UsageError(f"tiling: double_buffer must be true or false, not {self.double_buffer!r}.")
        for name, allowed_n in (("acc_buffers", (1, 2)), ("panel_buffers", (0, 1, 2))):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value not in allowed_n:
                raise UsageError(f"tiling: {name} must be one of {', '.join(map(str, allowed_n))}, "
                                 f"not {value!r}.")
        sb = self.stream_buffers
        if not isinstance(sb, int) or isinstance(sb, bool) or sb not in (0, *STREAM_BUFFERS):
            raise UsageError(f"tiling: stream_buffers must be one of {', '.join(map(str, (0, *STREAM_BUFFERS)))}, "
                             f"not {sb!r}.")
        if sb and (sb > 1) != self.double_buffer:
            raise UsageError(f"tiling: stream_buffers={sb} contradicts double_buffer={self.double_buffer} "
                             "(1 buffer is single, 2 or more double buffering).")
        if self.panel_buffers == 0 or self.resident == "none":  # one canonical form per tiling
            object.__setattr__(self, "panel_buffers", 2 if self.double_buffer else 1)
        if sb == 0:
            object.__setattr__(self, "stream_buffers", 2 if self.double_buffer else 1)

    def key(self) -> tuple[int, int, int, str, bool, int, str, str, int, int]:
        return (self.bm, self.bn, self.bk, self.order, self.double_buffer, self.acc_buffers, self.init,
                self.resident, self.panel_buffers, self.stream_buffers)

    @property
    def streamed(self) -> str:
        """The operands whose chunks stream through :attr:`stream_buffers` ("ab", "b" or "a")."""
        return {"none": "ab", "a": "b", "b": "a"}[self.resident]

    def buffers(self, operand: str) -> int:
        """Buffers of ``operand`` ("a" or "b") in its scope."""
        if self.resident == operand:
            return self.panel_buffers
        return self.stream_buffers


@dataclass(frozen=True)
class Schedule:
    """A named trace of primitive applications.

    Attributes:
        name: ``naive``, ``auto``, ``tuned`` or a file name.
        steps: The primitive applications, in order.
    """

    name: str
    steps: tuple[Step, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "steps": [dict(s) for s in self.steps]}

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Schedule:
        """Read a schedule saved by ``--schedule``/``tune -o``.

        Raises:
            UsageError: unreadable file or not a schedule.
        """
        data = fsio.read_json(path, what="the schedule")
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list) or not all(
            isinstance(s, dict) and isinstance(s.get("op"), str) for s in data["steps"]
        ):
            raise UsageError(f'{path}: a schedule is a JSON object '
                             '{"name": ..., "steps": [{"op": ...}, ...]}.')
        return cls(name=str(data.get("name", Path(path).name)), steps=tuple(data["steps"]))

    def pretty(self) -> str:
        """The trace, one primitive per line, as the course writes it."""
        lines = []
        for s in self.steps:
            if "python" in s:  # a step of a TVM schedule's trace, as TVM prints it
                lines.append(str(s["python"]))
                continue
            args = ", ".join(f"{k}={v!r}" for k, v in s.items() if k != "op")
            lines.append(f"sch.{s['op']}({args})")
        return "\n".join(lines)


def intrinsic(cfg: ArchConfig) -> str:
    """The tensor intrinsic's name in traces: ``tmm<T>`` for tile edge T (the course's ``tmm16`` at T = 16)."""
    return f"tmm{cfg.tile}"


def from_tiling(t: Tiling, cfg: ArchConfig, name: str = "auto") -> Schedule:
    """The trace that replays to ``t``."""
    e = cfg.tile
    outer = ["i0", "j0"] if t.order == "mn" else ["j0", "i0"]
    steps: list[Step] = [
        {"op": "split", "loop": "i", "factors": [None, t.bm * e]},
        {"op": "split", "loop": "j", "factors": [None, t.bn * e]},
        {"op": "split", "loop": "k", "factors": [None, t.bk * e]},
        {"op": "reorder", "order": [*outer, "k0", "i1", "j1", "k1"]},
        {"op": "cache_write", "tensor": "C", "scope": "acc"},
        {"op": "compute_at", "stage": "acc", "loop": outer[1]},
        {"op": "cache_read", "tensor": "A", "scope": "a_reg"},
        {"op": "compute_at", "stage": "A_reg", "loop": "i0" if t.resident == "a" else "k0"},
        {"op": "cache_read", "tensor": "B", "scope": "b_reg"},
        {"op": "compute_at", "stage": "B_reg", "loop": "j0" if t.resident == "b" else "k0"},
        {"op": "decompose_reduction", "loop": "k0", "init": t.init},
        {"op": "tensorize", "loop": "i1", "intrinsic": intrinsic(cfg)},
    ]
    steps += [{"op": "double_buffer", "stage": stage} for stage, op in (("A_reg", "a"), ("B_reg", "b"))
              if t.buffers(op) == 2]
    steps += [{"op": "multi_buffer", "stage": stage, "buffers": t.buffers(op)}
              for stage, op in (("A_reg", "a"), ("B_reg", "b")) if t.buffers(op) > 2]
    if t.acc_buffers == 2:
        steps.append({"op": "double_buffer", "stage": "acc"})
    return Schedule(name=name, steps=tuple(steps))


def naive(cfg: ArchConfig) -> Schedule:
    """The course's seed loop: one tile per block, fill-zero, single buffers."""
    return from_tiling(Tiling(bm=1, bn=1, bk=1, double_buffer=False, init="fill_zero"), cfg, name="naive")


_SCOPE_OF = {"A": "a_reg", "B": "b_reg", "C": "acc"}


def _bad(i: int, step: Step, what: str) -> UsageError:
    return UsageError(f"schedule step {i} ({json.dumps(step)}) does not apply to this workload: {what}")


def apply(schedule: Schedule, *, m: int, n: int, k: int, cfg: ArchConfig, bias: int = 0) -> Tiling:
    """Replay ``schedule`` on an ``m x n x k`` GEMM and return the tiling it describes.

    Raises:
        UsageError: naming the step that does not apply, or the scope a buffer
            does not fit (bytes needed and available).
    """
    replay = _Replay(cfg, {"i": m, "j": n, "k": k})
    for i, s in enumerate(schedule.steps):
        op = s.get("op")
        primitive = _PRIMITIVES.get(op) if isinstance(op, str) else None
        if primitive is None:
            raise _bad(i, s, f"unknown primitive {op!r}.")
        primitive(replay, i, s)
    t = replay.tiling(schedule)
    check_fits(t, cfg, bias=bias, k=k)
    return t


class _Replay:
    """The loop nest and stages as a schedule's steps leave them; one method per primitive."""

    def __init__(self, cfg: ArchConfig, extents: dict[str, int]) -> None:
        self.cfg = cfg
        self.extents = extents
        self.inner: dict[str, int] = {}  # split loop -> inner factor in tiles
        self.loops = ["i", "j", "k"]
        self.order: list[str] | None = None  # the block loops, outermost first, once reordered
        self.staged: dict[str, str] = {}  # tensor -> scope
        self.at: dict[str, str] = {}  # stage -> the loop it is computed at
        self.init: str | None = None
        self.tensorized = False
        self.double: set[str] = set()
        self.multi: dict[str, int] = {}  # stage -> buffers given by multi_buffer

    def split(self, i: int, s: Step) -> None:
        e = self.cfg.tile
        loop, factors = s.get("loop"), s.get("factors")
        if loop not in self.extents or loop in self.inner:
            left = [x for x in "ijk" if x not in self.inner]
            raise _bad(i, s, f"loop must be one of the unsplit loops {left}.")
        if not (isinstance(factors, list) and len(factors) == 2 and factors[0] is None
                and isinstance(factors[1], int)):
            raise _bad(i, s, "factors must be [null, inner] with an integer inner factor.")
        f = factors[1]
        padded = round_up(self.extents[loop], e)
        if f <= 0 or f % e or f > padded:
            raise _bad(i, s, f"the inner factor must be a positive multiple of the tile edge {e} and at "
                             f"most {padded} (loop {loop} has extent {self.extents[loop]}), not {f}.")
        self.inner[loop] = f // e
        idx = self.loops.index(loop)
        self.loops[idx:idx + 1] = [f"{loop}0", f"{loop}1"]

    def reorder(self, i: int, s: Step) -> None:
        new = s.get("order")
        if not isinstance(new, list) or sorted(new) != sorted(self.loops):
            raise _bad(i, s, f"order must be a permutation of the current loops {self.loops}.")
        outer = [x for x in new if x.endswith("0")]
        if new[:3] != outer or outer[-1] != "k0":
            raise _bad(i, s, "the block loops (i0, j0, k0) must be outermost with k0 innermost among "
                             "them (output-stationary: partial sums stay in acc).")
        self.loops = list(new)
        self.order = outer

    def cache_read(self, i: int, s: Step) -> None:
        self._cache(i, s, "cache_read", ("A", "B"))

    def cache_write(self, i: int, s: Step) -> None:
        self._cache(i, s, "cache_write", ("C",))

    def _cache(self, i: int, s: Step, op: str, want: tuple[str, ...]) -> None:
        tensor, scope = str(s.get("tensor")), str(s.get("scope"))
        if tensor not in want or _SCOPE_OF[tensor] != scope:
            pairs = ", ".join(f"{t}->{_SCOPE_OF[t]}" for t in want)
            raise _bad(i, s, f"{op} supports {pairs}.")
        self.staged[tensor] = scope

    def compute_at(self, i: int, s: Step) -> None:
        stage, loop = s.get("stage"), s.get("loop")
        if stage not in ("A_reg", "B_reg", "acc"):
            raise _bad(i, s, "stage must be A_reg, B_reg or acc.")
        if loop not in self.loops:
            raise _bad(i, s, f"loop must be one of {self.loops}.")
        order = self.order
        outer_loop = order[0] if order else "i0"
        allowed = {"acc": [order[1] if order else "j0"],
                   "A_reg": ["k0"] + (["i0"] if outer_loop == "i0" else []),
                   "B_reg": ["k0"] + (["j0"] if outer_loop == "j0" else [])}[stage]
        if loop not in allowed:
            raise _bad(i, s, f"{stage} can be computed at {' or '.join(allowed)} in this lowering "
                             "(at the outermost block loop it stays resident across the inner one).")
        self.at[stage] = loop

    def decompose_reduction(self, i: int, s: Step) -> None:
        if s.get("loop") != "k0" or s.get("init") not in ("fold", "fill_zero"):
            raise _bad(i, s, 'expects loop "k0" and init "fold" or "fill_zero".')
        self.init = s["init"]

    def tensorize(self, i: int, s: Step) -> None:
        cfg = self.cfg
        if s.get("intrinsic") != intrinsic(cfg) or s.get("loop") != "i1":
            raise _bad(i, s, f'the only intrinsic of config {cfg.name!r} (tile edge {cfg.tile}) is '
                             f'"{intrinsic(cfg)}", applied at loop "i1".')
        if self.init is None:
            raise _bad(i, s, f"decompose_reduction must come before tensorize ({intrinsic(cfg)} is an update).")
        self.tensorized = True

    def double_buffer(self, i: int, s: Step) -> None:
        if s.get("stage") not in ("A_reg", "B_reg", "acc"):
            raise _bad(i, s, "stage must be A_reg, B_reg or acc.")
        self.double.add(s["stage"])

    def multi_buffer(self, i: int, s: Step) -> None:
        buffers = s.get("buffers")
        if s.get("stage") not in ("A_reg", "B_reg"):
            raise _bad(i, s, "stage must be A_reg or B_reg (a ring of streamed chunks).")
        if not isinstance(buffers, int) or isinstance(buffers, bool) or buffers not in STREAM_BUFFERS[1:]:
            raise _bad(i, s, f"buffers must be one of {', '.join(map(str, STREAM_BUFFERS[1:]))}.")
        self.double.add(s["stage"])
        self.multi[s["stage"]] = buffers

    def tiling(self, schedule: Schedule) -> Tiling:
        """The tiling the replayed steps describe, once they are complete and consistent."""
        missing = [x for x in "ijk" if x not in self.inner]
        order = self.order
        if missing or order is None or not self.tensorized or len(self.staged) < 3 or len(self.at) < 3:
            raise UsageError(
                f"schedule {schedule.name!r} ({len(schedule.steps)} steps) is incomplete: it must split i, j and "
                "k, reorder, stage A, B and C in a_reg, b_reg and acc with compute_at, decompose the reduction "
                f"and tensorize onto {intrinsic(self.cfg)}."
            )
        at, double = self.at, self.double
        resident = "a" if at.get("A_reg") == "i0" else "b" if at.get("B_reg") == "j0" else "none"
        if resident == "none" and ("A_reg" in double) != ("B_reg" in double):
            raise UsageError(f"schedule {schedule.name!r}: double_buffer A_reg and B_reg together or not at all "
                             "(unless one of them is a resident panel).")
        streamed = "B_reg" if resident == "a" else "A_reg"
        panel = "A_reg" if resident == "a" else "B_reg"
        ring = self._ring(schedule, resident, streamed, panel)
        return Tiling(bm=self.inner["i"], bn=self.inner["j"], bk=self.inner["k"],
                      order="mn" if order[0] == "i0" else "nm", double_buffer=streamed in double,
                      acc_buffers=2 if "acc" in double else 1, init=self.init or "fold", resident=resident,
                      panel_buffers=((2 if panel in double else 1) if resident != "none"
                                     else (2 if streamed in double else 1)),
                      stream_buffers=ring)

    def _ring(self, schedule: Schedule, resident: str, streamed: str, panel: str) -> int:
        """The streamed operands' buffers, once multi_buffer names only streamed stages, alike."""
        multi, double = self.multi, self.double
        if resident != "none" and multi.get(panel, 2) > 2:
            raise UsageError(f"schedule {schedule.name!r}: multi_buffer applies to streamed stages; {panel} holds the "
                             "resident panel (double_buffer gives it two buffers).")
        if resident == "none" and multi.get("A_reg", 2) != multi.get("B_reg", 2):
            raise UsageError(f"schedule {schedule.name!r}: multi_buffer A_reg and B_reg with the same buffers "
                             f"(they stream in the same chunks), not {multi.get('A_reg', 2)} and "
                             f"{multi.get('B_reg', 2)}.")
        return multi.get(streamed, 2 if streamed in double else 1)


#: The primitives a schedule step may name, each checking its step against the replay so far.
_PRIMITIVES: dict[str, Callable[[_Replay, int, Step], None]] = {
    "split": _Replay.split,
    "reorder": _Replay.reorder,
    "cache_read": _Replay.cache_read,
    "cache_write": _Replay.cache_write,
    "compute_at": _Replay.compute_at,
    "decompose_reduction": _Replay.decompose_reduction,
    "tensorize": _Replay.tensorize,
    "double_buffer": _Replay.double_buffer,
    "multi_buffer": _Replay.multi_buffer,
}


def buffer_rows(t: Tiling, cfg: ArchConfig, *, bias: int = 0, k: int | None = None) -> dict[str, int]:
    """Scratchpad rows the lowering of ``t`` uses, per config key.

    ``bias`` is the accumulator parameter rows per output column tile (True: one bias row; a
    layer epilogue's :attr:`~tinynpu.compiler.epilogue.Epilogue.param_rows`).

    A resident panel holds all ``ceil(k / tile)`` reduction tiles (``k`` omitted: ``bk`` of them).
    """
    e = cfg.tile
    kt = t.bk if k is None else max(t.bk, ceil_div(k, e))
    ka = kt if t.resident == "a" else t.bk
    kb = kt if t.resident == "b" else t.bk
    acc_block = t.bm * t.bn * e + round_up(t.bn * int(bias), e)
    return {"a_reg": t.buffers("a") * t.bm * ka * e, "b_reg": t.buffers("b") * t.bn * kb * e,
            "acc": t.acc_buffers * acc_block}


@functools.cache
def max_block_tiles() -> int:
    """The most tile rows one ``tmm`` covers (its ``m`` field): the lowering issues ``m = bm, n = k = 1``."""
    return next(f.hi for f in load_isa().by_mnemonic["tmm"].fields if f.name == "m")


def fits(t: Tiling, cfg: ArchConfig, *, bias: int = 0, k: int | None = None) -> bool:
    """Whether the lowering of ``t`` fits every scope and the ``tmm`` instruction's fields."""
    return t.bm <= max_block_tiles() and all(
        rows <= cfg.rows(key) for key, rows in buffer_rows(t, cfg, bias=bias, k=k).items())


def check_fits(t: Tiling, cfg: ArchConfig, *, bias: int = 0, k: int | None = None) -> None:
    """Raise naming the scope, bytes needed and bytes available if ``t`` does not fit."""
    for key, rows in buffer_rows(t, cfg, bias=bias, k=k).items():
        have = cfg.rows(key)
        if rows > have:
            per_row = cfg.tile * cfg.elem_bytes(key)
            raise UsageError(
                f"the schedule's tiles do not fit scope {key!r}: tiling bm={t.bm}, bn={t.bn}, bk={t.bk} "
                f"tiles (stream_buffers={t.stream_buffers}, acc_buffers={t.acc_buffers}, resident={t.resident}) "
                f"needs {rows * per_row} bytes ({rows} rows) but {key} has {have * per_row} bytes ({have} rows) "
                f"in config {cfg.name!r}."
            )
    if t.bm > max_block_tiles():
        raise UsageError(f"tiling bm={t.bm} exceeds the {max_block_tiles()} tile rows one tmm covers "
                         "(its m field).")


def require_a_fit(cfg: ArchConfig, *, bias: int = 0) -> None:
    """Raise unless the smallest tiling (one tile per buffer, single buffers) fits ``cfg``'s scopes.

    Raises:
        UsageError: naming the scope that cannot hold one tile per buffer, with rows needed and available.
    """
    smallest = Tiling(bm=1, bn=1, bk=1, double_buffer=False)
    for key, rows in buffer_rows(smallest, cfg, bias=bias).items():
        if rows > cfg.rows(key):
            what = "one output tile and its bias rows" if key == "acc" and bias else "one tile"
            raise UsageError(f"no tiling fits config {cfg.name!r}: scope {key} has {cfg.rows(key)} rows, but "
                             f"{what} of edge {cfg.tile} need {rows}.")


__all__ = ["STREAM_BUFFERS", "Schedule", "Step", "Tiling", "apply", "buffer_rows", "check_fits", "fits", "from_tiling",
           "intrinsic", "max_block_tiles", "naive", "require_a_fit"]
