"""cocotb testbench of the GEMM engine + HBM controller top (``hw.top.GEMMTop``), Verilator and Icarus.

Environment: ``GEMM_TB_CONFIG`` (JSON): ``engine`` (:meth:`hw.engine.EngineConfig.as_dict`),
``jobs_npz`` (input arrays ``a<j>``, ``b<j>``, ``c<j>`` as raw bit patterns), ``out_npz`` (where the
results go), ``jobs`` (a list of ``{"kind": "gemm", "m", "k", "n", "load_c", "out_bf16", "pad_bytes"}``
or ``{"kind": "regs", "writes": [[offset, value], ...]}`` for hand-made descriptors), ``timeout_cycles``.

Per job: the matrices are written into the HBM device model by its backdoor (every other byte of
memory holds ``verif.gemm_host.FILL``), the descriptor goes in through the AXI4-Lite port
(cocotbext-axi ``AxiLiteMaster``), CTRL.START with IRQ_EN, then the bench waits for ``irq`` (a run
longer than ``timeout_cycles`` fails the test: the engine must never hang), reads STATUS and CYCLES,
clears DONE (``irq`` must fall), reads D back from the device model and counts bytes of D's region
outside the result that changed (must be 0). Every DRAM command goes through the device model's
fatal JEDEC timing checker.
"""

from __future__ import annotations

import json
import logging
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, First, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from hw.engine import ENGINE_ID, PERF_COUNTERS, REG, EngineConfig
from verif.gemm_host import (
    FILL,
    POLL_CYCLES,
    check_untouched,
    drain_cycles,
    layout,
    peek_matrix,
    poke_matrix,
    register_writes,
)
from verif.hbm_device import HBMDevice
from verif.hbm_harness import _COL, _ROW

CFG = json.loads(os.environ.get("GEMM_TB_CONFIG", "{}"))
#: the address pins recorded with each DRAM command of a trace (0 where that command slot is empty)
ADDR_FIELDS = ("row_bg", "row_bank", "row_row", "col_bg", "col_bank", "col_row", "col_column")


class Device:
    """Runs the HBM device model against the top's DRAM pins, one call per clock cycle."""

    def __init__(self, dut, config):
        self.dut, self.config = dut, config
        self.device = HBMDevice(config, fill=FILL)
        self.cycle = 0
        n = config.pseudo_channels
        self.pins = [{name: getattr(dut, f"pc{k}__{name}") for name in (
            "row_cmd", "row_bg", "row_bank", "row_row", "col_cmd", "col_bg", "col_bank", "col_row", "col_column",
            "wdata", "wmask", "wdata_valid", "rdata", "rdata_valid")} for k in range(n)]
        self.driven = [False] * n
        self.last_col_cycle = 0
        # CFG["trace"]: record every DRAM command and, each cycle, the engine's feeder state
        self.trace = CFG.get("trace")
        self.cmds = []
        self.addrs = []
        self.samples = []

    async def run(self):
        dev, bb = self.device, self.config.burst_bytes
        while True:
            await FallingEdge(self.dut.clk)
            c = self.cycle
            for k, p in enumerate(self.pins):
                row = p["row_cmd"].value
                col = p["col_cmd"].value
                wv = p["wdata_valid"].value
                if not (row.is_resolvable and col.is_resolvable and wv.is_resolvable):
                    raise AssertionError(f"cycle {c}: pc{k} command pins are X/Z")
                row, col, wv = int(row), int(col), int(wv)
                if self.trace and (row or col):
                    self.cmds.append((c, k, row, col))
                    self.addrs.append(tuple(int(p[f].value) if (f.startswith("row") and row) or (
                        f.startswith("col") and col) else 0 for f in ADDR_FIELDS))
                if row:
                    dev.command(c, k, _ROW[row], int(p["row_bg"].value), int(p["row_bank"].value),
                                int(p["row_row"].value), 0)
                if col:
                    self.last_col_cycle = c
                    dev.command(c, k, _COL[col], int(p["col_bg"].value), int(p["col_bank"].value),
                                int(p["col_row"].value), int(p["col_column"].value))
                if wv:
                    dev.write_data(c, k, int(p["wdata"].value).to_bytes(bb, "little"), int(p["wmask"].value))
            if self.trace:
                e = self.dut.engine
                d = self.dut
                self.samples.append((c, int(e.mxu.act__valid.value), int(e.mxu.act__ready.value),
                                     int(e.s1_why.value), int(d.axi1__arvalid.value), int(d.mem_w__arready.value),
                                     int(d.mem_w__rvalid.value), int(d.axi0__arvalid.value),
                                     int(d.mem_a__rvalid.value), int(e.acc0_state.value), int(e.acc1_state.value),
                                     int(d.mem_c__rvalid.value), int(d.axi2__wvalid.value & d.mem_c__wready.value)))
            got = dev.tick(c)
            hits = {rd.pc: rd for rd in got}
            for k, p in enumerate(self.pins):
                if k in hits:
                    p["rdata"].value = int.from_bytes(hits[k].data, "little")
                    p["rdata_valid"].value = 1
                    self.driven[k] = True
                elif self.driven[k]:
                    p["rdata_valid"].value = 0
                    self.driven[k] = False
            self.cycle += 1


@cocotb.test()
async def gemm_jobs(dut):
    cfg = EngineConfig.from_dict(CFG["engine"])
    mc = cfg.mxu
    arrays = np.load(CFG["jobs_npz"]) if CFG.get("jobs_npz") else {}
    timeout = int(CFG.get("timeout_cycles", 2_000_000))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    for k in range(cfg.hbm.pseudo_channels):
        getattr(dut, f"pc{k}__rdata_valid").value = 0
        getattr(dut, f"pc{k}__rdata").value = 0
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "csr_"), dut.clk, dut.rst)
    for log in (axil.write_if.log, axil.read_if.log):
        log.setLevel(logging.WARNING)
    await ClockCycles(dut.clk, 2)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    dev = Device(dut, cfg.hbm)
    cocotb.start_soon(dev.run())

    async def rd(name):
        return int.from_bytes((await axil.read(REG[name].offset, 4)).data, "little")

    async def wr(offset, value):
        await axil.write(offset, int(value & 0xFFFFFFFF).to_bytes(4, "little"))

    assert await rd("ID") == ENGINE_ID
    assert await rd("CONFIG") == cfg.config_word
    assert await rd("MAX_K") == cfg.max_k
    results = {}
    t_wall = time.perf_counter()
    quiet = drain_cycles(cfg.hbm.timing)  # DONE means posted: wait until the queues drained
    start = 0x1000
    for j, job in enumerate(CFG["jobs"]):
        lay = None
        if job["kind"] == "gemm":
            m, k, n = job["m"], job["k"], job["n"]
            ob = mc.operand_bits // 8
            out_b = 2 if job.get("out_bf16") else 4
            lay = layout(m, k, n, ob, out_b, bool(job.get("load_c")), pad_bytes=int(job.get("pad_bytes", 0)),
                         start=start)
            start = lay.end
            poke_matrix(dev.device, lay.a_base, lay.a_stride, arrays[f"a{j}"])
            poke_matrix(dev.device, lay.b_base, lay.b_stride, arrays[f"b{j}"])
            if job.get("load_c"):
                poke_matrix(dev.device, lay.c_base, lay.c_stride, arrays[f"c{j}"])
            writes = register_writes(m, k, n, lay, load_c=bool(job.get("load_c")), out_bf16=bool(job.get("out_bf16")))
        else:
            writes = [tuple(x) for x in job["writes"]]
        for off, val in writes:
            await wr(off, val)
        c0 = dev.cycle
        await wr(REG["CTRL"].offset, 0b11)  # START | IRQ_EN
        if not int(dut.irq.value):
            await First(RisingEdge(dut.irq), ClockCycles(dut.clk, timeout))
            assert int(dut.irq.value), f"job {j}: no irq within {timeout} cycles: the engine hangs ({job})"
        sim_cycles = dev.cycle - c0
        status = await rd("STATUS")
        cycles = await rd("CYCLES")
        for name in PERF_COUNTERS:
            results[f"{name.lower()}{j}"] = np.array(await rd(name))
        await wr(REG["STATUS"].offset, 0b10)  # clear DONE
        await ClockCycles(dut.clk, 2)
        assert not int(dut.irq.value), f"job {j}: irq still high after DONE was cleared"
        assert not (status & 1), f"job {j}: BUSY with DONE"
        results[f"status{j}"] = np.array(status)
        results[f"cycles{j}"] = np.array(cycles)
        results[f"sim_cycles{j}"] = np.array(sim_cycles)
        while dev.cycle - dev.last_col_cycle < quiet or not dev.device.idle:
            await ClockCycles(dut.clk, POLL_CYCLES)
        if lay is not None and ((status >> 4) & 0xF) == 0:
            dt = np.uint16 if job.get("out_bf16") else np.uint32
            d = peek_matrix(dev.device, lay.d_base, lay.d_stride, m, n, dt)
            results[f"d{j}"] = d
            results[f"clobbered{j}"] = np.array(check_untouched(
                dev.device, lay.d_base, lay.d_stride, m, n * np.dtype(dt).itemsize, lay.end))
        dut._log.info("job %d: status 0x%x, %d engine cycles, %d simulated cycles", j, status, cycles, sim_cycles)
    wall = time.perf_counter() - t_wall
    results["total_cycles"] = np.array(dev.cycle)
    results["wall_s"] = np.array(wall)
    np.savez(CFG["out_npz"], **results)
    if dev.trace:
        np.savez(dev.trace, cmds=np.array(dev.cmds, dtype=np.int64).reshape(-1, 4),
                 addrs=np.array(dev.addrs, dtype=np.int64).reshape(-1, len(ADDR_FIELDS)),
                 samples=np.array(dev.samples, dtype=np.int64).reshape(-1, 13))
