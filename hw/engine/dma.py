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
            and never crossing a 4 KiB boundary. One burst per cycle; a transfer that needs one burst
            passes through in the cycle it is offered; ``cmd.ready`` rises in the cycle the last burst
            of a transfer is taken.

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
        })

    def elaborate(self, platform):
        m = Module()
        lg = self.beat_bytes.bit_length() - 1
        busy = Signal()                     # a transfer is part-way through
        addr = Signal(self.addr_bits)
        left = Signal(self.beat_bits)
        cur_addr = Signal(self.addr_bits)
        cur_left = Signal(self.beat_bits)
        m.d.comb += [cur_addr.eq(Mux(busy, addr, self.cmd.payload.addr)),
                     cur_left.eq(Mux(busy, left, self.cmd.payload.beats))]
        # beats up to the next 4 KiB boundary: 1 .. 4096 / beat_bytes
        to_4k = Signal(range(4096 // self.beat_bytes + 1))
        m.d.comb += to_4k.eq((4096 - (cur_addr & 4095)) >> lg)
        n = Signal(range(257))
        n_a = Mux(cur_left < to_4k, cur_left, to_4k)
        m.d.comb += n.eq(Mux(n_a < 256, n_a, 256))
        last = Signal()
        go = Signal()
        m.d.comb += [
            last.eq(cur_left == n),
            self.ax.valid.eq(busy | self.cmd.valid),
            go.eq(self.ax.valid & self.ax.ready),
            self.ax.payload.addr.eq(cur_addr),
            self.ax.payload.len.eq(n - 1),
            self.cmd.ready.eq(go & last),
        ]
        with m.If(go):
            m.d.sync += [busy.eq(~last), addr.eq(cur_addr + (n << lg)), left.eq(cur_left - n)]
        return m
