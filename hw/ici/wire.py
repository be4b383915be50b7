"""The ICI wire between two nodes: latency both ways, and a fault-injection input."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib.wiring import In, Out

from .config import ICIConfig, ICIPart, ack_signature, flit_signature

__all__ = ["ICIWire"]


class ICIWire(ICIPart):
    """``latency_cycles`` register stages on the forward lane (transmitter to receiver) and as many
    on the reverse lane (acknowledgements and credits back): the SerDes and the cable. ``flip`` is
    XORed onto the data of a forward beat as it leaves the wire (fault injection: a testbench drives
    it; 0 in a design for hardware).

    Ports:
        tx_flit: In(flit_signature), tx_ack: Out(ack_signature): the transmitter's side.
        rx_flit: Out(flit_signature), rx_ack: In(ack_signature): the receiver's side.
        flip: In(beat bits): bits to invert in the forward beat leaving this cycle.

    Raises:
        TypeError: ``config`` is not an ICIConfig.
    """

    def members(self, config: ICIConfig) -> dict:
        return {
            "tx_flit": In(flit_signature(config)), "tx_ack": Out(ack_signature(config)),
            "rx_flit": Out(flit_signature(config)), "rx_ack": In(ack_signature(config)),
            "flip": In(config.width),
        }

    def elaborate(self, platform):
        m = Module()
        fwd = [self.tx_flit.valid, self.tx_flit.first, self.tx_flit.last, self.tx_flit.data]
        back = [self.rx_ack.valid, self.rx_ack.nak, self.rx_ack.seq, self.rx_ack.credits]
        for k in range(self.config.latency_cycles):
            stage_f = [Signal.like(s, name=f"fwd{k}_{n}") for s, n in zip(fwd, ("valid", "first", "last", "data"))]
            stage_b = [Signal.like(s, name=f"back{k}_{n}") for s, n in zip(back, ("valid", "nak", "seq", "credits"))]
            m.d.sync += [d.eq(s) for d, s in zip(stage_f + stage_b, fwd + back)]
            fwd, back = stage_f, stage_b
        r, t = self.rx_flit, self.tx_ack
        m.d.comb += [r.valid.eq(fwd[0]), r.first.eq(fwd[1]), r.last.eq(fwd[2]),
                     r.data.eq(fwd[3] ^ (self.flip & fwd[0].replicate(self.config.width))),
                     t.valid.eq(back[0]), t.nak.eq(back[1]), t.seq.eq(back[2]), t.credits.eq(back[3])]
        return m
