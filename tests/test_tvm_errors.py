"""Every user error of the TVM front end is one paragraph naming the TIR statement, buffer or file, and a
non-zero exit from ``tinynpu run tvm``."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from tvm_support import ROOT, example, require_tvm

from tinynpu.cli import main
from tinynpu.errors import UsageError
from tinynpu.isa import load_config

LESSON = ROOT / "examples" / "tvm" / "lesson.py"


def test_a_missing_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tvm" else real(name, *a))
    script = tmp_path / "s.py"
    script.write_text("def schedule(config):\n    raise AssertionError('never called')\n")
    assert main(["run", "tvm", str(script)]) == 2
    err = capsys.readouterr().err
    assert "Apache TVM is not installed" in err and "pip install 'tinynpu[tvm]'" in err
    assert "Traceback" not in err


def _lower(sch, config: str = "default"):  # type: ignore[no-untyped-def]
    from tinynpu.compiler import tvm as npu

    return npu.lower(sch, load_config(config))


def test_no_tensorized_block() -> None:
    require_tvm()
    from tvm import s_tir

    cfg = load_config("default")
    sch = s_tir.Schedule(example("tvm/lesson").matmul_module(32, 32, 32, cfg))
    with pytest.raises(UsageError, match=r"no tensorized block: no statement calls tmm16.*sch.tensorize"):
        _lower(sch)


def test_an_intrinsic_of_another_tile_edge() -> None:
    """Tensorized with t8's tmm8, lowered for the default config (tile edge 16)."""
    require_tvm()
    sch = example("tvm/lesson").lesson_schedule(32, 32, 32, "t8")
    with pytest.raises(UsageError, match=r"TIR statement `T\.call_extern.*tmm8.*calls tmm8, a tmm intrinsic for 8 x 8 "
                                         r"tiles, but config 'default' has tile edge 16"):
        _lower(sch, "default")


def test_a_buffer_in_an_unknown_scope() -> None:
    require_tvm()
    from tvm import s_tir

    from tinynpu.compiler import tvm as npu

    cfg = load_config("default")
    npu.register_intrinsics(cfg)
    sch = s_tir.Schedule(example("tvm/lesson").matmul_module(32, 32, 32, cfg))
    block = sch.get_sblock("matmul")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    a_reg = sch.cache_read(block, 0, storage_scope="global.A_reg")
    b_reg = sch.cache_read(block, 1, storage_scope="global.B_reg")
    sch.compute_at(a_reg, k0)
    sch.compute_at(b_reg, k0)
    shared = sch.cache_read(a_reg, 0, storage_scope="shared")  # a GPU scope tinynpu does not have
    sch.compute_at(shared, k0)
    acc = sch.cache_write(block, 0, storage_scope="global.accumulator")
    sch.reverse_compute_at(acc, j0)
    sch.decompose_reduction(block, k0)
    sch.tensorize(i1, "tmm16")
    with pytest.raises(UsageError, match=r"buffer A_shared is allocated in scope 'shared'; tinynpu's scopes are "
                                         r"global\.A_reg, global\.B_reg, global\.accumulator"):
        _lower(sch)


def test_buffers_that_overflow_a_scratchpad() -> None:
    require_tvm()
    blocked = example("tvm/blocked")
    sch = blocked.blocked_schedule(64, 1024, 64, "default", bm=1, bn=64)  # a 1024 x 64 B panel: 4096 rows
    with pytest.raises(UsageError, match=r"buffer B_global\.B_reg \(\[1024, 64\] int8\) needs scratchpad rows "
                                         r"0\.\.4095 of global\.B_reg, which has 2048 rows"):
        _lower(sch)


def test_a_file_without_schedule_and_a_failing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_tvm()
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    assert main(["run", "tvm", str(empty)]) == 2
    assert "defines no function schedule(config)" in capsys.readouterr().err
    failing = tmp_path / "failing.py"
    failing.write_text("def schedule(config):\n    return 1 / 0\n")
    assert main(["run", "tvm", str(failing)]) == 2
    err = capsys.readouterr().err
    assert f"{failing}:2: schedule(config) failed: ZeroDivisionError" in err and "Traceback" not in err
    missing = tmp_path / "nothere.py"
    assert main(["run", "tvm", str(missing)]) == 2
    assert "no such file" in capsys.readouterr().err


def test_run_tvm_reports_like_run_matmul(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_tvm()
    import json

    script = tmp_path / "lesson64.py"
    script.write_text("import importlib.util, sys\n"
                      f"spec = importlib.util.spec_from_file_location('lesson64_src', {str(LESSON)!r})\n"
                      "lesson = importlib.util.module_from_spec(spec)\n"
                      "sys.modules['lesson64_src'] = lesson\n"
                      "spec.loader.exec_module(lesson)\n\n"
                      "def schedule(config):\n"
                      "    return lesson.lesson_schedule(64, 64, 64, config)\n")
    assert main(["run", "tvm", str(script), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] is True and report["workload"]["kind"] == "tvm"
    assert (report["workload"]["m"], report["workload"]["n"], report["workload"]["k"]) == (64, 64, 64)
    assert report["instructions"]["total"] == 225 and report["cycles"] > 0
    assert any("sch.tensorize" in step["python"] for step in report["trace"])
    assert main(["run", "tvm", str(script)]) == 0
    table = capsys.readouterr().out
    assert re.search(r"^verified vs numpy +True$", table, re.M) and re.search(r"^cycles +12,610$", table, re.M)
    assert "sch.tensorize" in table


def _named_tmm16_with_b_from_a_reg():  # type: ignore[no-untyped-def]
    """A function calling an extern named tmm16 whose B operand lives in global.A_reg."""
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((16, 16), "int8"), C: T.Buffer((16, 16), "int32")) -> None:
        acc = T.alloc_buffer((16, 16), "int32", scope="global.accumulator")
        a = T.alloc_buffer((16, 16), "int8", scope="global.A_reg")
        for i, j in T.grid(16, 16):
            with T.sblock("load_a"):
                vi, vj = T.axis.remap("SS", [i, j])
                a[vi, vj] = A[vi, vj]
        for i, j in T.grid(16, 16):
            with T.sblock("init"):
                vi, vj = T.axis.remap("SS", [i, j])
                acc[vi, vj] = 0
        with T.sblock("call"):
            T.evaluate(T.call_extern("int32", "tmm16",
                                     T.tvm_access_ptr(T.type_annotation("int32"), acc.data, 0, 256, 2),
                                     T.tvm_access_ptr(T.type_annotation("int8"), a.data, 0, 256, 1),
                                     T.tvm_access_ptr(T.type_annotation("int8"), a.data, 0, 256, 1), 16, 16, 16))
        for i, j in T.grid(16, 16):
            with T.sblock("store"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = acc[vi, vj]

    return main


def test_a_call_named_like_the_intrinsic_is_checked_operand_by_operand() -> None:
    require_tvm()
    want = (r"TIR statement `T\.call_extern\(\"int32\", \"tmm16\".*`: operand 3 \(B\) is a in global\.A_reg as "
            r"int8; tmm16 of config 'default' takes int8 in global\.B_reg")
    with pytest.raises(UsageError, match=want):
        _lower(_named_tmm16_with_b_from_a_reg())


def test_a_function_that_is_no_gemm_needs_a_reference() -> None:
    require_tvm()
    from tinynpu.compiler import tvm as npu

    sch = example("tvm/conv2d").conv2d_schedule(1, 3, 18, 16, 16, 3, 3, "default")
    with pytest.raises(UsageError, match=r"the function is not a GEMM .*give one \(reference\(inputs\)"):
        npu.compile_tvm(sch, config="default")
