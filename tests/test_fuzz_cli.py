"""Fuzzing: every command and input class, no traceback, crash or hang, nothing changed that was not asked.

A bounded slice runs by default; ``test_fuzz_counts`` (slow) runs 1,200 inputs and prints the counts, as
``python tests/fuzz_support.py --inputs 1200`` does.  The property tests feed Hypothesis-made inputs
straight to the readers (assembler, YAML loader, .npy reader, image parser): each must either succeed or
raise the project's own error type.
"""

from __future__ import annotations

import contextlib
import io
import json
import struct
import zlib
from pathlib import Path

import pytest
from fuzz_support import OUTCOMES, Inputs, cases, counts, run_cases, summary
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinynpu import fsio
from tinynpu.assembler.assemble import assemble
from tinynpu.assembler.image import Program
from tinynpu.errors import AsmError, SpecError, TinyNpuError, UsageError
from tinynpu.isa import load_config, load_isa
from tinynpu.isa.yamlsrc import load_yaml

BAD = ("traceback", "crash", "hang", "violation")


def _assert_clean(results: list) -> None:  # type: ignore[type-arg]
    c = counts(results)
    assert all(c[k] == 0 for k in BAD), summary(results)


def test_fuzz_slice_of_every_input_class() -> None:
    batch = cases(60, seed=0)
    assert {c.kind for c in batch} == {"assembly", "binary", "manifest", "npy", "config", "isa", "schedule",
                                       "numbers", "outputs", "environment"}
    _assert_clean(run_cases(batch))


@pytest.mark.slow
def test_fuzz_counts(capsys: pytest.CaptureFixture[str]) -> None:
    results = run_cases(cases(1200, seed=0))
    with capsys.disabled():
        print("\n" + summary(results))
    assert sum(counts(results)[k] for k in OUTCOMES) == 1200
    _assert_clean(results)


# ---------------------------------------------------------------- properties, in-process

ISA = load_isa()
CFG = load_config("default", ISA)
PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_ATOMS = st.one_of(st.integers(min_value=-(2**70), max_value=2**70).map(str), st.sampled_from(["X", "M", "(", ")"]))
_OPS = st.sampled_from(["+", "-", "*", "/", "//", "%", "<<", ">>", "~", "(", ")", " "])
EXPRESSIONS = st.lists(st.one_of(_ATOMS, _OPS), min_size=1, max_size=40).map(" ".join)


@PROPS
@given(expr=EXPRESSIONS, nest=st.integers(min_value=0, max_value=300))
def test_any_constant_expression_assembles_or_is_an_asm_error(expr: str, nest: int) -> None:
    source = f".equ M, 7\n.equ X, {'(' * nest}{expr}{')' * nest}\nsync wait=X\nhalt\n"
    with contextlib.suppress(AsmError):
        assemble(source, filename="fuzz.s", isa=ISA, cfg=CFG)


@PROPS
@given(line=st.text(min_size=0, max_size=200))
def test_any_line_assembles_or_is_an_asm_error(line: str) -> None:
    with contextlib.suppress(AsmError):
        assemble(line + "\nhalt\n", filename="fuzz.s", isa=ISA, cfg=CFG)


_YAML_PIECES = st.sampled_from(["a:", " b:", "- ", "&x ", "*x ", "[", "]", "{", "}", ",", "<<: *x", "\n", "  ",
                                "2048.0", "16", "'s'", "? ", "!!int ", "!!python/object ", "\t", "\0", "#", "|",
                                "9" * 5000, "tile: 16", "name: x"])


@PROPS
@given(pieces=st.lists(_YAML_PIECES, max_size=60))
def test_any_yaml_loads_or_is_a_spec_error(tmp_path_factory: pytest.TempPathFactory, pieces: list[str]) -> None:
    path = tmp_path_factory.mktemp("yaml") / "cfg.yaml"
    path.write_text("".join(pieces), encoding="utf-8")
    try:
        load_yaml(path)
        load_config(str(path), ISA)
    except SpecError:
        pass


@PROPS
@given(data=st.binary(max_size=300), keep=st.integers(min_value=0, max_value=200))
def test_any_npy_bytes_read_or_are_a_usage_error(tmp_path_factory: pytest.TempPathFactory, data: bytes,
                                                 keep: int) -> None:
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.arange(6, dtype=np.int16).reshape(2, 3))
    good = buf.getvalue()
    path = tmp_path_factory.mktemp("npy") / "x.npy"
    path.write_bytes(good[:keep] + data)
    with contextlib.suppress(UsageError):
        fsio.read_npy(path, what="--input X")


SEED = Inputs(0).seed_bin
_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
                     lambda inner: st.one_of(st.lists(inner, max_size=4),
                                             st.dictionaries(st.sampled_from(["name", "addr", "shape", "dtype",
                                                                              "role", "tensors"]), inner,
                                                             max_size=5)), max_leaves=20)


@PROPS
@given(manifest=_JSON)
def test_any_crc_valid_manifest_loads_or_is_an_asm_error(manifest: object) -> None:
    words_end = 48 + 16 * struct.unpack_from("<I", SEED, 40)[0]
    body = SEED[48:words_end] + json.dumps(manifest).encode()
    head = bytearray(SEED[:48])
    struct.pack_into("<I", head, 44, zlib.crc32(body))
    try:
        program = Program.from_bytes(bytes(head) + body, where="fuzz.bin")
        program.check_built_for(ISA, CFG, where="fuzz.bin")
    except TinyNpuError:
        pass


def test_fuzz_support_runs_as_a_command(tmp_path: Path) -> None:
    """The command that prints the counts (run here on a handful of inputs)."""
    import subprocess
    import sys

    script = Path(__file__).with_name("fuzz_support.py")
    proc = subprocess.run([sys.executable, str(script), "--inputs", "10", "--seed", "3"], capture_output=True,
                          text=True, timeout=600, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("fuzz: 10 inputs") and "0 tracebacks, 0 crashes, 0 hangs" in proc.stdout
