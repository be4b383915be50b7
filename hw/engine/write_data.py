"""The write-back's data side: finished accumulator rows, converted, as AXI4 write beats."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .config import BEAT_BYTES
from .cursor import attach_cursor
from .interface import AccState, EnginePart, Geometry, LoopEnd, lg, loop_control, result_bytes, seq_port_signature
from .write_address import row_segment

__all__ = ["WriteData", "w_layout"]


def w_layout() -> data.StructLayout:
    """AXI4 write-data beat: ``data`` (256 bits), ``strb`` (32 bits, byte i = data bits 8i..8i+7),
    ``last`` (WLAST)."""
    return data.StructLayout({"data": BEAT_BYTES * 8, "strb": BEAT_BYTES, "last": 1})


def _to_bf16(x):
    """fp32 -> bf16, RNE (IEEE 754-2019 §4.3.1), NaN -> canonical quiet NaN 0x7FC0.

    The upper half plus one when the dropped half is above half an ulp, or exactly half with the
    kept half odd: a 16-bit increment (the same value as ``(x + 0x7FFF + x[16])[16:32]``, without a
    32-bit carry chain)."""
    nan = (x[23:31] == 0xFF) & (x[:23] != 0)
    up = x[15] & (x[16] | (x[:15] != 0))
    return Mux(nan, 0x7FC0, (x[16:32] + up)[:16])


class WriteData(EnginePart):
    """Read each finished result row from its accumulator bank and write it: fp32 / int32 entries as
    they are, or (FLAGS.OUT_BF16) rounded once to bf16, in pieces of at most 32 B packed into beats
    whose WSTRB covers exactly the columns < N of the group's segment.

    A row may be written once its last entry holds its final value: the bank is DONE, or READY with
    enough output beats written (during the group's last k-block pass, the row's last entry is output
    number (KB * Gc - 1) * mb + i + 1; the base is computed in three registered steps after each group
    change, and the write-back holds for those three cycles). Three stages (accumulator read; select
    the piece's entries; round them to bf16 and shift the piece into its beat) feed a 16-beat FIFO; W
    beats leave when the beat and its burst's AWLEN are both there.

    Ports:
        desc: In(descriptor_layout); run, go, prep: In(1).
        seq: Out(seq_port_signature): this side's m-block lookup.
        acc_state_next: In(ArrayLayout(AccState, 2)), rows_done_next: In(ArrayLayout(range(m_block + 1),
            2)): the banks' states and complete rows (the collector wrote the row's last output beat)
            after this clock edge, unless the write-back frees the bank in this cycle.
        rd_addr: Out(range(ACCD)), rd_en: Out(1), rd_data: In(ArrayLayout(32 * C, 2)): accumulator read port.
        free: Out(1), free_bank: Out(1): the group's last row is read (strobe).
        wlen: In(stream.Signature(8)): AWLEN of the bursts, in order (from the address side).
        w: Out(stream.Signature(w_layout())): write beats (``mem_c`` W).
        idle: Out(1): every row is read and every beat has left.

    Raises:
        TypeError: ``config`` is not an EngineConfig.
    """

    def members(self, g: Geometry) -> dict:
        return {
            **loop_control(g),
            "seq": Out(seq_port_signature(g)),
            "acc_state_next": In(data.ArrayLayout(AccState, 2)),
            "rows_done_next": In(data.ArrayLayout(range(g.m_block + 1), 2)),
            "rd_addr": Out(range(g.ACCD)), "rd_en": Out(1), "rd_data": In(data.ArrayLayout(32 * g.C, 2)),
            "free": Out(1), "free_bank": Out(1),
            "wlen": In(stream.Signature(8)), "w": Out(stream.Signature(w_layout())), "idle": Out(1),
        }

    def elaborate(self, platform):  # noqa: C901 (one pipeline, written out)
        m = Module()
        g, d = self.geom, self.desc
        C, D, BB, WB, lgC = g.C, g.D, BEAT_BYTES, BEAT_BYTES * 8, lg(g.C)
        wd = attach_cursor(m, "cursor", self, self.seq)
        x_i = Signal(range(g.m_block + 1))
        x_off = Signal(D + 12)         # byte offset of the piece in the row
        x_bank = Signal()
        x_addr = Signal(range(g.ACCD))      # g * mb + i of the piece's entry
        x_q = Signal(range(8 * C // BB + 2))
        # the group's row segment changes only with the group: registered, valid one edge after the
        # group change, inside x_settle's window below (it was the write-back's critical path:
        # group size -> segment end -> piece bytes, 82-90 logic levels on ECP5)
        xs_c, xe_c = row_segment(wd, d, lgC)
        xs = Signal(len(xs_c))
        xe = Signal(len(xe_c))
        m.d.sync += [xs.eq(xs_c), xe.eq(xe_c)]
        PB = Mux(d.out_bf16, min(C * 2, BB), min(C * 4, BB))     # piece bytes
        PPE = Mux(d.out_bf16, max(1, C * 2 // BB), max(1, C * 4 // BB))  # pieces per entry
        WFD = 16
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=WB + BB, depth=WFD)
        x_go = Signal()
        # x_settle holds the write-back for three cycles after every group change (edge E0: the
        # group's last piece read): the values that follow the cursor settle inside it (below);
        # the window is as long as the row check's three-step product once needed, and is kept
        # because shortening it changes the engine's cycle counts
        x_settle = Signal(2, init=3)
        # the cursor steps a cycle after the group's last piece is read (`step`): the read decision
        # does not fan out into the cursor's registers and the sequencer's port (the engine's and the
        # board's critical paths ended there). Its new values are first needed after x_settle's
        # window, which counts the cycles in which the cursor's entry is in the sequencer's table
        # (the old group's in the window's first cycle: the next block's entry is written long
        # before the write-back, the last of the loops, reaches it)
        step = Signal()
        m.d.comb += wd.next_group.eq(step)
        with m.If((x_settle != 0) & wd.ok):
            m.d.sync += x_settle.eq(x_settle - 1)
        # row x_i is complete when the collector has written its last output beat (last k-block, last
        # n-block of the group): a compare of two row counters, each bank's before the bank is chosen
        # (registered a cycle ahead from the bank's state and complete rows after the edge, for the
        # row x_i is at and the next one, the read of that cycle choosing; after a group change x_i
        # and the bank change, and the window below recomputes it before the first read. The row
        # counters' compare and the bank's state were in front of x_go.)
        def row_ready_for(i):
            return Cat(*((self.acc_state_next[b] == AccState.DONE)
                         | ((self.acc_state_next[b] == AccState.READY) & (self.rows_done_next[b] > i))
                         for b in range(2))).bit_select(x_bank, 1)
        rr_same, rr_inc, xi_inc = Signal(), Signal(), Signal()
        m.d.sync += [rr_same.eq(row_ready_for(x_i)), rr_inc.eq(row_ready_for(x_i + 1))]
        row_ready = Mux(xi_inc, rr_inc, rr_same)
        # (a piece in each of stages B and C may still close a beat: WFD - 4 leaves them room)
        # FIFO room and the row's last piece, each a register loaded a cycle ahead (exactly the
        # compares of this cycle's values): the FIFO level's adder and the piece's offset compare were
        # in front of x_go and through it of the cursor's step (the board top's and an engine
        # placement's critical paths)
        room = Signal()
        do_write = fifo.w_en & fifo.w_rdy
        m.d.sync += room.eq(Mux(fifo.r_en & fifo.r_rdy, fifo.level + do_write <= WFD - 3,
                                fifo.level + do_write <= WFD - 4))
        last_piece = Signal()
        m.d.comb += x_go.eq(self.run & wd.ok & ~wd.fin & row_ready & room & (x_settle == 0))
        closes = last_piece | (((x_off + PB) & (BB - 1)) == 0)
        x_vb = Mux(PB < xe - x_off, PB, xe - x_off)
        i_end = LoopEnd(x_i, wd.mb, "x_i", wd.mb_one)
        group_end = last_piece & i_end.last
        m.d.comb += [self.rd_addr.eq(x_addr), self.rd_en.eq(x_go),
                     self.free.eq(x_go & group_end), self.free_bank.eq(x_bank)]
        # stage B registers
        y_valid = Signal()
        y_bank = Signal()
        y_q = Signal.like(x_q)
        y_pos = Signal(range(BB))
        y_vb = Signal(range(BB + 1))
        y_closes = Signal()
        m.d.sync += [y_valid.eq(x_go), step.eq(x_go & group_end), xi_inc.eq(x_go & last_piece & ~i_end.last)]
        # last_piece for the offset after the edge: the next piece's (x_off + 2 PB), a new row's
        # (xs + PB), or, without a step, this offset's against the row end of this cycle; after a new
        # group's first offset the row end settles inside x_settle's window (the cursor after E1, xe
        # after E2, this flag after E3, the first read in the cycle after E3)
        m.d.sync += last_piece.eq(Mux(x_go & ~last_piece, x_off + 2 * PB >= xe,
                                      Mux(x_go & ~i_end.last, xs + PB >= xe, x_off + PB >= xe)))
        with m.If(x_go):
            m.d.sync += [y_bank.eq(x_bank), y_q.eq(x_q), y_pos.eq(x_off[:lg(BB)]), y_vb.eq(x_vb), y_closes.eq(closes)]
            with m.If(last_piece):
                # next row (or next group)
                m.d.sync += x_q.eq(0)
                with m.If(~i_end.last):
                    m.d.sync += [x_i.eq(x_i + 1), x_addr.eq(x_i + 1), x_off.eq(xs), *i_end.step()]
                with m.Else():
                    m.d.sync += [x_i.eq(0), x_addr.eq(0), x_bank.eq(~x_bank), x_settle.eq(3), *i_end.restart()]
                    nxt_nb0 = Mux(wd.last_group, 0, wd.nb0 + wd.gc)
                    m.d.sync += x_off.eq(result_bytes(nxt_nb0 << lgC, d.out_bf16))
            with m.Else():
                m.d.sync += x_off.eq(x_off + PB)
                with m.If(x_q + 1 == PPE):
                    m.d.sync += [x_q.eq(0), x_addr.eq(x_addr + wd.mb)]
                with m.Else():
                    m.d.sync += x_q.eq(x_q + 1)
        with m.If(self.go):
            m.d.sync += [x_i.eq(0), x_bank.eq(0), x_addr.eq(0), x_q.eq(0), x_off.eq(0), x_settle.eq(3),
                         *i_end.restart()]

        # stage B: select the piece's entries (fp32: a beat's worth; bf16: the entries of a beat's
        # worth after rounding) and register them; stage C: round to bf16, then shift the piece into
        # its beat. The bf16 rounding's carry chain sits behind the register, not behind the
        # accumulator's block RAM (clock-to-output 5.8 ns at ECP5 speed grade 6: with the rounding
        # and the piece selection in front of one register, the board top's critical path).
        entry = Mux(y_bank, self.rd_data[1], self.rd_data[0])
        EB = min(C, 16) * 32  # bits of the entries behind one bf16 piece (at most 16 entries: 32 B)

        def chunk(bits, width, count):
            """The ``y_q``-th ``width``-bit chunk of ``bits`` (``count`` chunks)."""
            if count <= 1:
                return bits
            out = Const(0, width)
            for q in range(count):
                out = Mux(y_q == q, bits[q * width:(q + 1) * width], out)
            return out

        p32 = chunk(entry, WB, C * 4 // BB)
        raw = Signal(EB if not g.is_int8 else min(32 * C, WB))
        z_valid = Signal()
        z_pos = Signal.like(y_pos)
        z_vb = Signal.like(y_vb)
        z_closes = Signal()
        m.d.sync += z_valid.eq(y_valid)
        with m.If(y_valid):
            raw_next = p32 if g.is_int8 else Mux(d.out_bf16, chunk(entry, EB, C * 2 // BB), p32)
            m.d.sync += [raw.eq(raw_next), z_pos.eq(y_pos), z_vb.eq(y_vb), z_closes.eq(y_closes)]
        piece = Signal(WB)
        if g.is_int8:  # no bf16 output: the flag gives zeros
            m.d.comb += piece.eq(Mux(d.out_bf16, 0, raw))
        else:
            conv = Cat(*(_to_bf16(raw[32 * c:32 * c + 32]) for c in range(EB // 32)))
            m.d.comb += piece.eq(Mux(d.out_bf16, conv, raw[:min(EB, WB)]))
        asm_d = Signal(WB)
        asm_s = Signal(BB)
        shifted = Signal(WB)
        strb = Signal(BB)
        m.d.comb += [shifted.eq(piece << (z_pos * 8)), strb.eq((((Const(1, BB + 1) << z_vb) - 1) << z_pos)[:BB])]
        m.d.comb += [fifo.w_data.eq(Cat(asm_d | shifted, asm_s | strb)), fifo.w_en.eq(z_valid & z_closes)]
        with m.If(z_valid):
            with m.If(z_closes):
                m.d.sync += [asm_d.eq(0), asm_s.eq(0)]
            with m.Else():
                m.d.sync += [asm_d.eq(asm_d | shifted), asm_s.eq(asm_s | strb)]

        # W channel: a beat leaves when its burst's AWLEN is known (WLAST)
        w_cnt = Signal(8)
        w = self.w
        m.d.comb += [
            w.valid.eq(fifo.r_rdy & self.wlen.valid),
            w.payload.data.eq(fifo.r_data[:WB]), w.payload.strb.eq(fifo.r_data[WB:]),
            w.payload.last.eq(w_cnt == self.wlen.payload),
            fifo.r_en.eq(w.valid & w.ready), self.wlen.ready.eq(w.valid & w.ready & w.payload.last),
        ]
        with m.If(w.valid & w.ready):
            m.d.sync += w_cnt.eq(Mux(w.payload.last, 0, w_cnt + 1))
        with m.If(self.go):
            m.d.sync += w_cnt.eq(0)
        m.d.comb += self.idle.eq(wd.fin & ~fifo.r_rdy & ~y_valid & ~z_valid)
        return m
