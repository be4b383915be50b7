"""Transaction-level cocotb testbench of the GEMM engine with the HDL memory system
(:class:`verif.hdl.gemm_sim_top.GEMMSimTop`), Verilator and Icarus.

The clock loop never enters Python: the HBM device model and the JEDEC checker are in the netlist.
The job loop is :func:`verif.tb.base.run_gemm_jobs`, as in :mod:`verif.tb.gemm_tb`: the matrices go
into the device models' storage through the simulator's handle (no clock cycles), the descriptor
over AXI4-Lite; then the bench waits for one of three edges (``irq``, ``violation``, ``row_error``)
or a timeout, reads STATUS, CYCLES and the performance counters, clears DONE, waits until the
controllers drained (by the rule and at the cycles of the Python bench:
:func:`verif.gemm_host.drain_cycles`) and reads D back through the handle. A JEDEC violation fails the
test with the checker's message (rule, both commands, address, cycle). Configuration:
:class:`verif.tb.base.GemmTbConfig`; job kind ``backdoor`` round-trips random bursts.
"""

from __future__ import annotations

import logging
import time

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, First, NextTimeStep, ReadOnly, RisingEdge, Timer
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from verif.gemm_host import POLL_CYCLES, drain_cycles
from verif.hdl.gemm_sim_top import VIOLATION_FIELDS
from verif.hdl.jedec_checker import describe
from verif.tb.base import ADDR_FIELDS, GemmTbConfig, HdlBackdoor, run_gemm_jobs, start_clock
from verif.tb.base import check_memory_system as check_memory

PERIOD_NS = 10


def violation_message(dut, config) -> str:
    out = []
    for k in range(config.pseudo_channels):
        if int(getattr(dut, f"pc{k}_violation").value):
            raw = {f: getattr(dut, f"pc{k}_v_{f}").value for f in VIOLATION_FIELDS}
            fields = {f: int(v) if v.is_resolvable else 0 for f, v in raw.items()}
            out.append(describe(fields, k, config) + ("" if all(v.is_resolvable for v in raw.values())
                                                      else f" (unresolved outputs: {raw})"))
    return "; ".join(out)


async def record_commands(dut, pseudo_channels: int, now, cmds: list, addrs: list) -> None:
    """Every DRAM command on the pins between the controller and the device models, sampled at each
    falling edge (Python every cycle: only for a trace): ``cmds`` gets (cycle, pc, row command, column
    command), ``addrs`` the address pins (``ADDR_FIELDS``; 0 where that command slot is empty)."""
    pins = [{n: getattr(dut, f"pc{k}__{n}") for n in ("row_cmd", "col_cmd", *ADDR_FIELDS)}
            for k in range(pseudo_channels)]
    row_fields = ADDR_FIELDS[:3]
    while True:
        await FallingEdge(dut.clk)
        for k, h in enumerate(pins):
            row, col = int(h["row_cmd"].value), int(h["col_cmd"].value)
            if row or col:
                cmds.append((now(), k, row, col))
                addrs.append(tuple(int(h[f].value) if (row if f in row_fields else col) else 0
                                   for f in ADDR_FIELDS))


def backdoor_round_trip(mem: HdlBackdoor, stored_rows: int, seed: int) -> int:
    """Random bursts written at the first and the last stored burst of every pseudo-channel through
    the handle and read back; returns the number of bursts that did not read back (0)."""
    rng = np.random.default_rng(seed)
    cfg = mem.config
    last = (cfg.bank_groups - 1, cfg.banks_per_group - 1, stored_rows - 1, cfg.columns - 1)
    bad = 0
    for pc in range(cfg.pseudo_channels):
        for where in ((0, 0, 0, 0), last):
            data = rng.integers(0, 256, cfg.burst_bytes, dtype=np.uint8).tobytes()
            mem.poke(pc, *where, data)
            bad += mem.peek(pc, *where) != data
    return bad


@cocotb.test()
async def gemm_jobs(dut):
    cfg = GemmTbConfig.from_env()
    dut.rst.value = 1
    dut.finish.value = 0
    for x in "awc":  # no back-pressure unless a job asks for it
        getattr(dut, f"stall_{x}").value = 0
    # the first clock edge after the netlist's initial values and reset have settled (Icarus would
    # otherwise clock X into the checker at time 0); the simulator-side clock: the Python one runs a
    # coroutine every half period
    await Timer(1, unit="ns")
    await start_clock(dut, period_ns=PERIOD_NS, gpi=True)
    await ClockCycles(dut.clk, 1)
    await FallingEdge(dut.clk)
    dut.rst.value = 0  # one cycle before gemm_tb: GEMMSimTop registers rst once
    await FallingEdge(dut.clk)
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "csr_"), dut.clk, dut.rst)
    for log in (axil.write_if.log, axil.read_if.log):
        log.setLevel(logging.WARNING)
    t0_ns = cocotb.utils.get_sim_time("ns")
    mem = HdlBackdoor(dut, cfg.engine.hbm, cfg.stored_rows)
    rules = cfg.device_hbm or cfg.engine.hbm  # the checkers' rules
    quiet = drain_cycles(cfg.engine.hbm.timing)

    def now():
        return int((cocotb.utils.get_sim_time("ns") - t0_ns) // PERIOD_NS)

    async def check_memory_system(where):
        await check_memory(dut, where, lambda: violation_message(dut, rules), cfg.stored_rows)

    async def wait_done(j, timeout):  # one trigger for the whole run: no Python per clock cycle
        await First(RisingEdge(dut.irq), RisingEdge(dut.violation), RisingEdge(dut.row_error),
                    Timer(timeout * PERIOD_NS, unit="ns"))
        await check_memory_system(f"job {j}")

    async def drain(j):
        # DONE means the writes were accepted (posted): wait by the rule and at the cycles of the
        # Python bench, so the next job sees the same refresh phase. since_col counts from the cycle
        # after a command; the Python bench's count includes it.
        waited = 0
        while True:
            await ReadOnly()  # the counter after this edge, on both simulators
            if int(dut.since_col.value) + 1 >= quiet or int(dut.violation.value):
                break
            await ClockCycles(dut.clk, POLL_CYCLES)
            waited += POLL_CYCLES
            assert waited < 100_000, f"job {j}: the memory system never drained"
        await NextTimeStep()  # out of the read-only phase: the backdoor and the bus may write again
        await check_memory_system(f"job {j}")

    def special(j, job):  # round trip at the first and last stored bursts, no clock cycle
        assert job["kind"] == "backdoor", job
        return {f"backdoor{j}": np.array(backdoor_round_trip(mem, cfg.stored_rows, job["seed"]))}

    trace_cmds, trace_addrs = [], []
    if cfg.trace:
        cocotb.start_soon(record_commands(dut, cfg.engine.hbm.pseudo_channels, now, trace_cmds, trace_addrs))

    t_wall = time.perf_counter()
    results = await run_gemm_jobs(dut, cfg, mem, axil, now=now, wait_done=wait_done, drain=drain, special=special)
    # The refresh-rate check at the end of the run. The strobe is driven from falling edge to falling
    # edge, so a rising edge samples it (the bench stands on a falling edge here, where an
    # `await FallingEdge` returns at once); GEMMSimTop registers it, so the checkers latch a cycle later.
    dut.finish.value = 1
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.finish.value = 0
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    await check_memory_system("end of run")
    results["total_cycles"] = np.array(now())
    results["wall_s"] = np.array(time.perf_counter() - t_wall)
    dut._log.info("wall time: %s", ", ".join(f"{k} {float(results[k]):.2f}"
                                              for k in ("backdoor_s", "engine_s", "registers_s")))
    np.savez(cfg.out_npz, **results)
    if cfg.trace:  # the commands only: the engine's internals are not readable in this build
        np.savez(cfg.trace, cmds=np.array(trace_cmds, dtype=np.int64).reshape(-1, 4),
                 addrs=np.array(trace_addrs, dtype=np.int64).reshape(-1, len(ADDR_FIELDS)),
                 samples=np.zeros((0, 13), dtype=np.int64))
