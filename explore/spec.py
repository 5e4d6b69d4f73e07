"""A sweep spec: base config(s), parameters over their keys, workloads, objectives, constraints; from YAML.

:func:`load_sweep` checks the spec against ``sweep.schema.json`` and against
the base configs (every parameter names a leaf key of each), so a typo is one
message with the spec's file:line:col.  A list of base configs is one more
dimension of the grid, named ``base``: sweeping ``t8``, ``default`` and
``t32`` changes the tile edge with everything that goes with it (MAC rate,
scratchpad energies), which overriding ``tile`` alone would not.  :func:`design_points` expands the grid
(or a seeded random or Latin-hypercube sample of it) and validates every point with the config
loader before any work starts.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import importlib.util
import itertools
import json
import math
import operator
import random
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tinynpu.compiler.conv_shape import RESNET50_CONVS
from tinynpu.errors import SpecError, TinyNpuError
from tinynpu.explore import llm_workload
from tinynpu.fsio import write_atomic
from tinynpu.isa import ArchConfig, load_config
from tinynpu.isa.config import CONFIG_DIR, config_source
from tinynpu.isa.yamlsrc import YamlSource, load_yaml

SCHEMA_PATH = Path(__file__).with_name("sweep.schema.json")
_CONV_KEYS = ("n", "c", "h", "w", "k", "r", "s", "stride", "pad")
_CONV_DEFAULTS = {"n": 1, "stride": 1, "pad": 0}
BASE_KEY = "base"  # the grid dimension of a spec with several base configs
_OPERATORS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, ">=": operator.ge, "<": operator.lt,
                                                         ">": operator.gt}


@dataclass(frozen=True)
class Parameter:
    """One swept config key and its values, in spec order."""

    key: str  # dotted config key, e.g. ``dram.bytes_per_cycle``
    values: tuple[Any, ...]
    where: str  # spec file:line:col of the key


@dataclass(frozen=True)
class Workload:
    """One program to compile and simulate: ``kind`` is ``gemm``, ``conv2d`` or ``mlp``; ``onnx``, a whole
    network (``model`` its file); or ``llm``, a decoder's generation (:mod:`tinynpu.explore.llm_workload`;
    ``model`` its file, or "" for a decoder given by its shape).  ``model_sha256`` is the model's content hash;
    ``count`` is how many times the spec's workloads have it (it runs once; the totals count it ``count``
    times)."""

    kind: str
    sizes: tuple[tuple[str, int], ...]
    count: int = 1
    model: str = ""
    model_sha256: str = ""

    @property
    def key(self) -> str:
        """Stable name, e.g. ``gemm m=256 n=256 k=256``: identical shapes have identical keys (a network's
        names its file and content, so an edited model is a new workload)."""
        model = [Path(self.model).name, f"sha256={self.model_sha256[:16]}"] if self.model else []
        return " ".join([self.kind, *model, *(f"{name}={value}" for name, value in self.sizes)])

    def cli_args(self) -> str:
        """The arguments of ``tinynpu run KIND`` that give this workload."""
        if self.model:
            return " ".join([shlex.quote(self.model), *(f"--{name} {value}" for name, value in self.sizes)])
        return " ".join(f"--{name} {value}" for name, value in self.sizes)


@dataclass(frozen=True)
class Constraint:
    """``objective op bound`` on a config's totals, e.g. ``cycles <= 2e6``."""

    objective: str
    op: str
    bound: float
    text: str

    def holds(self, value: float) -> bool:
        return _OPERATORS[self.op](value, self.bound)


@dataclass(frozen=True)
class BaseConfig:
    """One base config of the spec: its name as the spec gives it, its file and its YAML data."""

    name: str
    path: Path
    data: dict[str, Any]


@dataclass(frozen=True)
class DesignPoint:
    """One config of the sweep: the overrides (``base`` first when the spec has several), its YAML text and the
    loaded, validated config."""

    overrides: tuple[tuple[str, Any], ...]
    config_text: str
    config: ArchConfig

    @property
    def digest(self) -> str:
        """The config hash: of its whole text, energy table and clock included (``ArchConfig.digest`` omits
        them, as they change no binary, yet they change a point's energy)."""
        return hashlib.sha256(self.config_text.encode()).hexdigest()


@dataclass(frozen=True)
class SweepSpec:
    """A loaded, checked sweep spec."""

    source: Path
    bases: tuple[BaseConfig, ...]
    parameters: tuple[Parameter, ...]
    sample_points: int | None
    sample_seed: int
    sample_method: str  # "random" or "latin-hypercube"
    workloads: tuple[Workload, ...]
    objectives: tuple[str, ...]
    constraints: tuple[Constraint, ...]
    where_parameters: str

    @functools.cached_property
    def digest(self) -> str:
        """A hash of everything the results depend on: the base configs' contents, the parameters and their
        values, the sampling, the workloads (shapes and counts, wherever they came from), the objectives and
        the constraints; not the spec's layout, comments or file name.  ``results.csv`` records it."""
        content = {"bases": [[b.name, b.data] for b in self.bases],
                   "parameters": [[p.key, list(p.values)] for p in self.parameters],
                   "sample": [self.sample_points, self.sample_seed, self.sample_method],
                   "workloads": [[w.key, w.count] for w in self.workloads],
                   "objectives": list(self.objectives), "constraints": [c.text for c in self.constraints]}
        return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def objective_unavailable(name: str) -> str | None:
    """Why objective ``name`` cannot be measured by this tinynpu, or None if it can."""
    if name in ("energy_pj", "edp") and importlib.util.find_spec("tinynpu.simulator.energy") is None:
        return "this tinynpu's simulator has no energy model (its stats carry no energy_pj)"
    if name == "area_mm2":
        from tinynpu.rtl.synth import yosys_missing_reason

        return yosys_missing_reason()
    return None


def _load_base(src: YamlSource, base: str, where: tuple[str | int, ...]) -> BaseConfig:
    candidate = (src.path.parent / base) if base.endswith((".yaml", ".yml")) else CONFIG_DIR / f"{base}.yaml"
    if not candidate.is_file():
        names = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
        raise SpecError(f"{src.where(where)}: base config {base!r} is neither a built-in config ({names}) "
                        f"nor a file ({candidate} does not exist).")
    data = config_source(candidate).data  # its base: chain applied, as load_config reads it
    if not isinstance(data, dict):
        raise SpecError(f"{src.where(where)}: base config {candidate} is not a YAML mapping.")
    return BaseConfig(name=base, path=candidate, data=data)


def energy_figure_names() -> tuple[str, ...]:
    """The figures of the energy table a sweep may override (``energy.NAME``)."""
    from tinynpu.isa import load_isa
    from tinynpu.isa.energy_model import figure_names, pricing_classes

    return figure_names(pricing_classes(load_isa()))


def _check_key(src: YamlSource, base: Path, base_data: dict[str, Any], dotted: str) -> None:
    if dotted == BASE_KEY:
        raise SpecError(f"{src.where(('parameters', dotted))}: {BASE_KEY!r} is not a config key; to sweep base "
                        f"configs, give `{BASE_KEY}` a list at the top level of the spec.")
    if dotted.startswith("energy."):  # a derived figure: overridable though the base does not spell it out
        names = energy_figure_names()
        if dotted.removeprefix("energy.") not in (*names, "clock_gating"):
            raise SpecError(f"{src.where(('parameters', dotted))}: {dotted!r} is not a figure of the energy table; "
                            f"the figures are {', '.join(names)} (and the switch clock_gating; docs/energy.md).")
        return
    node: Any = base_data
    walked: list[str] = []
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            under = ".".join(walked) or "the top level"
            known = ", ".join(sorted(node)) if isinstance(node, dict) else "none (it is a value)"
            raise SpecError(f"{src.where(('parameters', dotted))}: {dotted!r} is not a key of the base config "
                            f"{base}: {under} has no key {part!r}; its keys are: {known}.")
        node = node[part]
        walked.append(part)
    if isinstance(node, (dict, list)):
        raise SpecError(f"{src.where(('parameters', dotted))}: {dotted!r} is a section of the base config "
                        f"{base}, not a value; sweep one of its keys: {', '.join(sorted(node))}.")


def _values(src: YamlSource, dotted: str, raw: Any) -> tuple[Any, ...]:
    if isinstance(raw, list):
        return tuple(raw)
    step = raw.get("step", 1)
    values = tuple(range(raw["from"], raw["to"] + 1, step))
    if not values:
        raise SpecError(f"{src.where(('parameters', dotted))}: the range from {raw['from']} to {raw['to']} is "
                        "empty; `to` must be at least `from`.")
    return values


def _workloads(src: YamlSource, raw: dict[str, Any]) -> tuple[Workload, ...]:
    from tinynpu.explore.workloads import READERS

    found: list[Workload] = []
    for m, n, k in raw.get("gemm", []):
        found.append(Workload("gemm", (("m", m), ("n", n), ("k", k))))
    convs = raw.get("conv2d", [])
    layers = [sh.kwargs() for sh in RESNET50_CONVS] if convs == "resnet50" else [{**_CONV_DEFAULTS, **c}
                                                                                    for c in convs]
    for layer in layers:
        found.append(Workload("conv2d", tuple((name, layer[name]) for name in _CONV_KEYS)))
    for batch in raw.get("mlp", []):
        found.append(Workload("mlp", (("batch", batch),)))
    for fmt, read in READERS.items():
        for index, name in enumerate(raw.get(fmt, [])):
            path = src.path.parent / name
            if not path.is_file():
                raise SpecError(f"{src.where(('workloads', fmt, index))}: the {fmt} workload file {name!r} does "
                                f"not exist ({path}; a relative path is relative to the spec).")
            found += [Workload(layer.kind, layer.sizes, layer.count, layer.model, layer.model_sha256)
                      for layer in read(path)]
    for sizes, model, digest in llm_workload.read_llm_workloads(src, raw.get(llm_workload.KIND, [])):
        found.append(Workload(llm_workload.KIND, sizes, 1, model, digest))
    merged: dict[str, Workload] = {}
    for w in found:  # identical shapes (or models), from any source, run once
        seen = merged.get(w.key)
        merged[w.key] = dataclasses.replace(w, count=w.count + seen.count) if seen else w
    if not merged:
        raise SpecError(f"{src.where(('workloads',))}: the spec lists no workload; give gemm, conv2d, mlp, llm, "
                        "csv or onnx entries.")
    return tuple(merged.values())


def _constraint(src: YamlSource, index: int, text: str, objectives: tuple[str, ...]) -> Constraint:
    match = re.fullmatch(r"\s*([a-z_][a-z0-9_]*)\s*(<=|>=|<|>)\s*(\S+)\s*", text)
    assert match is not None  # the schema's pattern
    name, op, bound = match.groups()
    try:
        value = float(bound)
    except ValueError:
        raise SpecError(f"{src.where(('constraints', index))}: constraint {text!r}: {bound!r} is not a number.") \
            from None
    if name not in objectives:
        raise SpecError(f"{src.where(('constraints', index))}: constraint {text!r} is on {name!r}, which is not "
                        f"one of the spec's objectives ({', '.join(objectives)}).")
    return Constraint(objective=name, op=op, bound=value, text=text.strip())


def load_sweep(path: Path | str) -> SweepSpec:
    """Load and check a sweep spec.

    Raises:
        SpecError: with the spec's file:line:col for a schema violation, an unknown config key, an empty
            range, an unmeasurable objective or a constraint on something that is not an objective.
    """
    src = load_yaml(Path(path))
    if not isinstance(src.data, dict):
        raise SpecError(f"{src.where(())}: a sweep spec must be a YAML mapping.")
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(src.data),
                    key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        err = errors[0]
        key_path = tuple(err.absolute_path)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            # Point at the unexpected key itself, not at the mapping holding it.
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            key_path = (*key_path, extra[0]) if extra else key_path
        raise SpecError(f"{src.where(key_path)}: schema violation ({SCHEMA_PATH.name}): {err.message}.")
    d = src.data
    names = d["base"] if isinstance(d["base"], list) else [d["base"]]
    bases = tuple(_load_base(src, name, ("base", i) if isinstance(d["base"], list) else ("base",))
                  for i, name in enumerate(names))
    parameters = []
    if len(bases) > 1:
        parameters.append(Parameter(key=BASE_KEY, values=tuple(b.name for b in bases), where=src.where(("base",))))
    for dotted, raw in d["parameters"].items():
        for base in bases:
            _check_key(src, base.path, base.data, dotted)
        parameters.append(Parameter(key=dotted, values=_values(src, dotted, raw),
                                    where=src.where(("parameters", dotted))))
    objectives = tuple(d["objectives"])
    for index, name in enumerate(objectives):
        why = objective_unavailable(name)
        if why:
            raise SpecError(f"{src.where(('objectives', index))}: objective {name!r} is not available: {why}.")
    sample = d.get("sample")
    workloads = _workloads(src, d["workloads"])
    llm_workload.check_objectives(src, objectives, any(w.kind == llm_workload.KIND for w in workloads))
    return SweepSpec(
        source=src.path, bases=bases, parameters=tuple(parameters),
        sample_points=sample["points"] if sample else None, sample_seed=sample.get("seed", 0) if sample else 0,
        sample_method=sample.get("method", "random") if sample else "random",
        workloads=workloads, objectives=objectives,
        constraints=tuple(_constraint(src, i, text, objectives) for i, text in enumerate(d.get("constraints", []))),
        where_parameters=src.where(("parameters",)),
    )


def _override(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:  # energy figures the base derives have no key yet
        node = node.setdefault(part, {})
    node[leaf] = value


def _grid_point(parameters: tuple[Parameter, ...], index: int) -> tuple[Any, ...]:
    """The ``index``-th point of the grid in ``itertools.product`` order, without building the grid."""
    values = []
    for p in reversed(parameters):
        index, digit = divmod(index, len(p.values))
        values.append(p.values[digit])
    return tuple(reversed(values))


def _latin_hypercube(parameters: tuple[Parameter, ...], points: int, rng: random.Random) -> list[tuple[Any, ...]]:
    """``points`` Latin-hypercube samples: each parameter's range is cut into ``points`` equal strata, each
    stratum is used by exactly one sample, independently shuffled per parameter; a sample's position in its
    stratum picks the value.  With as many points as a parameter has values, every value occurs once."""
    columns = []
    for p in parameters:
        strata = list(range(points))
        rng.shuffle(strata)
        columns.append([p.values[int((stratum + rng.random()) / points * len(p.values))] for stratum in strata])
    return list(zip(*columns, strict=True))


def design_points(spec: SweepSpec, config_dir: Path) -> list[DesignPoint]:
    """Every point of the grid (or the seeded random or Latin-hypercube sample; identical points once), each
    written to ``config_dir`` and validated.

    Raises:
        SpecError: the grid is empty, or a point is not a valid config (naming the spec's parameters and
            the config loader's message).
    """
    size = math.prod(len(p.values) for p in spec.parameters)
    if not spec.parameters or not size:
        raise SpecError(f"{spec.where_parameters}: the grid is empty: give at least one parameter with at least "
                        "one value (a parameter with a single value sweeps just that value).")
    grid: list[tuple[Any, ...]]
    if spec.sample_points is None or spec.sample_points >= size and spec.sample_method == "random":
        grid = list(itertools.product(*(p.values for p in spec.parameters)))
    else:
        rng = random.Random(spec.sample_seed)
        grid = (_latin_hypercube(spec.parameters, spec.sample_points, rng) if spec.sample_method == "latin-hypercube"
                else [_grid_point(spec.parameters, i) for i in rng.sample(range(size), spec.sample_points)])
    points: dict[str, DesignPoint] = {}
    for values in grid:
        overrides = tuple((p.key, v) for p, v in zip(spec.parameters, values, strict=True))
        chosen = dict(overrides).get(BASE_KEY, spec.bases[0].name)
        base = next(b for b in spec.bases if b.name == chosen)
        data = copy.deepcopy(base.data)
        for dotted, value in overrides:
            if dotted != BASE_KEY:
                _override(data, dotted, value)
        label = hashlib.sha256(json.dumps(overrides).encode()).hexdigest()[:8]
        data["name"] = f"{base.data.get('name', 'config')}-{label}"
        text = yaml.safe_dump(data, sort_keys=False)
        path = config_dir / f"{data['name']}.yaml"
        write_atomic(path, text, what="sweep config")
        try:
            cfg = load_config(path)
        except TinyNpuError as exc:
            shown = ", ".join(f"{k}={v}" for k, v in overrides)
            raise SpecError(f"{spec.where_parameters}: the design point {shown} is not a valid config: "
                            f"{exc.message}") from None
        point = DesignPoint(overrides=overrides, config_text=text, config=cfg)
        points.setdefault(point.digest, point)
    return list(points.values())


__all__ = ["BASE_KEY", "BaseConfig", "Constraint", "DesignPoint", "Parameter", "SweepSpec", "Workload",
           "design_points", "load_sweep", "objective_unavailable"]
