"""AXI4 address-channel helper of the GEMM engine's DMA: split a transfer into legal INCR bursts.

AMBA AXI4 (ARM IHI 0022, A3.4.1): an INCR burst has at most 256 beats and must not cross a 4 KiB
address boundary. The engine's loaders ask for "``beats`` consecutive full-width beats from ``addr``";
:class:`BurstSplitter` turns that into one or more AxADDR/AxLEN handshakes.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
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
            and never crossing a 4 KiB boundary. One burst per cycle. With no transfer held, a
            request's first burst is offered in the cycle of the request (no added latency) and the
            request is taken at once, what remains of it held in registers; while a transfer is held
            a second request waits in a spare register.
        busy: Out(1): a transfer is held or waiting (bursts of it are still to be offered).

    ``cmd.ready`` is a register (no transfer held, or the spare empty), so a loader's path cursor ->
    transfer geometry -> ``cmd.ready`` -> cursor is cut at this block: the burst arithmetic (4 KiB
    boundary, 256-beat limit) no longer feeds back into the loader's next decision. A registered
    splitter (the first burst a cycle after the request) was tried: the same cut, but the added
    cycle on every weight and A transfer cost the 16x16 engine 0.7 % of a 256^3 GEMM's cycles.

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
        # the burst on offer: the held transfer's next one, or with none held the request's first
        cur_addr = Signal(self.addr_bits)
        cur_left = Signal(self.beat_bits)
        m.d.comb += [cur_addr.eq(Mux(busy, addr, self.cmd.payload.addr)),
                     cur_left.eq(Mux(busy, left, self.cmd.payload.beats))]
        # beats up to the next 4 KiB boundary (1 .. 4096 / beat_bytes), capped at 256: a burst that
        # is not its transfer's last ends at the cap, so the next one starts at the next 4 KiB page
        # (or 256 beats on, when the cap is 256 beats short of the page): no adder on the address.
        # Everything is kept minus one: beats to the boundary - 1 is the complement of the beat's
        # index in its page (4095 - x = ~x), so the address reaches AxLEN through one compare and no
        # subtractor (the request's address and beats come from the loaders' registers, and AxLEN
        # runs on into the memory's burst checks)
        page = 4096 // self.beat_bytes
        to_4k_m1 = Signal(range(page))      # beats to the boundary - 1
        m.d.comb += to_4k_m1.eq(~cur_addr[lg:12] if page > 1 else 0)
        cap = Signal(range(257))
        cap_m1 = Signal(8)                  # the burst's beats - 1 unless it is the transfer's last
        by_len = Signal()                   # the 256-beat limit, not the page, ends the burst
        if page > 256:
            m.d.comb += [by_len.eq(to_4k_m1[8:].any()), cap_m1.eq(Mux(by_len, 255, to_4k_m1[:8]))]
        else:
            m.d.comb += cap_m1.eq(to_4k_m1)
        m.d.comb += cap.eq(cap_m1 + 1)      # (only into the held transfer's registers)
        left_m1 = Signal(self.beat_bits)    # beats >= 1
        m.d.comb += left_m1.eq(cur_left - 1)
        last = Signal()                     # the burst on offer is its transfer's last
        # (the high bits' zero test beside an 8-bit compare, not one carry chain through all of them)
        m.d.comb += last.eq((left_m1[8:] == 0) & (left_m1[:8] <= cap_m1))
        len_ = Signal(8)
        m.d.comb += len_.eq(Mux(last, left_m1[:8], cap_m1))
        next_addr = Signal(self.addr_bits)  # where the transfer goes on after a burst that is not last
        next_page = Cat(Const(0, 12), cur_addr[12:] + 1)
        if page > 256:
            m.d.comb += next_addr.eq(Mux(by_len, cur_addr + (256 << lg), next_page))
        else:
            m.d.comb += next_addr.eq(next_page)
        go = Signal()
        done = Signal()                     # the burst on offer is its transfer's last and is taken
        take = Signal()
        m.d.comb += [
            self.ax.valid.eq(busy | self.cmd.valid),
            go.eq(self.ax.valid & self.ax.ready),
            done.eq(go & last),
            self.ax.payload.addr.eq(cur_addr),
            self.ax.payload.len.eq(len_),
            self.cmd.ready.eq(~busy | ~spare),
            take.eq(self.cmd.valid & self.cmd.ready),
            self.busy.eq(busy | spare),
        ]
        with m.If(~busy):
            # the request is taken at once; what its first burst leaves is held
            with m.If(take & ~done):
                m.d.sync += [busy.eq(1), addr.eq(Mux(go, next_addr, cur_addr)), left.eq(cur_left - Mux(go, cap, 0))]
        with m.Elif(done):
            with m.If(spare):
                m.d.sync += [addr.eq(sp_addr), left.eq(sp_beats), spare.eq(0)]
            with m.Elif(take):
                m.d.sync += [addr.eq(self.cmd.payload.addr), left.eq(self.cmd.payload.beats)]
            with m.Else():
                m.d.sync += busy.eq(0)
        with m.Else():
            with m.If(go):
                m.d.sync += [addr.eq(next_addr), left.eq(left - cap)]
            with m.If(take):
                m.d.sync += [spare.eq(1), sp_addr.eq(self.cmd.payload.addr), sp_beats.eq(self.cmd.payload.beats)]
        return m
