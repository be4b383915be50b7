"""Write data path of one HBM2 pseudo-channel controller: the burst at WR + CWL."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from .config import HBMConfig
from .interface import check_config

__all__ = ["WriteDataPath"]


class WriteDataPath(wiring.Component):
    """Holds each write burst from its WR on the pins until WR + CWL.

    WR on the pins at cycle P (``wr``): the slot's data comes out of the queue memory at P + 1
    (``wdata``/``wmask``) into a small FIFO and leaves it at P + CWL. Writes are at least
    ``burst_cycles`` apart, so at most ``CWL // burst_cycles + 1`` are in flight; the FIFO has one
    entry more. With CWL = 1 the data goes straight through.

    Ports:
        wr: ``In(1)`` -- a WR is on the pins this cycle.
        wdata / wmask: ``In(burst_bytes * 8)`` / ``In(burst_bytes)`` -- its data, one cycle later.
        dram_wdata / dram_wmask / dram_wdata_valid: ``Out`` -- the burst on the pins at WR + CWL
            (``wmask`` bit i = 1 writes byte i).

    Args:
        config: :class:`~hw.hbm.config.HBMConfig` (``timing.CWL``, ``timing.burst_cycles``).

    Raises:
        TypeError: ``config`` is not an :class:`HBMConfig`.
    """

    def __init__(self, config: HBMConfig):
        self.config = check_config(config)
        bw = config.burst_bytes * 8
        super().__init__({
            "wr": In(1), "wdata": In(bw), "wmask": In(config.burst_bytes),
            "dram_wdata": Out(bw), "dram_wmask": Out(config.burst_bytes), "dram_wdata_valid": Out(1),
        })

    def elaborate(self, platform):
        cfg, t = self.config, self.config.timing
        m = Module()
        bw = cfg.burst_bytes * 8
        strobe = [Signal(name=f"wr_pins_d{k + 1}") for k in range(t.CWL)]
        m.d.sync += strobe[0].eq(self.wr)
        for k in range(1, t.CWL):
            m.d.sync += strobe[k].eq(strobe[k - 1])
        m.d.comb += self.dram_wdata_valid.eq(strobe[-1])
        if t.CWL == 1:
            m.d.comb += [self.dram_wdata.eq(self.wdata), self.dram_wmask.eq(self.wmask)]
            return m
        depth = t.CWL // t.burst_cycles + 2
        m.submodules.wdata_fifo = wfifo = fifo.SyncFIFO(width=bw + cfg.burst_bytes, depth=depth)
        m.d.comb += [
            wfifo.w_data.eq(Cat(self.wdata, self.wmask)),
            wfifo.w_en.eq(strobe[0]),
            wfifo.r_en.eq(strobe[-1]),
            self.dram_wdata.eq(wfifo.r_data[:bw]),
            self.dram_wmask.eq(wfifo.r_data[bw:]),
        ]
        return m
