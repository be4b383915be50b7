"""The write-back's address side: one AXI4 write transfer per result row segment."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .config import BEAT_BYTES
from .cursor import attach_cursor
from .dma import BurstSplitter
from .interface import EnginePart, Geometry, ar_signature, lg, loop_control, result_bytes, seq_port_signature

__all__ = ["WriteAddress", "row_segment"]


def segment_columns(cur, lgC):
    """Columns [nb0*C, (nb0 + gc)*C) of a group's result rows, before the cut at N (``cur``: a
    :class:`~hw.engine.cursor.BlockCursor`)."""
    return cur.nb0 << lgC, (cur.nb0 + cur.gc) << lgC


def segment_bytes(col0, col1, d):
    """Bytes [start, end) of the row segment of columns [col0, min(col1, N)) at 2 (bf16) or 4 bytes
    each (``d``: the descriptor)."""
    return result_bytes(col0, d.out_bf16), result_bytes(Mux(col1 < d.n, col1, d.n), d.out_bf16)


def row_segment(cur, d, lgC):
    """Bytes [start, end) of a group's result row segment: columns nb0*C .. min((nb0 + gc)*C, N) at
    2 (bf16) or 4 bytes each (``cur``: a :class:`~hw.engine.cursor.BlockCursor`; ``d``: the
    descriptor)."""
    return segment_bytes(*segment_columns(cur, lgC), d)


class WriteAddress(EnginePart):
    """Issue the result's write bursts: for each m-block, group and row, the row segment's beats as
    INCR bursts (split at 256 beats and 4 KiB). Addresses need no data, so this side runs ahead of the
    data (the memory holds each burst until its W beats come); each burst's AWLEN goes into an 8-deep
    FIFO that the data side reads to place WLAST, and AW waits while that FIFO is full.

    Ports:
        desc: In(descriptor_layout); run, go, prep: In(1).
        seq: Out(seq_port_signature): this side's m-block lookup.
        aw: Out(ar_signature): write bursts (``mem_c`` AW).
        wlen: Out(stream.Signature(8)): AWLEN of each burst issued, in order.
        b: In(1): a write response taken this cycle.
        idle: Out(1): every row is issued and every burst's response is in.

    Raises:
        TypeError: ``config`` is not an EngineConfig.
    """

    def members(self, g: Geometry) -> dict:
        return {
            **loop_control(g),
            "seq": Out(seq_port_signature(g)), "aw": Out(ar_signature(g)), "wlen": Out(stream.Signature(8)),
            "b": In(1), "idle": Out(1),
        }

    def elaborate(self, platform):
        m = Module()
        g, d = self.geom, self.desc
        BB, D = BEAT_BYTES, g.D
        cur = attach_cursor(m, "cursor", self, self.seq)
        m.submodules.split = sp = BurstSplitter(g.A32, BB)
        m.submodules.wlen = wlen = SyncFIFOBuffered(width=8, depth=8)
        i = Signal(range(g.m_block + 1))
        row = Signal(g.A32 + D + 9)
        mrow = Signal(g.A32 + D + 9)
        with m.If(self.go):
            m.d.sync += [i.eq(0), row.eq(d.d_base), mrow.eq(d.d_base)]
        # The group's row segment in beats and its first row's address, computed in three registered
        # steps (they change only with the cursor; in one cycle, group size -> segment -> beats ->
        # splitter was this loop's critical path, 91 logic levels on ECP5, and an address adder in
        # front of the splitter ran on into the memory's AW checks). seg_v[j]: step j + 1 holds the
        # cursor's present group (a group change or the sequencer's entry arriving restarts it).
        # Bursts run ahead of the data, so the three cycles per group cost no GEMM cycles.
        lgC = lg(g.C)
        change = cur.next_group | self.go | self.prep
        seg_v = Signal(3)
        m.d.sync += seg_v.eq(Mux(change, 0, Cat(cur.ok, seg_v[:2])))
        col0 = Signal(D + lgC)                 # first column of the segment
        col1 = Signal(D + lgC + 1)             # one past its last column, before the cut at N
        m.d.sync += [c.eq(v) for c, v in zip((col0, col1), segment_columns(cur, lgC))]
        start = Signal(D + lgC + 2)            # bytes
        end = Signal(D + lgC + 2)
        m.d.sync += [b.eq(v) for b, v in zip((start, end), segment_bytes(col0, col1, d))]
        beats = Signal(len(sp.cmd.payload.beats))
        m.d.sync += beats.eq(((end - 1) >> lg(BB)) - (start >> lg(BB)) + 1)
        # row + the segment's first beat, in step 3 beside ``beats``; then one stride per row
        addr = Signal(len(row))
        with m.If(~seg_v[2]):
            m.d.sync += addr.eq(row + ((start >> lg(BB)) << lg(BB)))
        m.d.comb += [sp.cmd.valid.eq(self.run & seg_v[2] & cur.ok & ~cur.fin),
                     sp.cmd.payload.addr.eq(addr), sp.cmd.payload.beats.eq(beats)]
        with m.If(sp.cmd.valid & sp.cmd.ready):
            with m.If(i + 1 != cur.mb):
                m.d.sync += [i.eq(i + 1), row.eq(row + d.d_stride), addr.eq(addr + d.d_stride)]
            with m.Else():
                m.d.sync += i.eq(0)
                m.d.comb += cur.next_group.eq(1)
                nxt = row + d.d_stride         # = m0's row + mb * stride (no multiplier)
                m.d.sync += [mrow.eq(Mux(cur.last_group, nxt, mrow)), row.eq(Mux(cur.last_group, nxt, mrow))]
        m.d.comb += [
            self.aw.payload.eq(sp.ax.payload), self.aw.valid.eq(sp.ax.valid & wlen.w_rdy),
            sp.ax.ready.eq(self.aw.ready & wlen.w_rdy),
            wlen.w_data.eq(sp.ax.payload.len), wlen.w_en.eq(self.aw.valid & self.aw.ready),
            self.wlen.valid.eq(wlen.r_rdy), self.wlen.payload.eq(wlen.r_data), wlen.r_en.eq(self.wlen.ready),
        ]
        aw_count = Signal(32)
        b_count = Signal(32)
        with m.If(self.go):
            m.d.sync += [aw_count.eq(0), b_count.eq(0)]
        with m.Else():
            with m.If(self.aw.valid & self.aw.ready):
                m.d.sync += aw_count.eq(aw_count + 1)
            with m.If(self.b):
                m.d.sync += b_count.eq(b_count + 1)
        m.d.comb += self.idle.eq(cur.fin & ~sp.busy & (b_count == aw_count))
        return m
