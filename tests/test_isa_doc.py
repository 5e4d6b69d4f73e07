"""The Markdown reference: a pure function of the spec, complete, and committed up to date."""

from __future__ import annotations

from tinynpu.isa import load_config, load_isa
from tinynpu.isa.cli import DOC_CONFIGS
from tinynpu.isa.gen_markdown import ISA_MD_PATH, generate_markdown


def test_committed_reference_is_current() -> None:
    isa = load_isa()
    text = generate_markdown(isa, [load_config(name, isa) for name in DOC_CONFIGS])
    assert ISA_MD_PATH.read_text(encoding="utf-8") == text, \
        f"{ISA_MD_PATH} is stale: run `tinynpu isa doc` and commit the result"


def test_reference_covers_the_spec() -> None:
    isa = load_isa()
    cfgs = [load_config("default", isa), load_config("fp32", isa)]
    text = generate_markdown(isa, cfgs)
    assert text == generate_markdown(isa, cfgs)  # pure: same input, same output
    for heading in ("## Units", "## Scopes", "## Synchronization", "## Timing", "## Timing classes",
                    "## Instructions", "## Configurations"):
        assert f"\n{heading}\n" in text
    for instr in isa.instructions:
        section = text.split(f"### `{instr.mnemonic}`", 1)[1].split("\n### ", 1)[0]
        assert instr.assembly in section and instr.semantics.strip().splitlines()[0] in section
        for fld in instr.fields:
            assert f"| `{fld.name}` |" in section, (instr.mnemonic, fld.name)
        for fixed in instr.fixed:
            bits = f"{fixed.msb}" if fixed.msb == fixed.lsb else f"{fixed.msb}:{fixed.lsb}"
            width = fixed.msb - fixed.lsb + 1
            assert f"| {bits} | {width} | `{fixed.name}` | = {fixed.value:#x} |" in section
    for t in isa.timing_classes:
        assert f"| `{t.name}` |" in text
    macs = " | ".join(str(c.macs_per_cycle) for c in cfgs)
    assert f"| MACs / cycle | {macs} |" in text
