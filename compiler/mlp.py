"""The course's two-layer MLP (784 -> 128 -> relu -> 10) as one accelerator program.

    hidden = relu(x @ w1.T + b1)        layer 1: GEMM M=batch, N=128, K=784
    logits = hidden @ w2.T + b2         layer 2: GEMM M=batch, N=10,  K=128

int8 config: int8 inputs and weights, int32 biases.  Each layer is a GEMM
lowered by :func:`~tinynpu.compiler.lower.lower_gemm`: its bias is loaded
once per block into an accumulator row and added with ``vaddrow`` before the
store.  Layer 1 is stored requantized (``store narrow=1, relu=1, shift=s``)
as the int8 ``hidden`` tensor in DRAM; layer 2 loads ``hidden`` back as its
A operand, ordered after those stores by a store -> load token (not a
``sync``), and stores int32 logits.  The shift ``s`` comes from
:func:`~tinynpu.compiler.quant.calibrate_shift` on layer 1's int32
pre-activations for the seeded inputs (seed 0; the smallest shift that
saturates nothing); the program is bit-exact against
:func:`~tinynpu.compiler.quant.mlp_int8_reference` for inputs of any seed.

Each layer's tiling is the least-traffic blocking of the schedule space, its
chunk and buffers ranked by the cost model: at batch 1 the layers are memory
bound (784 x 128 weights against one image), so bytes come first.

fp32 config: the same program with float32 tensors, ``hidden`` stored raw
with ``relu=1`` (no narrowing), checked against the course's ``numpy_mlp``
with rtol 1e-5 (the data are multiples of 1/16, see :func:`mlp_data`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tinynpu.assembler.image import Program
from tinynpu.compiler.bounds import best_tiling_bytes, roofline_cycles, tiling_space, tiling_traffic
from tinynpu.compiler.compiled import Bounds, Compiled
from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.lower import Bias, lower_gemm
from tinynpu.compiler.operands import DenseOperand, DenseOutput
from tinynpu.compiler.quant import calibrate_shift, linear_int32, mlp_fp32_reference, mlp_int8_reference
from tinynpu.compiler.schedule import Tiling, from_tiling, require_a_fit
from tinynpu.compiler.search import pick, rank
from tinynpu.compiler.workload import DramAllocator, check_sizes, resolve_config
from tinynpu.errors import UsageError
from tinynpu.isa import ArchConfig, load_isa

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
    check_sizes("mlp: ", batch=batch)
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


@dataclass
class _AfterStores:
    """A dense A operand whose first load waits for a store: the layer boundary's store -> load token.

    The Emitter tracks scratchpads, not DRAM, so the read-after-write through
    DRAM (layer 1 stores ``hidden``, layer 2 loads it) is declared here: the
    first load of ``hidden`` depends on the last store of layer 1, which
    :meth:`Emitter.finish` turns into a token.  Units retire in order, so that
    one token covers every earlier store, and later loads start after this one.
    """

    inner: DenseOperand
    store_index: int
    pending: bool = True

    @property
    def rows_total(self) -> int:
        return self.inner.rows_total

    @property
    def k_total(self) -> int:
        return self.inner.k_total

    def load(self, emit: Emitter, *, scope: str, sp_row: int, row0: int, rows: int, k0: int) -> None:
        first = emit.size
        self.inner.load(emit, scope=scope, sp_row=sp_row, row0=row0, rows=rows, k0=k0)
        if self.pending:
            emit.depend(first, on=self.store_index)
            self.pending = False


@dataclass(frozen=True)
class _Layer:
    name: str
    m: int
    n: int
    k: int
    in_bytes: int
    out_bytes: int


def _layers(batch: int, cfg: ArchConfig) -> tuple[_Layer, _Layer]:
    in_b, acc_b = cfg.elem_bytes("a_reg"), cfg.elem_bytes("acc")
    hid_b = in_b if cfg.is_integer else acc_b  # int8 hidden (requantized) or fp32
    return (_Layer("linear0", batch, HIDDEN, IN_FEATURES, in_b, hid_b),
            _Layer("linear1", batch, CLASSES, HIDDEN, hid_b, acc_b))


def _layer_tiling(layer: _Layer, cfg: ArchConfig) -> Tiling:
    """The least-traffic blocking of a layer, with the chunk and buffers the cost model ranks best.

    The layers are small and memory bound at small batch (784x128 int8
    weights against one image), so moving the fewest bytes comes first: only
    tilings whose exact traffic equals ``best_tiling_bytes`` are ranked.
    """
    m, n, k, in_b, out_b = layer.m, layer.n, layer.k, layer.in_bytes, layer.out_bytes
    require_a_fit(cfg, bias=True)
    space = list(tiling_space(m, n, k, cfg, bias=True))
    traffic = {t.key(): tiling_traffic(m, n, k, t, cfg, in_bytes=in_b, out_bytes=out_b, bias=True)
               for t in space}
    least = min(traffic.values())
    cands = [t for t in space if traffic[t.key()] == least]
    # A resident panel saves nothing once the traffic is already the least, and it is loaded as one
    # chunk (bk = all of K), so nothing overlaps inside it: prefer streamed panels when they tie.
    cands = [t for t in cands if t.resident == "none"] or cands
    return pick(rank(m, n, k, cfg, cands, in_bytes=in_b, out_bytes=out_b, bias=True)).tiling


def compile_mlp(batch: int, *, dtype: str = "int8", cfg: ArchConfig | None = None) -> Compiled:
    """Compile the course's MLP (784 -> 128 -> relu -> 10) for ``batch`` images into one program.

    Each layer is a GEMM lowered by :func:`~tinynpu.compiler.lower.lower_gemm`
    with its least-traffic tiling (:func:`_layer_tiling`), its bias added in
    ``acc`` (``vaddrow``) before the store.

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
    cfg = resolve_config(dtype, cfg)
    isa = load_isa()
    integer = cfg.is_integer
    check_sizes("mlp: ", batch=batch)
    act_bytes = batch * (IN_FEATURES * cfg.elem_bytes("a_reg") + (HIDDEN + CLASSES) * cfg.elem_bytes("acc"))
    if act_bytes > cfg.dram_bytes:  # checked before generating data of that size
        raise UsageError(f"mlp: batch {batch} needs more than {act_bytes} bytes of DRAM for its activations, "
                         f"more than the {cfg.dram_bytes} bytes of config {cfg.name!r}.")
    data = mlp_data(batch, integer=integer)
    in_dt, acc_dt = str(cfg.dtype("a_reg")), str(cfg.dtype("acc"))
    shapes: list[tuple[str, tuple[int, ...], str, str]] = [
        ("x", (batch, IN_FEATURES), in_dt, "input"),
        ("w1", (HIDDEN, IN_FEATURES), in_dt, "input"),
        ("b1", (HIDDEN,), acc_dt, "input"),
        ("w2", (CLASSES, HIDDEN), in_dt, "input"),
        ("b2", (CLASSES,), acc_dt, "input"),
        ("hidden", (batch, HIDDEN), in_dt if integer else acc_dt, "scratch"),
        ("logits", (batch, CLASSES), acc_dt, "output"),
    ]
    alloc = DramAllocator(cfg, f"the MLP at batch {batch}")
    addr = {name: alloc.add(name, shape, dt, role).addr for name, shape, dt, role in shapes}
    tensors = alloc.tensors

    l1, l2 = _layers(batch, cfg)
    emit = Emitter(isa, cfg)
    trace: list[dict[str, object]] = []
    issued = 0
    operands = (
        (DenseOperand(addr["x"], batch, IN_FEATURES, l1.in_bytes, "x"),
         DenseOperand(addr["w1"], HIDDEN, IN_FEATURES, l1.in_bytes, "w1"),
         DenseOutput(addr["hidden"], HIDDEN, l1.out_bytes, narrow=integer, shift=data.shift, relu=True,
                     name="hidden"), Bias(addr["b1"], HIDDEN)),
        (DenseOperand(addr["hidden"], batch, HIDDEN, l2.in_bytes, "hidden"),
         DenseOperand(addr["w2"], CLASSES, HIDDEN, l1.in_bytes, "w2"),
         DenseOutput(addr["logits"], CLASSES, l2.out_bytes, name="logits"), Bias(addr["b2"], CLASSES)),
    )
    for layer, (a, b, c, bias) in zip((l1, l2), operands, strict=True):
        if layer is l2:  # layer 2 reads hidden from DRAM only after layer 1's stores wrote it
            last_store = emit.last("store")
            a = _AfterStores(a, last_store)  # type: ignore[assignment]
        tiling = _layer_tiling(layer, cfg)
        issued += lower_gemm(emit, m=layer.m, n=layer.n, k=layer.k, a=a, b=b, c=c, tiling=tiling, bias=bias)
        relu_store = f"requantize: shift {data.shift}, relu, int8" if integer else "relu"
        store = "raw" if layer is l2 else relu_store
        trace.append({"op": "layer", "name": layer.name, "gemm": [layer.m, layer.n, layer.k],
                      "epilogue": ["vaddrow bias", f"store ({store})"]})
        trace.extend(dict(s) for s in from_tiling(tiling, cfg).steps)
    words, comments = emit.finish()
    program = Program.build(isa, cfg, words, tensors)

    useful = batch * (HIDDEN * IN_FEATURES + CLASSES * HIDDEN)
    compulsory = sum(tt.nbytes for tt in tensors if tt.name != "hidden")
    bounds = Bounds(
        io_lower_bound_bytes=compulsory,
        best_tiling_bytes=min_traffic_bytes(batch, cfg),
        roofline_cycles=roofline_cycles(useful, compulsory, cfg),
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
        workload={"kind": "mlp", "batch": batch, "dtype": "int8" if integer else "fp32", "config": cfg.name,
                  "layers": [[IN_FEATURES, HIDDEN, "relu"], [HIDDEN, CLASSES, None]],
                  "shift": data.shift if integer else None},
        trace=tuple(trace),
        schedule_name="auto",
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
    """``best_tiling_bytes`` of the MLP: each layer's least traffic over the tiling space, summed.

    Each layer's minimum is :func:`tinynpu.compiler.bounds.best_tiling_bytes`
    (exhaustive over its block sizes, bias included); ``hidden`` is written by
    layer 1 and read by layer 2, as every program in this space does.
    """
    return sum(best_tiling_bytes(la.m, la.n, la.k, cfg, in_bytes=la.in_bytes, out_bytes=la.out_bytes,
                                 bias=True) for la in _layers(batch, cfg))
