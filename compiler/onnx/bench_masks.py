"""Per-run attention masks: the host select against the mask inside the softmax program, on padded inputs.

``python -m tinynpu.compiler.onnx.bench_masks [--keep N] [MODEL ...]`` compiles each committed
export with an ``attention_mask`` input twice in one run, calibrated on the same padded inputs
(the committed ones with every key position from ``N`` on masked): once as it is (the mask's codes
read by the softmax programs, :mod:`.lower.mask_fusion`) and once with that fusion off (a host
select per layer, the path before it).  It prints, for both, the accelerator cycles, the host
compute steps, the host bytes, the cosine of every output against the float model and whether
the run is bit-exact against its integer reference, and whether the two runs' outputs are equal
bit for bit.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.bench_transformers import MODELS_DIR

#: The committed exports whose mask is a network input.
MASKED = ("bert_sdpa", "bert_eager", "bert_sdpa.legacy", "gpt2_past", "llama_past")


def padded_feeds(name: str, keep: int) -> dict[str, np.ndarray]:
    """The export's committed inputs with ``attention_mask`` 0 from key position ``keep`` on."""
    with np.load(MODELS_DIR / f"{name.split('.')[0]}.inputs.npz") as data:
        feeds = {k: data[k] for k in data.files}
    mask = feeds["attention_mask"].copy()
    mask[..., keep:] = 0
    feeds["attention_mask"] = mask
    return feeds


def _one(name: str, feeds: dict[str, np.ndarray], *, fused: bool) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    from unittest import mock

    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps
    from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource
    from tinynpu.compiler.onnx.lower import mask_fusion
    from tinynpu.compiler.onnx.network import compile_onnx
    from tinynpu.compiler.onnx.runtime.execute import execute
    from tinynpu.compiler.onnx.verify.run import run_network

    off = mock.patch.object(mask_fusion, "fuse_runtime_masks", lambda net, cfg: None)
    if not fused:
        off.start()
    try:
        cn = compile_onnx(MODELS_DIR / f"{name}.onnx", calibration=CalibrationSource((feeds,), "padded"))
    finally:
        if not fused:
            off.stop()
    r = run_network(cn, feeds=feeds)
    outputs = execute(cn.net, feeds, cache=cn.cache, image=cn.image).values
    row = {"cycles": r["cycles"], "host_compute_steps": len(host_compute_steps(cn.net)),
           "host_bytes": r["host_bytes"], "bit_exact": bool(r["verified"]),
           "cosines": {o["name"]: o["ort_float"]["cosine"] for o in r["outputs"]}}
    return row, {k: outputs[k] for k in cn.net.outputs}


def compare(name: str, keep: int) -> dict[str, Any]:
    """Both paths on ``name`` with key positions ``keep..`` masked (see the module docstring)."""
    feeds = padded_feeds(name, keep)
    host, host_out = _one(name, feeds, fused=False)
    npu, npu_out = _one(name, feeds, fused=True)
    equal = all(np.array_equal(host_out[k], npu_out[k]) for k in host_out)
    return {"model": name, "keep": keep, "host_select": host, "in_program": npu, "outputs_equal": equal}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tinynpu.compiler.onnx.bench_masks", description=__doc__)
    ap.add_argument("models", nargs="*", default=list(MASKED), help=f"exports (default: {', '.join(MASKED)})")
    ap.add_argument("--keep", type=int, default=5, help="key positions attended; the rest are padding (default 5)")
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f}; attention_mask 1 on the first {args.keep} key positions")
    for name in args.models:
        r = compare(name, args.keep)
        for label in ("host_select", "in_program"):
            s = r[label]
            cos = ", ".join(f"{k} {v:.4f}" for k, v in s["cosines"].items())
            print(f"{name:17s} {label:12s} cycles {s['cycles']:>7,}  host compute steps {s['host_compute_steps']:>2}  "
                  f"host bytes {s['host_bytes']:>7,}  bit-exact {s['bit_exact']}  cosine {cos}")
        h, n = r["host_select"], r["in_program"]
        print(f"{name:17s} ratio        cycles {n['cycles'] / h['cycles']:.3f}x  host bytes "
              f"{n['host_bytes'] / h['host_bytes']:.3f}x  outputs equal bit for bit: {r['outputs_equal']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
