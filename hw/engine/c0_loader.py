"""The C0 loader: a group's initial partial sums from memory into its accumulator bank."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .config import BEAT_BYTES
from .cursor import attach_cursor
from .dma import BurstSplitter
from .interface import (
    AccState,
    EnginePart,
    Geometry,
    LoopEnd,
    ar_signature,
    lg,
    loop_control,
    r_signature,
    seq_port_signature,
)

__all__ = ["C0Loader"]


class C0Loader(EnginePart):
    """Start each group in a free accumulator bank: with FLAGS.LOAD_C, read the group's rows of C0
    (fp32 / int32, ``CS`` beats per entry or ``CPART`` entries per beat) into the bank (FREE ->
    LOADING -> READY); without it, claim the bank as READY at once (the feeder then reads +0).

    Rows arrive in order, so the feeder may start a group's first k-block once the C0 rows it feeds
    are stored (``store_row_next``). A C0 beat waits while the collector writes the same bank (one write
    port per bank).

    Ports:
        desc: In(descriptor_layout); run, go, prep: In(1).
        seq_read, seq_store: Out(seq_port_signature): the read and store sides' m-block lookups (the
            store side holds the sequencer back only with LOAD_C: without it, it never moves).
        ar: Out(ar_signature): C0 read bursts (``mem_c``); r: In(r_signature): read data in AR order.
        acc_state: In(ArrayLayout(AccState, 2)): the accumulator banks; bank_busy: In(2): the
            collector writes bank b this cycle.
        start: Out(1), start_bank: Out(1): a group starts in bank ``start_bank`` (strobe).
        group_done: Out(1), done_bank: Out(1): the group's last C0 beat is stored (strobe).
        wr_valid: Out(1), wr_bank: Out(1), wr_addr: Out(range(ACCD)), wr_data: Out(32 * C),
            wr_lanes: Out(C): a C0 beat for the accumulator (lanes to write).
        store_bank: Out(1): the bank the store side is at; store_row_next: Out(range(m_block + 1)):
            the row it is at after this clock edge (rows before it are stored), so a reader can
            register its compare with the row a cycle ahead.

    Raises:
        TypeError: ``config`` is not an EngineConfig.
    """

    def members(self, g: Geometry) -> dict:
        return {
            **loop_control(g),
            "seq_read": Out(seq_port_signature(g)), "seq_store": Out(seq_port_signature(g)),
            "ar": Out(ar_signature(g)), "r": In(r_signature()),
            "acc_state": In(data.ArrayLayout(AccState, 2)), "bank_busy": In(2),
            "start": Out(1), "start_bank": Out(1), "group_done": Out(1), "done_bank": Out(1),
            "wr_valid": Out(1), "wr_bank": Out(1), "wr_addr": Out(range(g.ACCD)), "wr_data": Out(32 * g.C),
            "wr_lanes": Out(g.C), "store_bank": Out(1), "store_row_next": Out(range(g.m_block + 1)),
        }

    def elaborate(self, platform):
        m = Module()
        g, d = self.geom, self.desc
        C, D, CS, CPART, BB, lgC = g.C, g.D, g.CS, g.CPART, BEAT_BYTES, lg(g.C)
        mbits = range(g.m_block + 1)


        def geometry(nbC):
            """(byte offset of the entry segment in its row, beats to read)"""
            rem = d.n - nbC
            cols = Mux(rem < C, rem, C)
            if CS > 1:
                return nbC << 2, (cols * 4 + BB - 1) >> lg(BB)
            return ((nbC << 2) >> lg(BB)) << lg(BB), Const(1, 2)

        # ---- read side: one transfer per (row, n-block) of the group
        ci = attach_cursor(m, "read_cursor", self, self.seq_read, 1)
        m.submodules.split = sp = BurstSplitter(g.A32, BB)
        wiring.connect(m, wiring.flipped(self.ar), sp.ax)
        ci_i = Signal(mbits)
        ci_g = Signal(range(g.ACCD))
        ci_nbC = Signal(D + 9)
        ci_bank = Signal()
        ci_started = Signal()
        ci_row = Signal(g.A32 + D + 9)      # C row address of (m0 + i)
        ci_mrow = Signal(g.A32 + D + 9)     # C row address of m0
        # the request's address and beats are registers, loaded with the values of the segment read
        # next (so the row-geometry arithmetic and the address adder are not in front of the splitter)
        ci_addr = Signal(g.A32 + D + 9)
        ci_beats = Signal(range(CS + 2))

        def ci_request(row, nbC):
            off, beats = geometry(nbC)
            return [ci_row.eq(row), ci_nbC.eq(nbC), ci_addr.eq(row + off), ci_beats.eq(beats)]

        ci_g_end, ci_i_end = LoopEnd(ci_g, ci.gc, "ci_g", ci.gc_one), LoopEnd(ci_i, ci.mb, "ci_i", ci.mb_one)
        with m.If(self.go):
            m.d.sync += [ci_i.eq(0), ci_g.eq(0), ci_bank.eq(0), ci_started.eq(0), ci_mrow.eq(d.c_base),
                         *ci_request(d.c_base, 0), *ci_g_end.restart(), *ci_i_end.restart()]
        ci_active = self.run & ci.ok & ~ci.fin
        begin = ci_active & ~ci_started & (self.acc_state[ci_bank] == AccState.FREE)
        m.d.comb += [self.start.eq(begin), self.start_bank.eq(ci_bank)]
        m.d.comb += [sp.cmd.valid.eq(ci_active & ci_started), sp.cmd.payload.addr.eq(ci_addr),
                     sp.cmd.payload.beats.eq(ci_beats)]

        def advance_group():
            m.d.comb += ci.next_group.eq(1)
            m.d.sync += [
                ci_started.eq(0), ci_bank.eq(~ci_bank), ci_i.eq(0), ci_g.eq(0), *ci_g_end.restart(),
                *ci_i_end.restart(),
                # after the block's last row ci_row = m0's row + (mb - 1) * stride, so the next block
                # starts one stride further (no stride x mb multiplier; without C0 the rows are not
                # walked and not used either)
                ci_mrow.eq(Mux(ci.last_group, ci_row + d.c_stride, ci_mrow)),
                *ci_request(Mux(ci.last_group, ci_row + d.c_stride, ci_mrow),
                            Mux(ci.last_group, 0, (ci.nb0 + ci.gc) << lgC)),
            ]

        with m.If(begin):
            with m.If(d.load_c):
                m.d.sync += ci_started.eq(1)
            with m.Else():
                advance_group()
        with m.If(sp.cmd.valid & sp.cmd.ready):
            with m.If(~ci_g_end.last):
                m.d.sync += [ci_g.eq(ci_g + 1), *ci_g_end.step(), *ci_request(ci_row, ci_nbC + C)]
            with m.Elif(~ci_i_end.last):
                m.d.sync += [ci_g.eq(0), ci_i.eq(ci_i + 1), *ci_g_end.restart(), *ci_i_end.step(),
                             *ci_request(ci_row + d.c_stride, ci.nb0 << lgC)]
            with m.Else():
                advance_group()

        # ---- store side: beats -> accumulator lanes
        cc = attach_cursor(m, "store_cursor", self, self.seq_store, d.load_c)
        cc_i = Signal(mbits)
        cc_i_next = Signal(mbits)               # cc_i after the edge (the feeder's row check a cycle ahead)
        m.d.comb += cc_i_next.eq(cc_i)
        m.d.sync += cc_i.eq(cc_i_next)
        cc_g = Signal(range(g.ACCD))
        cc_nbC = Signal(D + 9)
        cc_q = Signal(range(CS + 1))
        cc_bank = Signal()
        cc_addr = Signal(range(g.ACCD))
        cc_rowaddr = Signal(range(g.ACCD))
        cc_g_end, cc_i_end = LoopEnd(cc_g, cc.gc, "cc_g", cc.gc_one), LoopEnd(cc_i, cc.mb, "cc_i", cc.mb_one)
        # the entry's beats: a register loaded with the n-block's (as the read side's request)
        cc_beats = Signal(range(CS + 2))

        def cc_entry(nbC):
            return [cc_nbC.eq(nbC), cc_beats.eq(geometry(nbC)[1])]

        with m.If(self.go):
            m.d.comb += cc_i_next.eq(0)
            m.d.sync += [cc_g.eq(0), cc_q.eq(0), cc_bank.eq(0), cc_addr.eq(0), cc_rowaddr.eq(0),
                         *cc_entry(0), *cc_g_end.restart(), *cc_i_end.restart()]
        beat = Signal()
        m.d.comb += [self.r.ready.eq(~self.bank_busy.bit_select(cc_bank, 1)), beat.eq(self.r.valid & self.r.ready),
                     self.store_bank.eq(cc_bank), self.store_row_next.eq(cc_i_next)]
        rdata = self.r.payload.data
        if CS > 1:
            m.d.comb += [self.wr_data.eq(rdata.replicate(CS)),
                         self.wr_lanes.eq(Cat(*((cc_q == q).replicate(8) for q in range(CS))))]
        else:
            part = (cc_nbC >> lgC)[:max(1, lg(CPART))] if CPART > 1 else Const(0, 1)
            sel = Const(0, 32 * C)
            for p_ in range(CPART):
                sel = Mux(part == p_, rdata[p_ * 32 * C:(p_ + 1) * 32 * C], sel)
            m.d.comb += [self.wr_data.eq(sel), self.wr_lanes.eq(Const((1 << C) - 1, C))]
        m.d.comb += [self.wr_valid.eq(beat), self.wr_bank.eq(cc_bank), self.wr_addr.eq(cc_addr)]
        last_entry = cc_q + 1 == cc_beats
        with m.If(beat):
            with m.If(~last_entry):
                m.d.sync += cc_q.eq(cc_q + 1)
            with m.Else():
                m.d.sync += cc_q.eq(0)
                with m.If(~cc_g_end.last):
                    m.d.sync += [cc_g.eq(cc_g + 1), *cc_g_end.step(), *cc_entry(cc_nbC + C),
                                 cc_addr.eq(cc_addr + cc.mb)]
                with m.Elif(~cc_i_end.last):
                    m.d.comb += cc_i_next.eq(cc_i + 1)
                    m.d.sync += [cc_g.eq(0), *cc_g_end.restart(), *cc_i_end.step(),
                                 *cc_entry(cc.nb0 << lgC), cc_addr.eq(cc_rowaddr + 1), cc_rowaddr.eq(cc_rowaddr + 1)]
                with m.Else():
                    m.d.comb += cc_i_next.eq(0)
                    m.d.sync += [cc_g.eq(0), cc_addr.eq(0), cc_rowaddr.eq(0), cc_bank.eq(~cc_bank),
                                 *cc_g_end.restart(), *cc_i_end.restart(),
                                 *cc_entry(Mux(cc.last_group, 0, (cc.nb0 + cc.gc) << lgC))]
                    m.d.comb += cc.next_group.eq(1)
        m.d.comb += [self.group_done.eq(beat & last_entry & cc_g_end.last & cc_i_end.last),
                     self.done_bank.eq(cc_bank)]
        return m
