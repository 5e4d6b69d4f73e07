"""The network's one DRAM image on the simulator: activations where the liveness plan puts them, weights once.

Layout of the image (one :class:`~tinynpu.simulator.Machine`, its DRAM kept
from layer to layer)::

    [0, activation peak)        every activation at its MemoryPlan offset (4-D tensors NHWC,
                                others row-major: the layout the layers read and write)
    [.., + weights)             each accelerator layer's weights in its program's layout and its
                                epilogue parameter rows, written once when the image is built
    [.., + staging)             a layer input the host re-lays for its program (rowpack, a
                                batched matmul's operands)

Programs are compiled once per shape (their DRAM tensors at the compiler's
own addresses) and relocated per layer: every ``load``/``store`` address is
moved from its tensor's compiled base to the tensor's place in the image, so
a layer reads its input where the previous layer (or host step) wrote it and
writes its output where the next one reads it.  A program that works on some
channels of every pixel (a grouped conv's programs, a conv stored into its
slice of a concatenation) is relocated with a pitch: its rows go a whole
pixel apart (:func:`relocate`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.compiler.onnx.lower.memory import ALIGN, ChannelSlice, MemoryPlan
from tinynpu.compiler.onnx.runtime.relocate import relocate
from tinynpu.errors import OnnxError
from tinynpu.intmath import round_up
from tinynpu.isa import ArchConfig, load_isa
from tinynpu.simulator.decode import Decoded

T = TypeVar("T")


def read_pitched(machine: Any, addr: int, rows: int, row_bytes: int, pitch: int) -> np.ndarray:
    """``rows`` rows of ``row_bytes`` bytes, ``pitch`` bytes apart from ``addr``, with the bytes between
    them, as a ``rows`` x ``pitch`` uint8 array (the last row's tail past the rows is zero)."""
    raw = machine.read_dram(addr, (rows - 1) * pitch + row_bytes)
    buf = np.zeros(rows * pitch, dtype=np.uint8)
    buf[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    return buf.reshape(rows, pitch)


def image_layout(value: np.ndarray) -> np.ndarray:
    """A tensor as the image holds it: 4-D NCHW as NHWC, anything else row-major."""
    return np.ascontiguousarray(value.transpose(0, 2, 3, 1) if value.ndim == 4 else value)


def from_image_layout(data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The inverse of :func:`image_layout`: ``data`` (flat, the image's bytes as a dtype) as the ``shape`` tensor."""
    if len(shape) == 4:
        n, c, h, w = shape
        return np.ascontiguousarray(data.reshape(n, h, w, c).transpose(0, 3, 1, 2))
    return data.reshape(shape)


@dataclass(frozen=True)
class RowAlias:
    """An activation kept row-major outside the activation region: its flat rows of ``row_bytes`` bytes,
    ``pitch`` bytes apart from ``addr`` (a KV cache's heads, each with room for more positions than the
    step holds).  ``resident``: its bytes are there before the run (the cached past), so nothing computes it."""

    addr: int
    row_bytes: int
    pitch: int
    resident: bool = False


@dataclass
class DramImage:
    """One simulated accelerator whose DRAM holds the whole network (see the module docstring).

    Attributes:
        cfg: The config.
        memory: The liveness plan of the activations.
        weight_base: First byte of the weights region.
        weight_bytes: Bytes of weights and parameter rows placed so far.
        staging_bytes: Largest staging area a layer has used.
    """

    cfg: ArchConfig
    memory: MemoryPlan
    machine: Any = None
    weight_base: int = 0
    weight_bytes: int = 0
    staging_bytes: int = 0
    weights: dict[tuple[str, str], int] = field(default_factory=dict)  # written: key -> address
    reserved: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # placed: key -> (address, bytes)
    programs: dict[tuple[Any, ...], Program] = field(default_factory=dict)
    origin: dict[int, int] = field(default_factory=dict)  # id of a relocated program -> id of the compiled one
    loaded: dict[int, Any] = field(default_factory=dict)  # id of a relocated program -> its Machine
    #: id of a relocated program -> its decoding, checked when the network was linked (:mod:`.link`)
    checked: dict[int, Decoded] = field(default_factory=dict)
    held: dict[str, tuple[tuple[int, ...], np.dtype]] = field(default_factory=dict)  # activations in DRAM now
    _addr: dict[str, int] = field(default_factory=dict)
    _size: dict[str, int] = field(default_factory=dict)
    _staged: int = 0
    _slices: dict[str, ChannelSlice] = field(default_factory=dict)
    aliases: dict[str, tuple[RowAlias, tuple[int, ...], np.dtype]] = field(default_factory=dict)
    #: what a step derives from its own constants and shapes alone (its program, epilogue and parameter rows,
    #: where its viewed operands lie), by (step name, what, shape): the same on every run (:meth:`derive`)
    derived: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    #: what a step derives from an object of its own (its epilogue) and its shapes, nothing of the plan, by the
    #: same keys: with that object, shared by the views of one run (an LLM's step networks, :meth:`derive`)
    shared: dict[tuple[Any, ...], tuple[object, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from tinynpu.simulator import Machine

        if self.machine is None:  # else a machine shared with other images (an LLM's steps: one DRAM)
            self.machine = Machine(self.cfg)
        self._addr = {b.name: b.offset for b in self.memory.buffers}
        self._size = {b.name: b.nbytes for b in self.memory.buffers}
        self._slices = {sl.name: sl for sl in self.memory.slices}
        self.weight_base = round_up(self.memory.activation_peak_bytes, ALIGN)

    def slice_of(self, name: str) -> ChannelSlice | None:
        """The channel slice activation ``name`` is stored as, or None (a buffer of its own)."""
        return self._slices.get(name)

    @property
    def staging_base(self) -> int:
        return self.weight_base + self.memory.weight_bytes

    @property
    def peak_bytes(self) -> int:
        """DRAM the image uses: activations at their peak, weights, the largest staging area."""
        return self.staging_base + self.staging_bytes

    def address(self, name: str, nbytes: int) -> int | None:
        """Where activation ``name`` of ``nbytes`` lives (None: not planned, or planned smaller); a
        channel slice's first byte (its rows are then its slice's pitch apart)."""
        sl = self._slices.get(name)
        if sl is not None:
            return self._addr[sl.of] + sl.offset
        if name in self.aliases:  # not where a program compiled for the activation layout may read it
            return None
        addr = self._addr.get(name)
        return addr if addr is not None and nbytes <= round_up(max(self._size[name], 1), ALIGN) else None

    def publish(self, name: str, value: np.ndarray) -> None:
        """Write a value the host produced to its planned place (in the image's layout)."""
        value = np.asarray(value)
        if name in self.aliases:
            self._write_alias(name, value)
            return
        data = image_layout(value)
        addr = self.address(name, data.nbytes)
        if addr is None:
            return  # not an activation of the plan (a shape tensor), or wider than planned (a host float64)
        sl = self._slices.get(name)
        if sl is None:
            self.machine.write_dram(addr, data)
        else:
            self.write_slice(sl, value)
        self.hold(name, value.shape, value.dtype)

    def write_slice(self, sl: ChannelSlice, value: np.ndarray) -> None:
        """Write int8 ``value`` (NCHW) as slice ``sl`` of its joined buffer: into every pixel, between
        the other slices' bytes."""
        data = image_layout(np.asarray(value)).reshape(-1, sl.row_bytes).view(np.uint8)
        region = self._pitched(sl, data.shape[0])
        region[:, :sl.row_bytes] = data
        self.machine.write_dram(self._addr[sl.of] + sl.offset,
                                region.reshape(-1)[:region.size - (sl.pitch - sl.row_bytes)])

    def _pitched(self, sl: ChannelSlice, rows: int) -> np.ndarray:
        return read_pitched(self.machine, self._addr[sl.of] + sl.offset, rows, sl.row_bytes, sl.pitch)

    def hold(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Record that activation ``name`` (``shape`` as the network sees it, ``dtype``) is at its planned place.

        A program that stored it there in place says so; :meth:`fetch` then reads it back from there.
        """
        self.held[name] = (tuple(shape), np.dtype(dtype))

    def fetch(self, name: str) -> np.ndarray | None:
        """Activation ``name`` read from its planned place, or None when the image does not hold it.

        The steps after the one that wrote it read it from here, not from a host copy, so a
        program that stored it anywhere else cannot go unnoticed.
        """
        return self.read(name) if name in self.held else None

    def read(self, name: str) -> np.ndarray:
        """Held activation ``name`` as it is at its planned place now.

        Raises:
            OnnxError: the image does not hold ``name`` (a bug of the runtime, never the user's).
        """
        shape, dtype = self.held.get(name, ((), np.dtype(np.int8)))
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if name in self.aliases and name in self.held:
            return self._read_alias(name, shape, dtype)
        addr = self.address(name, nbytes) if name in self.held else None
        if addr is None:
            raise OnnxError(f"the DRAM image holds no activation {name!r} of {nbytes} bytes at a planned place.")
        sl = self._slices.get(name)
        if sl is not None:
            rows = self._pitched(sl, nbytes // sl.row_bytes)[:, :sl.row_bytes]
            return from_image_layout(np.ascontiguousarray(rows).reshape(-1).view(dtype), shape)
        raw = np.frombuffer(self.machine.read_dram(addr, nbytes), dtype=dtype.newbyteorder("<")).astype(dtype)
        return from_image_layout(raw, shape)

    def forget(self) -> None:
        """Start a new run: no activation is held yet but the resident aliases (weights and relocated
        programs stay)."""
        self.held = {name: (shape, dtype) for name, (place, shape, dtype) in self.aliases.items() if place.resident}

    def alias(self, name: str, place: RowAlias, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Keep activation ``name`` (``shape``, ``dtype``, row-major) at ``place`` instead of its planned offset:
        the host's writes and every step's reads of it go there; a resident one is held from the run's start."""
        rows = int(np.prod(shape)) * np.dtype(dtype).itemsize // place.row_bytes if place.row_bytes else 0
        if rows > 1 and place.pitch < place.row_bytes:
            raise OnnxError(f"alias of {name!r}: rows of {place.row_bytes} bytes cannot be {place.pitch} bytes apart.")
        self.aliases[name] = (place, tuple(shape), np.dtype(dtype))
        if place.resident:
            self.hold(name, shape, dtype)

    def resident(self, name: str) -> bool:
        """Whether activation ``name`` is in DRAM before the run (nothing computes it)."""
        return name in self.aliases and self.aliases[name][0].resident

    def _write_alias(self, name: str, value: np.ndarray) -> None:
        place = self.aliases[name][0]
        if place.row_bytes:
            rows = np.ascontiguousarray(value).reshape(-1).view(np.uint8).reshape(-1, place.row_bytes)
            for r, row in enumerate(rows):
                self._write(place.addr + r * place.pitch, row)
        self.hold(name, value.shape, value.dtype)

    def write_alias_part(self, name: str, value: np.ndarray, axis: int, start: int) -> None:
        """Write ``value``, the part of aliased ``name`` from index ``start`` along ``axis``, into its rows
        (an alias whose rows are ``name``'s dimensions before ``axis``: a KV cache's new positions)."""
        place, shape, dtype = self.aliases[name]
        axis %= len(shape)
        inner = int(np.prod(shape[axis + 1:])) * dtype.itemsize
        if place.row_bytes != shape[axis] * inner:  # never: the LLM image aliases whole rows
            raise OnnxError(f"alias of {name!r}: its rows are not its dimensions before axis {axis}.")
        rows = np.ascontiguousarray(value, dtype).reshape(-1).view(np.uint8).reshape(int(np.prod(shape[:axis])), -1)
        for r, row in enumerate(rows):
            self._write(place.addr + r * place.pitch + start * inner, row)

    def _read_alias(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        place = self.aliases[name][0]
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if not nbytes:
            return np.zeros(shape, dtype)
        rows = read_pitched(self.machine, place.addr, nbytes // place.row_bytes, place.row_bytes, place.pitch)
        return np.ascontiguousarray(rows[:, :place.row_bytes]).reshape(-1).view(dtype).reshape(shape)

    def derive(self, key: tuple[Any, ...], build: Callable[[], T], owner: object = None) -> T:
        """``build()``, made on the first run of the image and kept: ``key`` must name everything it depends on
        (a step's name, the shapes it runs on), so a later run gets what it would build again.

        ``owner``: the one object besides the key's shapes that ``build`` reads (a step's epilogue), when it
        reads nothing of the image's plan: kept in :attr:`shared` while ``owner`` is that very object, so every
        step network of an LLM run that shares the object (its views of one DRAM, each run once) builds it once.
        """
        if owner is not None:
            kept = self.shared.get(key)
            if kept is None or kept[0] is not owner:
                kept = self.shared[key] = (owner, build())
            shared: T = kept[1]
            return shared
        if key not in self.derived:
            self.derived[key] = build()
        hit: T = self.derived[key]
        return hit

    def reserve(self, key: tuple[str, str], nbytes: int) -> int:
        """The address of a layer's weights (or parameter rows) ``key`` of ``nbytes``, placed the first time.

        The compiler places every layer's weights before any run, so ``network.json`` can list them.
        """
        hit = self.reserved.get(key)
        if hit is None:
            hit = (self.weight_base + self.weight_bytes, nbytes)
            self.weight_bytes += round_up(max(nbytes, 1), ALIGN)
            if self.weight_bytes > self.memory.weight_bytes:
                raise OnnxError(f"the DRAM image's weights region ({self.memory.weight_bytes} bytes) is smaller "
                                f"than the layers' weights in their programs' layouts ({self.weight_bytes}+).")
            self.reserved[key] = hit
        return hit[0]

    def weight(self, key: tuple[str, str], data: np.ndarray) -> int:
        """The address of a layer's weights (or parameter rows) ``key``, written the first time."""
        addr = self.weights.get(key)
        if addr is None:
            addr = self.reserve(key, data.nbytes)
            if self.reserved[key][1] != data.nbytes:
                raise OnnxError(f"layer {key[0]!r}: its {key[1]} are {data.nbytes} bytes, not the "
                                f"{self.reserved[key][1]} placed for them.")
            self._write(addr, data)
            self.weights[key] = addr
        return addr

    def stage(self, data: np.ndarray | None, nbytes: int = 0) -> int:
        """Room in the staging area for one layer operand (written if ``data``); :meth:`reset_staging` frees it."""
        size = data.nbytes if data is not None else nbytes
        addr = self.staging_base + self._staged
        self._staged += round_up(max(size, 1), ALIGN)
        self.staging_bytes = max(self.staging_bytes, self._staged)
        if data is not None:
            self._write(addr, data)
        return addr

    def reset_staging(self) -> None:
        self._staged = 0

    def program(self, key: tuple[Any, ...], program: Program, bases: dict[str, int],
                pitches: dict[str, int] | None = None) -> Program:
        """``program`` relocated to ``bases`` (and ``pitches``: :func:`relocate`), once per layer and image."""
        full = (key, tuple(sorted(bases.items())), tuple(sorted((pitches or {}).items())))
        hit = self.programs.get(full)
        if hit is None:
            hit = relocate(program, load_isa(), self.cfg, bases, pitches)
            self.programs[full] = hit
            self.origin[id(hit)] = id(program)
        return hit

    def machine_for(self, program: Program, compiled: Decoded | None = None) -> Any:
        """A :class:`~tinynpu.simulator.Machine` with relocated ``program`` (one of :attr:`programs`) loaded,
        over the image's one machine state (its DRAM and scratchpads).

        Loading decodes and checks every instruction, which took most of a transformer run's time outside
        the simulator when every run loaded every program again; each relocated program is loaded once
        per image instead, on its own front end over the shared state, so a run is what running the
        programs one after another on the image's machine is.  A compiled program's later relocations
        (the same projection for Q, K and V; each residual add) differ from its first only in their
        DRAM addresses: only those words are decoded again (:meth:`Machine.load`'s ``like``), against
        ``compiled``, the compiled program's decoding (made once by the program cache), when given.
        """
        from tinynpu.simulator import Machine

        hit = self.loaded.get(id(program))
        if hit is None:
            hit = Machine(self.cfg, self.machine.isa, self.machine.state)
            # a linked program's words were decoded and checked at compile time: loading compares them against
            # that decoding and decodes (and checks) only what differs, so a changed word faults as before
            hit.load(program, like=self.checked.get(id(program), compiled))
            self.loaded[id(program)] = hit
        return hit

    def check(self, program: Program, compiled: Decoded | None = None) -> None:
        """Decode and check relocated ``program`` (one of :attr:`programs`) as :meth:`machine_for`'s loading
        would, without a machine: what linking at compile time does for every program of a run; the
        decoding is kept in :attr:`checked`, and a later load of the program compares its words against it.

        Raises:
            AsmError: the program was built for another ISA or config.
            SimFault: an undecodable word or a static fault (the same a load of the program raises).
        """
        from tinynpu.simulator.decode import decode_like, decode_program

        if id(program) in self.checked:
            return
        isa = self.machine.isa
        program.check_built_for(isa, self.cfg)
        self.checked[id(program)] = (decode_program(isa, self.cfg, program.words, program.columns)
                                     if compiled is None else
                                     decode_like(isa, self.cfg, program.words, compiled, program.columns))

    def scratch(self) -> DramImage:
        """An image with this one's plan, weight places and aliases over a machine of its own: where the linker
        runs the network's steps without writing this image's DRAM (:func:`.link.link_programs`)."""
        twin = DramImage(self.cfg, self.memory)
        twin.reserved, twin.weight_bytes, twin.aliases = dict(self.reserved), self.weight_bytes, dict(self.aliases)
        return twin

    def adopt(self, linked: DramImage) -> None:
        """Take the relocated programs and their checked decodings of ``linked`` (this image's :meth:`scratch`,
        after linking): a run of this image then relocates and decodes none of them again."""
        self.programs.update(linked.programs)
        self.origin.update(linked.origin)
        self.checked.update(linked.checked)
        self.derived.update(linked.derived)
        self.shared.update(linked.shared)
        self.staging_bytes = max(self.staging_bytes, linked.staging_bytes)

    def touch(self) -> None:
        """Write every byte of DRAM the image uses back as it is, so the OS maps the simulated DRAM's pages now
        (it allocates them lazily: the first write into each page took a first run 7 ms of host time and more
        of its simulation, the page faults of a model's memory, not the host's work or the accelerator's)."""
        nbytes = min(self.peak_bytes, self.cfg.dram_bytes)
        self.machine.write_dram(0, self.machine.read_dram(0, nbytes))

    def _write(self, addr: int, data: np.ndarray) -> None:
        if addr + data.nbytes > self.cfg.dram_bytes:
            raise OnnxError(f"the network's DRAM image needs more than the {self.cfg.dram_bytes} bytes of config "
                            f"{self.cfg.name!r} (activations {self.memory.activation_peak_bytes}, weights "
                            f"{self.memory.weight_bytes}, staging {self.staging_bytes} bytes).")
        self.machine.write_dram(addr, np.ascontiguousarray(data).reshape(-1).view(np.uint8))

    def layout(self) -> dict[str, Any]:
        """Where everything is: the regions, every planned activation, every layer's weights (``network.json``)."""
        return {
            "regions": {"activations": {"address": 0, "bytes": self.memory.activation_peak_bytes},
                        "weights": {"address": self.weight_base, "bytes": self.memory.weight_bytes},
                        "staging": {"address": self.staging_base}},
            "activations": [{"name": b.name, "address": b.offset, "bytes": b.nbytes, "first_step": b.first,
                             "last_step": b.last} for b in self.memory.buffers],
            "channel_slices": [{"name": sl.name, "of": sl.of, "address": self._addr[sl.of] + sl.offset,
                                "row_bytes": sl.row_bytes, "pitch": sl.pitch} for sl in self.memory.slices],
            "weights": [{"layer": key[0], "tensor": key[1], "address": addr, "bytes": nbytes}
                        for key, (addr, nbytes) in self.reserved.items()],
        }

    def to_json(self) -> dict[str, int]:
        return {"dram_image_peak_bytes": self.peak_bytes, "weights_placed_bytes": self.weight_bytes,
                "staging_bytes": self.staging_bytes, "weight_base": self.weight_base}


__all__ = ["DramImage", "RowAlias", "from_image_layout", "image_layout", "read_pitched", "relocate"]
