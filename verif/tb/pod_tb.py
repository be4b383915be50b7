"""Transaction-level cocotb testbench of the pod with every node's memory system in the netlist
(:class:`verif.hdl.pod_sim_top.PodSimTop`), Verilator and Icarus.

Each node's matrices go into its HBM device models' storage through the simulator's handles (no
clock cycles); then phases, each started on every node over its AXI4-Lite ports and waited for with
one trigger per node (``irq`` / ``cirq``, a JEDEC ``violation``, a ``row_error``, or a timeout): the
collectives before the GEMM, the GEMMs, the collectives after. At the end the bench waits until the
controllers drained, strobes the checkers' end-of-run check, and reads every node's result back
through the handles. Configuration: :class:`verif.tb.base.PodTbConfig`.
"""

from __future__ import annotations

import logging
import time

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, First, NextTimeStep, ReadOnly, RisingEdge, Timer
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from hw.engine import REG
from hw.pod.csr import REG as CREG
from verif.gemm_host import POLL_CYCLES, drain_cycles, peek_matrix, poke_matrix
from verif.hdl.gemm_sim_top import VIOLATION_FIELDS
from verif.hdl.jedec_checker import describe
from verif.hdl.pod_sim_top import device_name
from verif.tb.base import HdlBackdoor, PodTbConfig, start_clock
from verif.tb.base import check_memory_system as check_memory

PERIOD_NS = 10


def violation_message(dut, pod) -> str:
    out = []
    hbm = pod.engine.hbm
    for k in pod.live:
        for j in range(hbm.pseudo_channels):
            if int(getattr(dut, f"n{k}pc{j}_violation").value):
                raw = {f: getattr(dut, f"n{k}pc{j}_v_{f}").value for f in VIOLATION_FIELDS}
                fields = {f: int(v) if v.is_resolvable else 0 for f, v in raw.items()}
                out.append(f"node {k}: " + describe(fields, j, hbm))
    return "; ".join(out)


async def flip_bits(dut, pod, p: float, seed: int) -> None:
    """Corrupt one random bit of each link's beat with probability ``p`` per cycle (Python every cycle)."""
    rng = np.random.default_rng(seed)
    width = pod.link.width
    pins = [getattr(dut, f"flip_{d}{k}") for k in pod.live for d in ("cw", "ccw")]
    while True:
        await FallingEdge(dut.clk)
        for pin in pins:
            pin.value = (1 << int(rng.integers(width))) if rng.random() < p else 0


@cocotb.test()
async def pod_run(dut):
    cfg = PodTbConfig.from_env()
    pod = cfg.pod
    hbm = pod.engine.hbm
    dut.rst.value = 1
    dut.finish.value = 0
    for k in pod.live:
        for d in ("cw", "ccw"):
            getattr(dut, f"flip_{d}{k}").value = 0
    await Timer(1, unit="ns")
    await start_clock(dut, period_ns=PERIOD_NS, gpi=True)
    await ClockCycles(dut.clk, 1)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    await FallingEdge(dut.clk)
    buses = {}
    for node in cfg.nodes:
        for port in ("csr", "ccsr"):
            bus = AxiLiteMaster(AxiLiteBus.from_prefix(dut, f"node{node['slot']}_{port}_"), dut.clk, dut.rst)
            for log in (bus.write_if.log, bus.read_if.log):
                log.setLevel(logging.WARNING)
            buses[node["slot"], port] = bus
    mems = {n["slot"]: HdlBackdoor(dut, hbm, cfg.stored_rows, [device_name(n["slot"], j)
                                                               for j in range(hbm.pseudo_channels)])
            for n in cfg.nodes}
    arrays = np.load(cfg.arrays_npz)
    for node in cfg.nodes:
        for base, stride, key in node["loads"]:
            poke_matrix(mems[node["slot"]], base, stride, arrays[key])
    if cfg.flip_p:
        cocotb.start_soon(flip_bits(dut, pod, cfg.flip_p, cfg.seed))
    t0_ns = cocotb.utils.get_sim_time("ns")

    def now():
        return int((cocotb.utils.get_sim_time("ns") - t0_ns) // PERIOD_NS)

    async def check_memory_system(where):
        await check_memory(dut, where, lambda: violation_message(dut, pod), cfg.stored_rows)

    async def phase(name, port, regmap, irq, writes_of):
        for node in cfg.nodes:
            for off, val in writes_of(node):
                await buses[node["slot"], port].write(off, int(val & 0xFFFFFFFF).to_bytes(4, "little"))
        c0 = now()
        for node in cfg.nodes:
            await buses[node["slot"], port].write(regmap["CTRL"].offset, (0b11).to_bytes(4, "little"))
        for node in cfg.nodes:
            pin = getattr(dut, f"node{node['slot']}_{irq}")
            left = cfg.timeout_cycles - (now() - c0)
            if not int(pin.value) and left > 0:
                await First(RisingEdge(pin), RisingEdge(dut.violation), RisingEdge(dut.row_error),
                            Timer(left * PERIOD_NS, unit="ns"))
            await check_memory_system(f"{name}, node {node['slot']}")
            assert int(pin.value), f"{name}: node {node['slot']} not done within {cfg.timeout_cycles} cycles"
        pod_cycles = now() - c0
        got = []
        for node in cfg.nodes:
            bus = buses[node["slot"], port]
            status = int.from_bytes((await bus.read(regmap["STATUS"].offset, 4)).data, "little")
            assert (status >> 4) & 0xF == 0, f"{name}: node {node['slot']} STATUS {status:#x}"
            got.append(int.from_bytes((await bus.read(regmap["CYCLES"].offset, 4)).data, "little"))
            await bus.write(regmap["STATUS"].offset, (0b10).to_bytes(4, "little"))
        return pod_cycles, got

    t_wall = time.perf_counter()
    phases, gemm, coll = [], [], [[] for _ in cfg.nodes]
    for which in ("before", "gemm", "after"):
        if which == "gemm":
            t, gemm = await phase("GEMM", "csr", REG, "irq", lambda n: n["gemm_writes"])
            phases.append(t)
            continue
        for j in range(max(len(n[which]) for n in cfg.nodes)):
            t, got = await phase(f"collective {which} {j}", "ccsr", CREG, "cirq", lambda n, j=j, w=which: n[w][j])
            phases.append(t)
            for i, c in enumerate(got):
                coll[i].append(c)
    # the posted writes reach the devices, then the checkers' end-of-run check
    quiet, waited = drain_cycles(hbm.timing), 0
    while True:
        await ReadOnly()
        if int(dut.since_col.value) + 1 >= quiet or int(dut.violation.value):
            break
        await ClockCycles(dut.clk, POLL_CYCLES)
        waited += POLL_CYCLES
        assert waited < 100_000, "the memory systems never drained"
    await NextTimeStep()
    await FallingEdge(dut.clk)
    dut.finish.value = 1
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.finish.value = 0
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    await check_memory_system("end of run")
    out = {"gemm_cycles": np.array(gemm), "phase_cycles": np.array(phases), "total_cycles": np.array(now()),
           "wall_s": np.array(time.perf_counter() - t_wall)}
    for i, c in enumerate(coll):
        out[f"collective_cycles{i}"] = np.array(c, dtype=np.int64)
    for i, node in enumerate(cfg.nodes):
        base, stride, rows, row_bytes = node["result"]
        out[f"result{i}"] = peek_matrix(mems[node["slot"]], base, stride, rows, row_bytes, np.uint8)
    for name in ("replays", "crc_errors"):
        out[name] = np.array(sum(int(getattr(dut, f"{name}_{d}{k}").value) for k in pod.live for d in ("cw", "ccw")))
    np.savez(cfg.out_npz, **out)
