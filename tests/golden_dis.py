"""Regenerate (or check) the golden disassembly listings tests/golden/*.dis from their .s sources.

    python tests/golden_dis.py           # rewrite every .dis from the disassembler's output now
    python tests/golden_dis.py --check   # exit 1, naming the files, if a .dis is stale

A .dis pins the disassembler's output format; tests/test_asm_golden.py fails on a stale one and
names this command.  Review the diff before committing a regenerated listing: a change there is a
change of the format users see.  The encodings themselves are pinned by hand in the .s files'
``; => 0x...`` comments, which no command writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tinynpu.assembler import assemble, disassemble
from tinynpu.isa import load_config, load_isa

GOLDEN = Path(__file__).resolve().parent / "golden"
COMMAND = "python tests/golden_dis.py"


def listing(source: Path) -> str:
    """The disassembly of the program ``source`` assembles to (default config)."""
    isa, cfg = load_isa(), load_config("default")
    return disassemble(assemble(source.read_text(encoding="utf-8"), filename=str(source), isa=isa, cfg=cfg), isa)


def stale() -> list[Path]:
    """The .dis files that differ from what their .s gives now (or are missing)."""
    out = []
    for source in sorted(GOLDEN.glob("*.s")):
        target = source.with_suffix(".dis")
        if not target.exists() or target.read_text(encoding="utf-8") != listing(source):
            out.append(target)
    return out


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print(f"usage: {COMMAND} [--check]", file=sys.stderr)
        return 2
    paths = stale()
    if argv == ["--check"]:
        for path in paths:
            print(f"{path} is stale: run `{COMMAND}` and review the diff.")
        return 1 if paths else 0
    for path in paths:
        path.write_text(listing(path.with_suffix(".s")), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
