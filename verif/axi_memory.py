"""Behavioural AXI4 memory for the Amaranth simulator: a sparse byte store and a port model that
serves one AXI4 master port cycle by cycle, checking the protocol rules the project's masters
promise (INCR bursts of full 32 B beats, aligned, at most 256 beats, never across a 4 KiB
boundary, ``wlast`` on the last beat only)."""

from __future__ import annotations

import numpy as np

from verif.gemm_host import FILL

__all__ = ["AxiMemory", "AxiPortModel", "BEAT"]

BEAT = 32


class AxiMemory:
    """Sparse byte memory (unwritten bytes read ``FILL``) with the protocol checks."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.data: dict[int, int] = {}
        self.errors: list[str] = []
        self.written: set[int] = set()

    def load(self, base: int, stride: int, x: np.ndarray) -> None:
        if x.size == 0:
            return
        raw = np.ascontiguousarray(x).view(np.uint8).reshape(x.shape[0], -1)
        for i in range(raw.shape[0]):
            for j, b in enumerate(raw[i].tolist()):
                self.data[base + i * stride + j] = b

    def read_beat(self, addr: int) -> int:
        return int.from_bytes(bytes(self.data.get(addr + i, FILL) for i in range(BEAT)), "little")

    def write_beat(self, addr: int, value: int, strobe: int) -> None:
        raw = value.to_bytes(BEAT, "little")
        for i in range(BEAT):
            if strobe >> i & 1:
                self.data[addr + i] = raw[i]
                self.written.add(addr + i)

    def matrix(self, base: int, stride: int, rows: int, cols: int, dtype) -> np.ndarray:
        item = np.dtype(dtype).itemsize
        out = np.empty((rows, cols * item), dtype=np.uint8)
        for i in range(rows):
            out[i] = [self.data.get(base + i * stride + j, FILL) for j in range(cols * item)]
        return out.view(dtype).reshape(rows, cols)

    def check_burst(self, kind: str, addr: int, length: int, size: int, burst: int, cycle: int) -> None:
        beats = length + 1
        problems = []
        if burst != 1:
            problems.append(f"burst type {burst} (INCR = 1 expected)")
        if size != 5:
            problems.append(f"size {size} (32 B beats = 5 expected)")
        if addr % BEAT:
            problems.append(f"unaligned address 0x{addr:x}")
        if addr // 4096 != (addr + beats * BEAT - 1) // 4096:
            problems.append(f"burst 0x{addr:x} + {beats} beats crosses a 4 KiB boundary")
        if addr + beats * BEAT > self.capacity:
            problems.append(f"burst 0x{addr:x} + {beats} beats runs past the end of memory")
        for p in problems:
            self.errors.append(f"cycle {cycle}: {kind}: {p}")



class AxiPortModel:
    """Serves one AXI4 master port (members named as :func:`hw.hbm.axi.axi4_signature`) from an
    :class:`AxiMemory`: at most 4 read bursts and 2 write bursts accepted ahead, read beats in AR
    order, writes answered OKAY after their last beat; with ``stall`` (a callable returning True)
    each read beat, B response and AR/AW/W ready is withheld in the cycles it says.

    Call :meth:`drive` before the clock edge and :meth:`sample` after driving every port (the same
    cycle); ``on_ar(addr, beats)`` is called for each accepted read burst.
    """

    def __init__(self, mem: AxiMemory, port, name: str, stall=lambda: False, on_ar=None):
        self.mem, self.p, self.name, self.stall, self.on_ar = mem, port, name, stall, on_ar
        self.reads: list[tuple[int, int]] = []
        self.writes: list[list[int]] = []
        self.b = 0

    def drive(self, ctx) -> None:
        p = self.p
        r_ok = bool(self.reads) and not self.stall()
        if r_ok:
            addr, left = self.reads[0]
            ctx.set(p.rdata, self.mem.read_beat(addr))
            ctx.set(p.rlast, int(left == 1))
            ctx.set(p.rresp, 0)
        ctx.set(p.rvalid, int(r_ok))
        ctx.set(p.arready, int(len(self.reads) < 4 and not self.stall()))
        ctx.set(p.awready, int(len(self.writes) < 2 and not self.stall()))
        ctx.set(p.wready, int(bool(self.writes) and not self.stall()))
        ctx.set(p.bvalid, int(self.b > 0))
        ctx.set(p.bresp, 0)

    def sample(self, ctx, cycle: int) -> None:
        p, mem = self.p, self.mem
        if ctx.get(p.arvalid) and ctx.get(p.arready):
            addr, ln = ctx.get(p.araddr), ctx.get(p.arlen)
            mem.check_burst(f"{self.name} AR", addr, ln, ctx.get(p.arsize), ctx.get(p.arburst), cycle)
            self.reads.append((addr, ln + 1))
            if self.on_ar is not None:
                self.on_ar(addr, ln + 1)
        if ctx.get(p.rvalid) and ctx.get(p.rready):
            addr, left = self.reads[0]
            if left == 1:
                self.reads.pop(0)
            else:
                self.reads[0] = (addr + BEAT, left - 1)
        if ctx.get(p.awvalid) and ctx.get(p.awready):
            addr, ln = ctx.get(p.awaddr), ctx.get(p.awlen)
            mem.check_burst(f"{self.name} AW", addr, ln, ctx.get(p.awsize), ctx.get(p.awburst), cycle)
            self.writes.append([addr, ln + 1])
        if ctx.get(p.wvalid) and ctx.get(p.wready):
            w = self.writes[0]
            mem.write_beat(w[0], ctx.get(p.wdata), ctx.get(p.wstrb))
            last = ctx.get(p.wlast)
            if bool(last) != (w[1] == 1):
                mem.errors.append(f"cycle {cycle}: {self.name}: wlast={last} with {w[1]} beats left")
            w[0] += BEAT
            w[1] -= 1
            if w[1] == 0:
                self.writes.pop(0)
                self.b += 1
        if ctx.get(p.bvalid) and ctx.get(p.bready):
            self.b -= 1


async def axil_write(ctx, port, offset: int, value: int, step) -> None:
    """Write a 32-bit register over the AXI4-Lite slave ``port`` (AW and W together, then B),
    advancing the simulation with the testbench's ``step`` coroutine."""
    ctx.set(port.awaddr, offset)
    ctx.set(port.wdata, value & 0xFFFFFFFF)
    ctx.set(port.wstrb, 0xF)
    ctx.set(port.awvalid, 1)
    ctx.set(port.wvalid, 1)
    ctx.set(port.bready, 1)
    while not ctx.get(port.awready):
        await step()
    await step()
    ctx.set(port.awvalid, 0)
    ctx.set(port.wvalid, 0)
    while not ctx.get(port.bvalid):
        await step()
    await step()


async def axil_read(ctx, port, offset: int, step) -> int:
    """Read a 32-bit register over the AXI4-Lite slave ``port``."""
    ctx.set(port.araddr, offset)
    ctx.set(port.arvalid, 1)
    ctx.set(port.rready, 1)
    while not ctx.get(port.arready):
        await step()
    await step()
    ctx.set(port.arvalid, 0)
    while not ctx.get(port.rvalid):
        await step()
    v = ctx.get(port.rdata)
    await step()
    return v
