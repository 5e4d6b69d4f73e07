"""Fuzzing ``run onnx``/``compile onnx``: every ONNX input class of ``fuzz_onnx``, no traceback, crash or hang,
every error one ``tinynpu: error:`` paragraph with exit 2, nothing written on a failure.

A seeded sample of each class runs by default; ``test_onnx_fuzz_counts`` (slow, TINYNPU_SLOW=1) runs the
650-input campaign and prints the counts per class, as ``python tests/fuzz_onnx.py --inputs 650`` does.
"""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from fuzz_onnx import KINDS, onnx_cases, run_onnx_cases, summary_by_kind  # noqa: E402
from fuzz_support import OUTCOMES, counts  # noqa: E402

BAD = ("traceback", "crash", "hang", "violation")
SAMPLE_PER_CLASS = 4


def _assert_clean(results: list) -> None:  # type: ignore[type-arg]
    c = counts(results)
    assert all(c[k] == 0 for k in BAD), summary_by_kind(results)
    errors = [r for r in results if r.outcome == "error"]
    assert all(r.detail.startswith("tinynpu: error: ") for r in errors), summary_by_kind(results)


@pytest.mark.parametrize("kind", KINDS)
def test_onnx_fuzz_sample(kind: str) -> None:
    cases = onnx_cases(SAMPLE_PER_CLASS, seed=KINDS.index(kind) + 11, kinds=(kind,))
    assert {c.kind for c in cases} == {kind}
    results = run_onnx_cases(cases)
    _assert_clean(results)
    # Each class damages models: most of them are refused (a class of only successes would test nothing).
    assert counts(results)["error"] >= 1 or kind == "onnx-external", summary_by_kind(results)


@pytest.mark.slow
def test_onnx_fuzz_counts(capsys: pytest.CaptureFixture[str]) -> None:
    results = run_onnx_cases(onnx_cases(650, seed=0))
    with capsys.disabled():
        print("\n" + summary_by_kind(results))
    assert sum(counts(results)[k] for k in OUTCOMES) == 650
    _assert_clean(results)
