"""``tinynpu run onnx``, ``tinynpu compile onnx`` and ``tinynpu bench onnx``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tinynpu.errors import UsageError

_GENERATOR = "tinynpu compile onnx"
_COMPILE_FILES = ("network.json", "model.int8.onnx")


def add_onnx_workload(sub: argparse._SubParsersAction, mode: str) -> None:  # type: ignore[type-arg]
    """The ``onnx`` workload under ``tinynpu run`` (mode ``run``) or ``tinynpu compile`` (``compile``)."""
    p = sub.add_parser("onnx", help="an ONNX model: import, quantize to int8, run layer by layer (accelerator + "
                                    "host), verify against numpy and onnxruntime")
    p.add_argument("model", type=Path, help="the .onnx file (float, or already quantized: QDQ or QOperator)")
    p.add_argument("--batch", type=int, default=None,
                   help="size of a dynamic batch dimension (default: none; required when the model has one)")
    p.add_argument("--random-weights", type=int, default=None, metavar="SEED",
                   help="replace the weights by seeded fan-in-scaled random ones (default: only when every weight "
                        "in the file is a constant, with seed 0)")
    p.add_argument("--calibrate", type=int, default=8, metavar="N",
                   help="seeded calibration inputs for quantization (default 8)")
    p.add_argument("--calibration", type=Path, default=None, metavar="FILE.npz|DIR",
                   help="real calibration samples: one .npz (one array per input name) or a folder of them; "
                        "replaces --calibrate's seeded samples (default: none; a run's --input values "
                        "calibrate when given, else seeded samples by input role)")
    p.add_argument("--config", default=None, help="architecture config name or YAML path (default: default)")
    if mode == "run":
        p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                       help="a network input from a .npy file (default: seeded input by role: standard-normal "
                            "floats, token ids within their table, masks of ones)")
        p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
        p.add_argument("--compare", type=int, default=0, metavar="N",
                       help="further seeded inputs compared against onnxruntime on the integer reference "
                            "(default 0)")
        p.add_argument("--json", action="store_true", help="print one JSON object (default: tables)")
        p.add_argument("--report", type=Path, default=None, metavar="DIR",
                       help="also write a per-layer report (index.md, layers.png, report.json) into DIR "
                            "(default: none)")
        p.add_argument("--force", action="store_true",
                       help="let --report replace files tinynpu did not write (default: refuse)")
        p.set_defaults(handler=_cmd_run)
    else:
        p.add_argument("-o", "--output", type=Path, required=True,
                       help="output directory (network.json, model.int8.onnx, programs/)")
        p.add_argument("--force", action="store_true", help="overwrite files that tinynpu did not write "
                                                            "(default: refuse)")
        p.set_defaults(handler=_cmd_compile)


def register_onnx_bench(bench_sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``tinynpu bench onnx``."""
    p = bench_sub.add_parser("onnx", help="ResNet-50, SqueezeNet, AlexNet from the onnx wheel: verification, "
                                          "utilization, end-to-end time against onnxruntime's")
    p.add_argument("--json", action="store_true", help="print one JSON object (default: a table)")
    p.add_argument("--models", default="resnet50,squeezenet,bvlc_alexnet",
                   help="comma-separated model-zoo names from onnx/backend/test/data/light "
                        "(default resnet50,squeezenet,bvlc_alexnet)")
    p.add_argument("--inputs", type=int, default=8,
                   help="seeded inputs compared against onnxruntime (default 8)")

    def handler(args: argparse.Namespace) -> int:
        from tinynpu.compiler.onnx.bench import run_bench

        return run_bench(models=[m.strip() for m in args.models.split(",") if m.strip()], inputs=args.inputs,
                         as_json=args.json)

    p.set_defaults(handler=handler)


def _config(name: str | None) -> Any:
    from tinynpu.isa import load_config

    return load_config(name) if name else None


def _feeds(specs: list[str]) -> dict[str, Any]:
    from tinynpu import fsio

    out = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--input {spec!r}: expected NAME=FILE.npy.")
        out[name] = fsio.read_npy(path, what=f"--input {name}")
    return out


def _calibration_source(args: argparse.Namespace, feeds: dict[str, Any]) -> Any:
    """The samples the user gives for calibration (``--calibration``, else the ``--input`` values), checked
    against the imported model's inputs; None when there are none (seeded samples then)."""
    if args.calibration is None and not feeds:
        return None
    from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource, check_sample, load_calibration
    from tinynpu.compiler.onnx.frontend.importer import import_model, seeded_inputs

    model = import_model(args.model, batch=args.batch, random_weights=args.random_weights).model
    if args.calibration is not None:
        samples = load_calibration(model, args.calibration)
        return CalibrationSource(tuple(samples), f"{len(samples)} sample(s) from --calibration {args.calibration}")
    given = {name: check_sample(model, {name: value}, f"--input {name}")[name] for name, value in feeds.items()}
    rest = sorted(set(seeded_inputs(model, args.seed)) - set(given))
    origin = "the --input values" + (f" (seeded by role: {', '.join(rest)})" if rest else "")
    return CalibrationSource((seeded_inputs(model, args.seed) | given,), origin)


def _calibration_text(cn: Any, source: Any, count: int) -> str:
    """What the quantizer calibrated on, for the report."""
    from tinynpu.compiler.onnx.frontend.calibration import describe_seeded

    if not cn.quantized_here:
        return "none: the model came quantized"
    return source.origin if source is not None else describe_seeded(cn.imported.model, count)


def _cmd_run(args: argparse.Namespace) -> int:
    from tinynpu import fsio
    from tinynpu.compiler.onnx.frontend.calibration import supplied_samples
    from tinynpu.compiler.onnx.network import compile_onnx
    from tinynpu.compiler.onnx.verify.report import REPORT_FILES, format_run, write_report
    from tinynpu.compiler.onnx.verify.run import run_network

    if args.compare < 0:
        raise UsageError(f"--compare must be 0 or more inputs, not {args.compare}.")
    if args.report is not None:
        fsio.check_output_dir(args.report, REPORT_FILES, force=args.force,
                              ours=(args.report / "report.json").is_file(), what="--report",
                              inputs=[args.model])
    feeds = _feeds(args.input)
    source = _calibration_source(args, feeds)
    with supplied_samples(source):
        cn = compile_onnx(args.model, batch=args.batch, random_weights=args.random_weights,
                          calibrate=args.calibrate, cfg=_config(args.config))
    report = run_network(cn, feeds=feeds or None, seed=args.seed, extra_seeds=args.compare)
    report["calibration"] = _calibration_text(cn, source, args.calibrate)
    if args.report is not None:
        write_report(args.report, report)
    print(json.dumps(report) if args.json else format_run(report))
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    from tinynpu import fsio
    from tinynpu.compiler.onnx.frontend.calibration import supplied_samples
    from tinynpu.compiler.onnx.network import compile_onnx
    from tinynpu.compiler.onnx.verify.describe import describe

    out = args.output
    ours = (out / "network.json").is_file() and _ours(out / "network.json")
    fsio.check_output_dir(out, _COMPILE_FILES, force=args.force, ours=ours, what="-o", inputs=[args.model])
    source = _calibration_source(args, {})
    with supplied_samples(source):
        cn = compile_onnx(args.model, batch=args.batch, random_weights=args.random_weights,
                          calibrate=args.calibrate, cfg=_config(args.config))
    doc, programs = describe(cn)
    doc["calibration"] = _calibration_text(cn, source, args.calibrate)
    doc["generator"] = _GENERATOR
    files: dict[str, bytes | str] = {"network.json": json.dumps(doc, indent=1) + "\n",
                                     "model.int8.onnx": cn.qmodel.SerializeToString()}
    for name, data in programs.items():
        files[f"program-{name}.bin"] = data
    fsio.write_dir(out, files, what="-o")
    print(f"wrote {out}/network.json, model.int8.onnx and {len(programs)} programs "
          f"({doc['npu_layers']} accelerator layers, {doc['host_steps']} host steps; DRAM image "
          f"{doc['memory']['dram_image_bytes']:,} bytes)")
    return 0


def _ours(path: Path) -> bool:
    from tinynpu import fsio

    try:
        return json.loads(fsio.read_text(path, what="network.json", limit=1 << 26)).get("generator") == _GENERATOR
    except (UsageError, json.JSONDecodeError, AttributeError):
        return False


__all__ = ["add_onnx_workload", "register_onnx_bench"]
