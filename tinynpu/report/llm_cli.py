"""``tinynpu report llm``: its options and their checks (the report itself: :mod:`tinynpu.report.llm`)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from tinynpu.errors import TinyNpuError, UsageError
from tinynpu.progress import step, wrote

#: The options only ``report llm`` takes (``--batch`` and ``--config`` it shares with the other workloads).
LLM_FLAGS = ("model", "from_run", "prompt_tokens", "generate", "seed")


def add_llm_flags(p: argparse.ArgumentParser) -> None:
    """The options of ``tinynpu report llm``."""
    p.add_argument("--model", default=None, metavar="DECODER.onnx",
                   help="llm: the decoder to run (as `tinynpu run llm` takes it), with --prompt-tokens and --generate")
    p.add_argument("--from-run", type=Path, default=None, metavar="RUN.json",
                   help="llm: report a run already made, the output of `tinynpu run llm ... --json` (its config "
                        "by name, or --config with its YAML path)")
    p.add_argument("--prompt-tokens", type=int, default=None, metavar="P", help="llm: prompt length (with --model)")
    p.add_argument("--generate", type=int, default=None, metavar="N", help="llm: tokens to generate (with --model)")
    p.add_argument("--seed", type=int, default=None, help="llm: seed of the prompt's token ids (default 0)")


def llm_flags_given(args: argparse.Namespace) -> bool:
    return any(getattr(args, flag) is not None for flag in LLM_FLAGS)


def _command(args: argparse.Namespace, out: Path) -> str:
    source = (f"--from-run {shlex.quote(str(args.from_run))}" if args.from_run else
              f"--model {shlex.quote(args.model)} --prompt-tokens {args.prompt_tokens} --generate {args.generate} "
              f"--batch {args.batch or 1} --seed {args.seed or 0}")
    return f"tinynpu report llm {source} --config {shlex.quote(args.config)} -o {shlex.quote(str(out))}"


def report_llm(args: argparse.Namespace) -> int:
    """Run (or read) the generation, then write its report; exit 1 when its tokens are not the reference's."""
    from tinynpu.isa import load_config
    from tinynpu.report.build import prepare_dir
    from tinynpu.report.llm import check_config, check_run, write_llm_report
    from tinynpu.report.reports import read_json_file

    if args.workload != "llm":
        given = next(f for f in LLM_FLAGS if getattr(args, f) is not None)
        raise UsageError(f"tinynpu report: --{given.replace('_', '-')} is an option of `tinynpu report llm`; "
                         f"give the llm workload{f', not {args.workload}' if args.workload else ''}.")
    if (args.model is None) == (args.from_run is None):
        raise UsageError("tinynpu report llm: give either --model DECODER.onnx (with --prompt-tokens and --generate) "
                         "to run a generation, or --from-run RUN.json to report one already run; "
                         f"{'both were given' if args.model else 'neither was given'}.")
    if args.model is not None and (args.prompt_tokens is None or args.generate is None):
        raise UsageError("tinynpu report llm --model: --prompt-tokens and --generate are needed (the run's prompt "
                         "length and the tokens to generate).")
    if args.from_run is not None and (args.prompt_tokens, args.generate, args.seed, args.batch) != (None,) * 4:
        raise UsageError("tinynpu report llm --from-run: the run's own prompt, generation, seed and batch are "
                         "reported; --prompt-tokens, --generate, --seed and --batch are options of --model.")
    out = args.out or Path("out") / "report-llm"
    prepare_dir(out, force=args.force)
    if args.from_run is not None:
        run = check_run(read_json_file(args.from_run, "--from-run"), f"--from-run {args.from_run}")
        name = args.config if args.config != "default" else run["config"]
        try:
            cfg = load_config(name)
        except TinyNpuError as exc:
            raise UsageError(f"--from-run {args.from_run}: the run's config {name!r} cannot be loaded "
                             f"({exc.message}); pass --config with its YAML path.") from None
        check_config(run, cfg, f"--from-run {args.from_run}")
    else:
        from tinynpu.compiler.onnx.libout import explained
        from tinynpu.compiler.onnx.llm import run_llm

        cfg = load_config(args.config)
        with explained(args.model), step("running the decoder (prefill, then greedy decode)", quiet=args.json):
            run = run_llm(Path(args.model), prompt_tokens=args.prompt_tokens, generate_tokens=args.generate,
                          cfg=cfg, seed=args.seed or 0, batch=args.batch or 1)
    with step("figures and index.md", quiet=args.json):
        written = write_llm_report(out, run, cfg=cfg, command=_command(args, out))
    if args.json:
        print(json.dumps(written.summary, default=str))
    else:
        print(f"time to first token {run['time_to_first_token_s'] * 1e6:.2f} us, per output token "
              f"{run['time_per_output_token_s'] * 1e6:.2f} us; tokens "
              f"{'verified' if run['verified'] else 'NOT VERIFIED'}")
        print(f"report: {written.index}; {wrote(written.files)}")
    return 0 if run["verified"] else 1


__all__ = ["LLM_FLAGS", "add_llm_flags", "llm_flags_given", "report_llm"]
