"""cocotb testbench of one generated pseudo-channel controller (Verilator and Icarus).

``HBM_TB_CONFIG`` (JSON): ``config`` (:meth:`hw.hbm.config.HBMConfig.as_dict` output, ``timing`` may
be a preset name), ``seed``, ``traffic`` (a list of ``{"kind": "sequential" | "random" | "conflicts",
"count": N, ...}`` segments, see :func:`verif.hbm_harness.build_traffic`), ``gap_p`` / ``stall_p`` (0 = stream always
offered / always ready), ``max_outstanding`` (1 = one request at a time), ``max_cycles``,
``drain_cycles``, ``expect_cycles`` and ``expect_trace`` (optional: the run must take exactly this
many cycles and give this ``trace_digest``, the digest of every DRAM command with its cycle and every
request's latency, e.g. the Amaranth model's for the same traffic). ``HBM_TB_REPORT`` (optional): a path where
the run's statistics (:meth:`verif.hbm_harness.PCHarness.finish`) are written as JSON.

Test ``traffic``: the requests go through :class:`verif.hbm_harness.PCHarness` exactly as in the
Amaranth tests: every command checked by the fatal JEDEC checker, every read compared with the
shadow memory, the memory compared at the end, the refresh cadence checked.
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from hw.hbm.config import HBMConfig
from hw.hbm.controller import request_layout, response_layout
from verif.hbm_harness import PCHarness, Pins, build_traffic

CFG = json.loads(os.environ.get("HBM_TB_CONFIG", "{}"))
REPORT = os.environ.get("HBM_TB_REPORT")


def _int(handle, name: str, cycle: int) -> int:
    value = handle.value
    if not value.is_resolvable:
        raise AssertionError(f"cycle {cycle}: output {name} is {value} (X/Z) while it must be 0/1")
    return int(value)


def _field(layout, name):
    f = layout[name]
    return f.offset, f.width


@cocotb.test()
async def traffic(dut):
    config = HBMConfig.from_dict(CFG["config"])
    seed = int(CFG.get("seed", 1))
    rng = np.random.default_rng(seed)
    reqs = build_traffic(config, CFG["traffic"], rng)
    gap_p, stall_p = float(CFG.get("gap_p", 0.0)), float(CFG.get("stall_p", 0.0))
    h = PCHarness(config, reqs, rng=rng if (gap_p or stall_p) else None, gap_p=gap_p, stall_p=stall_p,
                  max_outstanding=CFG.get("max_outstanding"))
    max_cycles = int(CFG.get("max_cycles", 100_000))
    drain = int(CFG.get("drain_cycles", 0))
    rl, sl = request_layout(config), response_layout(config)
    off = {n: _field(rl, n)[0] for n in ("write", "addr", "tag", "wdata", "wmask")}
    tag_w = _field(sl, "tag")[1]
    tag_mask = (1 << tag_w) - 1

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.req__valid.value = 0
    dut.req__payload.value = 0
    dut.rsp__ready.value = 0
    dut.dram__rdata_valid.value = 0
    dut.dram__rdata.value = 0
    dut.rst.value = 1
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    t0 = time.perf_counter()
    idle = 0
    sig = {n: getattr(dut, f"dram__{n}") for n in (
        "row_cmd", "row_bg", "row_bank", "row_row", "col_cmd", "col_bg", "col_bank", "col_row",
        "col_column", "wdata", "wmask", "wdata_valid")}
    while h.cycle < max_cycles:
        # outputs are registered or depend only on state: stable at the falling edge
        # data pins are only meaningful (and only required to be 0/1) while their strobe is high
        v = {n: _int(s, n, h.cycle) for n, s in sig.items() if n not in ("wdata", "wmask")}
        wv = v["wdata_valid"]
        v["wdata"] = _int(sig["wdata"], "wdata", h.cycle) if wv else 0
        v["wmask"] = _int(sig["wmask"], "wmask", h.cycle) if wv else 0
        rsp_valid = int(dut.rsp__valid.value)
        payload = int(dut.rsp__payload.value) if rsp_valid else 0
        pins = Pins(**v, req_ready=int(dut.req__ready.value), rsp_valid=rsp_valid,
                    rsp_tag=payload & tag_mask, rsp_rdata=payload >> tag_w,
                    refresh_owed=int(dut.refresh_owed.value), queue_empty=int(dut.queue_empty.value))
        d = h.step(pins)
        dut.req__valid.value = d.req_valid
        if d.req_valid:
            dut.req__payload.value = (d.req_write << off["write"] | d.req_addr << off["addr"]
                                      | d.req_tag << off["tag"] | d.req_wdata << off["wdata"]
                                      | d.req_wmask << off["wmask"])
        dut.rsp__ready.value = d.rsp_ready
        dut.dram__rdata_valid.value = d.rdata_valid
        dut.dram__rdata.value = d.rdata
        await FallingEdge(dut.clk)
        if h.done:
            idle += 1
            if idle > drain + config.timing.CWL + 2:
                break
    stats = h.finish()
    wall = time.perf_counter() - t0
    stats["sim_wall_s"] = wall
    stats["cycles_per_s"] = h.cycle / wall
    stats["latencies_raw"] = h.latencies
    dut._log.info("stats %s", {k: v for k, v in stats.items() if k != "latencies_raw"})
    if REPORT:
        with open(REPORT, "w") as f:
            json.dump(stats, f)
    if "expect_cycles" in CFG:
        assert h.cycle == int(CFG["expect_cycles"]), (
            f"{h.cycle} cycles, the reference model takes {CFG['expect_cycles']}")
    if "expect_trace" in CFG:
        assert stats["trace_digest"] == CFG["expect_trace"], (
            "the DRAM command stream or a request's latency differs from the reference model's")
