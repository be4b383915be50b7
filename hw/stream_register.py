"""A forward register slice on a ``lib.stream`` interface: a timing cut for valid and payload."""

from __future__ import annotations

from amaranth.hdl import Module, Shape
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamRegister"]


class StreamRegister(wiring.Component):
    """One register stage between two streams, at full throughput (one transfer per cycle).

    ``o.valid`` and ``o.payload`` come from flip-flops, so no combinational path runs from ``i`` to
    ``o``: the logic in front (an arbiter, say) and the logic behind (a queue's readiness) each get
    the whole clock period. ``i.ready`` is ``~o.valid | o.ready``, one gate after the consumer's
    ready (the AMBA AXI "forward register slice"; a full skid buffer would also register ready at the
    cost of a second payload register). A transfer takes one cycle longer to reach the consumer.

    Ports:
        i: ``In(stream.Signature(shape))`` -- the producer's side.
        o: ``Out(stream.Signature(shape))`` -- the consumer's side; ``payload`` holds its value while
            ``valid`` is high and ``ready`` low (the stream rule).

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
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        # the payload loads whenever the register can take a transfer, valid or not (what it holds
        # without valid is never looked at): its enable is then ready alone, not the producer's
        # valid, which in the HBM front end is the arbiter's output fanned out to every payload bit
        with m.If(self.i.ready):
            m.d.sync += [self.o.valid.eq(self.i.valid), self.o.payload.eq(self.i.payload)]
        return m
