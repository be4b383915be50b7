"""Registers of a node's collective engine on an AXI4-Lite slave (the node's ``ccsr`` port).

Same conventions as the GEMM engine's (:mod:`hw.engine.csr`): 32-bit registers, writes when AW and
W are both there (WSTRB per byte), reads a cycle after AR, 0 outside the map. ``REGISTERS`` is the
single source of the map; the manual's table is generated from it.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.engine.csr import Reg, axi4lite_signature, axil_read_side, axil_write_side, register_table_markdown

from .config import CollectiveConfig, descriptor_layout

__all__ = ["COLLECTIVE_ID", "REGISTERS", "REG", "CollectiveCSR", "collective_register_table"]

COLLECTIVE_ID = 0x49434931  # "ICI1"

REGISTERS: tuple[Reg, ...] = (
    Reg("ID", 0x00, "RO", COLLECTIVE_ID, "0x49434931 (\"ICI1\")"),
    Reg("CONFIG", 0x04, "RO", 0, "[7:0] link bytes per beat, [15:8] largest ring (max_nodes), [16] int32 adds "
        "(int8 format; else fp32), [17] subnormals (0 ftz, 1 ieee), [31:24] slice, HBM beats"),
    Reg("CTRL", 0x08, "W1S", 0, "[0] START: write 1 to start the collective described below (ignored while "
        "busy); [1] IRQ_EN (read/write): drive `cirq` while DONE is set"),
    Reg("STATUS", 0x0C, "RW1C", 0, "[0] BUSY (RO); [1] DONE (write 1 to clear); [6:4] ERROR code of the last "
        "start (RO; 1 base or stride not 32 B aligned, 2 row_bytes not allowed, 3 stride < row_bytes, 4 nodes or "
        "rank out of range); [8] FRAMING_ERROR (RO, sticky): a neighbour's message did not end where this "
        "node's schedule did; [9] WRITE_ERROR (RO, sticky): a write got SLVERR"),
    Reg("OP", 0x10, "RW", 0, "[1:0] 0 all-gather, 1 reduce-scatter, 2 all-reduce; [4] bidirectional"),
    Reg("RING", 0x14, "RW", 0, "[7:0] nodes on the ring, 1 .. max_nodes; [15:8] this node's rank"),
    Reg("BASE", 0x18, "RW", 0, "byte address of the array's first row, 32 B aligned"),
    Reg("STRIDE", 0x1C, "RW", 0, "bytes between rows, a multiple of 32, >= ROW_BYTES"),
    Reg("ROWS", 0x20, "RW", 0, "[15:0] rows of the array (chunks are row ranges, as numpy.array_split)"),
    Reg("ROW_BYTES", 0x24, "RW", 0, "[15:0] bytes of a row, >= 1; a multiple of 4 for a reduction"),
    Reg("CYCLES", 0x28, "RO", 0, "clock cycles of the last collective, from START to DONE"),
)
REG = {r.name: r for r in REGISTERS}


def collective_register_table() -> str:
    """The map as the manual's Markdown table."""
    return register_table_markdown(REGISTERS, configured=("CONFIG",))


class CollectiveCSR(wiring.Component):
    """The collective engine's register file behind an AXI4-Lite slave.

    Ports:
        axil: :func:`~hw.engine.csr.axi4lite_signature` (7-bit byte address).
        desc: Out(descriptor_layout): the RW registers as the engine's descriptor.
        start: Out(1) strobe (CTRL[0] written 1). irq: Out(1): DONE and IRQ_EN.
        busy, done, framing_error, write_error: In(1); error: In(3); cycles: In(32): the engine's.

    Args:
        config: :class:`~hw.pod.config.CollectiveConfig` (the CONFIG value).
    """

    RW = tuple(r.name for r in REGISTERS if r.access == "RW")

    def __init__(self, config: CollectiveConfig):
        self.config = config
        super().__init__({"axil": Out(axi4lite_signature()), "desc": Out(descriptor_layout(config)),
                          "start": Out(1), "irq": Out(1), "busy": In(1), "done": In(1), "error": In(3),
                          "framing_error": In(1), "write_error": In(1), "cycles": In(32)})

    def config_word(self) -> int:
        c = self.config
        return (c.link.beat_bytes | c.max_nodes << 8 | (c.fmt == "int8") << 16 | (c.subnormals == "ieee") << 17
                | min(c.slice_hbm_beats, 255) << 24)

    def elaborate(self, platform):
        m = Module()
        a = self.axil
        take, waddr, mask = axil_write_side(m, a)
        regs = {}
        for name in self.RW:
            q = Signal(32, name=f"r_{name}")
            regs[name] = q
            with m.If(take & (waddr == REG[name].offset >> 2)):
                m.d.sync += q.eq((q & ~mask) | (a.wdata & mask))
        d = self.desc
        m.d.comb += [d.op.eq(regs["OP"][:2]), d.bidirectional.eq(regs["OP"][4]), d.nodes.eq(regs["RING"][:8]),
                     d.rank.eq(regs["RING"][8:16]), d.base.eq(regs["BASE"]), d.stride.eq(regs["STRIDE"]),
                     d.rows.eq(regs["ROWS"]), d.row_bytes.eq(regs["ROW_BYTES"])]
        irq_en, cleared = Signal(), Signal()
        m.d.sync += self.start.eq(0)
        with m.If(take & (waddr == REG["CTRL"].offset >> 2) & a.wstrb[0]):
            m.d.sync += [self.start.eq(a.wdata[0]), irq_en.eq(a.wdata[1])]
            with m.If(a.wdata[0]):
                m.d.sync += cleared.eq(0)
        with m.If(take & (waddr == REG["STATUS"].offset >> 2) & a.wstrb[0] & a.wdata[1]):
            m.d.sync += cleared.eq(1)
        done = self.done & ~cleared & ~self.start
        m.d.comb += self.irq.eq(done & irq_en)
        values = dict(regs)
        values.update({"ID": Const(COLLECTIVE_ID, 32), "CONFIG": Const(self.config_word(), 32),
                       "CTRL": Cat(Const(0, 1), irq_en),
                       "STATUS": Cat(self.busy, done, Const(0, 2), self.error, Const(0, 1), self.framing_error,
                                     self.write_error),
                       "CYCLES": self.cycles})
        axil_read_side(m, a, REGISTERS, values)
        return m
