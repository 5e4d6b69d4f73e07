"""``tinynpu bench onnx``: model-zoo networks from the onnx wheel, end to end, against the targets; then the
transformer section (:mod:`.bench_transformers`).

For each network (random weights, batch 1): import + quantize + compile +
simulate + verify on one seeded input, timed end to end (wall and CPU
seconds, the main thread's share and the load average: the machine is
shared, so wall time includes waiting for a core; onnxruntime's own inference
time is measured in the same run beside it);
then the integer reference, which that run showed bit-exact with the
simulator, is compared against onnxruntime on every seeded input, and each
step on onnxruntime's own inputs (:mod:`~tinynpu.compiler.onnx.verify.origins`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tinynpu.errors import UsageError

TARGET_WITHIN_1LSB = 0.99
TARGET_UTIL_OVER_CEILING = 0.90
TARGET_RESNET50_SECONDS = 30.0


def zoo_path(name: str) -> Path:
    """``onnx/backend/test/data/light/light_<name>.onnx`` of the installed onnx wheel."""
    import onnx

    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    path = folder / f"light_{name}.onnx"
    if not path.is_file():
        have = sorted(p.stem.removeprefix("light_") for p in folder.glob("light_*.onnx"))
        raise UsageError(f"--models: no model-zoo graph {name!r} in {folder}; there are: {', '.join(have)}.")
    return path


def bench_model(name: str, inputs: int) -> dict[str, Any]:
    """One network: end-to-end time, the three checks over ``inputs`` seeded inputs, utilization."""
    from tinynpu.compiler.onnx.network import compile_onnx
    from tinynpu.compiler.onnx.runtime.execute import execute
    from tinynpu.compiler.onnx.verify.checks import ort_compare
    from tinynpu.compiler.onnx.verify.origins import ort_difference_origins
    from tinynpu.compiler.onnx.verify.run import run_network

    path = zoo_path(name)
    load0 = os.getloadavg()[0]
    wall0, cpu0, main0 = time.perf_counter(), time.process_time(), time.thread_time()
    cn = compile_onnx(path)
    report = run_network(cn)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    main_cpu = time.thread_time() - main0
    load = max(load0, os.getloadavg()[0])
    lq = cn.logits[0]
    feeds = [cn.make_inputs(seed) for seed in range(inputs)]
    # the integer reference's logits: on input 0 the run above showed them bit-exact with the simulator's
    ours = [execute(cn.net, f, cache=None).values[lq] for f in feeds]
    q_cmp, f_cmp, ort_times = ort_compare(cn, feeds, ours)
    origins = ort_difference_origins(cn, feeds[0])
    return {"model": name, "end_to_end_seconds": wall, "end_to_end_cpu_seconds": cpu,
            "main_thread_cpu_seconds": main_cpu, "load_average": load, "cores": os.cpu_count() or 1,
            "phases": report["seconds"], **ort_times, "inputs": inputs, "verified": report["verified"],
            "ort_quantized": q_cmp, "ort_float": f_cmp, "cycles": report["cycles"],
            "inferences_per_second": report["inferences_per_second"],
            "util_over_ceiling": report["utilization_over_ceiling_mac_weighted"],
            "utilization": report["utilization"], "padding_ceiling": report["padding_ceiling"],
            "npu_layers": report["npu_layers"], "host_steps": report["host_steps"],
            "programs": report["programs_compiled"], "memory": report["memory"],
            "dram_bytes": report["dram_bytes"], "ort_difference_origins": origins}


def target_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per target and network: the figure measured in this run, and met or not met."""
    lines = []
    for r in rows:
        m, q = r["model"], r["ort_quantized"]
        checks = [
            (f"{m}: bit-exact against the integer reference", "yes" if r["verified"] else "no", r["verified"]),
            (f"{m}: top-1 identical to onnxruntime int8 on {r['inputs']} seeded inputs",
             f"{q['top1_agree']:.0%}", q["top1_agree"] == 1.0),
            (f"{m}: >= {TARGET_WITHIN_1LSB:.0%} of output elements within 1 LSB of onnxruntime int8",
             f"{q['within_1lsb_fraction']:.2%} (equal {q['equal_fraction']:.2%}, max {q['max_abs_lsb']} LSB)",
             q["within_1lsb_fraction"] >= TARGET_WITHIN_1LSB),
            (f"{m}: conv/gemm layers >= {TARGET_UTIL_OVER_CEILING:.0%} of their padding ceiling, MAC-weighted",
             f"{r['util_over_ceiling']:.2%}", r["util_over_ceiling"] >= TARGET_UTIL_OVER_CEILING),
        ]
        if m == "resnet50":
            checks.append((f"{m}: import + quantize + compile + simulate + verify <= {TARGET_RESNET50_SECONDS:g} s",
                           f"{r['end_to_end_seconds']:.1f} s wall, {r['end_to_end_cpu_seconds']:.1f} s CPU "
                           f"(onnxruntime: {1e3 * r['ort_quantized_seconds']:.0f} ms int8, "
                           f"{1e3 * r['ort_quantized_int8_kept_seconds']:.0f} ms with int8 kept int8 as the "
                           f"comparison runs it, {1e3 * r['ort_float_seconds']:.0f} ms float per inference)",
                           r["end_to_end_seconds"] <= TARGET_RESNET50_SECONDS))
        lines += [f"target: {what}: {figure}: {'met' if ok else 'not met'}" for what, figure, ok in checks]
    return lines


def run_bench(*, models: list[str], inputs: int, as_json: bool, transformers: list[str] | None = None) -> int:
    """Run every model, then every transformer, print the tables and the target lines (or one JSON object)."""
    from tinynpu.compiler.onnx import bench_transformers
    from tinynpu.compiler.onnx.libout import explained

    if inputs <= 0:
        raise UsageError(f"--inputs must be a positive number of inputs, not {inputs}.")
    transformers = transformers or []
    for name in models:
        zoo_path(name)  # every name checked before any work
    bench_transformers.check_names(transformers)
    with explained("tinynpu bench onnx"):  # what the libraries print is captured, as in `tinynpu run onnx`
        rows = [bench_model(name, inputs) for name in models]
        t_rows = bench_transformers.run_section(transformers, inputs)
    lines = target_lines(rows) + bench_transformers.target_lines(t_rows)
    if as_json:
        print(json.dumps({"models": rows, "transformers": t_rows, "targets": lines,
                          "met": all(line.endswith(": met") for line in lines)}))
        return 0
    for r in rows:
        ph = r["phases"]
        print(f"{r['model']}: {r['npu_layers']} accelerator layers ({r['programs']} programs), {r['host_steps']} "
              f"host steps; {r['cycles']:,} cycles = {r['inferences_per_second']:.1f} inferences/s; utilization "
              f"{r['utilization']:.2%} of a {r['padding_ceiling']:.2%} padding ceiling; end to end "
              f"{r['end_to_end_seconds']:.1f} s (import {ph['import']:.1f}, quantize {ph['quantize']:.1f}, compile "
              f"{ph['compile']:.1f}, simulate {ph['simulate']:.1f}, host steps {ph['host_steps']:.1f}, reference "
              f"{ph['reference']:.1f}, onnxruntime checks {ph['onnxruntime_compare']:.1f}); float cosine "
              f"{r['ort_float']['cosine']:.4f}, float top-1 {r['ort_float']['top1_agree']:.0%}")
        print(f"{r['model']}: where the wall time goes: {r['end_to_end_seconds']:.1f} s wall = "
              f"{r['end_to_end_seconds'] / max(r['end_to_end_cpu_seconds'], 1e-9):.1f}x the "
              f"{r['end_to_end_cpu_seconds']:.1f} s CPU ({r['main_thread_cpu_seconds']:.1f} s in the main thread, "
              f"{r['end_to_end_cpu_seconds'] - r['main_thread_cpu_seconds']:.1f} s in BLAS/onnxruntime threads); "
              f"load average {r['load_average']:.1f} on {r['cores']} cores: the rest is waiting for a core")
        origins = "; ".join(f"{kind} {o['differing']:,} of {o['elements']:,} elements (max {o['max_abs_lsb']} LSB)"
                            for kind, o in r["ort_difference_origins"].items())
        print(f"{r['model']}: differences from onnxruntime int8 by origin (each step fed onnxruntime's own "
              f"int8 inputs; 'on' names the onnxruntime operator that computed the step: QLinearConv, QGemm, "
              f"... integer, Conv, FusedConv, ... float): {origins}")
    print("\n".join(bench_transformers.table_lines(t_rows) + lines))
    return 0


__all__ = ["bench_model", "run_bench", "target_lines", "zoo_path"]
