"""Amaranth-simulator harness of :class:`hw.engine.GEMMEngine` with a behavioural AXI4 memory.

The fast test tier for the engine (no HBM controller, no Verilog): every AXI4 port of the engine is
served by a Python memory that checks the protocol rules the engine promises (INCR bursts of full
32 B beats, aligned, at most 256 beats, never across a 4 KiB boundary, ``wlast`` on the last beat
only) and answers with an optional random delay per beat (seeded), so the engine's flow control is
exercised. Registers are written and read through the AXI4-Lite port by the same testbench.
"""

from __future__ import annotations

import numpy as np

from hw.engine import PERF_COUNTERS, REG, EngineConfig, GEMMEngine
from verif.amaranth_tb import run_testbench
from verif.axi_memory import BEAT, AxiMemory, AxiPortModel, axil_read, axil_write
from verif.gemm_host import layout, register_writes

__all__ = ["AxiMemory", "run_engine_amaranth"]


def run_engine_amaranth(cfg: EngineConfig, jobs: list[dict], *, seed: int | None = None, stall_p: float = 0.0,
                        max_cycles: int = 200_000, vcd: str | None = None) -> list[dict]:
    """Run GEMM jobs through the engine in the Amaranth simulator.

    Args:
        cfg: the engine configuration.
        jobs: dicts with ``a``, ``b`` (arrays in the input format), optional ``c`` (float32/int32),
            ``out_bf16``, ``pad_bytes``; or ``{"writes": [(offset, value), ...]}`` for a raw descriptor.
        seed, stall_p: with a seed, each read beat, B response, AR/AW/W ready is withheld with
            probability ``stall_p`` per cycle.
        max_cycles: per job; exceeding it raises (an engine hang).

    Returns:
        One dict per job: ``status``, ``cycles`` (CYCLES register), ``d`` (result bits; uint32 or
        uint16), ``mem`` (the :class:`AxiMemory`), ``layout``, ``a_beats`` (the byte address of every
        beat read on ``mem_a``, in AR order: shows the A loader's order and the m-blocking).

    Raises:
        AssertionError: a protocol error on a memory port, or a hang.
    """
    eng = GEMMEngine(cfg)
    rng = np.random.default_rng(seed) if seed is not None else None
    mem = AxiMemory(cfg.hbm.capacity_bytes)
    ob = cfg.operand_bytes
    results = []
    a_beats: list[int] = []

    def stall():
        return rng is not None and rng.random() < stall_p

    async def tb(ctx):
        def on_a(addr, n):
            a_beats.extend(addr + BEAT * i for i in range(n))

        servers = [AxiPortModel(mem, p, f"port {k}", stall, on_ar=on_a if k == 0 else None)
                   for k, p in enumerate([eng.mem_a, eng.mem_w, eng.mem_c])]
        cycle = 0

        async def axil_write_(off, val):
            await axil_write(ctx, eng.csr, off, val, step)

        async def axil_read_(off):
            return await axil_read(ctx, eng.csr, off, step)

        async def step():
            nonlocal cycle
            # drive the memory side, then take this cycle's handshakes at the edge
            for srv in servers:
                srv.drive(ctx)
            for srv in servers:
                srv.sample(ctx, cycle)
            await ctx.tick()
            cycle += 1
            assert not mem.errors, mem.errors[:5]

        start = 0x1000
        for j, job in enumerate(jobs):
            lay = None
            if "writes" in job:
                writes = job["writes"]
            else:
                a, b = job["a"], job["b"]
                m, k = a.shape
                n = b.shape[1]
                c = job.get("c")
                out_b = 2 if job.get("out_bf16") else 4
                lay = layout(m, k, n, ob, out_b, c is not None, start=start, pad_bytes=job.get("pad_bytes", 0))
                start = lay.end
                mem.load(lay.a_base, lay.a_stride, a)
                mem.load(lay.b_base, lay.b_stride, b)
                if c is not None:
                    mem.load(lay.c_base, lay.c_stride, c)
                writes = register_writes(m, k, n, lay, load_c=c is not None, out_bf16=bool(job.get("out_bf16")))
            for off, val in writes:
                await axil_write_(off, val)
            await axil_write_(REG["CTRL"].offset, 0b11)
            t = 0
            while not ctx.get(eng.irq):
                await step()
                t += 1
                assert t < max_cycles, f"job {j}: no irq within {max_cycles} cycles (engine hang)"
            status = await axil_read_(REG["STATUS"].offset)
            cyc = await axil_read_(REG["CYCLES"].offset)
            perf = {name: await axil_read_(REG[name].offset) for name in PERF_COUNTERS}
            await axil_write_(REG["STATUS"].offset, 0b10)
            assert not ctx.get(eng.irq), "irq stays high after DONE was cleared"
            res = {"status": status, "cycles": cyc, "perf": perf, "layout": lay, "mem": mem, "a_beats": list(a_beats)}
            a_beats.clear()
            if lay is not None:
                # every byte written must be a result byte of this job
                row_b = n * (2 if job.get("out_bf16") else 4)
                stray = [x for x in mem.written if not (lay.d_base <= x < lay.d_base + m * lay.d_stride
                                                        and (x - lay.d_base) % lay.d_stride < row_b)]
                res["stray_writes"] = len(stray)
                res["bytes_written"] = len(mem.written)
                mem.written.clear()
            if lay is not None and not (status >> 4) & 0xF:
                res["d"] = mem.matrix(lay.d_base, lay.d_stride, m, n, np.uint16 if job.get("out_bf16") else np.uint32)
            results.append(res)

    run_testbench(eng, tb, period_s=1e-8, vcd=vcd)
    return results
