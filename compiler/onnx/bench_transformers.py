"""``tinynpu bench onnx``, transformer section: the encoder block and the committed PyTorch exports, per output.

For each network, in one run: compiled with the defaults (the committed exports
calibrated on their committed inputs, as ``tinynpu run onnx --input`` does),
run on the simulator on those inputs (the encoder block on seeded ones), and per
graph output: bit-exact against the integer reference (check a), cosine against
the float model (check c), agreement with onnxruntime's int8 run of the same
QDQ model (check b) and which of the two int8 runs is closer to the float model.
Per network: the host steps that compute (not layout moves, not the network's
input and output conversions) and those of them that are nonlinear layers,
accelerator cycles, the host's share of the run's wall time with loading the
programs counted as the host's (and apart), and the wall time beside
onnxruntime's own per-inference time measured in the same run.

For the encoder block also: the per-operator error table of
:mod:`.bench_nonlinear` and the program-loading benchmark of
:func:`loading_ratio`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinynpu.compiler.onnx.ir import HOST
from tinynpu.errors import UsageError

MODELS_DIR = Path(__file__).resolve().parents[2] / "tests" / "models"
BLOCK = "block"  # the BERT-style encoder block, BERT_BLOCK
SMALL_BLOCK_NAME = "block_small"  # the same at sequence 16, hidden 32 (tests, quick looks)
#: The default transformer section: the block and every committed transformer export in its default form.
TRANSFORMERS = (BLOCK, "bert_sdpa", "bert_eager", "gpt2_sdpa", "gpt2_eager", "gpt2_past", "vit_hf",
                "vit_torchvision", "llama", "llama_past")
#: Added by ``--all``: the other forms of the exports that tinynpu takes (tests/models/README.md says why
#: gpt2_sdpa.op17 and gpt2_sdpa.legacy are not among them).
OTHER_FORMS = ("bert_sdpa.legacy", "bert_sdpa.op17", "gpt2_eager.legacy", "vit_hf.legacy")
TARGET_COSINE = 0.99
TARGET_HOST_SHARE = 0.15
#: ONNX operators of a transformer's nonlinear layers (softmax, the norms as exported, the activations): on
#: the host these are what the accelerator's transformer instructions exist to take over.
NONLINEAR_OPS = frozenset({"Softmax", "LogSoftmax", "LayerNormalization", "SimplifiedLayerNormalization", "Erf",
                           "Gelu", "Tanh", "Sigmoid", "HardSigmoid", "HardSwish", "Sqrt", "Reciprocal", "Pow",
                           "ReduceMean", "Exp", "Log"})


@dataclass(frozen=True)
class Case:
    """One network of the section: its label, file, and the inputs it runs and calibrates on (None: seeded)."""

    label: str
    path: Path
    feeds: dict[str, np.ndarray] | None


def known_names() -> list[str]:
    """Every name ``--transformers`` takes."""
    return [BLOCK, SMALL_BLOCK_NAME, *TRANSFORMERS[1:], *OTHER_FORMS]


def check_names(names: list[str]) -> None:
    """Refuse an unknown name before any work, naming the ones there are."""
    unknown = [n for n in names if n not in known_names()]
    if unknown:
        raise UsageError(f"--transformers: no network {', '.join(repr(u) for u in unknown)}; there are: "
                         f"{', '.join(known_names())}.")
    exports = [n for n in names if n not in (BLOCK, SMALL_BLOCK_NAME)]
    if exports and not MODELS_DIR.is_dir():
        raise UsageError(f"--transformers {', '.join(exports)}: the committed exports are not here ({MODELS_DIR} "
                         "is missing: they come with a checkout of the repository, not with the package); "
                         f"--transformers {BLOCK} needs none.")


def make_case(name: str, tmp: Path) -> Case:
    """The network ``name``: the encoder block written to ``tmp``, or a committed export with its inputs."""
    from tinynpu.compiler.onnx.encoder_block import BERT_BLOCK, SMALL_BLOCK, encoder_block

    if name in (BLOCK, SMALL_BLOCK_NAME):
        shape = BERT_BLOCK if name == BLOCK else SMALL_BLOCK
        return Case(name, encoder_block(tmp / f"{name}.onnx", shape=shape), None)
    with np.load(MODELS_DIR / f"{name.split('.')[0]}.inputs.npz") as data:
        feeds = {k: data[k] for k in data.files}
    return Case(name, MODELS_DIR / f"{name}.onnx", feeds)


def _output_row(o: dict[str, Any]) -> dict[str, Any]:
    row = {"name": o["name"], "shape": o["shape"], "bit_exact": o["verified"],
           "cosine_vs_float": o["ort_float"]["cosine"],
           "ort_int8_cosine_vs_float": o["ort_quantized"]["cosine_vs_float"],
           "ort_int8": {k: v for k, v in o["ort_quantized"].items() if k != "cosine_vs_float"},
           "closer_to_float": o["closer_to_float"]}
    if "top1_agree" in o["ort_float"]:
        row["top1_vs_float"] = o["ort_float"]["top1_agree"]
    return row


def bench_transformer(case: Case) -> dict[str, Any]:
    """One network end to end (see the module docstring); the figures of its row."""
    from tinynpu.compiler.onnx.bench_nonlinear import host_compute_steps
    from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource
    from tinynpu.compiler.onnx.network import compile_onnx
    from tinynpu.compiler.onnx.verify.run import run_network
    from tinynpu.simulator.native import NativeUnavailable, library

    # the native core built (once per cache) before the clock starts, else the first run's simulation counts
    # the C build; without it the Python core runs and there is nothing to build
    with contextlib.suppress(NativeUnavailable):
        library()
    load0 = os.getloadavg()[0]
    wall0, cpu0 = time.perf_counter(), time.process_time()
    source = CalibrationSource((case.feeds,), "the committed inputs") if case.feeds is not None else None
    cn = compile_onnx(case.path, calibration=source)
    r = run_network(cn, feeds=case.feeds)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    s = r["seconds"]
    host, sim, load = s["host_steps"], s["simulate"], s["program_load"]
    ops = {step.name: step.op for step in cn.net.steps}
    steps = [{"name": n, "op": ops[n]} for n in host_compute_steps(cn.net)]
    return {"model": case.label, "file": str(case.path), "verified": r["verified"],
            "outputs": [_output_row(o) for o in r["outputs"]], "cycles": r["cycles"],
            "npu_layers": r["npu_layers"], "host_compute_steps": steps,
            "host_move_steps": sum(1 for step in cn.net.steps if step.where == HOST and step.kind == "move"),
            "host_bytes": r["host_bytes"],
            "nonlinear_host_steps": [st for st in steps if st["op"] in NONLINEAR_OPS],
            "host_share_of_wall_time": (host + load) / (host + sim + load) if host + sim + load else 0.0,
            "host_share_apart_from_loading": r["host_share_of_wall_time"],
            "program_load_seconds": load, "simulate_seconds": sim, "host_steps_seconds": host,
            "run_seconds": s["run"], "end_to_end_seconds": wall, "end_to_end_cpu_seconds": cpu,
            "load_average": max(load0, os.getloadavg()[0]), "phases": s,
            "ort_quantized_seconds": s["ort_quantized_seconds"], "ort_float_seconds": s["ort_float_seconds"],
            "compiled": cn}


def loading_ratio(cn: Any) -> dict[str, Any]:
    """Checking the block's relocated programs as linking does at compile time (each relocation decoded only
    in the words it changed, against its compiled program's decoding, which the program cache made once)
    against decoding every relocated program whole, as every load did before; CPU seconds of this thread
    (the machine may be shared), both on the same programs.  ``compile_decode_cpu_seconds``: the one
    decoding per compiled program (counted in the compile phases, as linking is; a run decodes neither)."""
    from tinynpu.isa import load_isa
    from tinynpu.simulator.decode import decode_like, decode_program

    isa, cfg, image = load_isa(), cn.cfg, cn.image
    programs = list(image.programs.values())
    compiled = {id(c.program): c.program for c in cn.cache.programs.values()}
    t0 = time.thread_time()
    for p in programs:
        decode_program(isa, cfg, p.words, p.columns)
    whole = time.thread_time() - t0
    t0 = time.thread_time()
    origins = {image.origin[id(p)] for p in programs}
    first = {origin: decode_program(isa, cfg, compiled[origin].words, compiled[origin].columns) for origin in origins}
    at_compile = time.thread_time() - t0
    t0 = time.thread_time()
    for p in programs:
        decode_like(isa, cfg, p.words, first[image.origin[id(p)]], p.columns)
    per_run = time.thread_time() - t0
    return {"programs": len(programs), "compiled_programs": len(first), "decode_every_load_cpu_seconds": whole,
            "decode_once_cpu_seconds": per_run, "compile_decode_cpu_seconds": at_compile,
            "ratio": whole / per_run if per_run else 0.0}


def run_section(names: list[str], inputs: int) -> list[dict[str, Any]]:
    """Every network of ``names``, in order; the block's row carries the operator table and the loading ratio."""
    from tinynpu.compiler.onnx.bench_nonlinear import operator_errors

    rows = []
    with tempfile.TemporaryDirectory(prefix="tinynpu-bench-transformers-") as tmp:
        for name in names:
            row = bench_transformer(make_case(name, Path(tmp)))
            cn = row.pop("compiled")
            if name in (BLOCK, SMALL_BLOCK_NAME):
                row["operators"] = operator_errors(cn, inputs)
                row["loading"] = loading_ratio(cn)
            rows.append(row)
    return rows


def target_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The transformer targets, one line each: the figure measured in this run, and met or not met."""
    checks: list[tuple[str, str, bool]] = []
    for r in rows:
        m = r["model"]
        exact = all(o["bit_exact"] for o in r["outputs"])
        checks.append((f"{m}: bit-exact against the integer reference on every output",
                       "yes" if exact and r["verified"] else "no", exact and r["verified"]))
        for o in r["outputs"]:
            checks.append((f"{m}: {o['name']}: cosine against the float model >= {TARGET_COSINE}",
                           f"{o['cosine_vs_float']:.4f}", o["cosine_vs_float"] >= TARGET_COSINE))
        nl = r["nonlinear_host_steps"]
        checks.append((f"{m}: no nonlinear layer on the host", f"{len(nl)} host step(s)"
                       + (f" ({', '.join(st['name'] + ' ' + st['op'] for st in nl)})" if nl else ""), not nl))
        if m in (BLOCK, SMALL_BLOCK_NAME):
            checks.append((f"{m}: host share of the run's wall time, loading the programs counted as the host's, "
                           f"<= {TARGET_HOST_SHARE:.0%}", f"{r['host_share_of_wall_time']:.1%}",
                           r["host_share_of_wall_time"] <= TARGET_HOST_SHARE))
            checks.append((f"{m}: zero host compute steps", str(len(r["host_compute_steps"])),
                           not r["host_compute_steps"]))
    return [f"target: {what}: {figure}: {'met' if ok else 'not met'}" for what, figure, ok in checks]


def _ort_text(o: dict[str, Any]) -> str:
    q = o["ort_int8"]
    if q["on"] == "int8":
        return (f"{q['equal_fraction']:.2%} equal, {q['within_1lsb_fraction']:.2%} within 1 LSB, max "
                f"{q['max_abs_lsb']} LSB")
    return f"float output, max difference {q['max_abs_difference']:.2e}"


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The section's text: per network a line of figures, a line on time, a line per output."""
    lines = []
    for r in rows:
        nl = r["nonlinear_host_steps"]
        lines.append(f"{r['model']}: {r['npu_layers']} accelerator layers, {r['cycles']:,} cycles; "
                     f"{len(r['host_compute_steps'])} host compute steps "
                     f"({', '.join(sorted({st['op'] for st in r['host_compute_steps']})) or 'none'}), "
                     f"{len(nl)} of them nonlinear layers")
        lines.append(f"{r['model']}: host share of the run's wall time {r['host_share_of_wall_time']:.1%} "
                     f"counting the programs' loading ({r['host_share_apart_from_loading']:.1%} apart from it: "
                     f"load {r['program_load_seconds']:.2f} s, simulate {r['simulate_seconds']:.2f} s, host steps "
                     f"{r['host_steps_seconds']:.2f} s; at compile time, each compiled program's one decoding "
                     f"{r['phases'].get('program_decode', 0.0):.2f} s and linking every program of the run "
                     f"{r['phases'].get('link', 0.0):.2f} s); wall time: run {r['run_seconds']:.2f} s, "
                     f"end to end "
                     f"{r['end_to_end_seconds']:.1f} s ({r['end_to_end_cpu_seconds']:.1f} s CPU, load average "
                     f"{r['load_average']:.1f}) beside onnxruntime {1e3 * r['ort_quantized_seconds']:.2f} ms int8, "
                     f"{1e3 * r['ort_float_seconds']:.2f} ms float per inference")
        for o in r["outputs"]:
            top1 = f", top-1 vs float {o['top1_vs_float']:.0%}" if "top1_vs_float" in o else ""
            lines.append(f"{r['model']}: output {o['name']} {tuple(o['shape'])}: (a) "
                         f"{'bit-exact' if o['bit_exact'] else 'NOT bit-exact'}; (c) cosine vs float "
                         f"{o['cosine_vs_float']:.4f} (onnxruntime int8 {o['ort_int8_cosine_vs_float']:.4f}){top1}; "
                         f"(b) vs onnxruntime int8: {_ort_text(o)}; closer to float: {o['closer_to_float']}")
        if "loading" in r:
            ld = r["loading"]
            lines.append(f"{r['model']}: checking its {ld['programs']} relocated programs ({ld['compiled_programs']} "
                         f"compiled) when linking: {1e3 * ld['decode_once_cpu_seconds']:.1f} ms CPU decoding only the "
                         f"relocated words against each compiled program's decoding (made once at compile time: "
                         f"{1e3 * ld['compile_decode_cpu_seconds']:.1f} ms), "
                         f"{1e3 * ld['decode_every_load_cpu_seconds']:.1f} ms decoding every relocated program "
                         f"whole: {ld['ratio']:.1f}x")
            for op in r["operators"]:
                prob = (f"; probability {op['npu_prob']:.2e} (host {op['host_prob']:.2e})" if "npu_prob" in op
                        else "")
                lines.append(f"{r['model']}: operator {op['name']} ({op['op']}): largest error against the float "
                             f"operator {op['npu_lsb']:.2f} LSB on the accelerator, {op['host_lsb']:.2f} LSB on the "
                             f"host{prob}")
    return lines


__all__ = ["NONLINEAR_OPS", "OTHER_FORMS", "TRANSFORMERS", "Case", "bench_transformer", "check_names",
           "loading_ratio", "make_case", "run_section", "table_lines", "target_lines"]
