"""Configuration of an inter-chip interconnect (ICI) link."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import Out

from hw.config import check_int, check_pow2

__all__ = ["ICIConfig", "ICIPart", "HEADER_BITS", "message_signature", "flit_signature", "ack_signature",
           "buffer_address"]

#: bits of a packet's header beat that carry fields (sequence number, length, end of message); the
#: rest of the beat is 0, and a receiver refuses a header with another bit set
HEADER_BITS = 8 + 8 + 1


@dataclass(frozen=True)
class ICIConfig:
    """One direction of an ICI link: a transmitter at one node, a wire, a receiver at the next.

    Attributes:
        beat_bytes: link width, bytes per beat (cycle): a power of two from 4 to 64.
        latency_cycles: one-way latency of the wire (SerDes and cable), cycles, >= 1; the
            acknowledgements take as long back.
        packet_beats: payload beats per packet, 1 .. 256; a message longer than that is cut into
            packets. Each packet adds two beats (header, CRC), so a long message uses the wire at
            ``packet_beats / (packet_beats + 2)`` at most.
        rx_packets: the receiver's buffer, in packets: the transmitter's credits, 2 .. 64.
        replay_packets: packets the transmitter keeps until they are acknowledged (its replay
            buffer), a power of two from 2 to 64. Sequence numbers have ``lg(replay_packets) + 1`` bits.
        replay_timeout_cycles: cycles without an acknowledgement, while packets are unacknowledged,
            after which the transmitter sends them again from the oldest (PCI Express's REPLAY_TIMER:
            a corrupted NAK-triggered replay is not NAKed twice); None: four round trips of a
            full packet, ``4 * (2 * latency_cycles + packet_beats + 2) + 16``.

    Raises:
        TypeError: a value of the wrong type.
        ValueError: a value outside the range above.
    """

    beat_bytes: int = 8
    latency_cycles: int = 4
    packet_beats: int = 32
    rx_packets: int = 4
    replay_packets: int = 8
    replay_timeout_cycles: int | None = None

    def __post_init__(self):
        check_pow2("beat_bytes", self.beat_bytes, 4, 64)
        check_int("latency_cycles", self.latency_cycles, 1, 4096)
        check_int("packet_beats", self.packet_beats, 1, 256)
        check_int("rx_packets", self.rx_packets, 2, 64)
        check_pow2("replay_packets", self.replay_packets, 2, 64)
        if self.replay_timeout_cycles is None:
            object.__setattr__(self, "replay_timeout_cycles",
                               4 * (2 * self.latency_cycles + self.packet_beats + 2) + 16)
        check_int("replay_timeout_cycles", self.replay_timeout_cycles, 2 * self.latency_cycles + 4, 1 << 20)

    @property
    def width(self) -> int:
        """Beat width, bits."""
        return 8 * self.beat_bytes

    @property
    def beat_index_bits(self) -> int:
        """Bits of a beat's index inside a packet in the packet buffers (each slot a power of two)."""
        return max(1, (self.packet_beats - 1).bit_length())

    @property
    def seq_bits(self) -> int:
        """Sequence number bits: twice the replay window, so a duplicate is told from a new packet."""
        return self.replay_packets.bit_length()

    def as_dict(self) -> dict:
        return {"beat_bytes": self.beat_bytes, "latency_cycles": self.latency_cycles,
                "packet_beats": self.packet_beats, "rx_packets": self.rx_packets,
                "replay_packets": self.replay_packets, "replay_timeout_cycles": self.replay_timeout_cycles}


def message_signature(cfg: ICIConfig) -> wiring.Signature:
    """A node's messages into a transmitter or out of a receiver: a stream of beats ``data``
    (``beat_bytes`` bytes) with ``last`` on a message's final beat."""
    return stream.Signature(data.StructLayout({"data": cfg.width, "last": 1}))


def flit_signature(cfg: ICIConfig) -> wiring.Signature:
    """The wire's forward lane (transmitter side): ``valid``, ``first`` (a header beat), ``last``
    (a CRC beat), ``data``. Framing (``valid``, ``first``, ``last``) is out of band, as a 64b/66b
    sync header is; fault injection corrupts ``data``. No ``ready``: the receiver always takes a
    beat, and the credits guarantee it has room."""
    return wiring.Signature({"valid": Out(1), "first": Out(1), "last": Out(1), "data": Out(cfg.width)})


def ack_signature(cfg: ICIConfig) -> wiring.Signature:
    """The wire's reverse lane (receiver side): ``valid`` with ``nak`` and ``seq`` (ACK: every packet
    up to ``seq`` is received; NAK: every packet before ``seq`` is, ``seq`` is wanted again), and
    ``credits`` (0 .. 2 receive-buffer slots freed this cycle)."""
    return wiring.Signature({"valid": Out(1), "nak": Out(1), "seq": Out(cfg.seq_bits), "credits": Out(2)})


class ICIPart(wiring.Component):
    """Base of the link's components: checks the configuration and takes the signature from
    :meth:`members`.

    Raises:
        TypeError: ``config`` is not an ICIConfig.
    """

    def __init__(self, config: ICIConfig):
        if not isinstance(config, ICIConfig):
            raise TypeError(f"config must be an ICIConfig; got {config!r}")
        self.config = config
        super().__init__(self.members(config))

    def members(self, config: ICIConfig) -> dict:
        raise NotImplementedError


def buffer_address(cfg: ICIConfig, beat, slot):
    """The address of beat ``beat`` of packet slot ``slot`` in a buffer of whole packets: the slot
    above :attr:`ICIConfig.beat_index_bits` bits of beat (Amaranth values or ints)."""
    lb = cfg.beat_index_bits
    return Cat((Const(0, lb) | beat)[:lb], slot)
