"""8N1 UART receiver and transmitter (one start bit, 8 data bits LSB first, one stop bit, no parity).

Written here rather than taken from a library: ``amaranth-stdio`` (which has ``AsyncSerial``) has no
usable PyPI release (the ``amaranth-stdio`` 0 wheel is an empty placeholder) and this project
installs everything but Icarus from PyPI.

Both sides count ``divisor`` clock cycles per bit (``divisor = round(clk_hz / baud)``; 217 for
115,200 baud at 25 MHz, a rate error of 0.04 %). The receiver synchronizes ``rx`` with two flip-flops
(:class:`amaranth.lib.cdc.FFSynchronizer`), finds the falling edge of the start bit, checks the start
bit again half a bit later and samples every data bit and the stop bit in the middle of its bit time;
a receiver tolerates a rate mismatch of about +-4 % (half a bit over 9.5 bits).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from ..config import check_int

__all__ = ["UARTReceiver", "UARTTransmitter", "uart_divisor"]


def uart_divisor(clk_hz: int, baud: int, *, max_error: float = 0.02) -> int:
    """Clock cycles per bit for ``baud`` at ``clk_hz``: ``round(clk_hz / baud)``, at least 4.

    Raises:
        ValueError: ``clk_hz`` or ``baud`` not a positive integer, a divisor below 4 (the receiver
            needs a few cycles per bit), or a rate error ``|clk_hz / divisor - baud| / baud`` above
            ``max_error`` (2 %: an 8N1 receiver fails near 4-5 % over both ends together).
    """
    check_int("clk_hz", clk_hz, 1)
    check_int("baud", baud, 1)
    div = round(clk_hz / baud)
    if div < 4:
        raise ValueError(f"baud must be at most clk_hz / 4 = {clk_hz // 4} (4 clock cycles per bit); got {baud}")
    err = abs(clk_hz / div - baud) / baud
    if err > max_error:
        raise ValueError(f"baud {baud} at clk_hz {clk_hz}: {clk_hz / div:.0f} baud with a divisor of {div} "
                         f"is {100 * err:.1f} % off (at most {100 * max_error:.0f} %); choose another baud")
    return div


class UARTReceiver(wiring.Component):
    """8N1 receiver.

    Ports:
        rx: In(1), the line (idle high); synchronized inside.
        data: Out(stream.Signature(8)): one received byte per transfer. ``valid`` stays high until
            ``ready``; a byte completed while the previous one is still waiting is dropped and
            ``overrun`` pulses.
        overrun: Out(1), one-cycle pulse per dropped byte.
        framing_error: Out(1), one-cycle pulse when a stop bit reads 0 (the byte is dropped).

    Args:
        divisor: clock cycles per bit, 4 .. 2^20 (:func:`uart_divisor`).
    """

    def __init__(self, divisor: int):
        check_int("divisor", divisor, 4, 1 << 20)
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "data": Out(stream.Signature(8)), "overrun": Out(1),
                          "framing_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        div = self.divisor
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1)
        timer = Signal(range(div))
        bit = Signal(range(8))
        shreg = Signal(8)
        valid = Signal()
        m.d.comb += [self.data.valid.eq(valid), self.data.payload.eq(shreg)]
        with m.If(self.data.ready):
            m.d.sync += valid.eq(0)
        m.d.sync += [self.overrun.eq(0), self.framing_error.eq(0)]
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.FSM(name="uart_rx"):
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += timer.eq(div // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer == 0):
                    with m.If(~rx):      # still low in the middle of the start bit
                        m.d.sync += [timer.eq(div - 1), bit.eq(0)]
                        m.next = "DATA"
                    with m.Else():       # a glitch
                        m.next = "IDLE"
            with m.State("DATA"):
                with m.If(timer == 0):
                    m.d.sync += [shreg.eq(Cat(shreg[1:], rx)), timer.eq(div - 1), bit.eq(bit + 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer == 0):
                    with m.If(rx):
                        with m.If(valid & ~self.data.ready):
                            m.d.sync += self.overrun.eq(1)
                        with m.Else():
                            m.d.sync += valid.eq(1)
                    with m.Else():
                        m.d.sync += self.framing_error.eq(1)
                    m.next = "IDLE"
        return m


class UARTTransmitter(wiring.Component):
    """8N1 transmitter.

    Ports:
        data: In(stream.Signature(8)): a byte is taken when the line is idle, and sent in
            ``10 * divisor`` clock cycles.
        tx: Out(1), the line (idle high, registered).

    Args:
        divisor: clock cycles per bit, 4 .. 2^20 (:func:`uart_divisor`).
    """

    def __init__(self, divisor: int):
        check_int("divisor", divisor, 4, 1 << 20)
        self.divisor = divisor
        super().__init__({"data": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        div = self.divisor
        timer = Signal(range(div))
        left = Signal(range(11))
        shreg = Signal(10, init=0x3FF)
        m.d.comb += self.data.ready.eq(left == 0)
        with m.If(left == 0):
            with m.If(self.data.valid):
                m.d.sync += [shreg.eq(Cat(Const(0, 1), self.data.payload, Const(1, 1))), left.eq(10),
                             timer.eq(div - 1)]
        with m.Else():
            with m.If(timer == 0):
                m.d.sync += [shreg.eq(Cat(shreg[1:], Const(1, 1))), left.eq(left - 1), timer.eq(div - 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        m.d.sync += self.tx.eq(shreg[0] | (left == 0))   # registered: no glitch on the pin
        return m
