"""The ICI link's transmitter: messages into packets, a replay buffer, credits, go-back-N."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import crc
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import ICIConfig, ICIPart, ack_signature, buffer_address, flit_signature, message_signature

__all__ = ["ICITransmitter", "header_value", "CRC"]

#: the packet check: CRC-32 (the Ethernet polynomial and conventions) over the header beat and the
#: payload beats, one beat per step (:mod:`amaranth.lib.crc`; ``CRC(data_width=w).compute(beats)``
#: is the reference)
CRC = crc.catalog.CRC32_ETHERNET


def header_value(seq, beats_minus_1, end):
    """The header beat's fields (Amaranth values): ``seq`` in bits 0-7, the payload beats less one in
    bits 8-15, end of message in bit 16 (:data:`~hw.ici.config.HEADER_BITS`)."""
    return Cat(Const(0, 8) | seq, Const(0, 8) | beats_minus_1, end)


class ICITransmitter(ICIPart):
    """Send a node's messages over one ICI wire, each cut into packets of at most ``packet_beats``
    beats: a header beat (sequence number, length, end of message), the payload, a CRC beat
    (:data:`CRC` in the low 32 bits). A packet leaves only with a credit (a free slot in the
    receiver's buffer; the receiver returns one for every packet it takes or drops) and stays in the
    replay buffer until acknowledged. Go-back-N: a NAK, or ``replay_timeout_cycles`` without an
    acknowledgement while packets are unacknowledged, sends again from the packet named (the oldest),
    at the next packet boundary. Packets follow each other without a gap.

    Ports:
        inp: In(message_signature): the messages (``last`` on each one's final beat).
        flit: Out(flit_signature): to the wire.
        ack: In(ack_signature): from the wire's reverse lane.
        packets: Out(32): packets sent, replays included; replays: Out(16): go-back events (NAK or
            timeout); timeouts: Out(16): of them, by timeout.

    Raises:
        TypeError: ``config`` is not an ICIConfig.
    """

    def members(self, config: ICIConfig) -> dict:
        return {
            "inp": In(message_signature(config)), "flit": Out(flit_signature(config)),
            "ack": In(ack_signature(config)),
            "packets": Out(32), "replays": Out(16), "timeouts": Out(16),
        }

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        P, L, S = cfg.replay_packets, cfg.packet_beats, cfg.seq_bits
        lgP = P.bit_length() - 1
        m.submodules.buf = buf = Memory(shape=cfg.width, depth=P << cfg.beat_index_bits, init=[])
        wp, rp = buf.write_port(), buf.read_port(transparent_for=())
        m.submodules.crc = chk = CRC(data_width=cfg.width).create()
        meta_len = Array(Signal(range(L), name=f"len{i}") for i in range(P))    # payload beats - 1
        meta_end = Array(Signal(name=f"end{i}") for i in range(P))

        def dist(a, b):  # (a - b) mod 2^S
            return (a - b)[:S]

        # ---- store: messages into the replay buffer, packet by packet
        acked = Signal(S)     # the oldest unacknowledged packet
        stored = Signal(S)    # the next packet to store; [acked, stored) are kept
        w_beat = Signal(range(L))
        room = Signal()
        m.d.comb += [room.eq(dist(stored, acked) != P), self.inp.ready.eq(room)]
        take = self.inp.valid & room
        m.d.comb += [wp.addr.eq(buffer_address(cfg, w_beat, stored[:lgP])), wp.data.eq(self.inp.payload.data),
                     wp.en.eq(take)]
        with m.If(take):
            with m.If(self.inp.payload.last | (w_beat == L - 1)):
                m.d.sync += [meta_len[stored[:lgP]].eq(w_beat), meta_end[stored[:lgP]].eq(self.inp.payload.last),
                             stored.eq(stored + 1), w_beat.eq(0)]
            with m.Else():
                m.d.sync += w_beat.eq(w_beat + 1)

        send = Signal(S)      # the packet being sent, or the next one
        credits = Signal(range(cfg.rx_packets + 1), init=cfg.rx_packets)
        spend = Signal()
        m.d.sync += credits.eq(credits + self.ack.credits - spend)
        rewind, rewind_to = Signal(), Signal(S)
        kept = dist(stored, acked)

        # ---- send: header, payload, CRC; the next packet chosen at each boundary: the one named by
        # a pending go-back, else the next; one an acknowledgement has passed (a late ACK after a
        # timeout) moves up to the oldest unacknowledged
        def choose(candidate):
            nxt = Signal(S)
            m.d.comb += nxt.eq(Mux(rewind, rewind_to, candidate[:S]))
            nxt = Mux(dist(nxt, acked) > kept, acked, nxt)
            return nxt, (nxt != stored) & (credits != 0)

        beat = Signal(range(L))
        slot = send[:lgP]
        m.d.comb += [self.flit.data.eq(rp.data), chk.data.eq(rp.data)]
        with m.FSM():
            with m.State("IDLE"):
                nxt, go = choose(send)
                m.d.sync += [send.eq(nxt), rewind.eq(0)]
                with m.If(go):
                    m.next = "HEADER"
            with m.State("HEADER"):
                hdr = header_value(send, meta_len[slot], meta_end[slot])
                m.d.comb += [self.flit.valid.eq(1), self.flit.first.eq(1), self.flit.data.eq(hdr),
                             chk.start.eq(1), chk.valid.eq(1), chk.data.eq(hdr),
                             rp.addr.eq(buffer_address(cfg, 0, slot)), spend.eq(1)]
                m.d.sync += [beat.eq(0), self.packets.eq(self.packets + 1)]
                m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                m.d.comb += [self.flit.valid.eq(1), chk.valid.eq(1), rp.addr.eq(buffer_address(cfg, beat + 1, slot))]
                m.d.sync += beat.eq(beat + 1)
                with m.If(beat == meta_len[slot]):
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += [self.flit.valid.eq(1), self.flit.last.eq(1), self.flit.data.eq(chk.crc)]
                nxt, go = choose(send + 1)
                m.d.sync += [send.eq(nxt), rewind.eq(0)]
                m.next = "IDLE"
                with m.If(go):
                    m.next = "HEADER"

        # ---- acknowledgements and the replay timer (after the FSM: a go-back told in a boundary
        # cycle is kept for the next boundary)
        timer = Signal(range(cfg.replay_timeout_cycles + 1))
        ack_ok = self.ack.valid & ~self.ack.nak & (dist(self.ack.seq + 1, acked) != 0) & (
            dist(self.ack.seq + 1, acked) <= kept)
        nak_ok = self.ack.valid & self.ack.nak & (dist(self.ack.seq, acked) <= kept)
        with m.If(ack_ok):
            m.d.sync += [acked.eq(self.ack.seq + 1), timer.eq(0)]
        with m.Elif(nak_ok):
            m.d.sync += [acked.eq(self.ack.seq), rewind.eq(1), rewind_to.eq(self.ack.seq), timer.eq(0),
                         self.replays.eq(self.replays + 1)]
        with m.Elif(dist(send, acked) == 0):
            m.d.sync += timer.eq(0)
        with m.Elif(timer == cfg.replay_timeout_cycles):
            m.d.sync += [rewind.eq(1), rewind_to.eq(acked), timer.eq(0), self.replays.eq(self.replays + 1),
                         self.timeouts.eq(self.timeouts + 1)]
        with m.Else():
            m.d.sync += timer.eq(timer + 1)
        return m
