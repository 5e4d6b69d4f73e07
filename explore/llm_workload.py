"""``llm:`` sweep workloads: a decoder's prefill and greedy decode as one point per config.

A spec entry gives either a decoder's shape (``layers``, ``hidden``,
``heads``, ``kv_heads``, ``ffn``, ``vocab``, ``positions``: the GPT-2-style
decoder of :mod:`tinynpu.compiler.onnx.llm.decoder`, seeded weights) or a
``model`` file (a decoder with past keys and values, as ``tinynpu run llm``
takes), and the run: ``prompt_tokens``, ``generate`` (at least 2: the first
token comes from the prompt's step, the time per output token needs a decode
step), ``batch`` and the prompt's ``seed``.  A point is exactly
``tinynpu run llm`` on that config (:func:`~tinynpu.compiler.onnx.llm.run_llm`:
tokens checked against the integer reference at every step); its figures are
the run's own:

- ``cycles``, ``dram_bytes``, ``energy_pj``: summed over the prefill and every
  decode step (the whole generation); ``edp``: that energy times its delay at
  the config's ``clock_mhz`` (pJ*s, as the simulator's);
- ``time_to_first_token_s``, ``time_per_output_token_s``,
  ``tokens_per_second`` (over the batch), ``energy_per_token_pj`` (a decode
  step's energy per sequence): the run's figures of the same names.

Over several workloads a config's total of a time or an energy is their sum
(each counted as often as the spec has it); its ``tokens_per_second`` is the
rate at which it would produce one token of each in turn (the weighted
harmonic mean), the one objective where higher is better.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinynpu.errors import SpecError, TinyNpuError
from tinynpu.isa.yamlsrc import YamlSource

if TYPE_CHECKING:
    from tinynpu.isa import ArchConfig

KIND = "llm"
#: The decoder's shape parameters, as :class:`~tinynpu.compiler.onnx.llm.decoder.DecoderShape` names them.
SHAPE_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "positions")
#: The run's parameters (``seed``: the prompt's token ids), with their defaults where they have one.
RUN_DEFAULTS = {"batch": 1, "seed": 0}
RUN_KEYS = ("prompt_tokens", "generate", "batch", "seed")
#: The objectives only an ``llm:`` workload measures, and the unit each is shown in.
OBJECTIVES = {"time_to_first_token_s": "s", "time_per_output_token_s": "s", "tokens_per_second": "tokens/s",
              "energy_per_token_pj": "pJ"}
#: Objectives where more is better (every other objective is minimized).
HIGHER_IS_BETTER = frozenset({"tokens_per_second"})
MODELS_DIR = "models"


def shape_defaults() -> dict[str, int]:
    """The shape parameters a spec may leave out: the tiny decoder's (``kv_heads`` 0: as many as ``heads``)."""
    from tinynpu.compiler.onnx.llm.decoder import TINY

    return {name: int(getattr(TINY, name)) for name in SHAPE_KEYS}


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def _check_shape(src: YamlSource, where: tuple[str | int, ...], entry: Mapping[str, Any],
                 sizes: Mapping[str, int]) -> None:
    """The decoder's shape is one the builder can make, and it has positions for the run."""

    def at(key: str) -> str:
        return src.where((*where, key) if key in entry else where)

    if sizes["hidden"] % sizes["heads"]:
        raise SpecError(f"{at('heads')}: heads {sizes['heads']} must divide hidden {sizes['hidden']} (each head "
                        f"takes hidden / heads features).")
    kv = sizes["kv_heads"] or sizes["heads"]
    if sizes["heads"] % kv or kv > sizes["heads"]:
        raise SpecError(f"{at('kv_heads')}: kv_heads {kv} must divide heads {sizes['heads']} (grouped-query "
                        "attention: each key/value head serves heads / kv_heads query heads).")
    capacity = sizes["prompt_tokens"] + sizes["generate"] - 1
    if capacity > sizes["positions"]:
        raise SpecError(f"{at('positions')}: a prompt of {sizes['prompt_tokens']} tokens and {sizes['generate']} "
                        f"generated tokens need {capacity} positions, but the decoder has {sizes['positions']}; "
                        "give more positions or fewer tokens.")


def _check_model(src: YamlSource, where: tuple[str | int, ...], path: Path, sizes: Mapping[str, int]) -> None:
    """The model file is a decoder ``tinynpu run llm`` takes, with positions for the run."""
    from tinynpu.compiler.onnx.frontend.importer import load_model
    from tinynpu.compiler.onnx.llm.interface import read_interface

    try:
        itf = read_interface(load_model(path), str(path))
    except TinyNpuError as exc:
        raise SpecError(f"{src.where((*where, 'model'))}: {exc.message}") from None
    capacity = sizes["prompt_tokens"] + sizes["generate"] - 1
    if itf.positions is not None and capacity > itf.positions:
        raise SpecError(f"{src.where((*where, 'generate'))}: a prompt of {sizes['prompt_tokens']} tokens and "
                        f"{sizes['generate']} generated tokens need {capacity} positions, but {path} has "
                        f"{itf.positions}.")


def read_llm_workloads(src: YamlSource, entries: Sequence[Mapping[str, Any]]
                       ) -> list[tuple[tuple[tuple[str, int], ...], str, str]]:
    """The spec's ``llm:`` entries (already schema-checked): per entry its sizes (shape and run parameters,
    defaults filled in; a model file's entry has only the run's), its model file ("" for a shape) and that
    file's digest.

    Raises:
        SpecError: with the spec's file:line:col for a model file given with shape parameters, a model
            file that does not exist or is not a decoder, a shape the builder cannot make, or more tokens
            than positions.
    """
    from tinynpu.compiler.onnx.llm.interface import TOKENS_MAX

    found = []
    for index, entry in enumerate(entries):
        where: tuple[str | int, ...] = ("workloads", KIND, index)
        run = {**RUN_DEFAULTS, **{k: int(entry[k]) for k in RUN_KEYS if k in entry}}
        for key in ("prompt_tokens", "generate", "batch"):
            if run[key] > TOKENS_MAX:
                raise SpecError(f"{src.where((*where, key))}: {key} must be at most {TOKENS_MAX}, not {run[key]}.")
        given_shape = [k for k in SHAPE_KEYS if k in entry]
        if "model" in entry:
            if given_shape:
                raise SpecError(f"{src.where((*where, given_shape[0]))}: an llm workload gives either a model file "
                                f"or a decoder's shape, not both: {given_shape[0]!r} beside model "
                                f"{entry['model']!r}.")
            path = src.path.parent / str(entry["model"])
            if not path.is_file():
                raise SpecError(f"{src.where((*where, 'model'))}: the llm model file {entry['model']!r} does not "
                                f"exist ({path}; a relative path is relative to the spec).")
            _check_model(src, where, path, run)
            found.append((tuple((k, run[k]) for k in RUN_KEYS), str(path), _file_digest(path)))
            continue
        sizes = {**shape_defaults(), **{k: int(entry[k]) for k in SHAPE_KEYS if k in entry}, **run}
        _check_shape(src, where, entry, sizes)
        found.append((tuple((k, sizes[k]) for k in (*SHAPE_KEYS, *RUN_KEYS)), "", ""))
    return found


def check_objectives(src: YamlSource, objectives: Sequence[str], has_llm: bool) -> None:
    """An LLM objective needs an ``llm:`` workload to measure it.

    Raises:
        SpecError: naming the objective's place in the spec.
    """
    for index, name in enumerate(objectives):
        if name in OBJECTIVES and not has_llm:
            raise SpecError(f"{src.where(('objectives', index))}: objective {name!r} is measured on llm workloads "
                            "only, and the spec has none; add an `llm:` workload or drop the objective.")


def model_name(sizes: Mapping[str, int]) -> str:
    """The file name of a shape's decoder: ``decoder-L2-H64-A2-KV2-F256-V100-P64.onnx``."""
    kv = sizes["kv_heads"] or sizes["heads"]
    return (f"decoder-L{sizes['layers']}-H{sizes['hidden']}-A{sizes['heads']}-KV{kv}-F{sizes['ffn']}"
            f"-V{sizes['vocab']}-P{sizes['positions']}.onnx")


def write_decoder(sizes: Mapping[str, int], path: Path) -> Path:
    """The decoder of ``sizes``'s shape at ``path`` (built unless there), written atomically."""
    import onnx

    from tinynpu.compiler.onnx.llm.decoder import DecoderShape, build_decoder

    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        shape = DecoderShape(layers=sizes["layers"], hidden=sizes["hidden"], heads=sizes["heads"],
                             kv_heads=sizes["kv_heads"], ffn=sizes["ffn"], vocab=sizes["vocab"],
                             positions=sizes["positions"])
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        onnx.save(build_decoder(shape), str(tmp))
        os.replace(tmp, path)
    return path


def write_models(workloads: Sequence[Any], folder: Path) -> None:
    """The decoder of every shape workload in ``folder`` (``DIR/models``), so that the index's commands run."""
    for w in workloads:
        if w.kind == KIND and not w.model:
            write_decoder(dict(w.sizes), folder / model_name(dict(w.sizes)))


def run_args(workload: Any, out: Path) -> str:
    """``MODEL --prompt-tokens P --generate N --batch B --seed S``: the arguments of ``tinynpu run llm``."""
    sizes = dict(workload.sizes)
    model = workload.model or str(out / MODELS_DIR / model_name(sizes))
    flags = " ".join(f"--{k.replace('_', '-')} {sizes[k]}" for k in RUN_KEYS)
    return f"{model} {flags}"


def task_params(workload: Any) -> dict[str, Any]:
    """What a worker needs to run the workload: its sizes and its model file ("" for a shape)."""
    return {**dict(workload.sizes), "model": workload.model}


def _worker_model(params: Mapping[str, Any]) -> Path:
    """The model file: the spec's, or the shape's decoder in the worker's own folder (the client's ``DIR`` may
    be on another machine)."""
    if params["model"]:
        return Path(params["model"])
    folder = Path(tempfile.gettempdir()) / f"tinynpu-sweep-models-{os.getuid()}"
    return write_decoder(params, folder / model_name(params))


def point_figures(run: Mapping[str, Any], macs_per_cycle: int) -> dict[str, Any]:
    """A point's columns from ``run_llm``'s report: the generation's totals and its LLM figures."""
    steps = run["steps"]
    cycles = sum(int(s["cycles"]) for s in steps)
    energy = float(sum(float(s["energy_pj"]) for s in steps))
    seconds = cycles / (float(run["clock_mhz"]) * 1e6)
    macs = sum(int(s["macs"]) for s in steps)
    return {"status": "ok", "cycles": cycles, "dram_bytes": sum(int(s["dram_bytes"]) for s in steps),
            "utilization": macs / (cycles * macs_per_cycle) if cycles else 0.0,
            "energy_pj": energy, "edp": energy * seconds,
            "time_to_first_token_s": float(run["time_to_first_token_s"]),
            "time_per_output_token_s": float(run["time_per_output_token_s"]),
            "tokens_per_second": float(run["tokens_per_second"]),
            "energy_per_token_pj": float(run["decode_energy_per_token_pj"])}


def evaluate_llm(config_text: str, digest: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run the llm workload ``params`` on the config ``config_text`` (a sweep task, timed as
    :func:`~tinynpu.explore.task.evaluate`: every error is the point's result)."""
    from tinynpu.explore.task import timed_point

    def compute(cfg: ArchConfig) -> dict[str, Any]:
        from tinynpu.compiler.onnx.llm import run_llm

        run = run_llm(_worker_model(params), prompt_tokens=params["prompt_tokens"],
                      generate_tokens=params["generate"], cfg=cfg, seed=params["seed"], batch=params["batch"])
        if not run["verified"]:  # the simulator's tokens are not the integer reference's: a bug, never a figure
            return {"status": "failed", "cacheable": False,
                    "error": f"the generated tokens {run['generated']} differ from the integer reference's "
                             f"{run['integer_reference']['tokens']}"}
        return point_figures(run, cfg.macs_per_cycle)

    return timed_point(config_text, digest, compute)


def config_totals(rows: Sequence[Mapping[str, str]]) -> dict[str, float]:
    """A config's LLM objectives over its ``llm`` rows, each weighted by its ``count`` (none without them)."""
    llm = [(int(r.get("count") or 1), r) for r in rows if r.get("kind") == KIND]
    if not llm:
        return {}
    totals = {name: sum(w * float(r[name]) for w, r in llm) for name in OBJECTIVES if name not in HIGHER_IS_BETTER}
    per_token = sum(w / float(r["tokens_per_second"]) for w, r in llm if float(r["tokens_per_second"]))
    totals["tokens_per_second"] = sum(w for w, _ in llm) / per_token if per_token else 0.0
    return totals


def cost(name: str, value: float) -> float:
    """What the sweep minimizes for objective ``name``: the value, or its negation where higher is better."""
    return -value if name in HIGHER_IS_BETTER else value


__all__ = ["HIGHER_IS_BETTER", "KIND", "MODELS_DIR", "OBJECTIVES", "RUN_KEYS", "SHAPE_KEYS", "check_objectives",
           "config_totals", "cost", "evaluate_llm", "model_name", "point_figures", "read_llm_workloads", "run_args",
           "shape_defaults", "task_params", "write_decoder", "write_models"]
