"""Amaranth-simulator harness of a ring of collective engines joined by ICI links.

Each node is a :class:`hw.pod.CollectiveEngine` whose two AXI4 ports are served by a behavioural
memory (:class:`verif.axi_memory.AxiMemory`, protocol rules checked, optional random stalls); node
k's clockwise link goes to node k + 1, its counter-clockwise link to node k - 1 (each an
:class:`hw.ici.ICIChannel`, with bit flips injected on request).
"""

from __future__ import annotations

import sys

import numpy as np
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring

from hw.ici.channel import ICIChannel
from hw.pod import CollectiveConfig, CollectiveEngine, CollectiveOp
from verif.amaranth_tb import run_testbench
from verif.axi_memory import BEAT, AxiMemory, AxiPortModel, axil_read, axil_write

__all__ = ["CollectiveRing", "run_collective", "run_pod_amaranth", "BASE"]

#: byte address of every node's array
BASE = 0x1000


class CollectiveRing(Elaboratable):
    """``nodes`` collective engines on a bidirectional ring of ICI channels (simulation top)."""

    def __init__(self, config: CollectiveConfig, nodes: int):
        self.config, self.nodes = config, nodes
        self.engines = [CollectiveEngine(config) for _ in range(nodes)]
        self.cw = [ICIChannel(config.link) for _ in range(nodes)]    # k: node k -> k + 1
        self.ccw = [ICIChannel(config.link) for _ in range(nodes)]   # k: node k -> k - 1

    def elaborate(self, platform):
        m = Module()
        n = self.nodes
        for k, e in enumerate(self.engines):
            m.submodules[f"node{k}"] = e
            m.submodules[f"cw{k}"] = self.cw[k]
            m.submodules[f"ccw{k}"] = self.ccw[k]
        for k, e in enumerate(self.engines):
            wiring.connect(m, e.tx_cw, self.cw[k].inp)
            wiring.connect(m, self.cw[k].out, self.engines[(k + 1) % n].rx_cw)
            wiring.connect(m, e.tx_ccw, self.ccw[k].inp)
            wiring.connect(m, self.ccw[k].out, self.engines[(k - 1) % n].rx_ccw)
        return m


def run_collective(cfg: CollectiveConfig, arrays: list[np.ndarray], op: str, *, bidirectional: bool = False,
                   seed: int | None = None, stall_p: float = 0.0, flip_p: float = 0.0, pad_bytes: int = 0,
                   max_cycles: int = 200_000, vcd: str | None = None) -> dict:
    """Run one collective on a ring of ``len(arrays)`` nodes in the Amaranth simulator.

    Args:
        arrays: one 2-D float32 or int32 array per node, all of one shape (rows, columns): node k's
            array is stored at :data:`BASE` with its rows ``pad_bytes`` apart beyond the 32-byte
            multiple that holds them, the rest of memory the fill byte.
        op: ``"all_gather"``, ``"reduce_scatter"`` or ``"all_reduce"``.
        seed, stall_p: random stalls on every AXI port with probability ``stall_p`` per cycle.
        flip_p: each beat on every link's wire is corrupted (one random bit) with this probability.

    Returns:
        ``{"out": [array per node, as stored after the run], "cycles": [CYCLES per node],
        "error": [...], "framing_error", "write_error", "links": {"replays", "crc_errors", "packets"}}``
        (link counters summed over the ring).

    Raises:
        AssertionError: an AXI protocol error, or no node finished within ``max_cycles``.
    """
    n = len(arrays)
    rows, cols = arrays[0].shape
    row_bytes = cols * 4
    stride = -(-row_bytes // BEAT) * BEAT + pad_bytes
    top = CollectiveRing(cfg, n)
    rng = np.random.default_rng(seed)
    mems = [AxiMemory(1 << cfg.address_bits) for _ in range(n)]
    for mem, x in zip(mems, arrays):
        mem.load(BASE, stride, np.ascontiguousarray(x))
    out: dict = {}

    def stall():
        return stall_p > 0 and rng.random() < stall_p

    async def tb(ctx):
        servers = []
        for k, e in enumerate(top.engines):
            servers += [AxiPortModel(mems[k], getattr(e, f"axi_{name}"), f"node {k} {name}", stall)
                        for name in ("cw", "ccw", "cw_drain", "ccw_drain")]
        for k, e in enumerate(top.engines):
            d = e.desc
            ctx.set(d.op, CollectiveOp[op.upper()])
            for field, value in (("bidirectional", int(bidirectional)), ("nodes", n), ("rank", k), ("base", BASE),
                                 ("stride", stride), ("rows", rows), ("row_bytes", row_bytes)):
                ctx.set(getattr(d, field), value)
            ctx.set(e.start, 1)
        links = top.cw + top.ccw
        width = cfg.link.beat_bytes * 8
        for cycle in range(max_cycles):
            for s in servers:
                s.drive(ctx)
            for s in servers:
                s.sample(ctx, cycle)
            if flip_p:
                for ch in links:
                    hit = rng.random() < flip_p
                    ctx.set(ch.flip, (1 << int(rng.integers(width))) if hit else 0)
            await ctx.tick()
            for e in top.engines:
                ctx.set(e.start, 0)
            assert not any(mem.errors for mem in mems), [mem.errors[:3] for mem in mems]
            if cycle > 2 and all(ctx.get(e.done) and not ctx.get(e.busy) for e in top.engines):
                break
        else:
            raise AssertionError(f"seed {seed}: no finish within {max_cycles} cycles "
                                 f"(done: {[ctx.get(e.done) for e in top.engines]})")
        out["cycles"] = [ctx.get(e.cycles) for e in top.engines]
        out["error"] = [ctx.get(e.error) for e in top.engines]
        out["framing_error"] = any(ctx.get(e.framing_error) for e in top.engines)
        out["write_error"] = any(ctx.get(e.write_error) for e in top.engines)
        out["links"] = {name: sum(ctx.get(getattr(ch, name)) for ch in links)
                        for name in ("replays", "crc_errors", "tx_packets")}

    # Amaranth's Python simulator compiles a statement by recursion, and the CRC step of a 32- or
    # 64-byte link beat nests deeper than Python's default limit of 1,000 frames
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
    run_testbench(top, tb, period_s=1e-8, vcd=vcd)
    dtype = arrays[0].dtype
    out["out"] = [mem.matrix(BASE, stride, rows, cols, dtype) for mem in mems]
    return out


def run_pod_amaranth(cfg, plan, *, seed: int | None = None, stall_p: float = 0.0, flip_p: float = 0.0,
                     max_cycles: int = 400_000) -> dict:
    """Run a :class:`verif.pod_host.PodPlan` on :class:`hw.pod.top.PodTop` (``memory="axi"``) in the
    Amaranth simulator, each node's seven AXI4 ports served by its own behavioural memory.

    Phases, each started on every node and waited for on every node: the collectives before the
    GEMM, the GEMMs, the collectives after. Registers go over each node's AXI4-Lite ports.

    Returns:
        ``{"results": [each node's result matrix], "gemm_cycles": [...], "collective_cycles":
        [[per collective] per node], "phase_cycles": [pod cycles of each phase], "links": {...},
        "status": [...]}``.

    Raises:
        AssertionError: an AXI protocol error, a refused descriptor or a hang.
    """
    from hw.engine import REG
    from hw.pod.csr import REG as CREG
    from hw.pod.node import MEMORY_PORTS
    from hw.pod.top import PodTop
    from verif.pod_host import collective_writes

    top = PodTop(cfg, memory="axi")
    rng = np.random.default_rng(seed)
    n = len(plan.nodes)
    mems = [AxiMemory(cfg.engine.hbm.capacity_bytes) for _ in plan.nodes]
    for mem, node in zip(mems, plan.nodes):
        for base, stride, x in node.loads:
            mem.load(base, stride, x)
    out: dict = {"gemm_cycles": [], "collective_cycles": [[] for _ in plan.nodes], "phase_cycles": []}
    width = cfg.link.width

    def stall():
        return stall_p > 0 and rng.random() < stall_p

    async def tb(ctx):
        servers = [AxiPortModel(mems[i], getattr(top, f"node{node.slot}_{name}"), f"node {node.slot} {name}", stall)
                   for i, node in enumerate(plan.nodes) for name in MEMORY_PORTS]
        cycle = 0

        async def step():
            nonlocal cycle
            for s in servers:
                s.drive(ctx)
            for s in servers:
                s.sample(ctx, cycle)
            if flip_p:
                for k in cfg.live:
                    for d in ("cw", "ccw"):
                        hit = rng.random() < flip_p
                        ctx.set(getattr(top, f"flip_{d}{k}"), (1 << int(rng.integers(width))) if hit else 0)
            await ctx.tick()
            cycle += 1
            assert not any(m.errors for m in mems), [m.errors[:3] for m in mems]

        async def phase(port, regmap, writes_of, irq):
            for node in plan.nodes:
                for off, val in writes_of(node):
                    await axil_write(ctx, getattr(top, f"node{node.slot}_{port}"), off, val, step)
            t0 = cycle
            for node in plan.nodes:
                await axil_write(ctx, getattr(top, f"node{node.slot}_{port}"), regmap["CTRL"].offset, 0b11, step)
            while not all(ctx.get(getattr(top, f"node{node.slot}_{irq}")) for node in plan.nodes):
                await step()
                assert cycle - t0 < max_cycles, f"seed {seed}: {port}: no irq on every node in {max_cycles} cycles"
            out["phase_cycles"].append(cycle - t0)
            got = []
            for node in plan.nodes:
                p = getattr(top, f"node{node.slot}_{port}")
                status = await axil_read(ctx, p, regmap["STATUS"].offset, step)
                assert (status >> 4) & 0xF == 0, f"node {node.slot}: {port} STATUS {status:#x}"
                got.append(await axil_read(ctx, p, regmap["CYCLES"].offset, step))
                await axil_write(ctx, p, regmap["STATUS"].offset, 0b10, step)
            return got

        async def collectives(which):
            for j in range(max(len(getattr(nd, which)) for nd in plan.nodes)):
                cyc = await phase("ccsr", CREG, lambda nd, j=j: collective_writes(
                    nd, n, *getattr(nd, which)[j], plan.bidirectional), "cirq")
                for i, c in enumerate(cyc):
                    out["collective_cycles"][i].append(c)

        await collectives("before")
        out["gemm_cycles"] = await phase("csr", REG, lambda nd: nd.gemm_writes, "irq")
        await collectives("after")
        out["links"] = {name: sum(ctx.get(getattr(top, f"{name}_{d}{k}")) for k in cfg.live for d in ("cw", "ccw"))
                        for name in ("replays", "crc_errors")}

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
    run_testbench(top, tb)
    out["results"] = [mem.matrix(nd.layout.d_base, nd.layout.d_stride, nd.gemm[0], nd.gemm[2], plan.acc_dtype)
                      for mem, nd in zip(mems, plan.nodes)]
    if plan.sharding == "tp-k":
        m, _, nn = plan.shape
        out["results"] = [mem.matrix(nd.layout.d_base, nd.layout.d_stride, m, nn, plan.acc_dtype)
                          for mem, nd in zip(mems, plan.nodes)]
    return out
