"""The command-line options of the workloads (shared by ``tinynpu run``, ``compile`` and ``cosim``).

Which function compiles a kind is not decided here: :func:`compile_from_args`
hands the parsed sizes to :func:`tinynpu.compiler.kinds.compile_workload`.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING, Any

from tinynpu.compiler.kinds import compile_workload, workload_kind
from tinynpu.errors import UsageError

if TYPE_CHECKING:
    from tinynpu.compiler.compiled import Compiled

DTYPE_HELP = "element type of the inputs: int8 (int32 accumulation) or fp32 (default int8)"
SCHEDULE_HELP = ("naive (the course's seed loop), auto (the compiler's best tiling) or a schedule JSON file "
                 "from `tinynpu tune -o` or `tinynpu compile` (default auto)")
CONFIG_HELP = "architecture config: a name in isa/configs or a YAML path (default: default, or fp32 for --dtype fp32)"



def add_gemm_sizes(parser: argparse.ArgumentParser) -> None:
    """``--m --n --k`` of a GEMM C[M, N] = A[M, K] @ B: K is the reduction (inner) size."""
    parser.add_argument("--m", type=int, required=True, help="rows of A and C (elements)")
    parser.add_argument("--n", type=int, required=True,
                        help="columns of C, rows of B in the nt layout (elements)")
    parser.add_argument("--k", type=int, required=True, help="reduction size: columns of A (elements)")


def parse_int_tuple(option: str, text: str, *, counts: tuple[int, ...], least: int, form: str) -> tuple[int, ...]:
    """``text`` as comma-separated integers: one of ``counts`` many, each at least ``least`` (else a UsageError).

    Args:
        option: The option's name as the user typed it (``--pad``), for the message.
        text: The option's value.
        counts: How many integers it may hold (``(1, 2, 4)``).
        least: The smallest value allowed (1 for a stride, 0 for a pad).
        form: What the longest form means (``TOP,LEFT,BOTTOM,RIGHT``), for the message.
    """
    parts = [part.strip() for part in text.split(",")]
    if len(parts) in counts and all(re.fullmatch(r"-?[0-9]+", part) and int(part) >= least for part in parts):
        return tuple(int(part) for part in parts)
    kind = "positive" if least == 1 else "non-negative"
    allowed = ", ".join(str(c) for c in counts[:-1]) + f" or {counts[-1]}"
    raise UsageError(f"{option} must be {allowed} comma-separated {kind} integers ({form}), not {text!r}.")


def conv_geometry_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``stride``, ``pad`` and ``dilation`` of ``compile_conv2d`` from ``--stride --pad --dilation``.

    ``--pad PH,PW`` pads top and bottom by PH, left and right by PW: ONNX's ``(PH, PW, PH, PW)``.
    """
    stride = parse_int_tuple("--stride", args.stride, counts=(1, 2), least=1, form="SH,SW")
    pad = parse_int_tuple("--pad", args.pad, counts=(1, 2, 4), least=0, form="TOP,LEFT,BOTTOM,RIGHT")
    dilation = parse_int_tuple("--dilation", args.dilation, counts=(1, 2), least=1, form="DH,DW")
    return {"stride": stride, "pad": pad * 2 if len(pad) == 2 else pad, "dilation": dilation}


def add_workloads(p: argparse.ArgumentParser, *, schedule: bool = True,
                   onnx: str = "") -> list[argparse.ArgumentParser]:
    """The workloads as subcommands of ``p`` (their sizes, options and ``--config``); returns their parsers.

    ``schedule``: give matmul and conv2d ``--schedule``; ``onnx``: add the ONNX network as ``run``/``compile``.
    """
    sub = p.add_subparsers(dest="workload", required=True, metavar="WORKLOAD")
    mm = sub.add_parser("matmul", help="C = A @ B^T (nt) or A @ B (nn)")
    add_gemm_sizes(mm)
    mm.add_argument("--dtype", default="int8", choices=("int8", "fp32"), help=DTYPE_HELP)
    mm.add_argument("--layout", default="nt", choices=("nt", "nn"),
                    help="how B is stored: nt = N x K (C = A @ B^T), nn = K x N (C = A @ B) (default nt)")
    mm.add_argument("--out-dtype", default=None,
                    help="C's element type: int32/float32 (default: the accumulator's) or int8 (requantized "
                         "by --shift)")
    mm.add_argument("--shift", type=int, default=None,
                    help="int8 output only: C = saturate(round(acc / 2^SHIFT)), 0-31 (default: the smallest "
                         "shift mapping 3 sigma of a K-deep sum of uniform int8 products to 127, e.g. 11 for K=64)")
    if schedule:
        mm.add_argument("--schedule", default="auto", help=SCHEDULE_HELP)
    conv = sub.add_parser("conv2d", help="2-D convolution by implicit im2col (NHWC input, KRSC filters, NHWC output)")
    for name, what in (("n", "batch size N (images)"), ("c", "input channels C"), ("h", "input height H, pixels"),
                       ("w", "input width W, pixels"),
                       ("k", "output channels K (filters; not the matmul's reduction size)"),
                       ("r", "filter height R, pixels"), ("s", "filter width S, pixels")):
        conv.add_argument(f"--{name}", type=int, required=True, help=what)
    conv.add_argument("--stride", default="1", metavar="S|SH,SW",
                      help="stride, pixels: S on both axes or SH,SW (height, width) (default 1)")
    conv.add_argument("--pad", default="0", metavar="P|PH,PW|T,L,B,R",
                      help="zero padding, pixels: P on every side, PH,PW (top and bottom, left and right) or "
                           "TOP,LEFT,BOTTOM,RIGHT in ONNX's order (default 0: none; 1 keeps a 3x3 conv's size)")
    conv.add_argument("--dilation", default="1", metavar="D|DH,DW",
                      help="kernel dilation, pixels from one tap to the next: D on both axes or DH,DW (height, width) "
                           "(default 1: a dense kernel)")
    conv.add_argument("--dtype", default="int8", choices=("int8", "fp32"), help=DTYPE_HELP)
    if schedule:
        conv.add_argument("--schedule", default="auto", help=SCHEDULE_HELP)
    mlp = sub.add_parser("mlp", help="the course's MLP 784 -> 128 -> relu -> 10")
    mlp.add_argument("--batch", type=int, required=True, help="images per batch (rows of the input)")
    mlp.add_argument("--dtype", default="int8", choices=("int8", "fp32"), help=DTYPE_HELP)
    tvm = sub.add_parser("tvm", help="a TensorIR schedule written with Apache TVM, tensorized onto tmm "
                                     "(needs tinynpu[tvm]; docs/tvm.md)")
    tvm.add_argument("file", metavar="FILE.py",
                     help="a Python file defining schedule(config) -> the tensorized tvm.s_tir.Schedule (and "
                          "reference(inputs) unless the function is a GEMM)")
    for q in (mm, conv, mlp, tvm):
        q.add_argument("--config", default=None, help=CONFIG_HELP)
    if onnx:  # an ONNX network: its own options and handler (tinynpu.compiler.onnx.cli)
        from tinynpu.compiler.onnx.cli import add_onnx_workload

        add_onnx_workload(sub, onnx)
        if onnx == "run":  # a decoder's prefill and decode loop (tinynpu.compiler.onnx.llm.cli)
            from tinynpu.compiler.onnx.llm.cli import add_llm_workload

            add_llm_workload(sub)
    return [mm, conv, mlp, tvm]


def workload_params(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed workload's sizes and options, as :func:`~tinynpu.compiler.kinds.compile_workload` takes them."""
    kind = workload_kind(args.workload)
    params: dict[str, Any] = {name: getattr(args, name) for name in kind.sizes}
    if args.workload == "conv2d":
        params.update(conv_geometry_kwargs(args))
    for name, _ in kind.options:
        if name not in params and hasattr(args, name):
            params[name] = getattr(args, name)
    return params


def note_dtype_config(args: argparse.Namespace) -> None:
    """Say on stderr that ``--dtype fp32`` without ``--config`` runs on the built-in fp32 config, not default."""
    if args.dtype == "fp32" and not getattr(args, "config", None):
        print("tinynpu: note: --dtype fp32 runs on the built-in fp32 config (float32 scratchpads, the default's "
              "sizes and timing); give --config NAME|FILE for another float32 config.", file=sys.stderr)


def compile_from_args(args: argparse.Namespace) -> Compiled:
    """Build the Compiled for the parsed workload arguments (through the registry of workload kinds)."""
    from tinynpu.isa import load_config

    cfg = load_config(args.config) if getattr(args, "config", None) else None
    if args.workload == "tvm":  # a schedule written in TVM: its own file, compiled by the TVM front end
        from tinynpu.compiler.tvm.script import compile_file

        return compile_file(args.file, cfg or load_config("default"))
    note_dtype_config(args)
    return compile_workload(args.workload, workload_params(args), dtype=args.dtype, cfg=cfg,
                            schedule=getattr(args, "schedule", None) or "auto")


__all__ = ["CONFIG_HELP", "DTYPE_HELP", "SCHEDULE_HELP", "add_gemm_sizes", "add_workloads", "compile_from_args",
           "conv_geometry_kwargs", "note_dtype_config", "parse_int_tuple", "workload_params"]
