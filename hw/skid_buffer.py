"""A full register slice on a ``lib.stream`` interface: valid, payload *and* ready from flip-flops."""

from __future__ import annotations

from amaranth.hdl import Module, Signal

from .stream_register import StreamRegister

__all__ = ["SkidBuffer"]


class SkidBuffer(StreamRegister):
    """A two-entry skid buffer: one transfer per cycle, and no combinational path in either direction.

    ``o.valid`` and ``o.payload`` come from the main register and ``i.ready`` from a flip-flop (high
    while the skid register is empty), so neither the producer's valid nor the consumer's ready
    crosses the slice in the same cycle: the AMBA AXI "fully registered" slice. When the consumer
    stalls, the transfer the producer made in that cycle (it saw ``i.ready`` high) lands in the skid
    register and ``i.ready`` falls a cycle later. A transfer takes one cycle longer to reach the
    consumer; the slice holds at most two transfers, in order.

    Ports, arguments and errors as :class:`~hw.stream_register.StreamRegister` (``i``, ``o``;
    ``shape``; TypeError for a shape that is none).
    """

    def elaborate(self, platform):
        m = Module()
        skid_valid = Signal()
        skid = Signal(self.shape)
        m.d.comb += self.i.ready.eq(~skid_valid)
        # the skid register loads whenever it is empty, valid or not (without skid_valid its value
        # is never looked at), so its enable is a flip-flop, not the producer's valid
        with m.If(~skid_valid):
            m.d.sync += skid.eq(self.i.payload)
        with m.If(~self.o.valid | self.o.ready):       # the main register moves on
            with m.If(skid_valid):
                m.d.sync += [self.o.payload.eq(skid), self.o.valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [self.o.payload.eq(self.i.payload), self.o.valid.eq(self.i.valid)]
        with m.Elif(self.i.valid & ~skid_valid):        # main register stalled: park the new transfer
            m.d.sync += skid_valid.eq(1)
        return m
