"""The TVM front end: the lesson's schedule lowers to examples/seed.py's program, other schedules to the
compiler's own programs, and every lowered program runs and matches numpy."""

from __future__ import annotations

import time

import pytest
from tvm_support import cycles, example, require_tvm, seed_program, without_tokens

from tinynpu.compiler.matmul import compile_matmul
from tinynpu.compiler.run import run_compiled
from tinynpu.compiler.schedule import Tiling, from_tiling
from tinynpu.isa import load_config

require_tvm()

from tinynpu.compiler import tvm as npu  # noqa: E402  (after the skip: needs the extra)

lesson = example("tvm/lesson")


@pytest.mark.parametrize(("size", "config"), [(64, "default"), (128, "default"), (64, "t8"), (32, "fp32")])
def test_lesson_is_the_seed_program(size: int, config: str) -> None:
    """Instruction for instruction (tokens aside) and cycle for cycle, in several configs."""
    cfg = load_config(config)
    low = npu.lower(lesson.lesson_schedule(size, size, size, cfg), cfg)
    seed = seed_program(size, size, size, cfg)
    assert without_tokens(low.program.words) == without_tokens(seed.words)
    assert low.program.tensors == seed.tensors
    assert cycles(low.program, cfg) == cycles(seed, cfg)


@pytest.mark.slow
def test_lesson_1024_lowers_in_seconds_to_the_seed_program() -> None:
    cfg = load_config("default")
    sch = lesson.lesson_schedule(1024, 1024, 1024, cfg)
    t0 = time.perf_counter()
    low = npu.lower(sch, cfg)
    seconds = time.perf_counter() - t0
    seed = seed_program(1024, 1024, 1024, cfg)
    assert without_tokens(low.program.words) == without_tokens(seed.words)
    assert seconds <= 10.0, f"the 1024^3 lowering took {seconds:.1f} s"
    assert cycles(low.program, cfg) == cycles(seed, cfg)


@pytest.mark.parametrize(("m", "n", "k", "order"), [(64, 32, 48, "mn"), (48, 64, 32, "nm"), (16, 80, 16, "nm")])
def test_loop_orders_and_shapes_give_the_compilers_program(m: int, n: int, k: int, order: str) -> None:
    """The seed loop in either block order, non-square: the program compile_matmul emits for that tiling."""
    cfg = load_config("default")
    sch = lesson.lesson_schedule(m, n, k, cfg, order=order)
    low = npu.lower(sch, cfg)
    tiling = Tiling(bm=1, bn=1, bk=1, order=order, double_buffer=False, init="fill_zero")
    ours = compile_matmul(m, n, k, schedule=from_tiling(tiling, cfg, name="naive"), cfg=cfg)
    assert without_tokens(low.program.words) == without_tokens(ours.program.words)


@pytest.mark.parametrize(("m", "n", "k", "config"), [(48, 32, 80, "default"), (32, 48, 16, "t8"),
                                                     (32, 32, 48, "fp32")])
def test_lowered_programs_match_numpy(m: int, n: int, k: int, config: str) -> None:
    cfg = load_config(config)
    report = run_compiled(npu.compile_tvm(lesson.lesson_schedule(m, n, k, cfg), config=cfg), cfg=cfg)
    assert report["verified"] is True
    assert report["workload"]["m"] == m and report["macs"] == m * n * k


def _mnemonics(compiled) -> dict[str, int]:  # type: ignore[no-untyped-def]
    counts: dict[str, int] = {}
    for mnemonic, _ in without_tokens(compiled.program.words):
        counts[mnemonic] = counts.get(mnemonic, 0) + 1
    return counts


@pytest.mark.parametrize(("pipeline", "fold"), [(True, True), (False, False), (True, False)])
def test_blocked_schedule_with_panels_pipeline_and_folded_init(pipeline: bool, fold: bool) -> None:
    """Resident B panel, software-pipelined A, double-buffered accumulator, init folded into tmm: all race-free
    and equal to numpy; folding leaves no zero and makes each output tile's first tmm overwrite."""
    cfg = load_config("default")
    sch = example("tvm/blocked").blocked_schedule(64, 64, 48, cfg, bm=2, bn=2, pipeline=pipeline, fold=fold)
    compiled = npu.compile_tvm(sch, config=cfg)
    report = run_compiled(compiled, cfg=cfg, check_races=True)
    assert report["verified"] is True
    counts = _mnemonics(compiled)
    tiles = (64 // 16) * (64 // 16)
    assert counts["tmm"] == tiles * 3
    overwrite = sum(1 for m, f in without_tokens(compiled.program.words) if m == "tmm" and dict(f)["accumulate"] == 0)
    assert (counts.get("zero", 0), overwrite) == ((0, tiles) if fold else (4, 0))  # 4 blocks of 2 x 2 tiles
    accs = {dict(f)["acc"] for m, f in without_tokens(compiled.program.words) if m == "tmm"}
    assert accs == set(range(8)) if pipeline else accs == set(range(4))  # two versions of a 2 x 2-tile block


def test_conv2d_by_implicit_im2col_matches_numpy() -> None:
    """Input pixels x channels loaded straight from the NHWC tensor as A tiles; checked against numpy."""
    conv = example("tvm/conv2d")
    cfg = load_config("default")
    sch = conv.conv2d_schedule(1, 4, 18, 32, 32, 3, 3, cfg)
    compiled = npu.compile_tvm(sch, config=cfg, reference=lambda x: conv.conv2d_reference(x, 3, 3))
    report = run_compiled(compiled, cfg=cfg, check_races=True)
    assert report["verified"] is True and report["workload"]["O"] == "1x2x16x32 int32"
    assert report["issued_macs"] == 1 * 2 * 16 * 32 * 3 * 3 * 32
