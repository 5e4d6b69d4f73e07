"""cocotb bench of tinynpu: a DRAM model in Python and a job runner.

Runs inside the simulator (started by :mod:`tinynpu.rtl.cosim`).  The job
(a pickle named by ``TINYNPU_COSIM_JOB``) lists programs; each runs after a
reset on the same build, and its cycles, error state, trace and DRAM regions
go to the pickle named by ``TINYNPU_COSIM_RESULT``.

The DRAM model answers one request per DMA row, never single beats: a
request seen at clock edge k gets its response (read data or write
acknowledgement) sampled by the RTL at edge k + beats + latency - 2, where
beats = ceil(bytes / bytes_per_cycle) (see rtl/tinynpu_top.sv).  Python runs
only on edges where a request is valid and on timers for the responses.
"""

from __future__ import annotations

import collections
import os
import pickle
import time
from typing import Any

import cocotb
import numpy as np
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, First, RisingEdge, Timer

PERIOD_NS = 10
FIRST_EDGE_NS = 5


def edge_index(now_ns: float) -> int:
    """Index k of the rising edge at ``now_ns`` (edges at 5 + 10k ns)."""
    return round((now_ns - FIRST_EDGE_NS) / PERIOD_NS)


def _high(signal: Any) -> bool:
    """A 1-bit signal is 1 (X/Z before reset count as low)."""
    return str(signal.value) == "1"


def _int_or(signal: Any, default: int = -1) -> int:
    """Integer value, or ``default`` where the trace never wrote (sync/halt have no start)."""
    value = signal.value
    return int(value) if value.is_resolvable else default


def edge_time(k: int) -> int:
    return FIRST_EDGE_NS + PERIOD_NS * k


class Responder:
    """Drives one response channel: valid, optional data, tag, each at its due edge."""

    def __init__(self, valid: Any, tag: Any, data: Any | None) -> None:
        self.valid, self.tag, self.data = valid, tag, data
        self.pending: collections.deque[tuple[int, int, int]] = collections.deque()
        self.event = Event()
        self.late = 0

    def push(self, due_edge: int, tag: int, data: int) -> None:
        self.pending.append((due_edge, tag, data))
        self.event.set()

    async def run(self) -> None:
        while True:
            while not self.pending:
                self.event.clear()
                await self.event.wait()
            due, tag, data = self.pending.popleft()
            # Drive just after edge due-1 so the RTL samples it at edge due.
            wait = edge_time(due - 1) + 1 - get_sim_time("ns")
            if wait > 0:
                await Timer(wait, "ns")
            elif wait < 0:
                self.late += 1
            self.valid.value = 1
            self.tag.value = tag
            if self.data is not None:
                self.data.value = data
            if not self.pending or self.pending[0][0] != due + 1:
                await Timer(edge_time(due) + 1 - get_sim_time("ns"), "ns")
                if not self.pending or self.pending[0][0] != due + 1:
                    self.valid.value = 0


class DramModel:
    """Byte-addressed DRAM behind the read and write request channels."""

    def __init__(self, dut: Any, mem: np.ndarray, latency: int, bytes_per_cycle: int) -> None:
        self.dut, self.mem = dut, mem
        self.latency, self.bpc = latency, bytes_per_cycle
        self.reads = Responder(dut.rd_resp_valid, dut.rd_resp_tag, dut.rd_resp_data)
        self.acks = Responder(dut.wr_ack_valid, dut.wr_ack_tag, None)
        self.requests = 0

    def _due(self, nbytes: int) -> int:
        beats = -(-nbytes // self.bpc)
        return edge_index(get_sim_time("ns")) + beats + self.latency - 2

    async def serve_reads(self) -> None:
        dut = self.dut
        while True:
            if not _high(dut.rd_req_valid):
                await RisingEdge(dut.rd_req_valid)
            await RisingEdge(dut.clk)
            if _high(dut.rd_req_valid):
                addr, nbytes = int(dut.rd_req_addr.value), int(dut.rd_req_bytes.value)
                data = int.from_bytes(self.mem[addr : addr + nbytes].tobytes(), "little")
                self.reads.push(self._due(nbytes), int(dut.rd_req_tag.value), data)
                self.requests += 1

    async def serve_writes(self) -> None:
        dut = self.dut
        while True:
            if not _high(dut.wr_req_valid):
                await RisingEdge(dut.wr_req_valid)
            await RisingEdge(dut.clk)
            if _high(dut.wr_req_valid):
                addr, nbytes = int(dut.wr_req_addr.value), int(dut.wr_req_bytes.value)
                raw = int(dut.wr_req_data.value).to_bytes(64, "little")[:nbytes]
                self.mem[addr : addr + nbytes] = np.frombuffer(raw, dtype=np.uint8)
                self.acks.push(self._due(nbytes), int(dut.wr_req_tag.value), 0)
                self.requests += 1


async def run_program(dut: Any, model: DramModel, prog: dict[str, Any]) -> dict[str, Any]:
    """Reset, load the program through the write port, start, wait for done or error."""
    wall = time.perf_counter()
    mem = model.mem
    mem[:] = 0
    model.reads.pending.clear()  # nothing may leak from a program that stopped on an error
    model.acks.pending.clear()
    for addr, data in prog["dram"]:
        mem[addr : addr + len(data)] = np.frombuffer(data, dtype=np.uint8)
    dut.rst_n.value = 0
    dut.clear_spads.value = 1
    dut.start.value = 0
    dut.imem_we.value = 0
    dut.rd_req_ready.value = 1
    dut.wr_req_ready.value = 1
    dut.rd_resp_valid.value = 0
    dut.wr_ack_valid.value = 0
    dut.prog_len.value = len(prog["words"])
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    dut.rst_n.value = 1
    dut.clear_spads.value = 0
    for addr, word in enumerate(prog["words"]):
        dut.imem_we.value = 1
        dut.imem_waddr.value = addr
        dut.imem_wdata.value = word
        await RisingEdge(dut.clk)
    dut.imem_we.value = 0
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    begin = time.perf_counter()
    limit = Timer(PERIOD_NS * (prog["max_cycles"] + 2), "ns")
    fired = await First(RisingEdge(dut.finished), limit)
    sim_wall = time.perf_counter() - begin
    await RisingEdge(dut.clk)
    timed_out = fired is limit
    n = len(prog["words"])
    trace = [(_int_or(dut.disp_q[i]), _int_or(dut.start_q[i]), _int_or(dut.end_q[i])) for i in range(n)]
    return {
        "cycles": int(dut.cycles.value),
        "done": bool(int(dut.done.value)),
        "error": bool(int(dut.error.value)),
        "cause": int(dut.error_cause.value),
        "error_pc": int(dut.error_pc.value),
        "timed_out": timed_out,
        "trace": trace,
        "regions": [mem[a : a + size].tobytes() for a, size in prog["read"]],
        "late_responses": model.reads.late + model.acks.late,
        "sim_seconds": sim_wall,
        "wall_seconds": time.perf_counter() - wall,
    }


@cocotb.test()
async def run_jobs(dut: Any) -> None:
    """Run every program of the job file and write the results."""
    with open(os.environ["TINYNPU_COSIM_JOB"], "rb") as fh:
        job = pickle.load(fh)
    mem = np.zeros(job["dram_bytes"], dtype=np.uint8)
    model = DramModel(dut, mem, job["latency"], job["bytes_per_cycle"])
    cocotb.start_soon(model.reads.run())
    cocotb.start_soon(model.acks.run())
    cocotb.start_soon(model.serve_reads())
    cocotb.start_soon(model.serve_writes())
    results = []
    for prog in job["programs"]:
        results.append(await run_program(dut, model, prog))
    with open(os.environ["TINYNPU_COSIM_RESULT"], "wb") as fh:
        pickle.dump(results, fh)
