"""Module-level cocotb benches: one RTL module as the top level, one cocotb test module in rtl/tb.

A bench chooses its module's parameters (a lane count other than the config's
tile edge, padded cycle counts) and passes settings to the cocotb side through
the environment; pytest checks that every declared ``@cocotb.test()`` ran and
passed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tinynpu.isa import ArchConfig, Isa
from tinynpu.rtl.cosim import _tail, check_config
from tinynpu.rtl.runner import RtlError, build, run_test


@dataclass(frozen=True)
class BenchResult:
    """What a bench run reports: tests run, tests failed, and the tail of the simulator log."""

    total: int
    failed: int
    log: str


def run_module_bench(isa: Isa, cfg: ArchConfig, toplevel: str, test_module: str, *,
                     parameters: Mapping[str, int] | None = None, env: Mapping[str, str] | None = None,
                     simulator: str = "icarus") -> BenchResult:
    """Build ``toplevel`` (with ``parameters``) and run the cocotb tests of ``test_module`` on it.

    Raises:
        RtlError: the build failed or the simulator did not run the tests (the message has the log's tail).
    """
    from cocotb_tools.check_results import get_results

    check_config(cfg)
    bld = build(simulator, isa, cfg, toplevel, parameters=dict(parameters or {}))
    with tempfile.TemporaryDirectory(prefix=f"tinynpu-{toplevel}-") as tmp:
        log, xml = Path(tmp) / "sim.log", Path(tmp) / "results.xml"
        try:
            run_test(bld, test_module, test_dir=Path(tmp),
                     extra_env={"COCOTB_LOG_LEVEL": "WARNING", **(env or {})},
                     plusargs=[], waves=None, log=log, results_xml=xml)
        except (SystemExit, Exception) as exc:  # the runner exits when the simulator fails
            raise RtlError(f"the {toplevel} bench did not run ({exc}):\n{_tail(log, 30)}") from None
        total, failed = get_results(xml)
        return BenchResult(total, failed, _tail(log, 60))
