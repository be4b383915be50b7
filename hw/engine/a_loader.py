"""The A loader: rows of A from memory into two ping-pong A banks, in passes."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import BEAT_BYTES
from .cursor import attach_cursor
from .dma import BurstSplitter
from .interface import (
    EnginePart,
    Geometry,
    LoopEnd,
    ar_signature,
    lg,
    loop_control,
    mux_min,
    r_signature,
    seq_port_signature,
)

__all__ = ["ALoader"]


class ALoader(EnginePart):
    """Read each m-block's rows of A (``rb`` beats each) into one of two A banks.

    Every m-block is read in *passes* of ``QF`` = 2 * NSUB beats of every row (pass p: beats
    [p*QF, (p+1)*QF) of rows 0..mb-1), so its first k-blocks can run after about mb * QF beats instead
    of the whole block (mb * rb beats); ``progress`` tells the feeder how far the bank being stored
    has got. A bank is claimed by the read side when its first pass starts (it must be free), marked
    ``full`` when its last beat is stored and released by the feeder after the block's last group.
    Each bank holds ``ABUF_DEPTH`` words of NSUB beats, ``wpr`` words per row (one memory per beat of
    a word, so one read gives the feeder a whole chunk of R operands).

    Ports:
        desc: In(descriptor_layout); run, go, prep: In(1) (from the descriptor unit).
        seq_read, seq_store: Out(seq_port_signature): the read and store sides' m-block lookups.
        ar: Out(:func:`~hw.engine.interface.ar_signature`): read bursts (AXI4 AR, ``mem_a``).
        r: In(:func:`~hw.engine.interface.r_signature`): read data, in AR order (always ready).
        free: In(1), free_bank: In(1): the feeder is done with a bank (strobe).
        full: Out(2): bank b is loaded; store_bank: Out(1): the bank being stored; progress:
            Out(range(RB_MAX + 1)): beats of every row of ``store_bank`` stored so far.
        rd_addr: In(lg(ABUF_DEPTH) + 1) (bank in the top bit), rd_en: In(1), rd_data: Out(NSUB * 256):
            the feeder's read port (data one cycle after ``rd_en``).

    Raises:
        TypeError: ``config`` is not an EngineConfig.
    """

    def members(self, g: Geometry) -> dict:
        return {
            **loop_control(g),
            "seq_read": Out(seq_port_signature(g)), "seq_store": Out(seq_port_signature(g)),
            "ar": Out(ar_signature(g)), "r": In(r_signature()),
            "free": In(1), "free_bank": In(1),
            "full": Out(2), "store_bank": Out(1), "progress": Out(range(g.RB_MAX + 1)),
            "rd_addr": In(lg(g.ABUF_DEPTH) + 1), "rd_en": In(1), "rd_data": Out(g.NSUB * BEAT_BYTES * 8),
        }

    def elaborate(self, platform):
        m = Module()
        g, d = self.geom, self.desc
        D, NSUB, lgNSUB = g.D, g.NSUB, lg(g.NSUB)
        mbits = range(g.m_block + 1)
        rbits = range(g.RB_MAX + 1)      # a beat of an A row, a row's beats
        busy = Signal(2)       # bank claimed by the read side, released by the feeder
        full = Signal(2)       # bank loaded
        m.d.comb += self.full.eq(full)
        wps, rps = [], []
        for s_ in range(NSUB):
            m.submodules[f"abuf{s_}"] = mem = Memory(shape=BEAT_BYTES * 8, depth=2 * g.ABUF_DEPTH, init=[])
            wps.append(mem.write_port())
            rps.append(mem.read_port())
        for rp in rps:
            m.d.comb += [rp.addr.eq(self.rd_addr), rp.en.eq(self.rd_en)]
        m.d.comb += self.rd_data.eq(Cat(*(rp.data for rp in rps)))


        def pass_beats(pb):
            """(beats per row of a pass, beats of this row in the pass starting at beat pb)"""
            q = mux_min(g.QF, d.rb)
            return q, mux_min(q, d.rb - pb)

        def beats_left(name, q):
            """A row's beats after the current pass, rb - pb - q (negative in a short last pass), as a
            register, so a pass step reads no adder and compare of pb against the descriptor. Returns
            (the register, whether another pass follows: it is above 0, its value at a block's first
            pass, the next pass's beats min(q, left))."""
            left = Signal(range(-g.QF, g.RB_MAX + 1), name=name)
            more = Signal(name=name.replace("left", "more"))
            m.d.comb += more.eq(~left[-1] & left.any())
            return left, more, d.rb - q, mux_min(q, left[:-1])

        # ---- read side: one transfer per row and pass
        ai = attach_cursor(m, "read_cursor", self, self.seq_read)
        m.submodules.split = sp = BurstSplitter(g.A32, BEAT_BYTES)
        wiring.connect(m, wiring.flipped(self.ar), sp.ax)
        ai_i = Signal(mbits)
        ai_bank = Signal()
        ai_addr = Signal(g.A32 + D)            # address of row i of the block, pass start
        ai_baddr = Signal(g.A32 + D)           # address of row 0 of the block
        ai_pb = Signal(rbits)                  # first beat of the current pass
        # the request's address, ai_addr + ai_pb beats, kept in registers (row 0's in ai_preq) so the
        # splitter's burst arithmetic starts from a flip-flop, not from an adder
        ai_req = Signal(g.A32 + D)
        ai_preq = Signal(g.A32 + D)
        # the request's beats, pass_beats(ai_pb)[1], also a register: loaded with the value for the pass
        # ai_pb takes next, so the descriptor compare and subtract are not in front of the splitter
        # (the engine's and the board's critical path ran desc.rb -> min -> splitter -> AR -> memory)
        ai_q, _ = pass_beats(ai_pb)
        ai_beats = Signal(rbits)
        ai_left, ai_more, ai_left_first, ai_next_beats = beats_left("ai_left", ai_q)
        # the row loop's end from registers (LoopEnd), so no ai_i -> +1 -> compare with the cursor's
        # mb chain sits in front of next_mblock and the cursor's registers
        ai_i_end = LoopEnd(ai_i, ai.mb, "ai_i", ai.mb_one)
        with m.If(self.go):
            m.d.sync += [ai_i.eq(0), ai_bank.eq(0), ai_addr.eq(d.a_base), ai_baddr.eq(d.a_base), ai_pb.eq(0),
                         ai_req.eq(d.a_base), ai_preq.eq(d.a_base), ai_beats.eq(pass_beats(0)[1]),
                         ai_left.eq(ai_left_first), *ai_i_end.restart()]
        ai_can = self.run & ai.ok & ~ai.fin & (~ai_i_end.first | (ai_pb != 0) | ~busy.bit_select(ai_bank, 1))
        m.d.comb += [sp.cmd.valid.eq(ai_can), sp.cmd.payload.addr.eq(ai_req),
                     sp.cmd.payload.beats.eq(ai_beats)]
        claim = Signal()
        m.d.comb += claim.eq(sp.cmd.valid & sp.cmd.ready & ai_i_end.first & (ai_pb == 0))
        with m.If(sp.cmd.valid & sp.cmd.ready):
            with m.If(~ai_i_end.last):
                m.d.sync += [ai_i.eq(ai_i + 1), ai_addr.eq(ai_addr + d.a_stride), ai_req.eq(ai_req + d.a_stride),
                             *ai_i_end.step()]
            with m.Elif(ai_more):
                pass_addr = ai_preq + (ai_q << lg(BEAT_BYTES))
                m.d.sync += [ai_i.eq(0), ai_pb.eq(ai_pb + ai_q), ai_addr.eq(ai_baddr), ai_req.eq(pass_addr),
                             ai_preq.eq(pass_addr), ai_beats.eq(ai_next_beats),
                             ai_left.eq(ai_left - ai_q), *ai_i_end.restart()]
            with m.Else():
                nxt = ai_addr + d.a_stride
                m.d.sync += [ai_i.eq(0), ai_pb.eq(0), ai_bank.eq(~ai_bank), ai_addr.eq(nxt), ai_baddr.eq(nxt),
                             ai_req.eq(nxt), ai_preq.eq(nxt), ai_beats.eq(pass_beats(0)[1]),
                             ai_left.eq(ai_left_first), *ai_i_end.restart()]
                m.d.comb += ai.next_mblock.eq(1)

        # ---- store side: beats -> A bank (same pass order)
        ac = attach_cursor(m, "store_cursor", self, self.seq_store)
        ac_i = Signal(mbits)
        ac_j = Signal(rbits)                   # beat within the pass
        ac_pb = Signal(rbits)
        ac_bank = Signal()
        ac_row = Signal(range(g.ABUF_DEPTH + 1))    # i * wpr
        fill = Signal()
        prog = Signal(rbits)                   # beats of every row of bank ac_bank already stored
        m.d.comb += [self.store_bank.eq(ac_bank), self.progress.eq(prog)]
        ac_q, _ = pass_beats(ac_pb)
        # as on the read side, and the row's beats in this pass less one (the row's end is an equality)
        ac_last = Signal(rbits)
        ac_left, ac_more, ac_left_first, ac_next_beats = beats_left("ac_left", ac_q)
        first_pass = [ac_last.eq(pass_beats(0)[1] - 1), ac_left.eq(ac_left_first)]
        with m.If(self.go):
            m.d.sync += [ac_i.eq(0), ac_j.eq(0), ac_pb.eq(0), ac_bank.eq(0), ac_row.eq(0), prog.eq(0), *first_pass]
        m.d.comb += self.r.ready.eq(1)
        beat = self.r.valid
        ac_bi = ac_pb + ac_j                   # beat index in the row
        word = ac_row + (ac_bi >> lgNSUB)
        for s_, wp in enumerate(wps):
            sub_hit = (ac_bi[:lgNSUB] == s_) if NSUB > 1 else Const(1)
            m.d.comb += [wp.addr.eq(Cat(word[:lg(g.ABUF_DEPTH)], ac_bank)), wp.data.eq(self.r.payload.data),
                         wp.en.eq(beat & sub_hit)]
        row_end = ac_j == ac_last
        pass_end = row_end & (ac_i + 1 == ac.mb)
        m.d.comb += fill.eq(beat & pass_end & ~ac_more)
        with m.If(beat):
            with m.If(~row_end):
                m.d.sync += ac_j.eq(ac_j + 1)
            with m.Elif(~pass_end):
                m.d.sync += [ac_j.eq(0), ac_i.eq(ac_i + 1), ac_row.eq(ac_row + d.wpr)]
            with m.Elif(ac_more):
                m.d.sync += [ac_j.eq(0), ac_i.eq(0), ac_row.eq(0), ac_pb.eq(ac_pb + ac_q), prog.eq(ac_pb + ac_q),
                             ac_last.eq(ac_next_beats - 1), ac_left.eq(ac_left - ac_q)]
            with m.Else():
                m.d.sync += [ac_j.eq(0), ac_i.eq(0), ac_row.eq(0), ac_pb.eq(0), prog.eq(0), ac_bank.eq(~ac_bank),
                             *first_pass]
                m.d.comb += ac.next_mblock.eq(1)

        # ---- bank hand-shake
        for b in range(2):
            with m.If(self.go):
                m.d.sync += [busy[b].eq(0), full[b].eq(0)]
            with m.Else():
                with m.If(claim & (ai_bank == b)):
                    m.d.sync += busy[b].eq(1)
                with m.If(fill & (ac_bank == b)):
                    m.d.sync += full[b].eq(1)
                with m.If(self.free & (self.free_bank == b)):
                    m.d.sync += [busy[b].eq(0), full[b].eq(0)]
        return m
