"""One direction of a node's collective engine: schedule, reads, the combiner, writes."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from hw.hbm.axi import AXI_INCR, axi4_signature
from hw.ici.config import message_signature

from .combiner import Combiner
from .config import HBM_BEAT_BYTES, CollectiveConfig, descriptor_layout, is_drain
from .row_walker import RowWalker
from .schedule import RingSchedule

__all__ = ["RingUnit"]


class RingUnit(wiring.Component):
    """One ring direction of a collective: :class:`RingSchedule` commands, a :class:`RowWalker` for
    the reads (AR) and one for the writes (AW), the :class:`Combiner` between the R data, the link
    and the W data; the drains' local reads (:func:`~hw.pod.config.is_drain`: a reduce-scatter's
    last phase, which runs beside the next slice's first phase and its reads) have a walker and a
    read-only AXI4 port of their own, so neither read stream waits behind the other's R data.

    Ports:
        desc: In(descriptor_layout), held; start: In(1) strobe.
        axi: In(:func:`~hw.hbm.axi.axi4_signature`) flipped: an AXI4 master (1-bit IDs, always 0;
            32 B beats, INCR). axi_drain: the same, reads only (AWVALID and WVALID held low).
        tx: Out(message_signature): to the next node in this direction. rx: In(message_signature):
            from the previous one.
        done: Out(1): every command is through and every write answered (B), until the next start.
        framing_error: Out(1): see :class:`Combiner`. write_error: Out(1): a B with SLVERR (sticky).

    Args:
        config: :class:`CollectiveConfig`.
        ccw: this is the counter-clockwise direction.
    """

    def __init__(self, config: CollectiveConfig, ccw: bool = False):
        self.config, self.ccw = config, ccw
        msg = message_signature(config.link)
        super().__init__({"desc": In(descriptor_layout(config)), "start": In(1),
                          "axi": In(axi4_signature(config.address_bits, HBM_BEAT_BYTES * 8, 1)),
                          "axi_drain": In(axi4_signature(config.address_bits, HBM_BEAT_BYTES * 8, 1)),
                          "tx": Out(msg), "rx": In(msg),
                          "done": Out(1), "framing_error": Out(1), "write_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg, axi = self.config, self.axi
        m.submodules.sched = sched = RingSchedule(cfg, ccw=self.ccw)
        m.submodules.reads = rd = RowWalker(cfg)
        m.submodules.drain_reads = drd = RowWalker(cfg)
        m.submodules.writes = wr = RowWalker(cfg)
        m.submodules.comb = cb = Combiner(cfg)
        m.submodules.wlen = wlen = SyncFIFOBuffered(width=8, depth=8)
        d = self.desc
        m.d.comb += [sched.desc.eq(d), sched.start.eq(self.start),
                     rd.stride.eq(d.stride), drd.stride.eq(d.stride), wr.stride.eq(d.stride),
                     cb.row_bytes.eq(d.row_bytes)]
        wiring.connect(m, sched.comb, cb.cmd)
        to_drain = is_drain(sched.read.payload)
        m.d.comb += [rd.cmd.payload.eq(sched.read.payload), drd.cmd.payload.eq(sched.read.payload),
                     rd.cmd.valid.eq(sched.read.valid & ~to_drain), drd.cmd.valid.eq(sched.read.valid & to_drain),
                     sched.read.ready.eq(Mux(to_drain, drd.cmd.ready, rd.cmd.ready))]
        wiring.connect(m, sched.write, wr.cmd)
        wiring.connect(m, cb.tx, wiring.flipped(self.tx))
        wiring.connect(m, wiring.flipped(self.rx), cb.remote)
        # reads: AR from the walker, R straight into the combiner (AR order, so slice order)
        m.d.comb += [axi.araddr.eq(rd.ax.payload.addr), axi.arlen.eq(rd.ax.payload.len), axi.arsize.eq(5),
                     axi.arburst.eq(AXI_INCR), axi.arid.eq(0), axi.arvalid.eq(rd.ax.valid), rd.ax.ready.eq(axi.arready),
                     cb.local.payload.eq(axi.rdata), cb.local.valid.eq(axi.rvalid), axi.rready.eq(cb.local.ready)]
        dx = self.axi_drain
        m.d.comb += [dx.araddr.eq(drd.ax.payload.addr), dx.arlen.eq(drd.ax.payload.len), dx.arsize.eq(5),
                     dx.arburst.eq(AXI_INCR), dx.arid.eq(0), dx.arvalid.eq(drd.ax.valid), drd.ax.ready.eq(dx.arready),
                     cb.drain_local.payload.eq(dx.rdata), cb.drain_local.valid.eq(dx.rvalid),
                     dx.rready.eq(cb.drain_local.ready), dx.awvalid.eq(0), dx.wvalid.eq(0), dx.bready.eq(1)]
        # writes: AW from the walker while its burst length fits the W side's queue
        m.d.comb += [axi.awaddr.eq(wr.ax.payload.addr), axi.awlen.eq(wr.ax.payload.len), axi.awsize.eq(5),
                     axi.awburst.eq(AXI_INCR), axi.awid.eq(0),
                     axi.awvalid.eq(wr.ax.valid & wlen.w_rdy), wr.ax.ready.eq(axi.awready & wlen.w_rdy),
                     wlen.w_data.eq(wr.ax.payload.len), wlen.w_en.eq(axi.awvalid & axi.awready)]
        left = Signal(9)                   # W beats of the present burst still to send; 0: none taken
        first = left == 0
        n = Signal(9)
        m.d.comb += n.eq(wlen.r_data + 1)
        m.d.comb += [axi.wdata.eq(cb.hbm.payload.data), axi.wstrb.eq(cb.hbm.payload.strb),
                     axi.wvalid.eq(cb.hbm.valid & (~first | wlen.r_rdy)),
                     axi.wlast.eq((left == 1) | (first & (n == 1))),
                     cb.hbm.ready.eq(axi.wready & (~first | wlen.r_rdy)),
                     wlen.r_en.eq(first & axi.wvalid & axi.wready)]
        with m.If(axi.wvalid & axi.wready):
            m.d.sync += left.eq(n - 1)
            with m.If(~first):
                m.d.sync += left.eq(left - 1)
        outstanding = Signal(16)
        m.d.comb += axi.bready.eq(1)
        m.d.sync += outstanding.eq(outstanding + (axi.awvalid & axi.awready) - axi.bvalid)
        with m.If(axi.bvalid & axi.bresp[1]):
            m.d.sync += self.write_error.eq(1)
        m.d.comb += [self.done.eq(sched.done & ~rd.busy & ~drd.busy & ~wr.busy & cb.idle & (outstanding == 0) & first
                                  & ~self.start),
                     self.framing_error.eq(cb.framing_error)]
        return m
