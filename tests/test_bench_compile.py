"""``bench_compile`` rebuilds each GEMM of the LLM's program cache from its key's epilogue form."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinynpu.compiler.bench_compile import _epilogue_of_form, main


@pytest.mark.parametrize("form, requantizer, bias, zero_point, clamp", [
    ("int8_binary32_bias_clamp-128to127", "binary32", True, 0, (-128, 127)),
    ("int8_binary32_clamp-128to127", "binary32", False, 0, (-128, 127)),
    ("int8_q31_bias_zp_clamp7to120", "q31", True, 7, (7, 120)),
    ("int8_q31_zp_clamp-128to127", "q31", False, 1, (-128, 127)),
])
def test_epilogue_of_form(form: str, requantizer: str, bias: bool, zero_point: int, clamp: tuple[int, int]) -> None:
    epi = _epilogue_of_form(form, 37, seed=1)
    assert (epi.requantizer, epi.bias is not None, epi.zero_point, (epi.lo, epi.hi), epi.channels) == (
        requantizer, bias, zero_point, clamp, 37)


def test_epilogue_of_form_refuses_another_key() -> None:
    with pytest.raises(ValueError, match="not an epilogue form: 'int8_binary32'"):
        _epilogue_of_form("int8_binary32", 4, seed=0)


def test_a_baseline_without_its_venv_is_named(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=f"the baseline {tmp_path} has no .venv/bin/python"):
        main(["--baseline", str(tmp_path)])


def test_the_baseline_is_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2 and "--baseline DIR is needed" in capsys.readouterr().err
