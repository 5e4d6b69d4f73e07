"""Benchmark of the transformer nonlinear lowerings: accuracy per operator, and per network.

``python -m tinynpu.compiler.onnx.bench_nonlinear`` builds the BERT-style encoder
block (sequence 128, hidden 256, 4 heads, FFN 1024; :mod:`.encoder_block`) and,
in the same run:

- per nonlinear operator, over seeded inputs drawn like the calibration
  samples: the largest error of its int8 output against the float operator
  (its ONNX nodes in float, the final QuantizeLinear left out) applied to the
  same int8 input, in LSBs of the output scale, for the accelerator program
  (``npu``) and for the host-float path (``host``) side by side, and a
  softmax's in absolute probability too (a rotary embedding's float operator keeps its intermediate
  values unrounded: the Q/DQ pairs between its nodes are left out, so the error is against float rotary);
- per network, compiled with ``--nonlinear npu`` and ``--nonlinear host``: the
  run on the simulator, bit-exact against its integer reference (check a),
  its cosine against the float model (check c), the host's share of the wall
  time and the host compute steps (those that are neither data movement nor
  the network's input and output conversion).

``--models`` adds committed exports (``tests/models/*.onnx``) to the network table, and their nonlinear
steps (a Llama's rotary embeddings among them) to the operator table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.ir import HOST, Network, NonlinearStep, RotaryStep, SoftmaxStep

#: Host steps that are no computation: the network's input/output conversions and layout moves.
_NOT_COMPUTE = ("QuantizeLinear", "DequantizeLinear")


def host_compute_steps(net: Network) -> list[str]:
    """The names of the host steps that compute (not data movement, not a Q/DQ conversion, not a per-run mask's
    codes made from a network input: that input's conversion, docs/onnx.md "Runtime masks")."""
    from tinynpu.compiler.onnx.lower.mask_fusion import is_input_conversion

    return [s.name for s in net.steps if s.where == HOST and s.kind != "move" and s.op not in _NOT_COMPUTE
            and not is_input_conversion(s, net)]


def _float_operator(step: NonlinearStep, env: dict[str, np.ndarray], net: Network) -> np.ndarray:
    """The step's ONNX nodes in float on ``env``, without the QuantizeLinear they end at."""
    from tinynpu.compiler.onnx.runtime.host import onnx_operator

    local = dict(env)
    unrounded: dict[str, str] = {}  # a rotary's inner QuantizeLinear output -> the float value it rounds
    for s in step.chain[:-1]:
        if isinstance(step, RotaryStep) and s.op == "QuantizeLinear":
            unrounded[s.outputs[0]] = s.inputs[0]
        elif isinstance(step, RotaryStep) and s.op == "DequantizeLinear" and s.inputs[0] in unrounded:
            local[s.outputs[0]] = local[unrounded[s.inputs[0]]]
        else:
            local.update(zip(s.outputs, onnx_operator(s, local, net), strict=False))
    return np.asarray(local[step.chain[-1].inputs[0]], dtype=np.float64)


def operator_errors(npu_cn: Any, inputs: int) -> list[dict[str, Any]]:
    """Per nonlinear step: the largest error against the float operator, npu and host, over ``inputs`` samples."""
    from tinynpu.compiler.onnx.runtime.execute import execute
    from tinynpu.compiler.onnx.runtime.nonlinear import host_chain

    net = npu_cn.net
    rows: dict[str, dict[str, Any]] = {}
    for seed in range(inputs):
        ex = execute(net, npu_cn.make_inputs(1000 + seed), cache=None)
        for step in net.steps:
            if not isinstance(step, NonlinearStep):
                continue
            qp = net.qparams[step.outputs[0]]
            f = _float_operator(step, ex.values, net)
            want = np.clip(f / qp.s + qp.z, -128, 127)
            host = host_chain(step, ex.values, net)[0].astype(np.float64)
            got = ex.values[step.outputs[0]].astype(np.float64)
            row = rows.setdefault(step.name, {"name": step.name, "op": step.op, "where": step.where,
                                              "npu_lsb": 0.0, "host_lsb": 0.0})
            row["npu_lsb"] = max(row["npu_lsb"], float(np.abs(got - want).max()))
            row["host_lsb"] = max(row["host_lsb"], float(np.abs(host - want).max()))
            if isinstance(step, SoftmaxStep):
                row["npu_prob"] = max(row.get("npu_prob", 0.0), float(np.abs((got - qp.z) * qp.s - f).max()))
                row["host_prob"] = max(row.get("host_prob", 0.0), float(np.abs((host - qp.z) * qp.s - f).max()))
    return list(rows.values())


def network_row(path: Path, nonlinear: str, label: str) -> dict[str, Any]:
    """One network compiled with ``nonlinear`` and run on the simulator: checks, cosine, host share."""
    from tinynpu.compiler.onnx import compile_onnx, run_network

    cn = compile_onnx(path, nonlinear=nonlinear)
    r = run_network(cn)
    cosines = {o["name"]: o["ort_float"]["cosine"] for o in r["outputs"] if o.get("ort_float")}
    s = r["seconds"]
    counting_loads = (s["host_steps"] + s["program_load"]) / (s["host_steps"] + s["simulate"] + s["program_load"])
    return {"network": label, "nonlinear": nonlinear, "verified": r["verified"],
            "cosine_vs_float": cosines, "host_share_of_wall_time": r["host_share_of_wall_time"],
            "host_share_counting_program_loads": counting_loads, "program_load_seconds": s["program_load"],
            "host_compute_steps": host_compute_steps(cn.net), "cycles": r["cycles"],
            "seconds": r["seconds"]["run"]}


def run(inputs: int, models: list[str], small: bool) -> dict[str, Any]:
    from tinynpu.compiler.onnx import compile_onnx
    from tinynpu.compiler.onnx.encoder_block import BERT_BLOCK, SMALL_BLOCK, encoder_block

    shape = SMALL_BLOCK if small else BERT_BLOCK
    out: dict[str, Any] = {"block": vars(shape), "operators": [], "networks": []}
    with tempfile.TemporaryDirectory(prefix="tinynpu-bench-nl-") as tmp:
        for gelu in ("erf", "tanh"):
            path = encoder_block(Path(tmp) / f"block_{gelu}.onnx", shape=shape, gelu=gelu)
            for row in operator_errors(compile_onnx(path), inputs):
                out["operators"].append({"network": f"block ({gelu} GELU)"} | row)
            for mode in ("npu", "host"):
                out["networks"].append(network_row(path, mode, f"block ({gelu} GELU)"))
    for name in models:
        path = Path(__file__).resolve().parents[2] / "tests" / "models" / f"{name}.onnx"
        for row in operator_errors(compile_onnx(path), inputs):
            out["operators"].append({"network": name} | row)
        for mode in ("npu", "host"):
            out["networks"].append(network_row(path, mode, name))
    return out


def _table(result: dict[str, Any]) -> str:
    lines = ["per operator: largest error against the float operator on the same int8 input (LSB of the output "
             "scale; softmax also in probability)",
             f"{'network':24} {'step':18} {'op':24} {'npu LSB':>8} {'host LSB':>8} {'npu prob':>9} {'host prob':>9}"]
    for r in result["operators"]:
        prob = (f"{r['npu_prob']:9.2e} {r['host_prob']:9.2e}" if "npu_prob" in r else "")
        lines.append(f"{r['network']:24} {r['name'][:18]:18} {r['op'][:24]:24} {r['npu_lsb']:8.3f} "
                     f"{r['host_lsb']:8.3f} {prob}")
    lines += ["", "per network: check (a), host share of the first run's wall time (apart from loading the programs, "
              "and counting it as the host's), host compute steps, check (c)",
              f"{'network':24} {'nonlinear':9} {'a':>5} {'host share':>10} {'w/ loads':>8} {'host compute':>12}  "
              "cosine vs float"]
    for r in result["networks"]:
        cos = ", ".join(f"{k} {v:.4f}" for k, v in r["cosine_vs_float"].items())
        lines.append(f"{r['network']:24} {r['nonlinear']:9} {str(r['verified']):>5} "
                     f"{r['host_share_of_wall_time']:10.1%} {r['host_share_counting_program_loads']:8.1%} "
                     f"{len(r['host_compute_steps']):12d}  {cos}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tinynpu.compiler.onnx.bench_nonlinear", description=__doc__)
    p.add_argument("--inputs", type=int, default=4, help="seeded inputs per operator measurement (default 4)")
    p.add_argument("--models", default="", help="committed exports to add, comma-separated (e.g. bert_sdpa,llama)")
    p.add_argument("--small", action="store_true", help="the small block (sequence 16, hidden 32) instead")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    result = run(max(1, args.inputs), [m for m in args.models.split(",") if m], args.small)
    print(json.dumps(result, indent=1, default=str) if args.json else _table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
