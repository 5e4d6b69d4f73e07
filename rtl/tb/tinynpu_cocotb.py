"""cocotb side of the co-simulation bench: start each job, wait for it, time it.

Runs inside the simulator (started by :mod:`tinynpu.rtl.cosim`).  Everything
per cycle (DRAM, trace, cycle limit) is SystemVerilog in ``tinynpu_tb.sv``,
which reads job n's files and writes its results; this module writes job_id,
raises job_go, and waits on three flags of the bench per job, so the
simulator runs free between them.  The wall time of each job (from start to
halt, and in all) goes to the JSON file named by ``TINYNPU_COSIM_TIMINGS``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge


@cocotb.test()
async def run_jobs(dut: Any) -> None:
    """Run jobs 0 .. TINYNPU_COSIM_JOBS-1 and record their wall times."""
    timings = []
    for n in range(int(os.environ["TINYNPU_COSIM_JOBS"])):
        begin = time.perf_counter()
        dut.job_id.value = n
        dut.job_go.value = 1
        await RisingEdge(dut.job_running)
        started = time.perf_counter()
        await RisingEdge(dut.job_finished)
        sim_seconds = time.perf_counter() - started
        await RisingEdge(dut.job_done)
        dut.job_go.value = 0
        await FallingEdge(dut.job_done)
        timings.append({"sim_seconds": sim_seconds, "wall_seconds": time.perf_counter() - begin})
    with open(os.environ["TINYNPU_COSIM_TIMINGS"], "w") as fh:
        json.dump(timings, fh)
