"""Which definitions of the generated ISA header a set of Verilog sources uses: what a synthesis is keyed on."""

from __future__ import annotations

import re
from collections.abc import Iterable

#: One definition of the generated header: a ``localparam`` (one line) or a whole function.
_DEFINITION = re.compile(r"^localparam\b[^=]*?\b(\w+)\s*=[^;]*;|^function\b[^(]*?\b(\w+)\s*\(.*?^endfunction\b",
                         re.M | re.S)


def header_inputs(header: str, sources: Iterable[str]) -> str:
    """The definitions of the generated ``header`` that ``sources`` use, directly or through other definitions.

    This, not the whole header, is what a synthesis is keyed on.  The header also holds the config's
    name and digest and the ISA digest (comments), every instruction's field positions and every size
    of the config, but Yosys's result depends only on the values the modules read: keyed on the whole
    header, any ISA change or config rename would re-synthesize an unchanged MAC array, and a config
    differing only in DRAM latency (which only the testbench's DRAM model reads) the whole logic.  Every
    name a source mentions counts (a mention in a comment too: one cache miss too many, never a hit
    too many), and the definitions those refer to, so the key changes whenever a value read does.
    """
    defs = {m.group(1) or m.group(2): m.group(0) for m in _DEFINITION.finditer(header)}
    todo = {word for text in sources for word in re.findall(r"\w+", text)} & defs.keys()
    used: set[str] = set()
    while todo:
        name = todo.pop()
        used.add(name)
        todo |= (set(re.findall(r"\w+", defs[name])) & defs.keys()) - used
    return "\n".join(defs[name] for name in sorted(used))


__all__ = ["header_inputs"]
