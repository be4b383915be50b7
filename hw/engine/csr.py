"""Control/status registers of the GEMM engine on an AXI4-Lite slave.

Register map (32-bit registers, byte addresses; ``REGISTERS`` below is the single source of it; the
manual's register map is generated from the same list by ``register_table_markdown``):

Writes take effect when both AW and W have been received (WSTRB is honoured per byte); reads return
the register value one cycle after AR. An address outside the map reads 0 and ignores writes, with
OKAY (the map is small and fully decoded in 7 address bits; aliases above 0x7F are not decoded).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Reg", "REGISTERS", "REG", "axi4lite_signature", "CSRBlock", "register_table_markdown",
           "ENGINE_ID", "PERF_COUNTERS", "axil_write_side", "axil_read_side"]

ENGINE_ID = 0x4D585531  # "MXU1"


@dataclass(frozen=True)
class Reg:
    name: str
    offset: int
    access: str      # "RW", "RO", "W1S" (write 1 to set, self-clearing), "RW1C" (status bits, write 1 clears)
    reset: int
    fields: str      # human description of the fields


REGISTERS: tuple[Reg, ...] = (
    Reg("ID", 0x00, "RO", ENGINE_ID, "0x4D585531 (\"MXU1\")"),
    Reg("CONFIG", 0x04, "RO", 0, "[11:0] rows R, [23:12] cols C, [25:24] fmt (0 bf16, 1 fp8_e4m3fn, "
        "2 fp8_e5m2, 3 int8), [26] subnormals (0 ftz, 1 ieee), [31:28] PE stages L (the reset value is "
        "this configuration)"),
    Reg("CTRL", 0x08, "W1S", 0, "[0] START: write 1 to start the GEMM described by the registers "
        "below (ignored while busy); [1] IRQ_EN (read/write): drive `irq` while DONE is set"),
    Reg("STATUS", 0x0C, "RW1C", 0, "[0] BUSY (RO); [1] DONE (write 1 to clear; clears `irq`); "
        "[7:4] ERROR code of the last start (RO, 0 = none, see the error table); [8] BUS_ERROR (RO): "
        "a memory access of the last run got SLVERR"),
    Reg("M", 0x10, "RW", 0, "[19:0] rows of A and of the result, 1 .. 2^dim_bits - 1 (dim_bits: 8..20, "
        "default 20; a bit at or above dim_bits is the DIM_TOO_LARGE error)"),
    Reg("K", 0x14, "RW", 0, "[19:0] columns of A = rows of B, 1 .. K_MAX (register MAX_K)"),
    Reg("N", 0x18, "RW", 0, "[19:0] columns of B and of the result, 1 .. 2^dim_bits - 1"),
    Reg("FLAGS", 0x1C, "RW", 0, "[0] LOAD_C: start from the matrix at C_BASE (else +0); "
        "[1] OUT_BF16: write the result as bf16, rounded once (RNE), instead of fp32 (not for int8)"),
    Reg("A_BASE", 0x20, "RW", 0, "byte address of A[0][0] (M x K, row-major, input format), 32 B aligned"),
    Reg("A_STRIDE", 0x24, "RW", 0, "bytes from A[i][0] to A[i+1][0], a multiple of 32, >= K * operand bytes"),
    Reg("B_BASE", 0x28, "RW", 0, "byte address of B[0][0] (K x N, row-major), 32 B aligned"),
    Reg("B_STRIDE", 0x2C, "RW", 0, "bytes between rows of B, a multiple of 32, >= N * operand bytes"),
    Reg("C_BASE", 0x30, "RW", 0, "byte address of the initial C (M x N, fp32 / int32), 32 B aligned"),
    Reg("C_STRIDE", 0x34, "RW", 0, "bytes between rows of C, a multiple of 32, >= 4 N"),
    Reg("D_BASE", 0x38, "RW", 0, "byte address of the result D (M x N, fp32 / int32 or bf16), 32 B aligned"),
    Reg("D_STRIDE", 0x3C, "RW", 0, "bytes between rows of D, a multiple of 32, >= N * result bytes"),
    Reg("CYCLES", 0x40, "RO", 0, "clock cycles of the last run, from the START write to DONE"),
    Reg("MAX_K", 0x44, "RO", 0, "largest K the activation buffer holds (the reset value is it)"),
    # performance counters of the last run (cleared by START, counting while BUSY and not DONE); every
    # cycle of CYCLES is in exactly one of them or in the set-up (CYCLES minus their sum: descriptor
    # checks and blocking before the first beat can be offered)
    Reg("PERF_FEED", 0x48, "RO", 0, "cycles the MXU took an activation beat: M * ceil(K/R) * ceil(N/C) "
        "in every run"),
    Reg("PERF_WAIT_A", 0x4C, "RO", 0, "cycles without a beat because its row of A was not in the A bank "
        "yet (A loader behind: HBM latency or bandwidth)"),
    Reg("PERF_WAIT_W", 0x50, "RO", 0, "cycles a tile's first beat waited for the tile's weights (weight "
        "loader behind)"),
    Reg("PERF_WAIT_ACC", 0x54, "RO", 0, "cycles without a beat because no accumulator bank was free "
        "(write-back of an earlier group, or the initial C, not done)"),
    Reg("PERF_WAIT_DEP", 0x58, "RO", 0, "cycles without a beat because the partial sums it continues "
        "were still in the array (K-chain dependency)"),
    Reg("PERF_DRAIN", 0x5C, "RO", 0, "cycles from the cycle after the last beat to DONE (array latency "
        "and the last write-back)"),
)
#: the performance counters, in register order
PERF_COUNTERS = tuple(r.name for r in REGISTERS if r.name.startswith("PERF_"))
REG = {r.name: r for r in REGISTERS}


def axi4lite_signature(addr_bits: int = 7) -> wiring.Signature:
    """AXI4-Lite slave-side signature (ARM IHI 0022, B1), 32-bit data, flat AMBA names (Verilog
    ``<port>__awaddr``; cocotbext-axi attaches with the prefix ``"<port>_"``)."""
    return wiring.Signature({
        "awaddr": In(addr_bits), "awvalid": In(1), "awready": Out(1),
        "wdata": In(32), "wstrb": In(4), "wvalid": In(1), "wready": Out(1),
        "bresp": Out(2), "bvalid": Out(1), "bready": In(1),
        "araddr": In(addr_bits), "arvalid": In(1), "arready": Out(1),
        "rdata": Out(32), "rresp": Out(2), "rvalid": Out(1), "rready": In(1),
    })


def register_table_markdown(registers: tuple[Reg, ...] = REGISTERS, configured=("CONFIG", "MAX_K")) -> str:
    """A register map as a Markdown table (offset, name, access, reset, fields): the manual's.
    ``configured`` registers show "configuration" as their reset value.

    ``|`` and ``*`` in the field text are escaped so Markdown shows them as written."""
    lines = ["| offset | name | access | reset | fields |", "|---|---|---|---|---|"]
    for r in registers:
        fields = r.fields.replace("|", "\\|").replace("*", "\\*")
        lines.append(f"| 0x{r.offset:02X} | {r.name} | {r.access} | "
                     f"{'configuration' if r.name in configured else hex(r.reset)} | {fields} |")
    return "\n".join(lines)


def axil_write_side(m: Module, a):
    """The write side of an AXI4-Lite register slave ``a``: AW and W taken together when B is free,
    B (OKAY) the cycle after. Returns ``(take, word_address, byte_mask)``: the write strobe, AWADDR
    without its two low bits, and WSTRB widened to 32 bits."""
    bvalid = Signal()
    take_w = Signal()
    m.d.comb += [
        take_w.eq(a.awvalid & a.wvalid & ~bvalid),
        a.awready.eq(take_w), a.wready.eq(take_w),
        a.bvalid.eq(bvalid), a.bresp.eq(0),
    ]
    with m.If(take_w):
        m.d.sync += bvalid.eq(1)
    with m.Elif(a.bready):
        m.d.sync += bvalid.eq(0)
    return take_w, a.awaddr[2:], Cat(*(a.wstrb[i].replicate(8) for i in range(4)))


def axil_read_side(m: Module, a, registers, values: dict) -> None:
    """The read side of an AXI4-Lite register slave ``a``: R (OKAY) the cycle after AR with
    ``values[name]`` of the register at ARADDR among ``registers`` (0 outside the map)."""
    rvalid = Signal()
    rdata = Signal(32)
    m.d.comb += [a.arready.eq(~rvalid), a.rvalid.eq(rvalid), a.rdata.eq(rdata), a.rresp.eq(0)]
    raddr = a.araddr[2:]
    value = Const(0, 32)
    for r in registers:
        value = Mux(raddr == r.offset >> 2, values[r.name], value)
    with m.If(a.arvalid & ~rvalid):
        m.d.sync += [rvalid.eq(1), rdata.eq(value)]
    with m.Elif(a.rready):
        m.d.sync += rvalid.eq(0)


class CSRBlock(wiring.Component):
    """The register file behind an AXI4-Lite slave.

    Ports:
        axil: :func:`axi4lite_signature` (7-bit byte address).
        reg_<NAME>: Out(32) for every RW register (the value the engine reads).
        start: Out(1), one-cycle strobe on a write of 1 to CTRL[0] (the engine ignores it while busy).
        irq_en: Out(1), CTRL[1].
        done_clear: Out(1), one-cycle strobe on a write of 1 to STATUS[1].
        status: In(32), cycles: In(32): the read-only STATUS and CYCLES values.
        perf_<NAME>: In(32) for every register of :data:`PERF_COUNTERS` (read-only).

    Args:
        config_word: the CONFIG register value; max_k: the MAX_K register value.
    """

    RW = tuple(r.name for r in REGISTERS if r.access == "RW")

    def __init__(self, config_word: int, max_k: int):
        self.config_word, self.max_k = config_word, max_k
        members = {"axil": Out(axi4lite_signature()), "start": Out(1), "irq_en": Out(1),
                   "done_clear": Out(1), "status": In(32), "cycles": In(32)}
        for name in self.RW:
            members[f"reg_{name}"] = Out(32)
        for name in PERF_COUNTERS:
            members[f"perf_{name}"] = In(32)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        a = self.axil
        take_w, waddr, mask = axil_write_side(m, a)
        irq_en = Signal()
        m.d.comb += self.irq_en.eq(irq_en)
        start = Signal()
        done_clear = Signal()
        m.d.comb += [self.start.eq(start), self.done_clear.eq(done_clear)]
        m.d.sync += [start.eq(0), done_clear.eq(0)]
        regs = {}
        for name in self.RW:
            r = REG[name]
            q = Signal(32, name=f"r_{name}", init=r.reset)
            regs[name] = q
            m.d.comb += getattr(self, f"reg_{name}").eq(q)
            with m.If(take_w & (waddr == r.offset >> 2)):
                m.d.sync += q.eq((q & ~mask) | (a.wdata & mask))
        with m.If(take_w & (waddr == REG["CTRL"].offset >> 2)):
            with m.If(a.wstrb[0]):
                m.d.sync += [start.eq(a.wdata[0]), irq_en.eq(a.wdata[1])]
        with m.If(take_w & (waddr == REG["STATUS"].offset >> 2) & a.wstrb[0]):
            m.d.sync += done_clear.eq(a.wdata[1])
        values = dict(regs)
        values.update({"ID": Const(ENGINE_ID, 32), "CONFIG": Const(self.config_word, 32),
                       "CTRL": Cat(Const(0, 1), irq_en), "STATUS": self.status, "CYCLES": self.cycles,
                       "MAX_K": Const(self.max_k, 32)})
        values.update({name: getattr(self, f"perf_{name}") for name in PERF_COUNTERS})
        axil_read_side(m, a, REGISTERS, values)
        return m
