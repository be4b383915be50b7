"""Read response path of one HBM2 pseudo-channel controller: tags, data at RD + CL, credits."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import HBMConfig
from .interface import check_config, response_layout

__all__ = ["ReadResponsePath", "response_fifo_depth"]


def response_fifo_depth(config: HBMConfig) -> int:
    """Read-response buffer entries: enough for back-to-back reads over one CL round trip."""
    t = config.timing
    return max(4, -(-(t.CL + 3) // t.burst_cycles) + 2)


class ReadResponsePath(wiring.Component):
    """Pairs each read burst with its tag and buffers it for the response stream.

    A RD's tag enters a FIFO when the RD is on the pins; the burst arrives on ``rdata`` CL cycles
    later and leaves with the oldest tag, in RD order, through a response buffer of
    :func:`response_fifo_depth` entries. ``rd_credit`` allows a RD decision only while the reads on
    the pins or in flight plus the buffered responses leave a free entry, so ``rdata`` is never
    dropped whatever the back-pressure on ``rsp``. It is a register, computed one cycle ahead:
    it assumes a RD is decided in every cycle that can take one (no RD or WR on the pins), which is
    exact for back-to-back reads and one entry conservative otherwise.

    Ports:
        rd / wr: ``In(1)`` -- a RD / WR is on the pins this cycle; tag: ``In(tag_bits)`` -- the RD's tag.
        rdata / rdata_valid: ``In`` -- the burst from the pins (``burst_bytes * 8`` bits).
        rsp: ``Out(stream.Signature(response_layout(config)))`` -- tag and data, in RD order.
        rd_credit: ``Out(1)`` -- a RD may be decided this cycle.

    Args:
        config: :class:`~hw.hbm.config.HBMConfig` (``tag_bits``, ``timing.CL``).

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """

    def __init__(self, config: HBMConfig):
        self.config = check_config(config)
        super().__init__({
            "rd": In(1), "wr": In(1), "tag": In(config.tag_bits),
            "rdata": In(config.burst_bytes * 8), "rdata_valid": In(1),
            "rsp": Out(stream.Signature(response_layout(config))),
            "rd_credit": Out(1, init=1),
        })

    def elaborate(self, platform):
        cfg = self.config
        m = Module()
        depth = response_fifo_depth(cfg)
        m.submodules.tag_fifo = tag_fifo = fifo.SyncFIFO(width=cfg.tag_bits, depth=depth)
        m.submodules.rsp_fifo = rsp_fifo = fifo.SyncFIFOBuffered(width=cfg.tag_bits + cfg.burst_bytes * 8,
                                                                  depth=depth)
        # reads on the pins or later whose response has not left the buffer
        used = Signal(range(depth + 1), name="reads_outstanding")
        pop = Signal(name="rsp_pop")
        m.d.comb += pop.eq(self.rsp.valid & self.rsp.ready)
        m.d.sync += [
            used.eq(used + self.rd - pop),
            self.rd_credit.eq(used + (self.rd | ~(self.rd | self.wr)) - pop < depth),
        ]
        m.d.comb += [
            tag_fifo.w_data.eq(self.tag),
            tag_fifo.w_en.eq(self.rd),
            tag_fifo.r_en.eq(self.rdata_valid),
            rsp_fifo.w_data.eq(Cat(tag_fifo.r_data, self.rdata)),
            rsp_fifo.w_en.eq(self.rdata_valid),
            self.rsp.valid.eq(rsp_fifo.r_rdy),
            self.rsp.payload.tag.eq(rsp_fifo.r_data[:cfg.tag_bits]),
            self.rsp.payload.rdata.eq(rsp_fifo.r_data[cfg.tag_bits:]),
            rsp_fifo.r_en.eq(self.rsp.ready),
        ]
        return m
