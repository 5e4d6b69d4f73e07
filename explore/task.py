"""One sweep task, run on a Dask worker: compile and simulate one workload on one config.

No verification and no race sanitizer: a design point needs the figures, and
the compiler's own tests establish correctness.  Every error is returned as
the point's result, so one bad point never stops a sweep.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from tinynpu.fsio import write_atomic


def _config_file(digest: str, text: str) -> Path:
    """The worker's copy of a config (the client's directory may be on another machine)."""
    folder = Path(tempfile.gettempdir()) / f"tinynpu-sweep-configs-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    path = folder / f"{digest}.yaml"
    if not path.exists():
        write_atomic(path, text, what="sweep config")
    return path


def evaluate(config_text: str, digest: str, kind: str, sizes: dict[str, int]) -> dict[str, Any]:
    """Compile and simulate ``kind`` of ``sizes`` on the config ``config_text``.

    Returns:
        ``status`` ``ok`` with ``cycles``, ``dram_bytes`` (and ``energy_pj``, ``edp`` when the simulator
        reports them) and ``seconds`` (wall time of the task), or ``status`` ``failed`` with ``error``.
    """
    from tinynpu.compiler.conv2d import compile_conv2d
    from tinynpu.compiler.matmul import compile_matmul
    from tinynpu.compiler.mlp import compile_mlp
    from tinynpu.compiler.run import run_compiled_with_stats
    from tinynpu.isa import load_config

    t0 = time.perf_counter()
    try:
        cfg = load_config(_config_file(digest, config_text))
        dtype = "int8" if cfg.is_integer else "fp32"
        if kind == "gemm":
            compiled = compile_matmul(sizes["m"], sizes["n"], sizes["k"], dtype=dtype, cfg=cfg)
        elif kind == "conv2d":
            compiled = compile_conv2d(sizes["n"], sizes["c"], sizes["h"], sizes["w"], sizes["k"], sizes["r"],
                                      sizes["s"], stride=sizes["stride"], pad=sizes["pad"], dtype=dtype, cfg=cfg)
        else:
            compiled = compile_mlp(sizes["batch"], dtype=dtype, cfg=cfg)
        report, _ = run_compiled_with_stats(compiled, cfg=cfg, check_races=False, verify=False)
    except Exception as exc:  # noqa: BLE001 - a failing point is recorded with its error; the sweep goes on
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        return {"status": "failed", "error": message, "seconds": time.perf_counter() - t0}
    result: dict[str, Any] = {"status": "ok", "cycles": report["cycles"], "dram_bytes": report["dram_bytes"],
                              "utilization": report["utilization"]}
    for name in ("energy_pj", "edp"):  # the simulator's energy model, where this tinynpu has one
        if name in report:
            result[name] = float(report[name])
    result["seconds"] = time.perf_counter() - t0
    return result


__all__ = ["evaluate"]
