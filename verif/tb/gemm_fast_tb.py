"""Transaction-level cocotb testbench of the GEMM engine with the HDL memory system
(:class:`verif.hdl.gemm_sim_top.GEMMSimTop`), Verilator and Icarus.

The clock loop never enters Python: the HBM device model and the JEDEC checker are in the netlist.
Per job the bench writes the matrices into the device model's storage through the simulator's handle
(no clock cycles), programs the descriptor over AXI4-Lite, and waits for one of three edges (``irq``,
``violation``, ``row_error``) or a timeout, then reads STATUS, CYCLES and the performance counters,
clears DONE, waits until the controllers' queues drained (by the rule and at the cycles of the Python
bench: :func:`verif.gemm_host.drain_cycles`) and reads D back through the
handle. A JEDEC violation fails the test with the checker's message (rule, both commands, address,
cycle). Same ``GEMM_TB_CONFIG`` and output as :mod:`verif.tb.gemm_tb` (plus ``stored_rows``).
"""

from __future__ import annotations

import json
import logging
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.handle import Immediate
from cocotb.triggers import ClockCycles, FallingEdge, First, NextTimeStep, ReadOnly, RisingEdge, Timer
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from hw.engine import ENGINE_ID, PERF_COUNTERS, REG, EngineConfig
from hw.hbm.config import HBMConfig
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
from verif.hdl.jedec_checker import describe

CFG = json.loads(os.environ.get("GEMM_TB_CONFIG", "{}"))
PERIOD_NS = 10
FIELDS = ("rule", "cycle", "cmd", "prev", "bg", "bank", "row", "col", "distance")


class Backdoor:
    """The device models' storage through the simulator's handles, with the Python model's
    ``poke``/``peek`` interface (so :mod:`verif.gemm_host` lays matrices out the same way)."""

    def __init__(self, dut, config, stored_rows):
        from verif.hdl.hbm_device import HBMDeviceHDL

        self.config = config
        self.mems = [getattr(dut, f"dev{k}").store.mem for k in range(config.pseudo_channels)]
        self.model = HBMDeviceHDL(config, stored_rows=stored_rows, fill=FILL)  # for word_index only
        self.bb = config.burst_bytes

    def poke(self, pc, bank_group, bank, row, column, data: bytes) -> None:
        # Immediate: visible to a peek in the same time step (a plain write lands at its end)
        self.mems[pc][self.model.word_index(bank_group, bank, row, column)].value = Immediate(
            int.from_bytes(data, "little"))

    def peek(self, pc, bank_group, bank, row, column) -> bytes:
        v = self.mems[pc][self.model.word_index(bank_group, bank, row, column)].value
        return int(v).to_bytes(self.bb, "little")


def violation_message(dut, config) -> str:
    out = []
    for k in range(config.pseudo_channels):
        if int(getattr(dut, f"pc{k}_violation").value):
            raw = {f: getattr(dut, f"pc{k}_v_{f}").value for f in FIELDS}
            fields = {f: int(v) if v.is_resolvable else 0 for f, v in raw.items()}
            out.append(describe(fields, k, config) + ("" if all(v.is_resolvable for v in raw.values())
                                                      else f" (unresolved outputs: {raw})"))
    return "; ".join(out)


def backdoor_round_trip(mem: Backdoor, stored_rows: int, seed: int) -> int:
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
    cfg = EngineConfig.from_dict(CFG["engine"])
    mc = cfg.mxu
    arrays = np.load(CFG["jobs_npz"]) if CFG.get("jobs_npz") else {}
    timeout = int(CFG.get("timeout_cycles", 2_000_000))
    dut.rst.value = 1
    dut.finish.value = 0
    # the first clock edge after the netlist's initial values and reset have settled (Icarus would
    # otherwise clock X into the checker at time 0); the C++ clock (impl="gpi"): the default Python
    # clock runs a coroutine every half period
    await Timer(1, unit="ns")
    cocotb.start_soon(Clock(dut.clk, PERIOD_NS, unit="ns", impl="gpi").start())
    await ClockCycles(dut.clk, 1)
    await FallingEdge(dut.clk)
    dut.rst.value = 0  # one cycle before gemm_tb: GEMMSimTop registers rst once
    await FallingEdge(dut.clk)
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "csr_"), dut.clk, dut.rst)
    for log in (axil.write_if.log, axil.read_if.log):
        log.setLevel(logging.WARNING)
    t0_ns = cocotb.utils.get_sim_time("ns")
    mem = Backdoor(dut, cfg.hbm, int(CFG["stored_rows"]))
    dev_hbm = HBMConfig.from_dict(CFG["device_hbm"]) if CFG.get("device_hbm") else cfg.hbm  # the checkers' rules

    def now_cycles():
        return int((cocotb.utils.get_sim_time("ns") - t0_ns) // PERIOD_NS)

    async def check_memory_system(where):
        if int(dut.violation.value) or int(dut.row_error.value):
            # the checker's v_* outputs change in the same time step as violation: read them at its end
            await ReadOnly()
        if int(dut.violation.value):
            raise AssertionError(f"{where}: JEDEC violation: {violation_message(dut, dev_hbm)}")
        if int(dut.row_error.value):
            raise AssertionError(f"{where}: an ACT addressed a row the device model does not store "
                                 f"(stored_rows = {CFG['stored_rows']}): the GEMM's matrices need more")

    async def rd(name):
        return int.from_bytes((await axil.read(REG[name].offset, 4)).data, "little")

    async def wr(offset, value):
        await axil.write(offset, int(value & 0xFFFFFFFF).to_bytes(4, "little"))

    assert await rd("ID") == ENGINE_ID
    assert await rd("CONFIG") == cfg.config_word
    assert await rd("MAX_K") == cfg.max_k
    results = {}
    quiet = drain_cycles(cfg.hbm.timing)
    t_wall = time.perf_counter()
    spent = {"backdoor_s": 0.0, "engine_s": 0.0, "registers_s": 0.0}  # where the wall time goes
    start = 0x1000
    for j, job in enumerate(CFG["jobs"]):
        lay = None
        if job["kind"] == "backdoor":  # round trip at the first and last stored bursts, no clock cycle
            results[f"backdoor{j}"] = np.array(backdoor_round_trip(mem, int(CFG["stored_rows"]), job["seed"]))
            continue
        if job["kind"] == "gemm":
            m, k, n = job["m"], job["k"], job["n"]
            out_b = 2 if job.get("out_bf16") else 4
            lay = layout(m, k, n, mc.operand_bits // 8, out_b, bool(job.get("load_c")),
                         pad_bytes=int(job.get("pad_bytes", 0)), start=start)
            start = lay.end
            tb = time.perf_counter()
            poke_matrix(mem, lay.a_base, lay.a_stride, arrays[f"a{j}"])
            poke_matrix(mem, lay.b_base, lay.b_stride, arrays[f"b{j}"])
            if job.get("load_c"):
                poke_matrix(mem, lay.c_base, lay.c_stride, arrays[f"c{j}"])
            writes = register_writes(m, k, n, lay, load_c=bool(job.get("load_c")), out_bf16=bool(job.get("out_bf16")))
            spent["backdoor_s"] += time.perf_counter() - tb
        else:
            writes = [tuple(x) for x in job["writes"]]
        tr = time.perf_counter()
        for off, val in writes:
            await wr(off, val)
        c0 = now_cycles()
        await wr(REG["CTRL"].offset, 0b11)  # START | IRQ_EN
        te = time.perf_counter()
        spent["registers_s"] += te - tr
        if not int(dut.irq.value):
            # one trigger for the whole run: no Python per clock cycle
            await First(RisingEdge(dut.irq), RisingEdge(dut.violation), RisingEdge(dut.row_error),
                        Timer(timeout * PERIOD_NS, unit="ns"))
            await check_memory_system(f"job {j}")
            assert int(dut.irq.value), f"job {j}: no irq within {timeout} cycles: the engine hangs ({job})"
        spent["engine_s"] += time.perf_counter() - te
        sim_cycles = now_cycles() - c0
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
        # DONE means the writes were accepted (posted): wait by the rule and at the cycles of the
        # Python bench (verif.gemm_host.drain_cycles), so the next job sees the same refresh phase.
        # since_col counts from the cycle after a command; the Python bench's count includes it.
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
        if lay is not None and ((status >> 4) & 0xF) == 0:
            tb = time.perf_counter()
            dt = np.uint16 if job.get("out_bf16") else np.uint32
            results[f"d{j}"] = peek_matrix(mem, lay.d_base, lay.d_stride, m, n, dt)
            results[f"clobbered{j}"] = np.array(check_untouched(
                mem, lay.d_base, lay.d_stride, m, n * np.dtype(dt).itemsize, lay.end))
            spent["backdoor_s"] += time.perf_counter() - tb
        dut._log.info("job %d: status 0x%x, %d engine cycles, %d simulated cycles", j, status, cycles, sim_cycles)
    # the refresh-rate check at the end of the run
    dut.finish.value = 1
    await FallingEdge(dut.clk)
    dut.finish.value = 0
    await FallingEdge(dut.clk)
    await check_memory_system("end of run")
    wall = time.perf_counter() - t_wall
    results["total_cycles"] = np.array(now_cycles())
    results["wall_s"] = np.array(wall)
    for key, value in spent.items():
        results[key] = np.array(value)
    dut._log.info("wall time: %s", ", ".join(f"{k} {v:.2f}" for k, v in spent.items()))
    np.savez(CFG["out_npz"], **results)
