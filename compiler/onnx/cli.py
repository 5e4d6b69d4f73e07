"""``tinynpu run onnx``, ``tinynpu compile onnx`` and ``tinynpu bench onnx``."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from tinynpu.errors import UsageError

_GENERATOR = "tinynpu compile onnx"
_COMPILE_FILES = ("network.json", "model.int8.onnx")

# The ranges of the numeric options: far above any use (a batch the default DRAM could hold, ten times
# the calibration inputs that change a scale), and small enough that no value runs for hours.
BATCH_MAX = 65536
CALIBRATE_MAX = 1000
COMPARE_MAX = 1000
SEED_MAX = 2**32 - 1
#: The longest name one path component may have (ext4, xfs, tmpfs, ...), and a whole path.
_NAME_MAX = 255
_PATH_MAX = 4095


def add_onnx_workload(sub: argparse._SubParsersAction, mode: str) -> None:  # type: ignore[type-arg]
    """The ``onnx`` workload under ``tinynpu run`` (mode ``run``) or ``tinynpu compile`` (``compile``)."""
    p = sub.add_parser("onnx", help="an ONNX model: import, quantize to int8, run layer by layer (accelerator + "
                                    "host), verify against numpy and onnxruntime")
    p.add_argument("model", help="the .onnx file (float, or already quantized: QDQ or QOperator)")
    p.add_argument("--batch", default=None, metavar="N",
                   help=f"size of a dynamic batch dimension, 1 to {BATCH_MAX} (default: none; required when the "
                        "model has one)")
    p.add_argument("--random-weights", default=None, metavar="SEED",
                   help=f"replace the weights by seeded fan-in-scaled random ones, seed 0 to {SEED_MAX} (default: "
                        "only when every weight in the file is a constant, with seed 0)")
    p.add_argument("--calibrate", default="8", metavar="N",
                   help=f"seeded calibration inputs for quantization, 1 to {CALIBRATE_MAX} (default 8)")
    p.add_argument("--calibration", type=Path, default=None, metavar="FILE.npz|DIR",
                   help="real calibration samples: one .npz (one array per input name) or a folder of them; "
                        "replaces --calibrate's seeded samples (default: none; a run's --input values "
                        "calibrate when given, else seeded samples by input role)")
    p.add_argument("--config", default=None, help="architecture config name or YAML path (default: default)")
    p.add_argument("--nonlinear", choices=("npu", "host"), default="npu",
                   help="softmax, LayerNorm/RMSNorm, unary activations and the bias adds after matmuls: npu = "
                        "accelerator programs, host = the ONNX operators in float on the host (default: npu)")
    if mode == "run":
        p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                       help="a network input from a .npy file, once per input name (default: seeded input by "
                            "role: standard-normal floats, token ids within their table, masks of ones)")
        p.add_argument("--seed", default="0", help=f"seed of the random inputs, 0 to {SEED_MAX} (default 0)")
        p.add_argument("--compare", default="0", metavar="N",
                       help=f"further seeded inputs compared against onnxruntime on the integer reference, 0 to "
                            f"{COMPARE_MAX} (default 0)")
        p.add_argument("--json", action="store_true", help="print one JSON object (default: tables)")
        p.add_argument("--report", default=None, metavar="DIR",
                       help="also write a per-layer report (index.md, layers.png, layers.csv, report.json) into "
                            "DIR (default: none)")
        p.add_argument("--csv", default=None, metavar="FILE",
                       help="also write the per-layer table as CSV, one row per layer, units in the column names "
                            "(default: none)")
        p.add_argument("--force", action="store_true",
                       help="let --report and --csv replace files tinynpu did not write (default: refuse)")
        p.set_defaults(handler=_cmd_run)
    else:
        p.add_argument("-o", "--output", required=True,
                       help="output directory (network.json, model.int8.onnx, programs/)")
        p.add_argument("--force", action="store_true", help="overwrite files that tinynpu did not write "
                                                            "(default: refuse)")
        p.set_defaults(handler=_cmd_compile)


def register_onnx_bench(bench_sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``tinynpu bench onnx``."""
    from tinynpu.compiler.onnx.bench_transformers import OTHER_FORMS, TRANSFORMERS

    p = bench_sub.add_parser("onnx", help="ResNet-50, SqueezeNet, AlexNet from the onnx wheel, then the encoder block "
                                          "and the committed transformer exports: verification per output, "
                                          "utilization, host share, end-to-end time against onnxruntime's")
    p.add_argument("--json", action="store_true", help="print one JSON object (default: a table)")
    p.add_argument("--models", default="resnet50,squeezenet,bvlc_alexnet",
                   help="comma-separated model-zoo names from onnx/backend/test/data/light "
                        "(default resnet50,squeezenet,bvlc_alexnet)")
    p.add_argument("--inputs", type=int, default=8,
                   help="seeded inputs compared against onnxruntime (default 8; the encoder block's operator "
                        "table uses as many)")
    p.add_argument("--transformers", default=",".join(TRANSFORMERS),
                   help="comma-separated: 'block' (the BERT-style encoder block), 'block_small', committed exports "
                        f"of tests/models (default {','.join(TRANSFORMERS)}; '' for none)")
    p.add_argument("--all", action="store_true",
                   help=f"add the exports' other forms to the transformer section ({', '.join(OTHER_FORMS)})")

    def handler(args: argparse.Namespace) -> int:
        from tinynpu.compiler.onnx.bench import run_bench

        transformers = [m.strip() for m in args.transformers.split(",") if m.strip()]
        if args.all:
            transformers += [f for f in OTHER_FORMS if f not in transformers]
        return run_bench(models=[m.strip() for m in args.models.split(",") if m.strip()], inputs=args.inputs,
                         as_json=args.json, transformers=transformers)

    p.set_defaults(handler=handler)


def _config(name: str | None) -> Any:
    from tinynpu.isa import load_config

    return load_config(name) if name else None


def bounded_int(text: str | None, option: str, low: int, high: int) -> int | None:
    """``text`` (an option's value) as an integer in ``low..high``; None stays None.

    In the project's message format (argparse's own ``type=int`` would print its usage block), and
    bounded: a value past ``high`` would allocate or run without end.
    """
    if text is None:
        return None
    shown = text if len(text) <= 40 else text[:40] + "..."
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isascii() or not digits.isdigit() or len(digits) > 30:
        raise UsageError(f"{option} must be an integer from {low} to {high}, not {shown!r}.")
    value = int(text)
    if not low <= value <= high:
        raise UsageError(f"{option} must be an integer from {low} to {high}, not {value}.")
    return value


def _model_path(text: str) -> Path:
    if not text:
        raise UsageError("the ONNX model path is empty; give the .onnx file.")
    return Path(text)


def output_path(text: str, option: str) -> Path:
    """An output folder given with ``option``, refused before any work when no folder can be made there
    as named: an empty name (which would write into the current directory), a dangling symlink (whose
    target would be created), a name longer than the file system takes."""
    if not text:
        raise UsageError(f"{option} '': give an output folder (an empty name would write into the current "
                         "directory).")
    path = Path(text)
    long = next((part for part in path.parts if len(part.encode(errors="surrogateescape")) > _NAME_MAX), None)
    if long is not None or len(text.encode(errors="surrogateescape")) > _PATH_MAX:
        what = f"the name {long[:40]!r}... is {len(long)} characters" if long else f"the path is {len(text)} long"
        raise UsageError(f"{option}: {what}; file systems take at most {_NAME_MAX} bytes per name and "
                         f"{_PATH_MAX} per path.")
    try:
        dangling = path.is_symlink() and not path.exists()
        target = os.readlink(path) if dangling else ""
    except OSError as exc:
        raise UsageError(f"{option} {text}: cannot be inspected ({exc.strerror or exc}).") from None
    if dangling:
        raise UsageError(f"{option} {text}: a symlink to {target!r}, which does not exist; tinynpu does not create "
                         "a link's target: give the folder itself.")
    return path


def _feeds(specs: list[str]) -> dict[str, Any]:
    from tinynpu import fsio

    out = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--input {spec!r}: expected NAME=FILE.npy.")
        if name in out:
            raise UsageError(f"--input {name}=... is given more than once; give each input once.")
        out[name] = fsio.read_npy(path, what=f"--input {name}")
    return out


def _common(args: argparse.Namespace) -> dict[str, Any]:
    """The options ``run onnx`` and ``compile onnx`` share, checked (before any work)."""
    return {"batch": bounded_int(args.batch, "--batch", 1, BATCH_MAX),
            "random_weights": bounded_int(args.random_weights, "--random-weights", 0, SEED_MAX),
            "calibrate": bounded_int(args.calibrate, "--calibrate", 1, CALIBRATE_MAX),
            "nonlinear": args.nonlinear}


def _compile(model: Path, options: dict[str, Any], config: str | None, source: Any) -> Any:
    from tinynpu.compiler.onnx.frontend.validate import inferences_held
    from tinynpu.compiler.onnx.network import compile_onnx

    with inferences_held(options["calibrate"]):
        return compile_onnx(model, cfg=_config(config), calibration=source, **options)


def _calibration_source(calibration: Path | None, model_path: Path, options: dict[str, Any],
                        feeds: dict[str, Any], seed: int) -> Any:
    """The samples the user gives for calibration (``--calibration``, else the ``--input`` values), checked
    against the imported model's inputs; None when there are none (seeded samples then)."""
    if calibration is None and not feeds:
        return None
    from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource, check_sample, load_calibration
    from tinynpu.compiler.onnx.frontend.importer import import_model, seeded_inputs
    from tinynpu.compiler.onnx.frontend.validate import check_feeds

    model = import_model(model_path, batch=options["batch"], random_weights=options["random_weights"]).model
    check_feeds(model, feeds)  # dtypes, finiteness, ids against each Gather's table, naming the node
    if calibration is not None:
        samples = load_calibration(model, calibration)
        return CalibrationSource(tuple(samples), f"{len(samples)} sample(s) from --calibration {calibration}")
    given = {name: check_sample(model, {name: value}, f"--input {name}")[name] for name, value in feeds.items()}
    rest = sorted(set(seeded_inputs(model, seed)) - set(given))
    origin = "the --input values" + (f" (seeded by role: {', '.join(rest)})" if rest else "")
    return CalibrationSource((seeded_inputs(model, seed) | given,), origin)


def _calibration_text(cn: Any, source: Any, count: int) -> str:
    """What the quantizer calibrated on, for the report."""
    from tinynpu.compiler.onnx.frontend.calibration import describe_seeded

    if not cn.quantized_here:
        return "none: the model came quantized"
    return source.origin if source is not None else describe_seeded(cn.imported.model, count)


def _cmd_run(args: argparse.Namespace) -> int:
    from tinynpu import fsio
    from tinynpu.compiler.onnx.frontend.validate import check_feeds
    from tinynpu.compiler.onnx.libout import explained
    from tinynpu.compiler.onnx.verify.report import REPORT_FILES, format_run, write_report
    from tinynpu.compiler.onnx.verify.run import run_network

    model = _model_path(args.model)
    options = _common(args)
    seed = bounded_int(args.seed, "--seed", 0, SEED_MAX)
    compare = bounded_int(args.compare, "--compare", 0, COMPARE_MAX)
    report_dir = output_path(args.report, "--report") if args.report is not None else None
    if report_dir is not None:
        fsio.check_output_dir(report_dir, REPORT_FILES, force=args.force,
                              ours=(report_dir / "report.json").is_file(), what="--report", inputs=[model])
    csv_target = _csv_target(args.csv, args.force, model)
    feeds = _feeds(args.input)
    with explained(str(model)):
        source = _calibration_source(args.calibration, model, options, feeds, seed or 0)
        cn = _compile(model, options, args.config, source)
        check_feeds(cn.imported.model, feeds)
        report = run_network(cn, feeds=feeds or None, seed=seed or 0, extra_seeds=compare or 0)
    report["calibration"] = _calibration_text(cn, source, options["calibrate"])
    if report_dir is not None:
        write_report(report_dir, report)
    if csv_target is not None:
        from tinynpu.compiler.onnx.verify.layers_csv import layers_csv

        fsio.write_atomic(csv_target, layers_csv(report), what="--csv")
    print(json.dumps(report) if args.json else format_run(report))
    return 0


def _csv_target(text: str | None, force: bool, model: Path) -> Path | None:
    """Where ``--csv`` writes, checked before any work (a directory, a user's file without --force, the
    model itself are refused in one paragraph)."""
    if text is None:
        return None
    from tinynpu import fsio

    if not text:
        raise UsageError("--csv '': give a file name for the per-layer CSV.")
    return fsio.check_output(Path(text), force=force, what="--csv", inputs=[model])


def _cmd_compile(args: argparse.Namespace) -> int:
    from tinynpu import fsio
    from tinynpu.compiler.onnx.libout import explained
    from tinynpu.compiler.onnx.verify.describe import describe

    model = _model_path(args.model)
    options = _common(args)
    out = output_path(args.output, "-o")
    ours = (out / "network.json").is_file() and _ours(out / "network.json")
    fsio.check_output_dir(out, _COMPILE_FILES, force=args.force, ours=ours, what="-o", inputs=[model])
    with explained(str(model)):
        source = _calibration_source(args.calibration, model, options, {}, 0)
        cn = _compile(model, options, args.config, source)
        qbytes = _checked_qmodel(cn.qmodel, str(model))
    doc, programs = describe(cn)
    doc["calibration"] = _calibration_text(cn, source, options["calibrate"])
    doc["generator"] = _GENERATOR
    files: dict[str, bytes | str] = {"network.json": json.dumps(doc, indent=1) + "\n",
                                     "model.int8.onnx": qbytes}
    for name, data in programs.items():
        files[f"program-{name}.bin"] = data
    fsio.write_dir(out, files, what="-o")
    print(f"wrote {out}/network.json, model.int8.onnx and {len(programs)} programs "
          f"({doc['npu_layers']} accelerator layers, {doc['host_steps']} host steps; DRAM image "
          f"{doc['memory']['dram_image_bytes']:,} bytes)")
    return 0


def _checked_qmodel(qmodel: Any, source: str) -> bytes:
    """The int8 model's bytes, once onnx's checker takes it: a model onnxruntime would refuse is never
    written as ``model.int8.onnx``."""
    import onnx

    from tinynpu.errors import OnnxError

    try:
        onnx.checker.check_model(qmodel, full_check=True)
        return bytes(qmodel.SerializeToString())
    except Exception as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise OnnxError(f"{source}: the int8 model tinynpu made does not pass onnx's checker, so it is not "
                        f"written: {text[:400]}") from None


def _ours(path: Path) -> bool:
    from tinynpu import fsio

    try:
        return json.loads(fsio.read_text(path, what="network.json", limit=1 << 26)).get("generator") == _GENERATOR
    except (UsageError, json.JSONDecodeError, AttributeError):
        return False


__all__ = ["add_onnx_workload", "register_onnx_bench"]
