"""Co-simulation of the RTL on Verilator and on Icarus against the simulator and numpy.

One simulator process per simulator runs every case of this module (builds
are cached per source version), so the module costs one start of each.  Hand
programs check each unit against numpy (MAC array, DMA engines with zero
fill, requantizer, vector ALU); compiled workloads and random programs are
compared with the simulator output for output and instruction for
instruction.  ``TINYNPU_REQUIRE_RTL=1`` (Icarus) and
``TINYNPU_REQUIRE_VERILATOR=1`` turn a missing simulator from a skip into a
failure (CI sets both).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from tinynpu.assembler.image import Program, Tensor
from tinynpu.isa import load_config, load_isa
from tinynpu.rtl.compare import CosimCase, CosimReport, cosimulate
from tinynpu.rtl.randprog import random_program
from tinynpu.rtl.runner import SIMULATORS, missing_reason

pytestmark = pytest.mark.rtl
ISA = load_isa()
CFG = load_config("default", ISA)
T = CFG.tile
N_RANDOM = 4  # per simulator in the default suite; the slow runs below take thousands
#: environment switch that makes a missing simulator a failure instead of a skip.
REQUIRE = {"icarus": "TINYNPU_REQUIRE_RTL", "verilator": "TINYNPU_REQUIRE_VERILATOR"}


def require_simulator(simulator: str) -> None:
    """Skip without ``simulator``, unless the environment says it must be there (CI)."""
    reason = missing_reason(simulator)
    if reason is None:
        return
    if os.environ.get(REQUIRE[simulator]) == "1":
        pytest.fail(f"{REQUIRE[simulator]}=1 but the RTL cannot be simulated on {simulator}: {reason}")
    pytest.skip(reason)


def require_rtl() -> None:
    """Skip without Icarus (the simulator every RTL test can fall back to), unless CI requires it."""
    require_simulator("icarus")


def enc(mnemonic: str, **fields: int) -> int:
    return ISA.encode(mnemonic, fields)


def scope(name: str) -> int:
    return ISA.scope_by_name[name].id


def unit(*names: str) -> int:
    return sum(1 << ISA.unit_ids[n] for n in names)


def wrap32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.int64).astype(np.uint32).view(np.int32)


# ---- hand programs, each with its numpy expectation --------------------------------------------

def mac_case(rng: np.random.Generator) -> tuple[CosimCase, dict[str, np.ndarray]]:
    """tmm m=2, n=2, k=2 overwrite, then once more accumulating: C = 2 * A @ B^T (int32 wrap)."""
    m, n, k = 2, 2, 2
    a = rng.integers(-128, 128, (m * T, k * T), dtype=np.int8)
    b = rng.integers(-128, 128, (n * T, k * T), dtype=np.int8)
    a[0, :] = -128
    b[0, :] = -128  # the largest products
    A, B = Tensor("A", 0, a.shape, "int8"), Tensor("B", 4096, b.shape, "int8")
    C = Tensor("C", 8192, (m * T, n * T), "int32", "output")
    words = []
    for i in range(m):
        for kk in range(k):
            words.append(enc("load", scope=scope("a"), sp_row=(i * k + kk) * T, dram=A.addr + i * T * k * T + kk * T,
                             stride=k * T, rows=T))
    for j in range(n):
        for kk in range(k):
            last = j == n - 1 and kk == k - 1
            words.append(enc("load", scope=scope("b"), sp_row=(j * k + kk) * T, dram=B.addr + j * T * k * T + kk * T,
                             stride=k * T, rows=T, signal=unit("tensor") if last else 0))
    words.append(enc("tmm", acc=0, a=0, b=0, m=m, n=n, k=k, accumulate=0, wait=unit("load")))
    words.append(enc("tmm", acc=0, a=0, b=0, m=m, n=n, k=k, accumulate=1, signal=unit("store")))
    for i in range(m):
        for j in range(n):
            words.append(enc("store", sp_row=(i * n + j) * T, dram=C.addr + (i * T * n * T + j * T) * 4,
                             stride=n * T * 4, rows=T, wait=unit("tensor") if i == j == 0 else 0))
    words.append(enc("halt"))
    prog = Program.build(ISA, CFG, words, [A, B, C])
    expected = wrap32(2 * (a.astype(np.int64) @ b.astype(np.int64).T))
    return CosimCase("mac", prog, {"A": a, "B": b}), {"C": expected}


def requant(x: np.ndarray, shift: int, relu: bool, narrow: bool) -> np.ndarray:
    v = x.astype(np.int64)
    if narrow:
        v = (v + ((1 << shift) >> 1)) >> shift
    if relu:
        v = np.maximum(v, 0)
    return np.clip(v, -128, 127).astype(np.int8) if narrow else v.astype(np.int32)


def dma_requant_case(rng: np.random.Generator) -> tuple[CosimCase, dict[str, np.ndarray]]:
    """acc loads with short rows (zero fill), zero, raw and requantized stores."""
    x = rng.integers(-(2**31), 2**31, (8, T), dtype=np.int64).astype(np.int32)
    x[0, :4] = [2**31 - 1, -(2**31), 5, -5]
    x[1, :4] = [12, -12, 4, -4]  # ties for shift 3
    X = Tensor("X", 0, x.shape, "int32")
    combos = [(0, 0), (3, 0), (3, 1), (31, 1), (7, 0)]
    outs = [Tensor(f"Q{i}", 4096 + 512 * i, (8, T), "int8", "output") for i in range(len(combos))]
    raw = Tensor("R", 16384, (8, T), "int32", "output")
    part = Tensor("P", 20480, (8, T), "int32", "output")
    words = [enc("load", scope=scope("acc"), sp_row=0, dram=0, stride=T * 4, rows=8),
             enc("load", scope=scope("acc"), sp_row=16, dram=0, stride=T * 4, rows=8, cols=5),
             enc("sync"),
             enc("zero", scope=scope("acc"), sp_row=18, rows=2),
             enc("sync")]
    for (shift, relu), t in zip(combos, outs, strict=True):
        words.append(enc("store", sp_row=0, dram=t.addr, stride=T, rows=8, narrow=1, shift=shift, relu=relu))
    words.append(enc("store", sp_row=0, dram=raw.addr, stride=T * 4, rows=8, relu=1))
    words.append(enc("store", sp_row=16, dram=part.addr, stride=T * 4, rows=8))
    words.append(enc("halt"))
    prog = Program.build(ISA, CFG, words, [X, *outs, raw, part])
    expected = {t.name: requant(x, s, bool(r), True) for (s, r), t in zip(combos, outs, strict=True)}
    expected["R"] = requant(x, 0, True, False)
    p = np.zeros_like(x)
    p[:, :5] = x[:, :5]
    p[2:4] = 0
    expected["P"] = p
    return CosimCase("dma_requant", prog, {"X": x}), expected


def alu_case(rng: np.random.Generator) -> tuple[CosimCase, dict[str, np.ndarray]]:
    """Every vector ALU op on its own rows, then all rows stored raw."""
    x = rng.integers(-(2**31), 2**31, (64, T), dtype=np.int64).astype(np.int32)
    x[0, :3] = [2**31 - 1, -(2**31), -1]
    X = Tensor("X", 0, x.shape, "int32")
    Y = Tensor("Y", 8192, x.shape, "int32", "output")
    ops = [("vadd", {"dst": 0, "src": 8, "rows": 4}), ("vadd", {"dst": 12, "src": 12, "rows": 3}),
           ("vaddrow", {"dst": 16, "src": 40, "rows": 5}), ("vmax", {"dst": 24, "imm": -7, "rows": 4}),
           ("vmin", {"dst": 28, "imm": 1000, "rows": 4}), ("vmul", {"dst": 32, "imm": -3, "rows": 4}),
           ("vshr", {"dst": 36, "shift": 5, "rows": 2}), ("vshr", {"dst": 38, "shift": 0, "rows": 1}),
           ("vshr", {"dst": 48, "shift": 31, "rows": 2})]
    words = [enc("load", scope=scope("acc"), sp_row=0, dram=0, stride=T * 4, rows=64, signal=unit("alu"))]
    for i, (mn, f) in enumerate(ops):
        words.append(enc(mn, **f, wait=unit("load") if i == 0 else 0,
                         signal=unit("store") if i == len(ops) - 1 else 0))
    words.append(enc("store", sp_row=0, dram=Y.addr, stride=T * 4, rows=64, wait=unit("alu")))
    words.append(enc("halt"))
    y = x.astype(np.int64)
    for mn, f in ops:
        d = slice(f["dst"], f["dst"] + f["rows"])
        if mn == "vadd":
            y[d] = y[d] + y[f["src"]:f["src"] + f["rows"]]
        elif mn == "vaddrow":
            y[d] = y[d] + y[f["src"]]
        elif mn == "vmax":
            y[d] = np.maximum(y[d], f["imm"])
        elif mn == "vmin":
            y[d] = np.minimum(y[d], f["imm"])
        elif mn == "vmul":
            y[d] = y[d] * f["imm"]
        else:
            y[d] = (y[d] + ((1 << f["shift"]) >> 1)) >> f["shift"]
        y = wrap32(y).astype(np.int64)
    return CosimCase("alu", Program.build(ISA, CFG, words, [X, Y]), {"X": x}), {"Y": wrap32(y)}


def compiled_cases() -> list[tuple[CosimCase, dict[str, np.ndarray]]]:
    from tinynpu.compiler import compile_matmul
    from tinynpu.compiler.conv2d import compile_conv2d
    from tinynpu.compiler.mlp import compile_mlp
    from tinynpu.compiler.onnx.lower.eltwise import add_compiled, term_scales

    scales = term_scales([0.8, 1.7])
    assert scales is not None
    out = []
    for name, compiled in (("matmul64", compile_matmul(64, 64, 64)),
                           ("conv2d_pad1_stride2", compile_conv2d(1, 8, 9, 9, 16, 3, 3, stride=2, pad=1)),
                           ("mlp_b1", compile_mlp(1)),
                           ("residual_add", add_compiled(CFG, 37, 20, scales, relu=True))):
        inputs = compiled.make_inputs(0)
        device = compiled.to_device(inputs)
        ref = compiled.reference(inputs)
        out.append((CosimCase(name, compiled.program, device), {k: ref[k] for k in compiled.outputs}))
    return out


@pytest.fixture(scope="module", params=SIMULATORS)
def reports(request: pytest.FixtureRequest) -> dict[str, tuple[CosimReport, dict[str, np.ndarray]]]:
    simulator = str(request.param)
    require_simulator(simulator)
    rng = np.random.default_rng(5)
    cases = [mac_case(rng), dma_requant_case(rng), alu_case(rng), *compiled_cases()]
    for seed in range(N_RANDOM):
        prog, inputs = random_program(ISA, CFG, seed)
        cases.append((CosimCase(f"random{seed}", prog, inputs), {}))
    results = cosimulate(ISA, CFG, [c for c, _ in cases], simulator=simulator)
    assert all(r.simulator == simulator for r in results)
    return {r.name: (r, exp) for r, (_, exp) in zip(results, cases, strict=True)}


HAND = ["mac", "dma_requant", "alu"]
COMPILED = ["matmul64", "conv2d_pad1_stride2", "mlp_b1", "residual_add"]


@pytest.mark.parametrize("name", HAND + COMPILED)
def test_outputs_equal_numpy(reports: dict, name: str) -> None:
    report, expected = reports[name]
    assert report.rtl_error is None, report.rtl_error
    for tensor, want in expected.items():
        got = report.outputs[tensor]
        np.testing.assert_array_equal(got.reshape(want.shape), want, err_msg=f"{name}: tensor {tensor}")


@pytest.mark.parametrize("name", HAND + COMPILED + [f"random{s}" for s in range(N_RANDOM)])
def test_rtl_agrees_with_simulator(reports: dict, name: str) -> None:
    report, _ = reports[name]
    assert report.model_error is None, report.model_error
    assert report.agree, report.to_json()
    assert report.instructions_compared > 1


def test_random_programs_exercise_every_instruction(reports: dict) -> None:
    seen: set[str] = set()
    for seed in range(N_RANDOM):
        prog, _ = random_program(ISA, CFG, seed)
        seen |= {ISA.decode(w)[0].mnemonic for w in prog.words}
    assert seen == {i.mnemonic for i in ISA.instructions}


def random_cases(first_seed: int, count: int, *, length: int | None = None) -> list[CosimCase]:
    kwargs = {} if length is None else {"length": length}
    return [CosimCase(f"random{seed}", *random_program(ISA, CFG, seed, **kwargs))
            for seed in range(first_seed, first_seed + count)]


@pytest.mark.slow
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_bench_sized_matmul_128_agrees(simulator: str) -> None:
    """The `tinynpu bench cosim` workload, cycle for cycle and bit for bit."""
    require_simulator(simulator)
    from tinynpu.compiler import compile_matmul

    compiled = compile_matmul(128, 128, 128)
    inputs = compiled.make_inputs(3)
    [report] = cosimulate(ISA, CFG, [CosimCase("matmul128", compiled.program, compiled.to_device(inputs))],
                          simulator=simulator)
    assert report.agree, report.to_json()
    np.testing.assert_array_equal(report.outputs["C"], compiled.reference(inputs)["C"])


@pytest.mark.slow
@pytest.mark.parametrize("simulator, count", [("icarus", 200), ("verilator", 10_000)])
def test_random_differential_run(simulator: str, count: int) -> None:
    """Random programs (every instruction, random synchronization) agree on every cycle and byte."""
    require_simulator(simulator)
    bad: list[dict] = []
    for first in range(100, 100 + count, 1000):  # batches keep the job files and reports small
        reports = cosimulate(ISA, CFG, random_cases(first, min(1000, 100 + count - first)), simulator=simulator)
        bad += [r.to_json() for r in reports if not r.agree]
    assert not bad, bad[:3]


@pytest.mark.slow
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_long_random_programs_agree(simulator: str) -> None:
    require_simulator(simulator)
    bad = [r.to_json() for r in cosimulate(ISA, CFG, random_cases(10_000, 20, length=400), simulator=simulator)
           if not r.agree]
    assert not bad, bad[:3]


@pytest.mark.slow
def test_tuned_seed_1024_on_verilator() -> None:
    """The tuned 1024^3 seed (4.2 M cycles): outputs bit-exact, every instruction's cycles equal."""
    require_simulator("verilator")
    from tinynpu.compiler import compile_matmul

    compiled = compile_matmul(1024, 1024, 1024)
    inputs = compiled.make_inputs(0)
    [report] = cosimulate(ISA, CFG, [CosimCase("seed1024", compiled.program, compiled.to_device(inputs))],
                          simulator="verilator")
    assert report.agree and report.instructions_compared == len(compiled.program.words), report.to_json()
    np.testing.assert_array_equal(report.outputs["C"], compiled.reference(inputs)["C"])


@pytest.mark.slow
def test_resnet50_convs_on_verilator() -> None:
    """Every conv layer of ResNet-50, cycle for cycle against the simulator and bit for bit against numpy."""
    require_simulator("verilator")
    from tinynpu.rtl.cli import _bench_resnet50

    result = _bench_resnet50(ISA, CFG, quiet=True)
    assert len(result["layers"]) == 53
    bad = [row for row in result["layers"] if not (row["agree"] and row["verified"])]
    assert not bad, bad[:3]


def test_resnet50_layer_list() -> None:
    """53 conv layers whose distinct shapes are the compiler's ResNet-50 benchmark set."""
    from tinynpu.compiler.conv_shape import RESNET50_CONVS
    from tinynpu.rtl.cli import resnet50_conv_layers

    layers = resnet50_conv_layers()
    assert len(layers) == 53 and set(RESNET50_CONVS) <= set(layers)
    assert sum(layer.macs for layer in layers) == 3_855_925_248  # v1: 3.86 GMACs of convolutions
