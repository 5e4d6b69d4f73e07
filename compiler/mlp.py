"""The course's two-layer MLP (784 -> 128 -> relu -> 10) as one accelerator program.

    hidden = relu(x @ w1.T + b1)        layer 1: GEMM M=batch, N=128, K=784
    logits = hidden @ w2.T + b2         layer 2: GEMM M=batch, N=10,  K=128

int8 config: int8 inputs and weights, int32 biases.  Each layer's accumulator
block starts as its bias (a ``load`` into ``acc`` with row stride 0 repeats
the bias row over every output row, so no separate bias add is needed); the
``tmm`` steps then accumulate onto it.  Layer 1 is stored requantized
(``store narrow=1, relu=1, shift=s``) as the int8 ``hidden`` tensor in DRAM;
layer 2 loads ``hidden`` back as its A operand, ordered after those stores by
a store -> load token, and stores int32 logits.  The shift ``s`` comes from
:func:`~tinynpu.compiler.quant.calibrate_shift` on layer 1's int32
pre-activations for the seeded inputs the program runs on (the smallest shift
that saturates nothing), so the program is bit-exact against
:func:`~tinynpu.compiler.quant.mlp_int8_reference`.

fp32 config: the same program with float32 tensors, ``hidden`` stored raw
with ``relu=1`` (no narrowing), checked against the course's ``numpy_mlp``
with rtol 1e-5.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from tinynpu.assembler.image import Program, Tensor
from tinynpu.compiler.compiled import Bounds, Compiled
from tinynpu.compiler.operands import DenseOperand, DenseOutput, Emitter
from tinynpu.compiler.quant import calibrate_shift, linear_int32, mlp_fp32_reference, mlp_int8_reference
from tinynpu.isa import ArchConfig, load_config, load_isa

from tinynpu.errors import UsageError

IN_FEATURES = 784
HIDDEN = 128
CLASSES = 10
DEFAULT_SEED = 0


@dataclass(frozen=True)
class MlpData:
    """Inputs and parameters of one MLP run (seeded), plus layer 1's calibrated shift (int8 only)."""

    x: np.ndarray
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray
    shift: int


def mlp_data(batch: int, *, integer: bool, seed: int = DEFAULT_SEED) -> MlpData:
    """Seeded inputs and weights for ``batch`` images.

    int8: image pixels in 0..127 (an 8-bit image halved into int8), weights
    uniform in -127..127, biases of the magnitude of a typical accumulator
    sum so they matter.  fp32: pixels in [0, 1) like the course's
    Fashion-MNIST input, weights in [-0.5, 0.5], all multiples of 1/16.
    """
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch <= 0:
        raise UsageError(f"mlp: batch must be a positive integer, not {batch!r}.")
    rng = np.random.default_rng(seed)
    if integer:
        x = rng.integers(0, 128, size=(batch, IN_FEATURES), dtype=np.int8)
        w1 = rng.integers(-127, 128, size=(HIDDEN, IN_FEATURES), dtype=np.int8)
        b1 = rng.integers(-(2**15), 2**15, size=HIDDEN, dtype=np.int32)
        w2 = rng.integers(-127, 128, size=(CLASSES, HIDDEN), dtype=np.int8)
        b2 = rng.integers(-(2**12), 2**12, size=CLASSES, dtype=np.int32)
        shift = calibrate_shift(linear_int32(x, w1, b1), relu=True)
        return MlpData(x, w1, b1, w2, b2, shift)
    # Dyadic values with few significant bits (multiples of 1/16): every product and partial sum is
    # exact in float32 whatever order the machine sums in, so the rtol=1e-5 check is about the
    # program, not about rounding.  Pixels in [0, 1) as the course's Fashion-MNIST input.
    f32 = np.float32
    x = (rng.integers(0, 16, size=(batch, IN_FEATURES)) / 16).astype(f32)
    w1 = (rng.integers(-8, 9, size=(HIDDEN, IN_FEATURES)) / 16).astype(f32)
    b1 = (rng.integers(-64, 65, size=HIDDEN) / 16).astype(f32)
    w2 = (rng.integers(-8, 9, size=(CLASSES, HIDDEN)) / 16).astype(f32)
    b2 = (rng.integers(-64, 65, size=CLASSES) / 16).astype(f32)
    return MlpData(x, w1, b1, w2, b2, 0)


# -- the program ---------------------------------------------------------------


@dataclass(frozen=True)
class LinearPlan:
    """The schedule of one linear layer ``out = act(A @ W.T + bias)``.

    Attributes:
        name: Layer name in the trace and the listing.
        m: Rows (the batch).
        n: Output features.
        k: Input features.
        mb: Output tile rows per accumulator block (the batch split).
        kc: Reduction tiles per loaded chunk (the reduction split); chunks
            alternate between two buffers in ``a_reg``/``b_reg`` so the next
            chunk loads while ``tmm`` consumes this one.
        acc_buffers: 1 or 2 accumulator blocks (2: a block's epilogue and
            stores overlap the next block's ``tmm``).
    """

    name: str
    m: int
    n: int
    k: int
    mb: int
    kc: int
    acc_buffers: int

    def trace(self) -> dict[str, object]:
        t = (self.m, self.n, self.k)
        return {"layer": self.name, "gemm": {"m": t[0], "n": t[1], "k": t[2]},
                "split": {"i": self.mb, "kk": self.kc}, "cache_read": {"A": "a", "W": "b"},
                "decompose_reduction": "tmm accumulate=0 on the first chunk", "double_buffer": ["a", "b"],
                "acc_buffers": self.acc_buffers, "epilogue": ["vaddrow bias", "store"]}


def _tiles(x: int, tile: int) -> int:
    return -(-x // tile)


def plan_linear(name: str, m: int, n: int, k: int, cfg: ArchConfig) -> LinearPlan:
    """The largest batch block and reduction chunk that fit the scratchpads.

    The weights are re-read once per batch block, so the largest block is the
    least traffic; the largest chunk is the fewest ``tmm`` instructions.
    """
    t = cfg.tile
    mt, nt, kt = _tiles(m, t), _tiles(n, t), _tiles(k, t)
    acc_tiles = cfg.rows("acc") // t - 1  # one tile holds the bias rows
    a_tiles, b_tiles = cfg.rows("a_reg") // t, cfg.rows("b_reg") // t
    if nt > acc_tiles:
        raise UsageError(f"mlp: layer {name} has {n} outputs; the accumulator ({acc_tiles} tiles beside "
                         "the bias) cannot hold one row of output tiles.")
    mb = min(mt, acc_tiles // nt)
    buffers = 2 if 2 * mb * nt <= acc_tiles and mt > mb else 1
    kc = max(c for c in range(1, kt + 1) if kt % c == 0 and 2 * mb * c <= a_tiles and 2 * nt * c <= b_tiles)
    return LinearPlan(name, m, n, k, mb, kc, buffers)


def _emit_linear(emit: Emitter, plan: LinearPlan, a: DenseOperand, w: DenseOperand, bias_addr: int,
                 out: DenseOutput, bias_elem: int, after_store: int | None) -> None:
    """Emit one layer; ``after_store`` is the index of the store the first A load must follow."""
    cfg = emit.cfg
    t = cfg.tile
    mt, nt, kt = _tiles(plan.m, t), _tiles(plan.n, t), _tiles(plan.k, t)
    bias_row = cfg.rows("acc") - t  # the last accumulator tile holds one bias row per output tile
    full = plan.n // t
    if full:
        emit.load("acc", bias_row, bias_addr, rows=full, cols=t, stride=t * bias_elem,
                  comment=f"{plan.name}: bias, one row per output tile")
    if plan.n % t:
        emit.load("acc", bias_row + full, bias_addr + full * t * bias_elem, rows=1, cols=plan.n % t, stride=0,
                  comment=f"{plan.name}: bias[{full * t}:{plan.n}]")
    a_half, b_half = cfg.rows("a_reg") // 2, cfg.rows("b_reg") // 2
    chunks = kt // plan.kc
    chunk_no = 0
    for blk, i0 in enumerate(range(0, mt, plan.mb)):
        mbt = min(plan.mb, mt - i0)
        acc0 = (blk % plan.acc_buffers) * plan.mb * nt * t
        for ch in range(chunks):
            abuf, bbuf = (chunk_no % 2) * a_half, (chunk_no % 2) * b_half
            chunk_no += 1
            for kk in range(plan.kc):
                k0 = (ch * plan.kc + kk) * t
                for i in range(mbt):
                    row0 = (i0 + i) * t
                    a.load(emit, scope="a", sp_row=abuf + (i * plan.kc + kk) * t, row0=row0,
                           rows=min(t, plan.m - row0), k0=k0)
                    if after_store is not None:  # layer boundary: read DRAM only after the stores wrote it
                        emit.ops[-1].deps.add(after_store)
                        after_store = None
                for j in range(nt):
                    w.load(emit, scope="b", sp_row=bbuf + (j * plan.kc + kk) * t, row0=j * t,
                           rows=min(t, plan.n - j * t), k0=k0)
            emit.tmm(acc0, abuf, bbuf, m=mbt, n=nt, k=plan.kc, accumulate=ch > 0,
                     comment=f"{plan.name}: block {blk}, reduction chunk {ch}")
        for i in range(mbt):
            row0 = (i0 + i) * t
            rows = min(t, plan.m - row0)
            for j in range(nt):
                tile_row = acc0 + (i * nt + j) * t
                emit.alu("vaddrow", tile_row, rows=rows, src=bias_row + j, comment=f"{plan.name}: + bias")
                out.store(emit, sp_row=tile_row, row0=row0, rows=rows, col0=j * t,
                          cols=min(t, plan.n - j * t))


def _layout(sizes: list[tuple[str, int]], align: int = 64) -> dict[str, int]:
    """Consecutive DRAM addresses, each tensor aligned to ``align`` bytes."""
    addr, out = 0, {}
    for name, nbytes in sizes:
        out[name] = addr
        addr += -(-nbytes // align) * align
    return out


def compile_mlp(batch: int, *, dtype: str = "int8", cfg: ArchConfig | None = None) -> Compiled:
    """Compile the course's MLP (784 -> 128 -> relu -> 10) for ``batch`` images into one program.

    Args:
        batch: Images per run (any positive size; the course uses 1, and 64 is the batched case).
        dtype: ``int8`` (default config) or ``fp32`` (the fp32 config).
        cfg: The architecture config; by default the one matching ``dtype``.

    Returns:
        The compiled program with its inputs, numpy reference and yardsticks.

    Raises:
        UsageError: a bad batch or a dtype the config does not compute in.
    """
    started = time.perf_counter()
    cfg = _config_for(dtype, cfg)
    isa = load_isa()
    integer = cfg.is_integer
    data = mlp_data(batch, integer=integer)
    in_b, acc_b = cfg.elem_bytes("a_reg"), cfg.elem_bytes("acc")
    hid_b = 1 if integer else acc_b
    in_dt, acc_dt = str(cfg.dtype("a_reg")), str(cfg.dtype("acc"))
    shapes: list[tuple[str, tuple[int, ...], str, str]] = [
        ("x", (batch, IN_FEATURES), in_dt, "input"),
        ("w1", (HIDDEN, IN_FEATURES), in_dt, "input"),
        ("b1", (HIDDEN,), acc_dt, "input"),
        ("w2", (CLASSES, HIDDEN), in_dt, "input"),
        ("b2", (CLASSES,), acc_dt, "input"),
        ("hidden", (batch, HIDDEN), in_dt, "scratch"),
        ("logits", (batch, CLASSES), acc_dt, "output"),
    ]
    addr = _layout([(name, int(np.prod(shape)) * np.dtype(dt).itemsize) for name, shape, dt, _ in shapes])
    tensors = [Tensor(name, addr[name], shape, dt, role) for name, shape, dt, role in shapes]

    plan1 = plan_linear("linear0", batch, HIDDEN, IN_FEATURES, cfg)
    plan2 = plan_linear("linear1", batch, CLASSES, HIDDEN, cfg)
    emit = Emitter(isa, cfg)
    hidden_out = DenseOutput(addr["hidden"], HIDDEN, hid_b, narrow=integer, shift=data.shift, relu=True,
                             name="hidden")
    _emit_linear(emit, plan1, DenseOperand(addr["x"], batch, IN_FEATURES, in_b, "x"),
                 DenseOperand(addr["w1"], HIDDEN, IN_FEATURES, in_b, "w1"), addr["b1"], hidden_out, acc_b,
                 None)
    last_store = max(i for i, op in enumerate(emit.ops) if op.mnemonic == "store")
    _emit_linear(emit, plan2, DenseOperand(addr["hidden"], batch, HIDDEN, hid_b, "hidden"),
                 DenseOperand(addr["w2"], CLASSES, HIDDEN, in_b, "w2"), addr["b2"],
                 DenseOutput(addr["logits"], CLASSES, acc_b, name="logits"), acc_b, last_store)
    words, comments = emit.finish()
    program = Program.build(isa, cfg, words, tensors)

    t = cfg.tile
    useful = batch * (HIDDEN * IN_FEATURES + CLASSES * HIDDEN)
    issued = sum(_tiles(p.m, t) * _tiles(p.n, t) * _tiles(p.k, t) for p in (plan1, plan2)) * t**3
    compulsory = sum(tt.nbytes for tt in tensors if tt.name != "hidden")
    best = min_traffic_bytes(batch, cfg)
    bounds = Bounds(
        io_lower_bound_bytes=compulsory,
        best_tiling_bytes=best,
        roofline_cycles=max(-(-useful // cfg.macs_per_cycle), -(-compulsory // cfg.dram_bytes_per_cycle)),
        padding_ceiling=useful / issued,
        useful_macs=useful,
        issued_macs=issued,
        bound_kind="compulsory",
    )

    def make_inputs(seed: int) -> dict[str, np.ndarray]:
        d = mlp_data(batch, integer=integer, seed=seed)
        return {"x": d.x, "w1": d.w1, "b1": d.b1, "w2": d.w2, "b2": d.b2}

    def reference(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        args = (inputs["x"], inputs["w1"], inputs["b1"], inputs["w2"], inputs["b2"])
        if integer:
            hidden, logits = mlp_int8_reference(*args, data.shift)
        else:
            hidden, logits = mlp_fp32_reference(*args)
        return {"hidden": hidden, "logits": logits}

    return Compiled(
        program=program,
        comments=comments,
        workload={"kind": "mlp", "batch": batch, "dtype": "int8" if integer else "fp32",
                  "layers": [[IN_FEATURES, HIDDEN, "relu"], [HIDDEN, CLASSES, None]],
                  "shift": data.shift if integer else None},
        trace=(plan1.trace(), plan2.trace()),
        bounds=bounds,
        host_traffic_bytes=0,
        make_inputs=make_inputs,
        reference=reference,
        outputs=("hidden", "logits"),
        exact=integer,
        compile_seconds=time.perf_counter() - started,
        model={},
    )


def min_traffic_bytes(batch: int, cfg: ArchConfig) -> int:
    """``best_tiling_bytes`` of the MLP: the least DRAM traffic over the schedule space, by enumeration.

    The space is every batch block ``mb`` and reduction chunk ``kc`` of each
    layer that fits the scratchpads (as :func:`plan_linear` allocates them).
    A layer reads its input once, its weights once per batch block, its bias
    once and writes its output once; ``hidden`` is written by layer 1 and
    read by layer 2.
    """
    t = cfg.tile
    in_b, acc_b = cfg.elem_bytes("a_reg"), cfg.elem_bytes("acc")
    hid_b = 1 if cfg.is_integer else acc_b
    acc_tiles = cfg.rows("acc") // t - 1
    total = 0
    for k, n, a_b, out_b in ((IN_FEATURES, HIDDEN, in_b, hid_b), (HIDDEN, CLASSES, hid_b, acc_b)):
        mt, nt, kt = _tiles(batch, t), _tiles(n, t), _tiles(k, t)
        best = None
        for mb in range(1, mt + 1):
            if mb * nt > acc_tiles:
                break
            fits = any(2 * mb * c <= cfg.rows("a_reg") // t and 2 * nt * c <= cfg.rows("b_reg") // t
                       for c in range(1, kt + 1) if kt % c == 0)
            if not fits:
                continue
            bytes_ = batch * k * a_b + _tiles(mt, mb) * n * k * in_b + n * acc_b + batch * n * out_b
            best = bytes_ if best is None else min(best, bytes_)
        if best is None:
            raise UsageError(f"mlp: no tiling of the {k} -> {n} layer fits config {cfg.name!r}.")
        total += best
    return total


def _config_for(dtype: str, cfg: ArchConfig | None) -> ArchConfig:
    """The config for ``dtype``, or a check that ``cfg`` computes in it."""
    names = {"int8": "default", "fp32": "fp32"}
    if dtype not in names:
        raise UsageError(f"dtype must be one of {', '.join(names)}, not {dtype!r}.")
    if cfg is None:
        return load_config(names[dtype])
    if (dtype == "int8") != cfg.is_integer:
        raise UsageError(f"dtype {dtype} is not supported by config {cfg.name!r}, which computes in "
                         f"{cfg.input_dtype} -> {cfg.acc_dtype}; use --dtype "
                         f"{'int8' if cfg.is_integer else 'fp32'} or another config.")
    return cfg
