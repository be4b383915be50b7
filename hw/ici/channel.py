"""One direction of an ICI link: transmitter, wire, receiver."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import ICIConfig, ICIPart, message_signature
from .receiver import ICIReceiver
from .transmitter import ICITransmitter
from .wire import ICIWire

__all__ = ["ICIChannel"]


class ICIChannel(ICIPart):
    """An :class:`~hw.ici.transmitter.ICITransmitter` at one node, an :class:`~hw.ici.wire.ICIWire`
    and an :class:`~hw.ici.receiver.ICIReceiver` at the next: messages in at ``inp``, the same
    messages out at ``out``, nothing lost, duplicated or reordered whatever ``flip`` corrupts.

    Ports:
        inp: In(message_signature); out: Out(message_signature).
        flip: In(beat bits): the wire's fault injection.
        busy: Out(1): the wire's forward lane carries a beat this cycle (at the transmitter).
        tx_packets: Out(32), replays: Out(16), timeouts: Out(16): the transmitter's counters.
        rx_packets: Out(32), crc_errors: Out(16), duplicates: Out(16): the receiver's.

    Raises:
        TypeError: ``config`` is not an ICIConfig.
    """

    def members(self, config: ICIConfig) -> dict:
        return {
            "inp": In(message_signature(config)), "out": Out(message_signature(config)),
            "flip": In(config.width), "busy": Out(1),
            "tx_packets": Out(32), "replays": Out(16), "timeouts": Out(16),
            "rx_packets": Out(32), "crc_errors": Out(16), "duplicates": Out(16),
        }

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx = tx = ICITransmitter(self.config)
        m.submodules.wire = wire = ICIWire(self.config)
        m.submodules.rx = rx = ICIReceiver(self.config)
        wiring.connect(m, wiring.flipped(self.inp), tx.inp)
        wiring.connect(m, tx.flit, wire.tx_flit)
        wiring.connect(m, wire.rx_flit, rx.flit)
        wiring.connect(m, rx.ack, wire.rx_ack)
        wiring.connect(m, wire.tx_ack, tx.ack)
        wiring.connect(m, rx.out, wiring.flipped(self.out))
        m.d.comb += [wire.flip.eq(self.flip), self.busy.eq(tx.flit.valid),
                     self.tx_packets.eq(tx.packets), self.replays.eq(tx.replays), self.timeouts.eq(tx.timeouts),
                     self.rx_packets.eq(rx.packets), self.crc_errors.eq(rx.crc_errors),
                     self.duplicates.eq(rx.duplicates)]
        return m
