"""A full register slice on a ``lib.stream`` interface: valid, payload *and* ready from flip-flops."""

from __future__ import annotations

from amaranth.hdl import Module, Shape, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """A two-entry skid buffer: one transfer per cycle, and no combinational path in either direction.

    ``o.valid`` and ``o.payload`` come from the main register and ``i.ready`` from a flip-flop (high
    while the skid register is empty), so neither the producer's valid nor the consumer's ready
    crosses the slice in the same cycle: the AMBA AXI "fully registered" slice. When the consumer
    stalls, the transfer the producer made in that cycle (it saw ``i.ready`` high) lands in the skid
    register and ``i.ready`` falls a cycle later. A transfer takes one cycle longer to reach the
    consumer; the slice holds at most two transfers.

    Ports:
        i: ``In(stream.Signature(shape))`` -- the producer's side.
        o: ``Out(stream.Signature(shape))`` -- the consumer's side; ``payload`` holds its value while
            ``valid`` is high and ``ready`` low (the stream rule); order is kept.

    Args:
        shape: the payload's shape (a ``lib.data`` layout or anything ``Shape.cast`` accepts).

    Raises:
        TypeError: ``shape`` is not a shape.
    """

    def __init__(self, shape):
        if not isinstance(shape, data.Layout):
            try:
                Shape.cast(shape)
            except TypeError:
                raise TypeError(f"shape must be a shape or a lib.data layout; got {shape!r}") from None
        self.shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

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
