"""The accumulator banks and the collector of the MXU's output beats."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .cursor import attach_cursor
from .interface import AccState, EnginePart, Geometry, LoopEnd, loop_control, seq_port_signature

__all__ = ["Accumulator"]


class Accumulator(EnginePart):
    """Two banks of ``ACCD`` entries of C x 32 bits (ping-pong by group) and the collector that writes
    every MXU output beat into them.

    A bank goes FREE -> (LOADING ->) READY when the C0 loader starts a group in it, LOADING -> READY
    when its C0 is stored, READY -> DONE with the group's last output beat, DONE (or READY) -> FREE
    when the write-back has read its last row. ``wcount`` counts the output beats written into the
    bank since the group started: the feeder's K-chain check (a beat of k-block >= 1 waits until the
    output it continues is written) and the write-back's row check read it. The MXU's output stream
    is always ready (the array is built without back-pressure). Entry (g, i) of a group is at
    address g * mb + i.

    Ports:
        desc: In(descriptor_layout); go, prep: In(1).
        seq: Out(seq_port_signature): the collector's m-block lookup.
        out: In(stream.Signature(32 * C)): the MXU's output beats (``ready`` is 1).
        c0_start, c0_start_bank, c0_done, c0_done_bank: In(1): from the C0 loader.
        c0_valid, c0_bank: In(1), c0_addr: In(range(ACCD)), c0_data: In(32 * C), c0_lanes: In(C): a C0 beat.
        wb_free, wb_free_bank: In(1): the write-back read the group's last row (strobe).
        state: Out(ArrayLayout(AccState, 2)); wcount: Out(ArrayLayout(range(GROUP_BEATS + 1), 2)); rows_done:
            Out(ArrayLayout(range(m_block + 1), 2)), rows of the bank's group whose last output beat
            (last k-block, last n-block) is written (the write-back's row check);
        state_next, rows_done_next: Out, the same after this clock edge unless the write-back frees
            the bank in this cycle (``wb_free``);
        bank_busy: Out(2): the collector writes bank b this cycle (the C0 beat waits).
        fd_addr: In(range(ACCD)), fd_en: In(1); fd_data: Out(ArrayLayout(32 * C, 2)): the feeder's read port
            (both banks).
        wb_addr: In(range(ACCD)), wb_en: In(1); wb_data: Out(ArrayLayout(32 * C, 2)): the write-back's read port.

    Raises:
        TypeError: ``config`` is not an EngineConfig.
    """

    def members(self, g: Geometry) -> dict:
        entry = 32 * g.C
        abits = range(g.ACCD)  # entry addresses: a group's entries fit a bank
        return {
            **loop_control(g, run=False), "seq": Out(seq_port_signature(g)),
            "out": In(stream.Signature(entry)),
            "c0_start": In(1), "c0_start_bank": In(1), "c0_done": In(1), "c0_done_bank": In(1),
            "c0_valid": In(1), "c0_bank": In(1), "c0_addr": In(abits), "c0_data": In(entry), "c0_lanes": In(g.C),
            "wb_free": In(1), "wb_free_bank": In(1),
            "state": Out(data.ArrayLayout(AccState, 2)), "wcount": Out(data.ArrayLayout(range(g.GROUP_BEATS + 1), 2)),
            "rows_done": Out(data.ArrayLayout(range(g.m_block + 1), 2)),
            "state_next": Out(data.ArrayLayout(AccState, 2)),
            "rows_done_next": Out(data.ArrayLayout(range(g.m_block + 1), 2)),
            "bank_busy": Out(2),
            "fd_addr": In(abits), "fd_en": In(1), "fd_data": Out(data.ArrayLayout(entry, 2)),
            "wb_addr": In(abits), "wb_en": In(1), "wb_data": Out(data.ArrayLayout(entry, 2)),
        }

    def elaborate(self, platform):
        m = Module()
        g, d = self.geom, self.desc
        C = g.C
        co = attach_cursor(m, "cursor", self, self.seq)
        state = [Signal(AccState, name=f"acc{b}_state") for b in range(2)]
        wcount = [Signal(range(g.GROUP_BEATS + 1), name=f"acc{b}_wcount") for b in range(2)]
        rows_done = [Signal(range(g.m_block + 1), name=f"acc{b}_rows_done") for b in range(2)]
        for b in range(2):
            m.d.comb += [self.state[b].eq(state[b]), self.wcount[b].eq(wcount[b]), self.rows_done[b].eq(rows_done[b])]

        # ---- collector: output beat -> (k-block, n-block of the group, row)
        o_kb = Signal(range(g.KB_MAX))
        o_g = Signal(range(g.ACCD))
        o_i = Signal(range(g.m_block + 1))
        o_addr = Signal(range(g.ACCD))
        o_bank = Signal()
        # loop ends from registers (LoopEnd): no adder in front of the cursor's step
        i_end, g_end = LoopEnd(o_i, co.mb, "o_i", co.mb_one), LoopEnd(o_g, co.gc, "o_g", co.gc_one)
        kb_end = LoopEnd(o_kb, d.kb, "o_kb")
        with m.If(self.go):
            m.d.sync += [o_kb.eq(0), o_g.eq(0), o_i.eq(0), o_addr.eq(0), o_bank.eq(0), *i_end.restart(),
                         *g_end.restart(), *kb_end.restart()]
        beat = self.out.valid
        m.d.comb += [self.out.ready.eq(1), self.bank_busy.eq(Mux(beat, 1 << o_bank, 0))]
        group_end = i_end.last & g_end.last & kb_end.last
        with m.If(beat):
            with m.If(~i_end.last):
                m.d.sync += [o_i.eq(o_i + 1), o_addr.eq(o_addr + 1), *i_end.step()]
            with m.Else():
                m.d.sync += [o_i.eq(0), *i_end.restart()]
                with m.If(~g_end.last):
                    m.d.sync += [o_g.eq(o_g + 1), o_addr.eq(o_addr + 1), *g_end.step()]
                with m.Elif(~kb_end.last):
                    m.d.sync += [o_g.eq(0), o_kb.eq(o_kb + 1), o_addr.eq(0), *g_end.restart(), *kb_end.step()]
                with m.Else():
                    m.d.sync += [o_g.eq(0), o_kb.eq(0), o_addr.eq(0), o_bank.eq(~o_bank), *g_end.restart(),
                                 *kb_end.restart()]
                    m.d.comb += co.next_group.eq(1)

        # ---- banks: one write port (the collector, or the C0 loader: never the same bank at once)
        for b in range(2):
            m.submodules[f"bank{b}"] = mem = Memory(shape=32 * C, depth=g.ACCD, init=[])
            wp = mem.write_port(granularity=32)
            fd, wb = mem.read_port(), mem.read_port()
            col_hit = beat & (o_bank == b)
            c0_hit = self.c0_valid & (self.c0_bank == b)
            m.d.comb += [
                wp.addr.eq(Mux(col_hit, o_addr, self.c0_addr)),
                wp.data.eq(Mux(col_hit, self.out.payload, self.c0_data)),
                wp.en.eq(Mux(col_hit, Const((1 << C) - 1, C), Mux(c0_hit, self.c0_lanes, 0))),
                fd.addr.eq(self.fd_addr), fd.en.eq(self.fd_en), self.fd_data[b].eq(fd.data),
                wb.addr.eq(self.wb_addr), wb.en.eq(self.wb_en), self.wb_data[b].eq(wb.data),
            ]

        # ---- bank states; the state and complete rows after the edge unless the write-back frees
        # the bank in this cycle are outputs too (the write-back registers its row check from them)
        for b in range(2):
            st_n, rd_n = self.state_next[b], self.rows_done_next[b]
            m.d.comb += [st_n.eq(state[b]), rd_n.eq(rows_done[b])]
            with m.If(self.go):
                m.d.comb += [st_n.eq(AccState.FREE), rd_n.eq(0)]
                m.d.sync += wcount[b].eq(0)
            with m.Else():
                with m.If(self.c0_start & (self.c0_start_bank == b)):
                    m.d.comb += st_n.eq(Mux(d.load_c, AccState.LOADING, AccState.READY))
                with m.If(self.c0_done & (self.c0_done_bank == b)):
                    m.d.comb += st_n.eq(AccState.READY)
                with m.If(beat & (o_bank == b)):
                    m.d.sync += wcount[b].eq(wcount[b] + 1)
                    with m.If(g_end.last & kb_end.last):
                        m.d.comb += rd_n.eq(rows_done[b] + 1)
                    with m.If(group_end):
                        m.d.comb += st_n.eq(AccState.DONE)
            freed = ~self.go & self.wb_free & (self.wb_free_bank == b)
            m.d.sync += [state[b].eq(Mux(freed, AccState.FREE, st_n)), rows_done[b].eq(Mux(freed, 0, rd_n))]
            with m.If(freed):
                m.d.sync += wcount[b].eq(0)
        return m
