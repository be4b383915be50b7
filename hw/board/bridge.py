"""UART command bridge: a host loads matrices, programs the GEMM engine and reads results over a serial line.

Protocol (bytes on the line, multi-byte fields little-endian; every command is answered, in order):

=========  ==========================================  ==============================================
command    host sends                                  board answers
=========  ==========================================  ==============================================
``I`` 0x49  ``I``                                       16 bytes: ``"MXUB"``, protocol version (u16,
                                                        1), beat bytes (u16, 32), memory bytes (u32),
                                                        clock (u32, Hz)
``W`` 0x57  ``W``, address (u32), beats n (u16), then   status (1 byte) after the last beat is written
            n x 32 data bytes
``R`` 0x52  ``R``, address (u32), beats n (u16)         n x 32 data bytes, then status (1 byte)
``w`` 0x77  ``w``, register offset (u8), value (u32)    status (1 byte)
``r`` 0x72  ``r``, register offset (u8)                 value (u32), then status (1 byte)
other       any other byte                             ``?`` (0x3F); the byte is otherwise ignored
=========  ==========================================  ==============================================

Memory commands move whole 32-byte beats: the address's low 5 bits are ignored, beat i of a command
goes to ``address + 32 i``, byte j of a beat is memory byte ``address + 32 i + j``. Each beat is one
AXI4 single-beat INCR burst (AxLEN 0, AxSIZE 5) on the ``mem`` master; register commands are one
AXI4-Lite transfer on the ``csr`` master (the engine's register block, ``hw.engine.csr.REGISTERS``).
The status byte is the OR of the AXI responses of the command (0 OKAY, 2 SLVERR, 3 DECERR).
``n = 0`` moves nothing and answers the status 0.

The protocol has no framing: a host that stopped in the middle of a command (a cut cable, a killed
program) resets the board (``rst``: the FIRE 1 button on the ULX3S) before it talks again;
``verif.board_host.BoardLink`` checks the ``I`` answer first and says so when the board is out of step.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..config import check_int
from ..engine.csr import axi4lite_signature
from ..hbm.axi import axi4_signature

__all__ = ["UARTBridge", "CMD", "NAK", "PROTOCOL_VERSION", "INFO_MAGIC", "info_bytes"]

CMD = {"INFO": 0x49, "WRITE_MEM": 0x57, "READ_MEM": 0x52, "WRITE_REG": 0x77, "READ_REG": 0x72}
NAK = 0x3F
PROTOCOL_VERSION = 1
INFO_MAGIC = b"MXUB"
BEAT_BYTES = 32


def info_bytes(memory_bytes: int, clk_hz: int) -> bytes:
    """The 16-byte answer to ``I``."""
    return (INFO_MAGIC + PROTOCOL_VERSION.to_bytes(2, "little") + BEAT_BYTES.to_bytes(2, "little")
            + memory_bytes.to_bytes(4, "little") + clk_hz.to_bytes(4, "little"))


class UARTBridge(wiring.Component):
    """Command interpreter between a byte stream pair and two bus masters (see the module docstring).

    Ports:
        rx: In(stream.Signature(8)), bytes from the host.
        tx: Out(stream.Signature(8)), bytes to the host.
        mem: AXI4 master (:func:`~hw.hbm.axi.axi4_signature` flipped: ``address_bits``, 256-bit data,
            1-bit ID, always 0).
        csr: AXI4-Lite master (:func:`~hw.engine.csr.axi4lite_signature` flipped, 7-bit address).

    Args:
        address_bits: AXI address width, 6 .. 32 bits.
        memory_bytes: size of the memory behind ``mem`` (reported by ``I``), 1 .. 2^32 - 1.
        clk_hz: the clock frequency reported by ``I``, in Hz.

    Raises:
        ValueError: a parameter out of range (the message names it).
    """

    def __init__(self, address_bits: int, memory_bytes: int, clk_hz: int):
        check_int("address_bits", address_bits, 6, 32)
        check_int("memory_bytes", memory_bytes, 1, (1 << 32) - 1)
        check_int("clk_hz", clk_hz, 1, (1 << 32) - 1)
        self.address_bits, self.memory_bytes, self.clk_hz = address_bits, memory_bytes, clk_hz
        super().__init__({
            "rx": In(stream.Signature(8)),
            "tx": Out(stream.Signature(8)),
            "mem": In(axi4_signature(address_bits, BEAT_BYTES * 8, 1)),
            "csr": In(axi4lite_signature()),
        })

    def elaborate(self, platform):
        m = Module()
        rx, tx, mem, csr = self.rx, self.tx, self.mem, self.csr
        aw = self.address_bits
        cmd = Signal(8)
        hdr = Signal(48)            # header bytes enter at the top: after all of them, byte 0 is lowest
        hleft = Signal(range(7))
        buf = Signal(BEAT_BYTES * 8)  # a beat being received or any answer being sent (LSB first)
        bleft = Signal(range(BEAT_BYTES + 1))
        beats = Signal(16)
        addr = Signal(aw)
        resp = Signal(2)
        a_done = Signal()           # AW (AXI4-Lite AW, or AR) accepted
        w_done = Signal()
        byte = rx.payload
        info = int.from_bytes(info_bytes(self.memory_bytes, self.clk_hz), "little")

        # constant bus fields
        m.d.comb += [mem.awid.eq(0), mem.awlen.eq(0), mem.awsize.eq(5), mem.awburst.eq(1),
                     mem.arid.eq(0), mem.arlen.eq(0), mem.arsize.eq(5), mem.arburst.eq(1),
                     mem.awaddr.eq(Cat(Const(0, 5), addr[5:])), mem.araddr.eq(Cat(Const(0, 5), addr[5:])),
                     mem.wdata.eq(buf), mem.wstrb.eq(Const((1 << BEAT_BYTES) - 1, BEAT_BYTES)),
                     mem.wlast.eq(1),
                     csr.awaddr.eq(hdr[8:15]), csr.araddr.eq(hdr[40:47]), csr.wdata.eq(hdr[16:48]),
                     csr.wstrb.eq(0xF),
                     tx.payload.eq(buf[:8])]

        def send(nbytes, value=None):
            if value is not None:
                m.d.sync += buf.eq(value)
            m.d.sync += bleft.eq(nbytes)

        with m.FSM(name="bridge") as fsm:
            with m.State("CMD"):
                with m.If(rx.valid):
                    m.d.sync += [cmd.eq(byte), resp.eq(0), a_done.eq(0), w_done.eq(0)]
                    with m.Switch(byte):
                        with m.Case(CMD["WRITE_MEM"], CMD["READ_MEM"]):
                            m.d.sync += hleft.eq(6)
                            m.next = "HEADER"
                        with m.Case(CMD["WRITE_REG"]):
                            m.d.sync += hleft.eq(5)
                            m.next = "HEADER"
                        with m.Case(CMD["READ_REG"]):
                            m.d.sync += hleft.eq(1)
                            m.next = "HEADER"
                        with m.Case(CMD["INFO"]):
                            send(16, info)
                            m.next = "SEND"
                        with m.Default():
                            send(1, NAK)
                            m.next = "SEND"
            with m.State("HEADER"):
                with m.If(rx.valid):
                    m.d.sync += [hdr.eq(Cat(hdr[8:], byte)), hleft.eq(hleft - 1)]
                    with m.If(hleft == 1):
                        m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += [addr.eq(hdr[:32]), beats.eq(hdr[32:48]), bleft.eq(BEAT_BYTES)]
                no_beats = hdr[32:48] == 0               # a W or R of 0 beats only answers its status
                with m.Switch(cmd):
                    with m.Case(CMD["WRITE_MEM"]):
                        m.next = "W_DATA"
                        with m.If(no_beats):
                            m.next = "STATUS"
                    with m.Case(CMD["READ_MEM"]):
                        m.next = "R_ADDR"
                        with m.If(no_beats):
                            m.next = "STATUS"
                    with m.Case(CMD["WRITE_REG"]):
                        m.next = "CSR_WRITE"
                    with m.Default():
                        m.next = "CSR_READ_ADDR"

            def track_write(bus):
                """AW and W are offered until each is taken (they may go in different cycles)."""
                with m.If(bus.awready):
                    m.d.sync += a_done.eq(1)
                with m.If(bus.wready):
                    m.d.sync += w_done.eq(1)

            # ---- memory write: collect a beat, write it, repeat
            with m.State("W_DATA"):
                with m.If(rx.valid):
                    m.d.sync += [buf.eq(Cat(buf[8:], byte)), bleft.eq(bleft - 1)]
                    with m.If(bleft == 1):
                        m.d.sync += [a_done.eq(0), w_done.eq(0)]
                        m.next = "W_BUS"
            with m.State("W_BUS"):
                track_write(mem)
                with m.If(mem.bvalid):
                    m.d.sync += [resp.eq(resp | mem.bresp), beats.eq(beats - 1), addr.eq(addr + BEAT_BYTES),
                                 bleft.eq(BEAT_BYTES)]
                    with m.If(beats == 1):
                        m.next = "STATUS"
                    with m.Else():
                        m.next = "W_DATA"
            # ---- memory read: read a beat, send it, repeat
            with m.State("R_ADDR"):
                with m.If(mem.arready):
                    m.next = "R_DATA"
            with m.State("R_DATA"):
                with m.If(mem.rvalid):
                    m.d.sync += [buf.eq(mem.rdata), resp.eq(resp | mem.rresp), bleft.eq(BEAT_BYTES)]
                    m.next = "R_SEND"
            with m.State("R_SEND"):
                with m.If(tx.ready):
                    m.d.sync += [buf.eq(buf >> 8), bleft.eq(bleft - 1)]
                    with m.If(bleft == 1):
                        m.d.sync += [beats.eq(beats - 1), addr.eq(addr + BEAT_BYTES)]
                        with m.If(beats == 1):
                            m.next = "STATUS"
                        with m.Else():
                            m.next = "R_ADDR"
            # ---- registers
            with m.State("CSR_WRITE"):
                track_write(csr)
                with m.If(csr.bvalid):
                    m.d.sync += resp.eq(csr.bresp)
                    m.next = "STATUS"
            with m.State("CSR_READ_ADDR"):
                with m.If(csr.arready):
                    m.next = "CSR_READ_DATA"
            with m.State("CSR_READ_DATA"):
                with m.If(csr.rvalid):
                    send(5, Cat(csr.rdata, csr.rresp))
                    m.next = "SEND"
            # ---- answers
            with m.State("STATUS"):
                send(1, resp)
                m.next = "SEND"
            with m.State("SEND"):
                with m.If(tx.ready):
                    m.d.sync += [buf.eq(buf >> 8), bleft.eq(bleft - 1)]
                    with m.If(bleft == 1):
                        m.next = "CMD"

        # Handshake outputs as expressions of the state (continuous assignments in the Verilog: an
        # `always @*` block that sets them per state is not evaluated at time 0 by Icarus, and the
        # FIFO then missed the first byte's read strobe).
        def on(*states):
            return Cat(*(fsm.ongoing(st) for st in states)).any()
        m.d.comb += [
            rx.ready.eq(on("CMD", "HEADER", "W_DATA")), tx.valid.eq(on("SEND", "R_SEND")),
            mem.awvalid.eq(on("W_BUS") & ~a_done), mem.wvalid.eq(on("W_BUS") & ~w_done), mem.bready.eq(on("W_BUS")),
            mem.arvalid.eq(on("R_ADDR")), mem.rready.eq(on("R_DATA")),
            csr.awvalid.eq(on("CSR_WRITE") & ~a_done), csr.wvalid.eq(on("CSR_WRITE") & ~w_done),
            csr.bready.eq(on("CSR_WRITE")), csr.arvalid.eq(on("CSR_READ_ADDR")), csr.rready.eq(on("CSR_READ_DATA")),
        ]
        return m
