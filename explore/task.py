"""The sweep's tasks, run on Dask workers: one workload on one config, and one config's area.

No verification and no race sanitizer: a design point needs the figures, and
the compiler's own tests establish correctness.  Every error is returned as
the point's result, so one bad point never stops a sweep.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tinynpu.errors import TinyNpuError
from tinynpu.fsio import write_atomic
from tinynpu.isa import ArchConfig


def _config_file(digest: str, text: str) -> Path:
    """The worker's copy of a config (the client's directory may be on another machine)."""
    folder = Path(tempfile.gettempdir()) / f"tinynpu-sweep-configs-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    path = folder / f"{digest}.yaml"
    if not path.exists():
        write_atomic(path, text, what="sweep config")
    return path


def warm_up() -> float:
    """Import what a point needs and load the native core (building it if its cache has none).

    A worker process pays this in its first task only; :func:`evaluate` measures it apart
    (``warmup_seconds``) so that a benchmark can tell warm-up from work, and ``tinynpu bench sweep`` runs it
    on every worker before its clock starts.

    Returns:
        The wall seconds it took (close to 0 once the process is warm).
    """
    t0 = time.perf_counter()
    import tinynpu.compiler.conv2d  # noqa: F401
    import tinynpu.compiler.matmul  # noqa: F401
    import tinynpu.compiler.mlp  # noqa: F401
    import tinynpu.compiler.run  # noqa: F401
    from tinynpu.simulator import native

    with contextlib.suppress(native.NativeUnavailable):  # then the points run on the Python core
        native.library()
    return time.perf_counter() - t0


def timed_point(config_text: str, digest: str, compute: Callable[[ArchConfig], dict[str, Any]]) -> dict[str, Any]:
    """``compute`` on the config ``config_text``: its result, or ``status`` ``failed`` with ``error`` for any
    error it raises; either way ``seconds`` (wall time of the task), ``cpu_seconds`` (CPU time of the task's
    thread) and ``warmup_seconds`` (the part of ``seconds`` spent in :func:`warm_up`)."""
    t0 = time.perf_counter()
    cpu0 = time.thread_time()
    warmup = warm_up()
    from tinynpu.isa import load_config

    def timed(result: dict[str, Any]) -> dict[str, Any]:
        return {**result, "seconds": time.perf_counter() - t0, "cpu_seconds": time.thread_time() - cpu0,
                "warmup_seconds": warmup}

    try:
        result = compute(load_config(_config_file(digest, config_text)))
    except TinyNpuError as exc:  # the point's own error (e.g. it does not fit DRAM): a rerun gives the same
        return timed({"status": "failed", "error": exc.message, "cacheable": True})
    except Exception as exc:  # noqa: BLE001 - a failing point is recorded with its error; the sweep goes on
        # Not the point's own error (a bug, or tinynpu's files changed under a running worker): not cached.
        return timed({"status": "failed", "error": f"{type(exc).__name__}: {exc}", "cacheable": False})
    return timed(result)


def evaluate(config_text: str, digest: str, kind: str, sizes: dict[str, int], model: str = "") -> dict[str, Any]:
    """Compile and simulate ``kind`` of ``sizes`` on the config ``config_text`` (timed by :func:`timed_point`);
    kind ``onnx``: the network of the file ``model`` (read by the worker), every accelerator program of it, as
    ``tinynpu run onnx`` counts it.

    Returns:
        ``status`` ``ok`` with ``cycles``, ``dram_bytes`` (and ``energy_pj``, ``edp`` when the simulator
        reports them), or ``status`` ``failed`` with ``error``; either way the task's times.
    """

    def compute(cfg: ArchConfig) -> dict[str, Any]:
        from tinynpu.compiler.kinds import compile_workload
        from tinynpu.compiler.run import run_compiled_with_stats

        if kind == "onnx":
            from tinynpu.compiler.onnx.verify.totals import simulate_network

            report = simulate_network(Path(model), cfg)
        else:
            dtype = "int8" if cfg.is_integer else "fp32"
            # the sweep spec says `gemm` where the compiler's registry says `matmul`
            compiled = compile_workload("matmul" if kind == "gemm" else kind, sizes, dtype=dtype, cfg=cfg)
            report, _ = run_compiled_with_stats(compiled, cfg=cfg, check_races=False, verify=False)
        result: dict[str, Any] = {"status": "ok", "cycles": report["cycles"], "dram_bytes": report["dram_bytes"],
                                  "utilization": report["utilization"]}
        for name in ("energy_pj", "edp"):  # the simulator's energy model, where this tinynpu has one
            if name in report:
                result[name] = float(report[name])
        for component, pj in report.get("energy_breakdown_pj", {}).items():
            result[f"energy_{component}_pj"] = float(pj)
        return result

    return timed_point(config_text, digest, compute)


def area_identity(cfg: ArchConfig) -> str:
    """What ``tinynpu synth`` depends on: the RTL header generated for the config, its tile edge and its
    scratchpad sizes.  Configs that differ only elsewhere (energy table, clock) share one synthesis.
    """
    from tinynpu.isa import load_isa
    from tinynpu.isa.gen_verilog import generate_verilog

    try:  # under one name and digest: the header quotes both, and they are unique per design point
        header = generate_verilog(load_isa(), dataclasses.replace(cfg, name="sweep", digest=""))
    except ValueError:  # no RTL for this config: it is its own (refused) identity
        header = cfg.digest
    sizes = [cfg.scope_bytes(scope) for scope in ("a_reg", "b_reg", "acc")]
    return hashlib.sha256(f"{header}|{cfg.tile}|{sizes}".encode()).hexdigest()[:16]


def synth_area(config_text: str, digest: str, identity: str) -> dict[str, Any]:
    """The area of the RTL for the config, by ``tinynpu synth`` (Yosys; its own cache makes a repeat free).

    Returns:
        ``status`` ``ok`` with ``area_mm2``, ``synthesized`` (the parts that went through Yosys in this
        call) and ``seconds``, or ``status`` ``failed`` with ``error`` (for example a config the RTL is not
        built for, such as fp32).
    """
    from tinynpu.isa import load_config
    from tinynpu.rtl.synth import rtl_supports, synthesize

    t0 = time.perf_counter()
    try:
        cfg = load_config(_config_file(digest, config_text))
        reason = rtl_supports(cfg)
        if reason is not None:
            return {"status": "failed", "error": f"no area: {reason}", "seconds": time.perf_counter() - t0}
        # Named by its identity for Yosys's messages; tinynpu synth's cache is keyed by what the synthesis
        # reads, not by a config's name, so this shares `tinynpu synth --config NAME`'s runs of the same RTL.
        named = dataclasses.replace(cfg, name=f"sweep-{identity}", digest=identity)
        report = synthesize(named, named)
    except Exception as exc:  # noqa: BLE001 - a failing area is recorded with its error; the sweep goes on
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        return {"status": "failed", "error": f"no area: {message}", "seconds": time.perf_counter() - t0}
    return {"status": "ok", "area_mm2": report.area_um2 / 1e6, "synthesized": list(report.synthesized),
            "seconds": time.perf_counter() - t0}


__all__ = ["area_identity", "evaluate", "synth_area", "timed_point", "warm_up"]
