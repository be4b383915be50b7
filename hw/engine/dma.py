"""AXI4 address-channel helper of the GEMM engine's DMA: split a transfer into legal INCR bursts.

AMBA AXI4 (ARM IHI 0022, A3.4.1): an INCR burst has at most 256 beats and must not cross a 4 KiB
address boundary. The engine's loaders ask for "``beats`` consecutive full-width beats from ``addr``";
:class:`BurstSplitter` turns that into one or more AxADDR/AxLEN handshakes.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..config import check_pow2

__all__ = ["BurstSplitter"]


class BurstSplitter(wiring.Component):
    """Split ``cmd`` transfers into AXI4 INCR bursts.

    Ports:
        cmd: In stream ``{addr: addr_bits, beats: beat_bits}``: a transfer of ``beats`` >= 1 beats of
            ``beat_bytes`` bytes from the ``beat_bytes``-aligned byte address ``addr``.
        ax: Out stream ``{addr: addr_bits, len: 8}``: one burst (AxLEN = beats - 1), at most 256 beats
            and never crossing a 4 KiB boundary. One burst per cycle. A transfer is taken into
            registers when ``cmd`` fires and its first burst is offered the next cycle (1 cycle of
            latency); a second transfer waits in a spare register while the first is cut, so
            back-to-back transfers still give one burst per cycle.
        busy: Out(1): a transfer is held or waiting (bursts of it are still to be offered).

    ``cmd.ready`` is a register (the spare is empty) and the bursts are cut from registers only, so a
    loader's path cursor -> transfer geometry -> ``cmd`` ends at this block's flip-flops and the
    burst arithmetic (4 KiB boundary, 256-beat limit) does not reach back into the loader. That cut
    is what lets the engine's loops close timing (ECP5-85k, 8x8 int8 engine parts: the write-address
    loop went from 39.7 MHz to 87 MHz with this and its own registered row segment).

    Args:
        addr_bits: byte-address width in bits.
        beat_bytes: bytes per beat, a power of two from 1 to 4096.
        beat_bits: width of ``beats`` in bits.
    """

    def __init__(self, addr_bits: int, beat_bytes: int, beat_bits: int = 24):
        check_pow2("beat_bytes", beat_bytes, 1, 4096)
        self.addr_bits, self.beat_bytes, self.beat_bits = addr_bits, beat_bytes, beat_bits
        super().__init__({
            "cmd": In(stream.Signature(data.StructLayout({"addr": addr_bits, "beats": beat_bits}))),
            "ax": Out(stream.Signature(data.StructLayout({"addr": addr_bits, "len": 8}))),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lg = self.beat_bytes.bit_length() - 1
        busy = Signal()                     # a transfer is held
        addr = Signal(self.addr_bits)       # its next burst's byte address
        left = Signal(self.beat_bits)       # its beats not yet offered
        spare = Signal()                    # a second transfer waits
        sp_addr = Signal(self.addr_bits)
        sp_beats = Signal(self.beat_bits)
        # beats up to the next 4 KiB boundary: 1 .. 4096 / beat_bytes
        to_4k = Signal(range(4096 // self.beat_bytes + 1))
        m.d.comb += to_4k.eq((4096 - (addr & 4095)) >> lg)
        n = Signal(range(257))
        n_a = Mux(left < to_4k, left, to_4k)
        m.d.comb += n.eq(Mux(n_a < 256, n_a, 256))
        go = Signal()
        free = Signal()                     # the held transfer is done after this cycle
        take = Signal()
        m.d.comb += [
            self.ax.valid.eq(busy),
            go.eq(busy & self.ax.ready),
            free.eq(~busy | (go & (left == n))),
            self.ax.payload.addr.eq(addr),
            self.ax.payload.len.eq(n - 1),
            self.cmd.ready.eq(~spare),
            take.eq(self.cmd.valid & ~spare),
            self.busy.eq(busy | spare),
        ]
        with m.If(go):
            m.d.sync += [addr.eq(addr + (n << lg)), left.eq(left - n)]
        with m.If(free):
            with m.If(spare):
                m.d.sync += [busy.eq(1), addr.eq(sp_addr), left.eq(sp_beats), spare.eq(0)]
            with m.Elif(take):
                m.d.sync += [busy.eq(1), addr.eq(self.cmd.payload.addr), left.eq(self.cmd.payload.beats)]
            with m.Else():
                m.d.sync += busy.eq(0)
        with m.Elif(take):
            m.d.sync += [spare.eq(1), sp_addr.eq(self.cmd.payload.addr), sp_beats.eq(self.cmd.payload.beats)]
        return m
