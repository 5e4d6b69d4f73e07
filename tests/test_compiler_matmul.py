"""Compiler core: GEMM vs numpy, traffic accounting, traces, the naive seed loop, bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tinynpu.assembler.image import Program, Tensor
from tinynpu.compiler import Schedule, Tiling, compile_matmul, run_compiled
from tinynpu.compiler.bounds import best_tiling_bytes, matmul_io_lower_bound, tiling_traffic
from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.lower import Bias, lower_gemm
from tinynpu.compiler.operands import DenseOperand, DenseOutput
from tinynpu.compiler.schedule import STREAM_BUFFERS, apply, fits, from_tiling, naive
from tinynpu.errors import TinyNpuError, UsageError
from tinynpu.intmath import ceil_div
from tinynpu.isa import ArchConfig, load_config, load_isa
from tinynpu.simulator import Machine

CFG = load_config("default")
FP = load_config("fp32")
SIZES = st.integers(min_value=1, max_value=300)


EDGE_CONFIGS = tuple(load_config(name) for name in ("t8", "default", "t32"))  # T = 8, 16, 32


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=SIZES, n=SIZES, k=SIZES, seed=st.integers(0, 2**16), cfg=st.sampled_from(EDGE_CONFIGS))
def test_auto_int8_matches_numpy(m: int, n: int, k: int, seed: int, cfg: ArchConfig) -> None:
    report = run_compiled(compile_matmul(m, n, k, cfg=cfg), seed=seed)
    assert report["verified"] is True


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=SIZES, n=SIZES, k=SIZES)
def test_auto_fp32_matches_numpy(m: int, n: int, k: int) -> None:
    report = run_compiled(compile_matmul(m, n, k, dtype="fp32"))
    assert report["verified"] is True


@st.composite
def tilings(draw: st.DrawFn) -> tuple[int, int, int, Tiling, ArchConfig]:
    cfg = draw(st.sampled_from(EDGE_CONFIGS))
    m, n, k = draw(st.integers(1, 140)), draw(st.integers(1, 140)), draw(st.integers(1, 140))
    e = cfg.tile
    t = Tiling(bm=draw(st.integers(1, ceil_div(m, e))), bn=draw(st.integers(1, ceil_div(n, e))),
               bk=draw(st.integers(1, ceil_div(k, e))), order=draw(st.sampled_from(["mn", "nm"])),
               double_buffer=draw(st.booleans()), acc_buffers=draw(st.sampled_from([1, 2])),
               init=draw(st.sampled_from(["fold", "fill_zero"])))
    if draw(st.booleans()):  # a resident panel: the whole K in one chunk, matching order
        t = replace(t, bk=ceil_div(k, e), resident="a" if t.order == "mn" else "b",
                    panel_buffers=draw(st.sampled_from([1, 2])))
    if t.double_buffer:  # two buffers or a ring of streamed chunks
        t = replace(t, stream_buffers=draw(st.sampled_from(STREAM_BUFFERS[1:])))
    assume(fits(t, cfg))
    return m, n, k, t, cfg


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=tilings(), out=st.sampled_from([None, "int8"]), layout=st.sampled_from(["nt", "nn"]),
       relu=st.booleans())
def test_any_schedule_in_the_space_is_correct_and_race_free(case: tuple[int, int, int, Tiling, ArchConfig],
                                                            out: str | None, layout: str, relu: bool) -> None:
    m, n, k, t, cfg = case
    compiled = compile_matmul(m, n, k, schedule=from_tiling(t, cfg, "t"), out_dtype=out, layout=layout,
                              relu=relu, cfg=cfg)
    report = run_compiled(compiled, check_races=True)
    assert report["verified"] is True
    # Traffic is exactly what the bounds module's formula says for this tiling.
    assert report["dram_bytes"] == tiling_traffic(m, n, k, t, cfg, in_bytes=1, out_bytes=1 if out else 4)


def test_traffic_matches_hand_counts() -> None:
    # naive 32x32x32 int8: for each of the 2x2 output tiles and 2 k-steps, one 16x16 A and B tile
    # (256 B each): 2*2*2*2*256 = 4096 B read; C written once as int32: 32*32*4 = 4096 B.
    r = run_compiled(compile_matmul(32, 32, 32, schedule="naive"))
    assert (r["dram_read_bytes"], r["dram_write_bytes"]) == (4096, 4096)
    # One 2x2-tile block: A and B read once (1024 B each), C written once.
    r = run_compiled(compile_matmul(32, 32, 32, schedule=from_tiling(Tiling(bm=2, bn=2, bk=2), CFG)))
    assert (r["dram_read_bytes"], r["dram_write_bytes"]) == (2048, 4096)
    # Edge tiles: cols < 16 are read as cols, rows past M are never read: 20x18x5 naive reads
    # A (20 rows x 5 cols) once per column tile (2) and B (18 x 5) once per row tile (2).
    r = run_compiled(compile_matmul(20, 18, 5, schedule="naive"))
    assert (r["dram_read_bytes"], r["dram_write_bytes"]) == (20 * 5 * 2 + 18 * 5 * 2, 20 * 18 * 4)


def test_bounds_hand_values() -> None:
    # 1024^3 int8 with int8 output: (2*M*N*K/sqrt(S) - 2S) + M*N, S = (2048 + 2048 + 1024) * 16 = 81920.
    s = 81920
    want = int(np.ceil(2 * 1024**3 / np.sqrt(s))) - 2 * s + 1024 * 1024
    assert matmul_io_lower_bound(1024, 1024, 1024, CFG, in_bytes=1, out_bytes=1) == want
    # 512x512x64 nearly fits on chip: the bound is compulsory traffic, and no schedule may beat it.
    assert matmul_io_lower_bound(512, 512, 64, CFG, in_bytes=1, out_bytes=1) == 2 * 512 * 64 + 512 * 512
    assert best_tiling_bytes(512, 512, 64, CFG, in_bytes=1, out_bytes=1) >= 2 * 512 * 64 + 512 * 512
    # Best tiling of the space: 128x128 output blocks, A and B each read 1024/128 = 8 times.
    assert best_tiling_bytes(1024, 1024, 1024, CFG, in_bytes=1, out_bytes=4) == 16 * 2**20 + 4 * 2**20
    # Small case where everything fits one block: compulsory traffic.
    assert best_tiling_bytes(40, 30, 20, CFG, in_bytes=1, out_bytes=4) == 40 * 20 + 30 * 20 + 40 * 30 * 4


def test_seed_1024_compiles_fast_and_is_traffic_optimal() -> None:
    c = compile_matmul(1024, 1024, 1024)
    assert c.model["dram_bytes"] == c.bounds.best_tiling_bytes
    assert c.bounds.padding_ceiling == 1.0


def test_every_tiling_replays_from_its_trace() -> None:
    for t in (Tiling(bm=2, bn=3, bk=4),
              Tiling(bm=1, bn=1, bk=1, order="nm", double_buffer=False, acc_buffers=2, init="fill_zero"),
              Tiling(bm=2, bn=2, bk=5, resident="a", panel_buffers=1),
              Tiling(bm=3, bn=1, bk=5, order="nm", double_buffer=False, resident="b", panel_buffers=2),
              Tiling(bm=1, bn=2, bk=1, stream_buffers=3),
              Tiling(bm=1, bn=2, bk=2, resident="a", panel_buffers=1, stream_buffers=4),
              Tiling(bm=2, bn=1, bk=1, order="nm", resident="b", stream_buffers=3)):
        assert apply(from_tiling(t, CFG), m=64, n=64, k=80, cfg=CFG) == t


def test_trace_save_and_replay_gives_identical_program(tmp_path: Path) -> None:
    c = compile_matmul(200, 130, 90)
    path = tmp_path / "s.json"
    Schedule(name="saved", steps=c.trace).save(path)
    again = compile_matmul(200, 130, 90, schedule=str(path))
    assert again.program.words == c.program.words
    assert again.trace == c.trace


def test_naive_is_the_course_seed_loop() -> None:
    """Per (i, j): fill_zero(acc); per k: load A tile, load B tile, tmm16; store the tile."""
    m, n, k = 48, 32, 64
    c = compile_matmul(m, n, k, schedule="naive")
    isa = load_isa()
    got = [isa.decode(w) for w in c.program.words]
    expected: list[tuple[str, dict[str, int]]] = []
    a_addr, b_addr, c_addr = (c.program.tensor(x).addr for x in ("A", "B", "C"))
    for i in range(m // 16):
        for j in range(n // 16):
            expected.append(("zero", {"scope": 2, "sp_row": 0, "rows": 16}))
            for kk in range(k // 16):
                expected.append(("load", {"scope": 0, "sp_row": 0, "dram": a_addr + i * 16 * k + kk * 16,
                                          "rows": 16, "cols": 16, "stride": k}))
                expected.append(("load", {"scope": 1, "sp_row": 0, "dram": b_addr + j * 16 * k + kk * 16,
                                          "rows": 16, "cols": 16, "stride": k}))
                expected.append(("tmm", {"acc": 0, "a": 0, "b": 0, "m": 1, "n": 1, "k": 1, "accumulate": 1}))
            expected.append(("store", {"sp_row": 0, "dram": c_addr + (i * 16 * n + j * 16) * 4, "rows": 16,
                                       "cols": 16, "stride": n * 4, "narrow": 0}))
    expected.append(("halt", {}))
    assert len(got) == len(expected)
    for idx, ((instr, fields), (mn, want)) in enumerate(zip(got, expected, strict=True)):
        assert instr.mnemonic == mn, idx
        assert {f: fields[f] for f in want} == want, idx
    assert run_compiled(c)["verified"] is True


def test_seed_program_fp32_naive() -> None:
    r = run_compiled(compile_matmul(64, 64, 64, dtype="fp32", schedule="naive"))
    assert r["verified"] is True


def test_nn_layout_counts_host_traffic() -> None:
    c = compile_matmul(30, 40, 50, layout="nn")
    assert c.host_traffic_bytes == 2 * 40 * 50
    assert run_compiled(c)["verified"] is True


def test_bias_and_requantized_relu_output() -> None:
    isa = load_isa()
    m, n, k = 37, 45, 70
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    bias = rng.integers(-5000, 5000, n, dtype=np.int32)
    tensors = [Tensor("A", 0, (m, k), "int8"), Tensor("B", 4096, (n, k), "int8"),
               Tensor("bias", 8192, (n,), "int32"), Tensor("C", 12288, (m, n), "int8", "output")]
    for t in (Tiling(bm=2, bn=2, bk=2), Tiling(bm=3, bn=3, bk=5, acc_buffers=2),
              Tiling(bm=1, bn=1, bk=1, double_buffer=False, init="fill_zero")):
        emit = Emitter(isa, CFG)
        lower_gemm(emit, m=m, n=n, k=k, a=DenseOperand(0, m, k, 1), b=DenseOperand(4096, n, k, 1),
                   c=DenseOutput(12288, n, 1, narrow=True, shift=9, relu=True), tiling=t, bias=Bias(8192, n))
        words, _ = emit.finish()
        machine = Machine(CFG, isa)
        machine.load(Program.build(isa, CFG, words, tensors))
        for name, arr in (("A", a), ("B", b), ("bias", bias)):
            machine.write_tensor(name, arr)
        machine.run(check_races=True)
        wide = (a.astype(np.int64) @ b.T.astype(np.int64) + bias).astype(np.int32).astype(np.int64)
        want = np.clip(np.maximum((wide + 256) >> 9, 0), -128, 127).astype(np.int8)
        np.testing.assert_array_equal(machine.read_tensor("C"), want)


# -- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("sizes", [(0, 4, 4), (4, -1, 4), (4, 4, 0)])
def test_non_positive_sizes(sizes: tuple[int, int, int]) -> None:
    with pytest.raises(UsageError, match="positive integer"):
        compile_matmul(*sizes)


def test_absurd_sizes_beyond_dram() -> None:
    with pytest.raises(UsageError, match="does not fit DRAM"):
        compile_matmul(100000, 100000, 100000)


def test_unsupported_dtype_for_config() -> None:
    with pytest.raises(UsageError, match="not supported by config 'default'"):
        compile_matmul(16, 16, 16, dtype="fp32", cfg=CFG)
    with pytest.raises(UsageError, match="dtype must be one of"):
        compile_matmul(16, 16, 16, dtype="int4")
    with pytest.raises(UsageError, match="out_dtype"):
        compile_matmul(16, 16, 16, dtype="fp32", out_dtype="int8")


def test_tiles_that_do_not_fit_a_scope_name_it() -> None:
    big = from_tiling(Tiling(bm=16, bn=8, bk=1), CFG, "big")  # acc needs 128 tiles, has 64
    with pytest.raises(UsageError, match=r"scope 'acc'.*131072 bytes.*65536 bytes"):
        compile_matmul(1024, 1024, 64, schedule=big)
    wide_k = from_tiling(Tiling(bm=8, bn=1, bk=16), CFG, "k")  # a_reg: 2 x 8 x 16 tiles = 64 KiB > 32 KiB
    with pytest.raises(UsageError, match=r"scope 'a_reg'"):
        compile_matmul(128, 16, 256, schedule=wide_k)


def test_trace_that_does_not_apply_names_the_step(tmp_path: Path) -> None:
    steps = list(naive(CFG).steps)
    steps[0] = {"op": "split", "loop": "i", "factors": [None, 24]}
    with pytest.raises(UsageError, match=r"schedule step 0 .*multiple of the tile edge 16"):
        apply(Schedule("x", tuple(steps)), m=64, n=64, k=64, cfg=CFG)
    steps = list(naive(CFG).steps)
    steps[0] = {"op": "split", "loop": "i", "factors": [None, 256]}
    with pytest.raises(UsageError, match=r"schedule step 0 .*at most 64"):
        apply(Schedule("x", tuple(steps)), m=64, n=64, k=64, cfg=CFG)
    steps = list(naive(CFG).steps)
    steps[3] = {"op": "reorder", "order": ["i0", "k0", "j0", "i1", "j1", "k1"]}
    with pytest.raises(UsageError, match=r"schedule step 3 .*k0 innermost"):
        apply(Schedule("x", tuple(steps)), m=64, n=64, k=64, cfg=CFG)
    steps = [*naive(CFG).steps, {"op": "vectorize", "loop": "i1"}]
    with pytest.raises(UsageError, match=r"step 12 .*unknown primitive 'vectorize'"):
        apply(Schedule("x", tuple(steps)), m=64, n=64, k=64, cfg=CFG)
    with pytest.raises(UsageError, match="incomplete"):
        apply(Schedule("x", naive(CFG).steps[:5]), m=64, n=64, k=64, cfg=CFG)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError, match=r"bad.json:1:2: the schedule is not valid JSON"):
        compile_matmul(16, 16, 16, schedule=str(bad))
    with pytest.raises(UsageError, match="naive, auto or a schedule JSON file"):
        compile_matmul(16, 16, 16, schedule="fastest")


def _ring_trace(tiling: Tiling, *extra: dict[str, object]) -> Schedule:
    return Schedule("ring", (*from_tiling(tiling, CFG).steps, *extra))


@pytest.mark.parametrize(("tiling", "step", "message"), [
    (Tiling(bm=1, bn=1, bk=1), {"op": "multi_buffer", "stage": "acc", "buffers": 3},
     r"schedule step 14 .*stage must be A_reg or B_reg \(a ring of streamed chunks\)"),
    (Tiling(bm=1, bn=1, bk=1), {"op": "multi_buffer", "stage": "A_reg", "buffers": 9},
     r"schedule step 14 .*buffers must be one of 2, 3, 4"),
    (Tiling(bm=1, bn=1, bk=1), {"op": "multi_buffer", "stage": "A_reg", "buffers": 3},
     r"schedule 'ring': multi_buffer A_reg and B_reg with the same buffers .* not 3 and 2"),
    (Tiling(bm=1, bn=1, bk=4, resident="a"), {"op": "multi_buffer", "stage": "A_reg", "buffers": 3},
     r"schedule 'ring': multi_buffer applies to streamed stages; A_reg holds the resident panel"),
])
def test_multi_buffer_step_that_does_not_apply_names_it(tiling: Tiling, step: dict[str, object],
                                                          message: str) -> None:
    with pytest.raises(UsageError, match=message):
        apply(_ring_trace(tiling, step), m=64, n=64, k=64, cfg=CFG)


def test_a_ring_is_chosen_for_a_batch1_gemv_and_streams_at_the_port_rate() -> None:
    # K=3072: A's whole row does not fit a_reg as a resident panel; with two buffers a chunk's
    # weights load as long as it computes, so only a ring keeps the DRAM port busy.
    c = compile_matmul(1, 768, 3072, out_dtype="int8")
    assert any(s["op"] == "multi_buffer" for s in c.trace)
    report = run_compiled(c, check_races=False)
    floor = report["dram_bytes"] / CFG.dram_bytes_per_cycle
    assert report["cycles"] <= 1.02 * floor, report["cycles"] / floor


def test_every_error_is_a_tinynpu_error() -> None:
    assert issubclass(UsageError, TinyNpuError)


# -- CLI ---------------------------------------------------------------------------------------------
def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from tinynpu.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_run_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(["run", "matmul", "--m", "40", "--n", "33", "--k", "20", "--json"], capsys)
    assert code == 0
    report = json.loads(out)
    for key in ("cycles", "utilization", "padding_ceiling", "roofline_cycles", "dram_read_bytes",
                "dram_write_bytes", "io_lower_bound_bytes", "best_tiling_bytes", "busy_cycles",
                "instructions", "macs", "verified", "trace", "host_traffic_bytes", "simulator_wall_seconds"):
        assert key in report
    assert report["verified"] is True
    argv = ["run", "matmul", "--m", "40", "--n", "33", "--k", "20", "--schedule", "naive"]
    code, out, _ = _cli(argv, capsys)
    assert code == 0 and "utilization" in out and "sch.split" in out


@pytest.mark.parametrize("argv, needle", [
    (["run", "matmul", "--m", "0", "--n", "4", "--k", "4"], "positive integer"),
    (["run", "matmul", "--m", "4", "--n", "4", "--k", "4", "--dtype", "fp32", "--config", "default"],
     "not supported by config"),
    (["run", "matmul", "--m", "99999", "--n", "99999", "--k", "9999"], "does not fit DRAM"),
    (["run", "matmul", "--m", "4", "--n", "4", "--k", "4", "--schedule", "nope"], "schedule must be"),
])
def test_cli_bad_input_exits_nonzero_without_traceback(argv: list[str], needle: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(argv, capsys)
    assert code != 0
    assert needle in err.replace("\n", " ")
    assert "Traceback" not in err


def test_cli_schedule_file_that_does_not_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.json"
    from_tiling(Tiling(bm=16, bn=8, bk=1), CFG, "big").save(path)
    code, _, err = _cli(["run", "matmul", "--m", "1024", "--n", "1024", "--k", "16", "--schedule", str(path)],
                        capsys)
    assert code != 0 and "acc" in err and "Traceback" not in err


def test_cli_compile_writes_outputs_and_refuses_foreign_files(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "build"
    code, _, _ = _cli(["compile", "matmul", "--m", "20", "--n", "20", "--k", "20", "-o", str(out)], capsys)
    assert code == 0
    assert {p.name for p in out.iterdir()} == {"program.s", "program.bin", "manifest.json", "schedule.json"}
    program = Program.load(out / "program.bin")
    assert program.tensor("C").shape == (20, 20)
    # Recompiling into our own directory is fine; a foreign file is not overwritten without --force.
    assert _cli(["compile", "matmul", "--m", "20", "--n", "20", "--k", "20", "-o", str(out)], capsys)[0] == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "program.s").write_text("my notes")
    argv = ["compile", "matmul", "--m", "20", "--n", "20", "--k", "20", "-o", str(other)]
    code, _, err = _cli(argv, capsys)
    assert code != 0 and "--force" in err.replace("\n", " ")
    assert (other / "program.s").read_text() == "my notes"
    # The schedule written replays to the same program.
    again = compile_matmul(20, 20, 20, schedule=str(out / "schedule.json"))
    assert again.program.words == program.words


def test_tune_is_deterministic_and_writes_a_replayable_trace(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tuned.json"
    argv = ["tune", "matmul", "--m", "96", "--n", "80", "--k", "64", "--trials", "20", "--simulate-best", "2",
            "--seed", "5", "--json"]
    code, out1, _ = _cli([*argv, "-o", str(path)], capsys)
    assert code == 0
    code, out2, _ = _cli(argv, capsys)
    r1, r2 = json.loads(out1), json.loads(out2)
    assert r1["schedule"] == r2["schedule"]
    assert all(v["verified"] for v in r1["verified"])
    assert run_compiled(compile_matmul(96, 80, 64, schedule=str(path)))["verified"] is True


def test_bench_quick_prints_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(["bench", "compiler", "--quick", "--json"], capsys)
    assert code == 0
    result = json.loads(out)
    assert result["quick"] is True and result["races_checked"] is False
    assert {"gemm", "seed", "conv", "targets", "met"} <= set(result)
    assert result["seed"]["compile_instructions_per_second"] == (
        result["seed"]["naive_instructions"] / result["seed"]["naive_compile_cpu_seconds"])
    design = result["design_point"]
    assert len(design["seconds"]) == len(result["conv"]) and design["median_seconds"] > 0
    assert all(row["verified"] for row in result["gemm"])
    # The speed-up is measured against the naive schedule simulated in the same run.
    assert result["seed"]["speedup"] == result["seed"]["naive_cycles"] / result["seed"]["auto_cycles"]


def test_emitter_tokens_pair_every_wait_with_one_signal() -> None:
    """Per channel, signals and waits come in equal numbers, so no token is left over or missing."""
    isa = load_isa()
    c = compile_matmul(150, 90, 200)
    units = {u.id: u.name for u in isa.units}
    signals: dict[tuple[str, str], int] = {}
    waits: dict[tuple[str, str], int] = {}
    for word in c.program.words:
        instr, fields = isa.decode(word)
        for bit, other in units.items():
            if fields.get("signal", 0) >> bit & 1:
                signals[(instr.unit, other)] = signals.get((instr.unit, other), 0) + 1
            if fields.get("wait", 0) >> bit & 1:
                waits[(other, instr.unit)] = waits.get((other, instr.unit), 0) + 1
    assert signals == waits and signals


def test_chained_gemms_through_dram_are_ordered_without_a_barrier() -> None:
    """Layer 2 loads what layer 1 stored: the emitter's DRAM tracking adds the tokens (race-checked)."""
    isa = load_isa()
    m, k, h, n = 20, 50, 40, 30
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (m, k), dtype=np.int8)
    w1 = rng.integers(-128, 128, (h, k), dtype=np.int8)
    w2 = rng.integers(-128, 128, (n, h), dtype=np.int8)
    tensors = [Tensor("x", 0, (m, k), "int8"), Tensor("w1", 4096, (h, k), "int8"),
               Tensor("w2", 8192, (n, h), "int8"), Tensor("hid", 12288, (m, h), "int8", "scratch"),
               Tensor("y", 16384, (m, n), "int32", "output")]
    emit = Emitter(isa, CFG)
    lower_gemm(emit, m=m, n=h, k=k, a=DenseOperand(0, m, k, 1), b=DenseOperand(4096, h, k, 1),
               c=DenseOutput(12288, h, 1, narrow=True, shift=10, relu=True), tiling=Tiling(bm=1, bn=1, bk=1))
    lower_gemm(emit, m=m, n=n, k=h, a=DenseOperand(12288, m, h, 1), b=DenseOperand(8192, n, h, 1),
               c=DenseOutput(16384, n, 4), tiling=Tiling(bm=2, bn=2, bk=3))
    words, _ = emit.finish()
    machine = Machine(CFG, isa)
    machine.load(Program.build(isa, CFG, words, tensors))
    for name, arr in (("x", x), ("w1", w1), ("w2", w2)):
        machine.write_tensor(name, arr)
    machine.run(check_races=True)
    hid = np.clip(np.maximum((x.astype(np.int64) @ w1.T.astype(np.int64) + 512) >> 10, 0), -128, 127)
    np.testing.assert_array_equal(machine.read_tensor("y"), (hid @ w2.T.astype(np.int64)).astype(np.int32))


def test_listing_reassembles_to_the_same_binary() -> None:
    from tinynpu.assembler import assemble

    c = compile_matmul(50, 40, 70, layout="nn", out_dtype="int8")
    again = assemble(c.asm(), filename="program.s", isa=load_isa(), cfg=CFG)
    assert again.to_bytes() == c.program.to_bytes()
