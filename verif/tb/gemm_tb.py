"""cocotb testbench of the GEMM engine + HBM controller top (``hw.top.GEMMTop``) with the Python HBM
device model called at every clock cycle: the reference memory model, Verilator and Icarus.

Configuration: :class:`verif.tb.base.GemmTbConfig` (``GEMM_TB_CONFIG``). The job loop is
:func:`verif.tb.base.run_gemm_jobs`: the matrices go into the device model by its backdoor (every
other byte of memory holds ``verif.gemm_host.FILL``), the descriptor through the AXI4-Lite port,
CTRL.START with IRQ_EN, then the bench waits for ``irq`` (a run longer than ``timeout_cycles`` fails
the test: the engine must never hang), reads STATUS and CYCLES, clears DONE, waits until the
controllers drained (:func:`verif.gemm_host.drain_cycles`), reads D back and counts bytes of D's
region outside the result that changed (must be 0). Every DRAM command goes through the device
model's fatal JEDEC timing checker (:class:`verif.tb.base.DramAdapter`). With ``trace`` set, every
DRAM command with its address, and every cycle a sample of the engine's feeder, are recorded.
"""

from __future__ import annotations

import logging
import time

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, First, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from verif.gemm_host import FILL, POLL_CYCLES, drain_cycles
from verif.hbm_device import HBMDevice
from verif.tb.base import ADDR_FIELDS, DramAdapter, GemmTbConfig, run_gemm_jobs, start_clock

#: the inner signals a trace samples (the only ones besides the top's ports this bench reads)
TRACE_SIGNALS = ("act__valid", "act__ready", "s1_why", "acc0_state", "acc1_state", "axi0__arvalid", "axi1__arvalid",
                 "axi2__wvalid", "mem_a__rvalid", "mem_w__arready", "mem_w__rvalid", "mem_c__rvalid", "mem_c__wready")


class Trace:
    """Every DRAM command (cycle, pc, row command, column command) with its address, and each cycle
    the engine's feeder state (reads engine internals: Verilator with ``--public-flat-rw``)."""

    def __init__(self, dut):
        self.dut, self.cmds, self.addrs, self.samples = dut, [], [], []

    def command(self, c, k, p):
        self.cmds.append((c, k, p.row_cmd, p.col_cmd))
        self.addrs.append(tuple(getattr(p, f) for f in ADDR_FIELDS))

    def cycle(self, c):
        e, d = self.dut.engine, self.dut
        acc = e.accumulator
        self.samples.append((c, int(e.mxu.act__valid.value), int(e.mxu.act__ready.value), int(e.feeder.s1_why.value),
                             int(d.axi1__arvalid.value), int(d.mem_w__arready.value), int(d.mem_w__rvalid.value),
                             int(d.axi0__arvalid.value), int(d.mem_a__rvalid.value), int(acc.acc0_state.value),
                             int(acc.acc1_state.value), int(d.mem_c__rvalid.value),
                             int(d.axi2__wvalid.value & d.mem_c__wready.value)))

    def save(self, path):
        np.savez(path, cmds=np.array(self.cmds, dtype=np.int64).reshape(-1, 4),
                 addrs=np.array(self.addrs, dtype=np.int64).reshape(-1, len(ADDR_FIELDS)),
                 samples=np.array(self.samples, dtype=np.int64).reshape(-1, 13))


@cocotb.test()
async def gemm_jobs(dut):
    cfg = GemmTbConfig.from_env()
    trace = Trace(dut) if cfg.trace else None
    dev = DramAdapter(dut, cfg.engine.hbm, HBMDevice(cfg.engine.hbm, fill=FILL),
                      on_command=trace.command if trace else None, on_cycle=trace.cycle if trace else None)
    await start_clock(dut)
    dut.rst.value = 1
    dev.reset_inputs()
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "csr_"), dut.clk, dut.rst)
    for log in (axil.write_if.log, axil.read_if.log):
        log.setLevel(logging.WARNING)
    await ClockCycles(dut.clk, 2)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    cocotb.start_soon(dev.run())
    quiet = drain_cycles(cfg.engine.hbm.timing)

    async def wait_done(j, timeout):
        await First(RisingEdge(dut.irq), ClockCycles(dut.clk, timeout))

    async def drain(j):  # DONE means posted: wait until the queues drained
        while dev.cycle - dev.last_busy_cycle < quiet or not dev.device.idle:
            await ClockCycles(dut.clk, POLL_CYCLES)

    t_wall = time.perf_counter()
    results = await run_gemm_jobs(dut, cfg, dev.device, axil, now=lambda: dev.cycle, wait_done=wait_done, drain=drain)
    dev.device.finish(dev.cycle)  # end of run: no data outstanding, the refresh cadence (REFRESH_RATE)
    results["total_cycles"] = np.array(dev.cycle)
    results["wall_s"] = np.array(time.perf_counter() - t_wall)
    np.savez(cfg.out_npz, **results)
    if trace:
        trace.save(cfg.trace)
