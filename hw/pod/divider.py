"""A restoring serial divider: one quotient bit per cycle."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SerialDivider"]


class SerialDivider(wiring.Component):
    """``quotient = dividend // divisor``, ``remainder = dividend % divisor`` (unsigned), restoring
    division, one bit per cycle: ``done`` rises ``width`` cycles after the ``start`` strobe and stays
    high until the next one. A divisor of 0 gives an all-ones quotient and the dividend as remainder.

    Ports: ``start`` (In 1, strobe; ``dividend`` and ``divisor`` are sampled with it), ``dividend``
    (In ``width``), ``divisor`` (In ``width``), ``quotient`` (Out ``width``), ``remainder`` (Out
    ``width``), ``done`` (Out 1).

    Args:
        width: operand width in bits, >= 1.
    """

    def __init__(self, width: int):
        self.width = width
        super().__init__({"start": In(1), "dividend": In(width), "divisor": In(width),
                          "quotient": Out(width), "remainder": Out(width), "done": Out(1)})

    def elaborate(self, platform):
        m = Module()
        w = self.width
        q = Signal(w)                    # dividend bits still to bring down, then quotient bits
        r = Signal(w + 1)                # partial remainder
        d = Signal(w)
        left = Signal(range(w + 1))
        trial = Signal(w + 2)
        m.d.comb += trial.eq(Cat(q[w - 1], r) - d)
        with m.If(self.start):
            m.d.sync += [q.eq(self.dividend), r.eq(0), d.eq(self.divisor), left.eq(w)]
        with m.Elif(left != 0):
            m.d.sync += left.eq(left - 1)
            with m.If(trial[-1]):        # negative: restore
                m.d.sync += [r.eq(Cat(q[w - 1], r)), q.eq(Cat(0, q))]
            with m.Else():
                m.d.sync += [r.eq(trial), q.eq(Cat(1, q))]
        m.d.comb += [self.quotient.eq(q), self.remainder.eq(r), self.done.eq(left == 0)]
        return m
