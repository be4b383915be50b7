"""Formal harness: the HBM read path returns every burst once, in RD order, with its RD's tag.

:class:`hw.hbm.read_path.ReadResponsePath` holds a tag FIFO (a RD's tag waits CL cycles for its
burst) and a response FIFO (the bursts wait for the response stream), with a credit that allows a RD
only while a buffer entry is free. The harness checks the whole path against the DRAM it serves:

* **the DRAM**: a burst arrives on ``rdata`` exactly CL cycles after its RD is on the pins (JEDEC
  read latency; the data is free: any value);
* **the command choice's contract**: a RD is on the pins only one cycle after ``rd_credit`` allowed
  its decision, and no column command follows a RD or WR in the next cycle (a burst occupies the
  data bus for ``burst_cycles`` = 2 cycles, and the scheduler blocks column decisions while one is
  on the pins);
* the response stream's ``ready`` is free (any back-pressure).

Asserted:

* the RDs not yet answered (on the pins, in flight or buffered) never exceed the response buffer's
  entries (:func:`~hw.hbm.read_path.response_fifo_depth`): the credit keeps its promise, so a burst
  always finds a free entry;
* following the n-th RD for an ``n`` the solver picks (``AnyConst``, so for every RD): the n-th
  response carries the n-th RD's tag and the burst that arrived for it, and leaves only after that
  burst arrived. So no burst is lost, duplicated or reordered, whatever the back-pressure.
"""

from __future__ import annotations

from amaranth.asserts import AnyConst  # Amaranth 0.5 keeps it here, not in amaranth.hdl
from amaranth.hdl import Assert, Assume, Cover, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from hw.hbm.read_path import response_fifo_depth

__all__ = ["ResponseOrder"]


class ResponseOrder(wiring.Component):
    """The read-path harness (see the module docstring) around ``path``, a
    :class:`~hw.hbm.read_path.ReadResponsePath` (or a deliberately broken one in the tests).

    Ports (free inputs): ``rd``, ``wr``, ``tag`` (the column command on the pins), ``rdata`` (the
    DRAM's data, ``data_bits`` bits, zero-extended to the burst; valid when the harness's CL delay
    line says so), ``rsp_ready``. The path never looks at the data, so a few free bits tell every
    mix-up apart (data independence) and keep the solver's memories small.

    Raises:
        ValueError: ``data_bits`` is not 1 .. ``burst_bytes * 8``.
    """

    def __init__(self, path, data_bits: int = 4):
        cfg = path.config
        if not 1 <= data_bits <= cfg.burst_bytes * 8:
            raise ValueError(f"data_bits must be 1..{cfg.burst_bytes * 8}; got {data_bits!r}")
        self._path = path
        super().__init__({
            "rd": In(1), "wr": In(1), "tag": In(cfg.tag_bits), "rdata": In(data_bits),
            "rsp_ready": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.path = p = self._path
        cfg = p.config
        cl = cfg.timing.CL
        # the DRAM: RD at t -> burst at t + CL
        line = [Signal(name=f"dram_rd_{k + 1}") for k in range(cl)]
        m.d.sync += [line[0].eq(self.rd)] + [line[k].eq(line[k - 1]) for k in range(1, cl)]
        m.d.comb += [
            p.rd.eq(self.rd), p.wr.eq(self.wr), p.tag.eq(self.tag),
            p.rdata.eq(self.rdata), p.rdata_valid.eq(line[-1]),
            p.rsp.ready.eq(self.rsp_ready),
        ]
        # the command choice: a RD only after a credit; no column command right after one
        credit, col = Signal(name="credit_at_decision"), Signal(name="col_on_pins_before")
        m.d.sync += [credit.eq(p.rd_credit), col.eq(self.rd | self.wr)]
        m.d.comb += Assume(~(self.rd & self.wr))
        m.d.comb += Assume(~self.rd | credit)
        m.d.comb += Assume(~((self.rd | self.wr) & col))

        # the followed RD: number n (counted mod 2**8; fewer than 2**7 are ever in flight)
        n = Signal(8, name="followed")
        m.d.comb += n.eq(AnyConst(8))
        rds, bursts, rsps = (Signal(8, name=f"{x}_count") for x in ("rd", "burst", "rsp"))
        m.d.sync += [rds.eq(rds + self.rd), bursts.eq(bursts + line[-1]),
                     rsps.eq(rsps + (p.rsp.valid & p.rsp.ready))]
        tag, data = Signal(cfg.tag_bits, name="followed_tag"), Signal(len(self.rdata), name="followed_data")
        issued, arrived, out = (Signal(name=f"followed_{x}") for x in ("issued", "arrived", "out"))
        with m.If(self.rd & (rds == n)):
            m.d.sync += [tag.eq(self.tag), issued.eq(1)]
        with m.If(line[-1] & (bursts == n)):
            m.d.sync += [data.eq(self.rdata), arrived.eq(1)]
        leaving = p.rsp.valid & p.rsp.ready & (rsps == n)
        with m.If(leaving):
            m.d.sync += out.eq(1)
            m.d.comb += Assert(issued & arrived, "a response before its RD's burst arrived")
            m.d.comb += Assert(p.rsp.payload.tag == tag, "a response with another RD's tag")
            m.d.comb += Assert(p.rsp.payload.rdata == data, "a response with another RD's burst")
        # the credit's promise: RDs on the pins, in flight or buffered never exceed the buffer
        m.d.comb += Assert((rds - rsps)[:8] <= response_fifo_depth(cfg), "more RDs outstanding than buffer entries")
        # not vacuous: the followed RD leaves after the buffer was full and stalled
        full_seen = Signal(name="full_seen")
        with m.If(~p.rd_credit & p.rsp.valid & ~p.rsp.ready):
            m.d.sync += full_seen.eq(1)
        m.d.comb += Cover(leaving & full_seen & (n == 3))
        return m
