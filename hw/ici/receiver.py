"""The ICI link's receiver: packets checked and put back into messages, ACK / NAK, credits."""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import HEADER_BITS, ICIConfig, ICIPart, ack_signature, buffer_address, flit_signature, message_signature
from .transmitter import CRC

__all__ = ["ICIReceiver"]


class ICIReceiver(ICIPart):
    """Take packets from one ICI wire into a buffer of ``rx_packets`` packets and hand the messages
    on in order. A packet is kept when its CRC beat equals the CRC of its header and payload, its
    header's unused bits are 0, its payload has the length the header gives (at most
    ``packet_beats``) and its sequence number is the one expected: it is acknowledged (ACK with its
    number). A good packet already received (a replay after a lost acknowledgement) is dropped and
    acknowledged again (ACK of the last one kept); any other is dropped, and the first of a run of
    such packets is answered by a NAK of the expected number (one NAK until the expected packet
    arrives; the transmitter's replay timer covers a replay that is lost again). Every packet
    dropped returns its credit at once; a kept one when its last beat is read out.

    Ports:
        flit: In(flit_signature): from the wire.
        ack: Out(ack_signature): to the wire's reverse lane (registered).
        out: Out(message_signature): the messages, ``last`` on each one's final beat.
        packets: Out(32): packets kept; crc_errors: Out(16): packets dropped as corrupted (CRC,
            header or length); duplicates: Out(16): good packets dropped as already received.

    Raises:
        TypeError: ``config`` is not an ICIConfig.
    """

    def members(self, config: ICIConfig) -> dict:
        return {
            "flit": In(flit_signature(config)), "ack": Out(ack_signature(config)),
            "out": Out(message_signature(config)),
            "packets": Out(32), "crc_errors": Out(16), "duplicates": Out(16),
        }

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        Q, L, S = cfg.rx_packets, cfg.packet_beats, cfg.seq_bits
        m.submodules.buf = buf = Memory(shape=cfg.width, depth=Q << cfg.beat_index_bits, init=[])
        wp, rp = buf.write_port(), buf.read_port(transparent_for=())
        m.submodules.crc = chk = CRC(data_width=cfg.width).create()
        meta_len = Array(Signal(range(L), name=f"len{i}") for i in range(Q))
        meta_end = Array(Signal(name=f"end{i}") for i in range(Q))

        tail = Signal(range(Q))    # the slot a packet is received into
        head = Signal(range(Q))    # the slot being read out
        count = Signal(range(Q + 1))  # packets kept and not yet read out

        # ---- receive
        f = self.flit
        h_seq, h_len, h_end, h_ok = Signal(S), Signal(8), Signal(), Signal()
        r_beat = Signal(range(L + 2))      # payload beats received
        expected, nak_sent = Signal(S), Signal()
        m.d.comb += [chk.data.eq(f.data), chk.valid.eq(f.valid & ~f.last), chk.start.eq(f.valid & f.first)]
        m.d.comb += [wp.addr.eq(buffer_address(cfg, r_beat, tail)), wp.data.eq(f.data),
                     wp.en.eq(f.valid & ~f.first & ~f.last & (r_beat < L))]
        with m.If(f.valid & f.first):
            m.d.sync += [h_seq.eq(f.data[:S]), h_len.eq(f.data[8:16]), h_end.eq(f.data[16]),
                         h_ok.eq((f.data[S:8] == 0) & (f.data[HEADER_BITS:] == 0) & (f.data[8:16] < L)),
                         r_beat.eq(0)]
        with m.Elif(f.valid & ~f.last & (r_beat <= L)):
            m.d.sync += r_beat.eq(r_beat + 1)

        good = Signal()
        m.d.comb += good.eq(h_ok & (f.data[:32] == chk.crc) & (f.data[32:] == 0) & (r_beat == h_len + 1))
        behind = (h_seq - expected)[S - 1]      # a number before the expected one
        keep = f.valid & f.last & good & (h_seq == expected)
        drop = f.valid & f.last & ~keep
        freed = Signal()
        m.d.sync += [self.ack.valid.eq(0), self.ack.credits.eq(drop + freed)]
        with m.If(keep):
            m.d.sync += [meta_len[tail].eq(h_len), meta_end[tail].eq(h_end),
                         tail.eq(Mux(tail == Q - 1, 0, tail + 1)),
                         expected.eq(expected + 1), nak_sent.eq(0), self.packets.eq(self.packets + 1),
                         self.ack.valid.eq(1), self.ack.nak.eq(0), self.ack.seq.eq(h_seq)]
        with m.Elif(drop & good & behind):
            m.d.sync += [self.ack.valid.eq(1), self.ack.nak.eq(0), self.ack.seq.eq(expected - 1),
                         self.duplicates.eq(self.duplicates + 1)]
        with m.Elif(drop):
            with m.If(~good):
                m.d.sync += self.crc_errors.eq(self.crc_errors + 1)
            with m.If(~nak_sent):
                m.d.sync += [self.ack.valid.eq(1), self.ack.nak.eq(1), self.ack.seq.eq(expected), nak_sent.eq(1)]

        # ---- read out: one beat per cycle the output takes
        o_beat = Signal(range(L))
        load = ~self.out.valid | self.out.ready
        m.d.comb += [rp.en.eq(load), rp.addr.eq(buffer_address(cfg, o_beat, head)), self.out.payload.data.eq(rp.data)]
        with m.If(load):
            m.d.sync += self.out.valid.eq(count != 0)
            with m.If(count != 0):
                at_end = o_beat == meta_len[head]
                m.d.sync += self.out.payload.last.eq(at_end & meta_end[head])
                with m.If(at_end):
                    m.d.comb += freed.eq(1)
                    m.d.sync += [o_beat.eq(0), head.eq(Mux(head == Q - 1, 0, head + 1))]
                with m.Else():
                    m.d.sync += o_beat.eq(o_beat + 1)
        m.d.sync += count.eq(count + keep - freed)
        return m
