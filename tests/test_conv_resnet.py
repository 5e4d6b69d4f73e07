"""ResNet-50's conv layers: verified, and simulated utilization within the issue's bar of the im2col ceiling.

Cycle counts come from the simulator's deterministic timing model, not wall
time, so this is a regression check on the schedule, not a timed test.  The
layers run as in a quantized network (int8 in, int8 requantized out): with
int32 outputs the 1x1 layers are memory bound on writing the output (see the
final report / ``bench compiler``).
"""

from __future__ import annotations

import pytest

from tinynpu.compiler.conv2d import compile_conv2d
from tinynpu.compiler.conv_shape import RESNET50_CONVS, ConvShape
from tinynpu.compiler.run import run_compiled
from tinynpu.intmath import round_up
from tinynpu.isa import load_config

BAR = 0.80  # the bench target: utilization >= 80% of the padding ceiling of each layer's im2col GEMM


def im2col_ceiling(sh: ConvShape, tile: int) -> float:
    """Useful MACs over the MACs of the unpadded im2col GEMM rounded up to whole tiles."""
    m, n, k = sh.gemm_m, sh.gemm_n, sh.gemm_k
    return m * n * k / (round_up(m, tile) * round_up(n, tile) * round_up(k, tile))


@pytest.mark.parametrize("shape", RESNET50_CONVS, ids=[f"L{i}" for i in range(len(RESNET50_CONVS))])
def test_resnet_layer_meets_the_bar(shape: ConvShape) -> None:
    comp = compile_conv2d(**shape.kwargs(), out_dtype="int8")
    report = run_compiled(comp)  # race sanitizer on: the tokens order every reuse of a buffer
    assert report["verified"] is True
    ceiling = im2col_ceiling(shape, load_config("default").tile)
    assert report["utilization"] / ceiling >= BAR, (shape, report["utilization"], ceiling)
    # The traffic model is exact, and no tiling of the space moves less than best_tiling_bytes.  (auto
    # ranks speed first: on the 1x1 stride-2 and 7x7 1x1 layers the least-traffic tilings keep a
    # weight panel resident single-buffered, which the model ranks slower.)
    assert report["dram_bytes"] == comp.model["dram_bytes"] >= comp.bounds.best_tiling_bytes


def test_first_layer_keeps_the_unpadded_bar() -> None:
    # C=3: packing (s, r, c) keeps the issued MACs close to the im2col GEMM's, not 7*7*16.
    first = RESNET50_CONVS[0]
    comp = compile_conv2d(**first.kwargs(), out_dtype="int8")
    assert comp.workload["layout"] == "rowpack"
    assert comp.bounds.padding_ceiling == pytest.approx(im2col_ceiling(first, 16), rel=1e-12)
    assert comp.host_traffic_bytes > 0
