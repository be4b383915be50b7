"""Formal harness: a register slice on a ``lib.stream`` keeps order and loses nothing.

:class:`StreamOrder` checks a component with one stream input ``i`` and one stream output ``o``
that holds at most ``capacity`` transfers (:class:`hw.stream_register.StreamRegister`: 1,
:class:`hw.skid_buffer.SkidBuffer`: 2), with a free environment (every input, reset included, takes
any value in any cycle):

* the transfers in flight (taken at ``i``, not yet out at ``o``) never exceed ``capacity``, and
  ``o.valid`` is high exactly while one is in flight (a transfer held is offered, none invented);
* with ``full_ready``: ``i.ready`` is high exactly while fewer than ``capacity`` are in flight (a
  fully registered slice refuses only when full);
* following the n-th transfer taken at ``i``, for an ``n`` the solver picks (``AnyConst``, so for
  every transfer): the n-th transfer out of ``o`` carries its payload. So nothing is lost,
  duplicated or reordered.

The slice never looks at its payload, so ``data_bits`` free bits (zero-extended to the payload's
width) tell every mix-up apart (data independence).
"""

from __future__ import annotations

from amaranth.asserts import AnyConst  # Amaranth 0.5 keeps it here, not in amaranth.hdl
from amaranth.hdl import Assert, Cover, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In

__all__ = ["StreamOrder"]


class StreamOrder(wiring.Component):
    """The order harness (see the module docstring) around ``dut``.

    Ports (free inputs): ``i_valid``, ``i_data`` (``data_bits`` bits), ``o_ready``.

    Args:
        dut: a component with ``i`` (stream input) and ``o`` (stream output) whose payloads have the
            same width.
        capacity: the most transfers the component holds, 1..8.
        data_bits: free payload bits, 1 .. the payload's width.
        full_ready: also check that ``i.ready`` is high exactly while the component is not full.

    Raises:
        TypeError: ``dut`` has no stream ports ``i`` and ``o``.
        ValueError: ``capacity`` or ``data_bits`` out of range.
    """

    def __init__(self, dut, capacity: int, data_bits: int = 2, *, full_ready: bool = False):
        if not all(hasattr(dut, p) and hasattr(getattr(dut, p), "payload") for p in ("i", "o")):
            raise TypeError(f"dut must have stream ports i and o; got {dut!r}")
        if not (isinstance(capacity, int) and 1 <= capacity <= 8):
            raise ValueError(f"capacity must be 1..8; got {capacity!r}")
        width = len(Value.cast(dut.i.payload))
        if not (isinstance(data_bits, int) and 1 <= data_bits <= width):
            raise ValueError(f"data_bits must be 1..{width}; got {data_bits!r}")
        self._dut, self.capacity, self.full_ready = dut, capacity, full_ready
        super().__init__({"i_valid": In(1), "i_data": In(data_bits), "o_ready": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = d = self._dut
        m.d.comb += [d.i.valid.eq(self.i_valid), Value.cast(d.i.payload).eq(self.i_data), d.o.ready.eq(self.o_ready)]
        took, gave = Signal(name="in_taken"), Signal(name="out_taken")
        m.d.comb += [took.eq(d.i.valid & d.i.ready), gave.eq(d.o.valid & d.o.ready)]
        bits = (4 * self.capacity).bit_length() + 2  # counts wrap; far fewer than their range in flight
        ins, outs = Signal(bits, name="ins"), Signal(bits, name="outs")
        m.d.sync += [ins.eq(ins + took), outs.eq(outs + gave)]
        held = Signal(bits, name="held")
        m.d.comb += held.eq(ins - outs)
        m.d.comb += Assert(held <= self.capacity, "more transfers held than the capacity")
        m.d.comb += Assert(d.o.valid == (held != 0), "valid differs from a transfer being held")
        if self.full_ready:
            m.d.comb += Assert(d.i.ready == (held < self.capacity), "ready low with room, or high when full")

        n = Signal(bits, name="followed")
        m.d.comb += n.eq(AnyConst(bits))
        data, taken = Signal(len(self.i_data), name="followed_data"), Signal(name="followed_taken")
        with m.If(took & (ins == n)):
            m.d.sync += [data.eq(self.i_data), taken.eq(1)]
        leaving = gave & (outs == n)
        with m.If(leaving):
            m.d.comb += Assert(taken & (Value.cast(d.o.payload)[:len(data)] == data),
                               "a transfer out carried another transfer's payload")
        # not vacuous: the followed transfer leaves a slice that was full
        full_seen = Signal(name="full_seen")
        with m.If(held == self.capacity):
            m.d.sync += full_seen.eq(1)
        m.d.comb += Cover(leaving & full_seen & (n == 1))
        return m
