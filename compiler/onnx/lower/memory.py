"""The network's DRAM image: weights laid out once, activation buffers placed by liveness.

Each activation tensor lives from the step that writes it to the last step
that reads it; buffers whose lifetimes do not overlap share addresses.  A
tensor a channel concatenation is its only reader of can be a *slice* of the
concatenation's buffer instead (:class:`ChannelSlice`): its producer stores
each pixel's channels at their offset in the joined pixel, so the join moves
no data; the joined buffer then lives from the first slice's producer on
(the network's planner keeps such a plan only when its peak is no higher).
Placement is first fit in order of birth (largest first among tensors born
together), 64-byte aligned.  The liveness lower bound is the largest total
of tensors alive at one step: no placement can use less, so
``peak / lower_bound`` says what fragmentation costs.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinynpu.intmath import round_up

ALIGN = 64


@dataclass(frozen=True)
class Buffer:
    """One tensor's place in DRAM and its lifetime (step indices, inclusive)."""

    name: str
    offset: int
    nbytes: int
    first: int
    last: int


@dataclass(frozen=True)
class ChannelSlice:
    """A tensor stored inside another's buffer: its pixels' channels at ``offset`` bytes into each of
    the joined tensor's pixels, ``pitch`` bytes apart (NHWC: row ``r`` of ``row_bytes`` bytes at
    ``offset + r * pitch``)."""

    name: str
    of: str
    offset: int
    row_bytes: int
    pitch: int


@dataclass(frozen=True)
class MemoryPlan:
    """Weights region, then the activation region planned by liveness."""

    weight_bytes: int
    buffers: tuple[Buffer, ...]
    activation_peak_bytes: int
    liveness_lower_bound_bytes: int
    slices: tuple[ChannelSlice, ...] = ()

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.activation_peak_bytes

    def to_json(self) -> dict[str, int]:
        return {"weight_bytes": self.weight_bytes, "activation_peak_bytes": self.activation_peak_bytes,
                "liveness_lower_bound_bytes": self.liveness_lower_bound_bytes, "dram_image_bytes": self.total_bytes,
                "buffers": len(self.buffers), "channel_slices": len(self.slices)}


def plan_memory(weight_bytes: int, sizes: dict[str, int], lifetimes: dict[str, tuple[int, int]],
                slices: tuple[ChannelSlice, ...] = ()) -> MemoryPlan:
    """Place every tensor of ``sizes`` (bytes) alive over ``lifetimes`` (first, last step); a tensor
    of ``slices`` lives in its joined tensor's buffer, which then lives from the slice's first step."""
    sizes, lifetimes = dict(sizes), dict(lifetimes)
    for sl in slices:
        first = lifetimes.pop(sl.name)[0]
        sizes.pop(sl.name)
        lifetimes[sl.of] = (min(first, lifetimes[sl.of][0]), lifetimes[sl.of][1])
    order = sorted(sizes, key=lambda n: (lifetimes[n][0], -sizes[n], n))
    placed: list[Buffer] = []
    for name in order:
        first, last = lifetimes[name]
        size = round_up(max(sizes[name], 1), ALIGN)
        busy = sorted((b.offset, b.offset + round_up(max(b.nbytes, 1), ALIGN)) for b in placed
                      if not (b.last < first or b.first > last))
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        placed.append(Buffer(name, offset, sizes[name], first, last))
    peak = max((b.offset + round_up(max(b.nbytes, 1), ALIGN) for b in placed), default=0)
    steps = max((lt[1] for lt in lifetimes.values()), default=-1) + 1
    bound = 0
    for i in range(steps):
        bound = max(bound, sum(round_up(max(sizes[n], 1), ALIGN) for n, (f, la) in lifetimes.items()
                               if f <= i <= la))
    return MemoryPlan(weight_bytes=round_up(weight_bytes, ALIGN), buffers=tuple(placed), activation_peak_bytes=peak,
                      liveness_lower_bound_bytes=bound, slices=tuple(slices))


__all__ = ["ALIGN", "Buffer", "ChannelSlice", "MemoryPlan", "plan_memory"]
