"""The compiler at every tile edge T from 4 to 128: T comes from the config, nowhere else.

Two layers of checks:

- compile level, every T (configs built here with ``dataclasses.replace`` of the
  default: the same scratchpad bytes, so rows scale as 1/T): the instructions
  the lowering emits move exactly the DRAM bytes the traffic model predicts,
  issue whole T x T x T steps, replay from their trace (``tmm<T>``), and the
  best tiling is the least traffic of the whole space;
- end to end, configs written as YAML and loaded by the config loader: compile,
  simulate and verify matmul, conv2d and the MLP (T = 8, 16, 32 here; every T
  from 4 to 128 behind the slow flag).  At T = 4 and 8 the scratchpads have
  8,192 and 4,096 rows: the ISA's row counts and tile addresses must reach them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from tinynpu.compiler.bounds import best_tiling_bytes, tiling_space, tiling_traffic
from tinynpu.compiler.conv_bounds import conv_traffic_model
from tinynpu.compiler.conv_geometry import ConvLayout
from tinynpu.compiler.conv_lower import conv_auto_tiling, lower_conv2d
from tinynpu.compiler.conv_shape import ConvShape
from tinynpu.compiler.emitter import Emitter
from tinynpu.compiler.lower import Bias, lower_gemm
from tinynpu.compiler.operands import DenseOperand, DenseOutput
from tinynpu.compiler.schedule import apply, from_tiling, intrinsic
from tinynpu.compiler.search import auto_tiling, tune
from tinynpu.errors import UsageError
from tinynpu.intmath import ceil_div
from tinynpu.isa import ArchConfig, load_config, load_isa
from tinynpu.isa.config import CONFIG_DIR

DEFAULT = load_config("default")
ISA = load_isa()
ALL_EDGES = (4, 8, 16, 32, 64, 128)
CI_EDGES = (8, 16, 32)


def scope_rows(key: str, tile: int) -> int:
    """The default's scratchpad bytes at tile edge ``tile``, but at least 8 tiles (a block, its bias, buffers)."""
    return max(DEFAULT.rows(key) * DEFAULT.tile // tile, 8 * tile)


def scaled(tile: int) -> ArchConfig:
    """The default config at tile edge ``tile`` (see :func:`scope_rows`), one T^3 step every T cycles."""
    rows = tuple((key, scope_rows(key, tile)) for key, _ in DEFAULT.scope_rows)
    return dataclasses.replace(DEFAULT, name=f"t{tile}", tile=tile, scope_rows=rows, tmm_interval_cycles=tile)


def emitted_dram_bytes(emit: Emitter) -> int:
    """DRAM bytes the emitted loads and stores move (rows x cols x element bytes each)."""
    bytes_of = np.zeros(max(ISA.scope_ids.values()) + 1, dtype=np.int64)
    for name, key in (("a", "a_reg"), ("b", "b_reg"), ("acc", "acc")):
        bytes_of[ISA.scope_by_name[name].id] = emit.cfg.elem_bytes(key)
    load, store = emit.fields_of("load"), emit.fields_of("store")
    store_bytes = np.where(store["narrow"] == 1, 1, emit.cfg.elem_bytes("acc"))
    return int((load["rows"] * load["cols"] * bytes_of[load["scope"]]).sum()
               + (store["rows"] * store["cols"] * store_bytes).sum())


@pytest.mark.parametrize("tile", ALL_EDGES)
def test_dense_gemm_lowering_moves_what_the_model_says(tile: int) -> None:
    cfg = scaled(tile)
    m, n, k = 3 * tile + 5, 2 * tile - 3, 5 * tile + 1
    t = auto_tiling(m, n, k, cfg, in_bytes=1, out_bytes=1, bias=True).tiling
    emit = Emitter(ISA, cfg)
    issued = lower_gemm(emit, m=m, n=n, k=k, a=DenseOperand(0, m, k, 1), b=DenseOperand(1 << 20, n, k, 1),
                        c=DenseOutput(2 << 20, n, 1, narrow=True, shift=7, relu=True), tiling=t,
                        bias=Bias(3 << 20, n))
    assert emitted_dram_bytes(emit) == tiling_traffic(m, n, k, t, cfg, in_bytes=1, out_bytes=1, bias=True)
    assert issued == ceil_div(m, tile) * ceil_div(n, tile) * ceil_div(k, tile) * tile**3
    assert (emit.fields_of("tmm")["m"] * tile <= cfg.rows("acc")).all()
    trace = from_tiling(t, cfg)
    assert {"op": "tensorize", "loop": "i1", "intrinsic": f"tmm{tile}"} in trace.steps
    assert apply(trace, m=m, n=n, k=k, cfg=cfg, bias=True) == t
    space = list(tiling_space(m, n, k, cfg, bias=True))
    assert best_tiling_bytes(m, n, k, cfg, in_bytes=1, out_bytes=1, bias=True) == min(
        tiling_traffic(m, n, k, s, cfg, in_bytes=1, out_bytes=1, bias=True) for s in space)


@pytest.mark.parametrize("tile", ALL_EDGES)
@pytest.mark.parametrize("kind", ["direct", "rowpack"])
def test_conv_lowering_moves_what_the_model_says(tile: int, kind: str) -> None:
    cfg = scaled(tile)
    shape = ConvShape(n=1, c=3 if kind == "rowpack" else tile + 3, h=11, w=9, k=tile + 2, r=3, s=3, stride=2,
                      pad=1)
    lay = ConvLayout(shape, kind, tile, 1)
    t = conv_auto_tiling(lay, cfg, 4)
    emit = Emitter(ISA, cfg)
    lower_conv2d(emit, lay, x_addr=0, w_addr=1 << 20, out=DenseOutput(2 << 20, shape.k, 4), tiling=t)
    assert emitted_dram_bytes(emit) == conv_traffic_model(lay, cfg, 4)(t)


def test_a_trace_for_another_tile_edge_is_refused_naming_the_intrinsic() -> None:
    trace = from_tiling(auto_tiling(64, 64, 64, scaled(8), in_bytes=1, out_bytes=4).tiling, scaled(8))
    with pytest.raises(UsageError, match='the only intrinsic of config .t16. \\(tile edge 16\\) is "tmm16"'):
        apply(trace, m=64, n=64, k=64, cfg=scaled(16))
    assert intrinsic(DEFAULT) == "tmm16"


def test_a_config_without_room_for_one_tile_is_refused_naming_the_scope() -> None:
    cramped = dataclasses.replace(scaled(32), scope_rows=(("a_reg", 64), ("b_reg", 64), ("acc", 32)))
    with pytest.raises(UsageError, match="no tiling fits config 't32': scope acc has 32 rows, but one output tile "
                                         "and its bias rows of edge 32 need 64"):
        auto_tiling(40, 40, 40, cramped, in_bytes=1, out_bytes=4, bias=True)
    with pytest.raises(UsageError, match="scope a_reg has 16 rows, but one tile of edge 32 need 32"):
        tune(40, 40, 40, dataclasses.replace(cramped, scope_rows=(("a_reg", 16), ("b_reg", 64), ("acc", 64))),
             in_bytes=1, out_bytes=4)


# -- end to end through the config loader --------------------------------------------------------


def edge_config(tile: int, directory: Path) -> ArchConfig:
    """The default config file at tile edge ``tile`` (scopes as :func:`scope_rows`), through the config loader."""
    data = yaml.safe_load((CONFIG_DIR / "default.yaml").read_text(encoding="utf-8"))
    data["name"] = f"tile{tile}"
    data["tile"] = tile
    for key, scope in data["scopes"].items():
        scope["rows"] = scope_rows(key, tile)
    data["tensor"]["tmm_interval_cycles"] = tile
    path = directory / f"tile{tile}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_config(path)


def run_all_workloads(tile: int, directory: Path) -> None:
    from tinynpu.compiler.conv2d import compile_conv2d
    from tinynpu.compiler.matmul import compile_matmul
    from tinynpu.compiler.mlp import compile_mlp
    from tinynpu.compiler.run import run_compiled

    cfg = edge_config(tile, directory)
    for compiled in (compile_matmul(2 * tile + 3, tile + 5, 3 * tile - 1, cfg=cfg),
                     compile_matmul(tile + 1, tile, 2 * tile, cfg=cfg, schedule="naive", out_dtype="int8"),
                     compile_conv2d(1, 3, 10, 10, tile + 1, 3, 3, stride=1, pad=1, cfg=cfg),
                     compile_conv2d(1, tile + 2, 7, 7, 5, 3, 3, stride=2, pad=1, cfg=cfg, layout="direct"),
                     compile_mlp(2, cfg=cfg)):
        report = run_compiled(compiled, cfg=cfg)
        assert report["verified"], compiled.workload
        assert report["padding_ceiling"] <= 1.0


@pytest.mark.parametrize("tile", CI_EDGES)
def test_workloads_verify_at_tile_edge(tile: int, tmp_path: Path) -> None:
    run_all_workloads(tile, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("tile", [t for t in ALL_EDGES if t not in CI_EDGES])
def test_workloads_verify_at_every_tile_edge(tile: int, tmp_path: Path) -> None:
    run_all_workloads(tile, tmp_path)
