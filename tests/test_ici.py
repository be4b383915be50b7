"""The ICI link (``hw.ici``) in the Amaranth simulator: messages arrive whole and in order under
back-pressure and bit flips, each corrupted packet is dropped and sent again, and the link's
cycles are the cycle model's (``verif.ici_model``)."""

from __future__ import annotations

import random
import sys

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hw.ici import ICIConfig, ICIReceiver, ICITransmitter, ICIWire
from hw.ici.transmitter import CRC
from verif.ici_model import link_cycles, link_throughput, packets_of


class Link(Elaboratable):
    """Transmitter, wire and receiver, each reachable from the testbench."""

    def __init__(self, cfg):
        self.tx, self.wire, self.rx = ICITransmitter(cfg), ICIWire(cfg), ICIReceiver(cfg)

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx, m.submodules.wire, m.submodules.rx = self.tx, self.wire, self.rx
        wiring.connect(m, self.tx.flit, self.wire.tx_flit)
        wiring.connect(m, self.wire.rx_flit, self.rx.flit)
        wiring.connect(m, self.rx.ack, self.wire.rx_ack)
        wiring.connect(m, self.wire.tx_ack, self.tx.ack)
        return m


def run(cfg, msgs, *, seed=1, in_p=1.0, out_p=1.0, flip_p=0.0, flip_headers=(), max_cycles=100_000):
    """Send ``msgs`` (lists of beat values) through a link; returns (messages received, counters).
    ``flip_p``: per cycle, the probability that one random bit of the beat leaving the wire flips;
    ``flip_headers``: the arrivals (0-based, replays counted) of header beats to flip bit 20 of."""
    dut = Link(cfg)
    # Amaranth's simulator compiles the parallel CRC of a 32-byte beat (an XOR of up to 288 terms
    # per bit) into Python expressions nested deeper than the default recursion limit
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    rng = random.Random(seed)
    got, stats = [], {}

    async def source(ctx):
        for msg in msgs:
            for i, beat in enumerate(msg):
                while rng.random() > in_p:
                    ctx.set(dut.tx.inp.valid, 0)
                    await ctx.tick()
                ctx.set(dut.tx.inp.valid, 1)
                ctx.set(dut.tx.inp.payload.data, beat)
                ctx.set(dut.tx.inp.payload.last, i == len(msg) - 1)
                await ctx.tick().until(dut.tx.inp.ready)
        ctx.set(dut.tx.inp.valid, 0)

    async def sink(ctx):
        cur, cycle, busy, headers, flits = [], 0, 0, 0, []
        while len(got) < len(msgs):
            assert cycle < max_cycles, f"no progress after {cycle} cycles: {len(got)} of {len(msgs)} messages"
            ctx.set(dut.rx.out.ready, rng.random() < out_p)
            flip = (1 << rng.randrange(cfg.width)) if rng.random() < flip_p else 0
            if ctx.get(dut.wire.rx_flit.valid) and ctx.get(dut.wire.rx_flit.first):
                if headers in flip_headers:
                    flip = 1 << 20
                headers += 1
            ctx.set(dut.wire.flip, flip)
            *_, valid, ready, data, last, b, first, tx_data = await ctx.tick().sample(
                dut.rx.out.valid,
                dut.rx.out.ready,
                dut.rx.out.payload.data,
                dut.rx.out.payload.last,
                dut.tx.flit.valid,
                dut.tx.flit.first,
                dut.tx.flit.data,
            )
            if b:  # the forward lane at the transmitter: (cycle, header?, data)
                flits.append((cycle, first, tx_data))
            cycle += 1
            busy += b
            if valid and ready:
                cur.append(data)
                if last:
                    got.append(cur)
                    cur = []
        stats.update(
            cycles=cycle,
            busy=busy,
            flits=flits,
            tx_packets=ctx.get(dut.tx.packets),
            replays=ctx.get(dut.tx.replays),
            timeouts=ctx.get(dut.tx.timeouts),
            rx_packets=ctx.get(dut.rx.packets),
            crc_errors=ctx.get(dut.rx.crc_errors),
            duplicates=ctx.get(dut.rx.duplicates),
        )

    sim.add_process(source)
    sim.add_testbench(sink)
    sim.run()
    return got, stats


def random_messages(rng, cfg, count, longest):
    return [[rng.getrandbits(cfg.width) for _ in range(rng.randint(1, longest))] for _ in range(count)]


def test_config_errors_name_the_parameter():
    with pytest.raises(ValueError, match="beat_bytes must be a power of two from 4 to 64; got 12"):
        ICIConfig(beat_bytes=12)
    with pytest.raises(TypeError, match="latency_cycles must be an int"):
        ICIConfig(latency_cycles=2.5)
    with pytest.raises(ValueError, match="packet_beats"):
        ICIConfig(packet_beats=257)
    with pytest.raises(ValueError, match="rx_packets"):
        ICIConfig(rx_packets=1)
    with pytest.raises(ValueError, match="replay_packets must be a power of two"):
        ICIConfig(replay_packets=6)
    with pytest.raises(ValueError, match="replay_timeout_cycles"):
        ICIConfig(latency_cycles=10, replay_timeout_cycles=20)
    with pytest.raises(TypeError, match="config must be an ICIConfig"):
        ICITransmitter({"beat_bytes": 8})
    assert ICIConfig().replay_timeout_cycles == 4 * (2 * 4 + 32 + 2) + 16
    assert ICIConfig(replay_packets=64).seq_bits == 7


def test_packets_on_the_wire_carry_the_documented_header_and_crc():
    """The forward lane of one 3-beat message: header 0x10200 (sequence number 0 in bits 0-7, beats
    less one = 2 in bits 8-15, end of message in bit 16), the payload, then the Ethernet CRC-32 of
    the header and payload beats (``amaranth.lib.crc``'s software reference) in the low 32 bits.
    The receiver is built on the same assumptions, so only the wire can show them."""
    cfg = ICIConfig(beat_bytes=8, latency_cycles=2, packet_beats=4)
    payload = [0x0123456789ABCDEF, 0xFEDCBA9876543210, 0x00000000FFFFFFFF]
    got, st = run(cfg, [payload])
    assert got == [payload]
    beats = [data for _, _, data in st["flits"]]
    assert [first for _, first, _ in st["flits"]] == [1, 0, 0, 0, 0]
    assert beats[:4] == [0x10200, *payload]
    assert beats[4] == CRC(data_width=64).compute([0x10200, *payload])
    assert CRC(data_width=8).compute(b"123456789") == 0xCBF43926  # the catalogue's check value: Ethernet's


@pytest.mark.parametrize("in_p,out_p", [(1.0, 0.5), (0.6, 1.0), (0.7, 0.3)])
def test_messages_arrive_whole_and_in_order_under_back_pressure(seed, in_p, out_p):
    print(f"seed {seed}")
    rng = random.Random(seed)
    cfg = ICIConfig(beat_bytes=8, latency_cycles=3, packet_beats=6, rx_packets=2, replay_packets=4)
    msgs = random_messages(rng, cfg, 25, 20)
    got, st = run(cfg, msgs, seed=seed, in_p=in_p, out_p=out_p)
    assert got == msgs
    n = len(packets_of([len(m) for m in msgs], cfg.packet_beats))
    assert (st["tx_packets"], st["rx_packets"], st["replays"], st["crc_errors"], st["duplicates"]) == (n, n, 0, 0, 0)


@pytest.mark.parametrize("beat_bytes,latency,packet_beats", [(4, 1, 1), (8, 5, 8), (16, 12, 16)])
def test_bit_flips_are_dropped_and_replayed(seed, beat_bytes, latency, packet_beats):
    """A random bit flips in about one beat of 20 leaving the wire (header, payload or CRC): every
    message still arrives exactly once, whole and in order; the receiver counts the corrupted
    packets and the transmitter its go-back events. (32-byte beats work the same; their parallel CRC
    makes the Python simulator several times slower per cycle, so the suite stops at 16.)"""
    print(f"seed {seed}")
    rng = random.Random(seed)
    cfg = ICIConfig(
        beat_bytes=beat_bytes, latency_cycles=latency, packet_beats=packet_beats, rx_packets=3, replay_packets=4
    )
    msgs = random_messages(rng, cfg, 30 if beat_bytes <= 8 else 10, 3 * packet_beats)  # wide: slow to simulate
    got, st = run(cfg, msgs, seed=seed, flip_p=0.05, out_p=0.8)
    assert got == msgs
    n = len(packets_of([len(m) for m in msgs], cfg.packet_beats))
    assert st["rx_packets"] == n
    assert st["crc_errors"] > 0 and st["replays"] > 0, st
    assert st["tx_packets"] > n, st


def test_one_corrupted_header_costs_one_nak():
    """Bit 20 (an unused header bit) of the second header to arrive: the receiver drops that packet
    and the two after it (out of order), NAKs once, and the transmitter goes back to it."""
    cfg = ICIConfig(beat_bytes=8, latency_cycles=4, packet_beats=4, rx_packets=4, replay_packets=8)
    msgs = [[i * 100 + b for b in range(12)] for i in range(3)]
    got, st = run(cfg, msgs, flip_headers=(1,))
    assert got == msgs
    assert (st["crc_errors"], st["replays"], st["timeouts"], st["duplicates"], st["rx_packets"]) == (1, 1, 0, 0, 9)


def test_a_replay_corrupted_again_is_sent_after_the_timeout():
    """The second header and its replay (the fifth header to arrive) corrupted: the receiver NAKs
    once per run of bad packets, so the second replay comes from the transmitter's replay timer."""
    cfg = ICIConfig(beat_bytes=8, latency_cycles=4, packet_beats=4, rx_packets=4, replay_packets=8)
    msgs = [[i * 100 + b for b in range(12)] for i in range(3)]
    got, st = run(cfg, msgs, flip_headers=(1, 4))
    assert got == msgs
    assert (st["crc_errors"], st["replays"], st["timeouts"]) == (2, 2, 1), st


CYCLE_CASES = [  # latency, packet beats, credits, replay packets, message beats
    (4, 32, 4, 8, [1280]),  # the wire's rate: header and CRC per 32 beats
    (64, 32, 4, 8, [1280]),  # credit-bound: 4 packets per credit loop
    (64, 32, 8, 8, [1280]),
    (20, 8, 2, 2, [100, 3, 17]),  # replay-buffer-bound
    (1, 1, 2, 4, [5, 1, 2]),
    (30, 5, 3, 4, [7, 40, 1, 9]),
    (2, 16, 2, 2, [200]),
]


@pytest.mark.parametrize("latency,packet_beats,credits,replay,beats", CYCLE_CASES)
def test_cycle_model_is_exact(latency, packet_beats, credits, replay, beats):
    """Without faults and with an output that is always ready, the RTL's cycles and forward-lane
    beats are the model's."""
    cfg = ICIConfig(
        beat_bytes=8, latency_cycles=latency, packet_beats=packet_beats, rx_packets=credits, replay_packets=replay
    )
    rng = random.Random(1)
    msgs = [[rng.getrandbits(64) for _ in range(n)] for n in beats]
    got, st = run(cfg, msgs)
    assert got == msgs
    model = link_cycles(cfg, beats)
    assert (st["cycles"], st["busy"]) == (model["cycles"], model["wire_beats"])
    assert [c for c, first, _ in st["flits"] if first] == model["headers"]


def test_long_messages_use_the_wire_at_its_packet_rate():
    """1,280 beats in 32-beat packets at latency 4: 1,360 forward beats back to back, the payload at
    32/34 of the wire (94.1 %) in the steady state, 89.5 % of the run's 1,430 cycles. The closed
    form of the steady state is the rate of the cycle model's recurrence (which
    ``test_cycle_model_is_exact`` holds to the RTL) over a long message, wire-bound and
    credit-bound (latency 64 with 4 credits: 65.3 %)."""
    cfg = ICIConfig(beat_bytes=8, latency_cycles=4, packet_beats=32, rx_packets=4)
    assert round(link_throughput(cfg), 4) == 0.9412
    assert link_cycles(cfg, [1280])["cycles"] == 1430
    # 100 packets apart: 100 x 34 cycles on the wire; 25 credit loops of 196 cycles
    for c, spacing in ((cfg, 3400), (ICIConfig(latency_cycles=64, packet_beats=32, rx_packets=4), 4900)):
        h = link_cycles(c, [32 * 200])["headers"]
        assert h[-1] - h[-101] == spacing
        assert link_throughput(c) == 32 * 100 / spacing
    assert round(link_throughput(ICIConfig(latency_cycles=64, packet_beats=32, rx_packets=4)), 4) == 0.6531


def test_no_packet_is_sent_again_at_the_sequence_wrap():
    """Eight one-packet messages with 3-bit sequence numbers: after the packet numbered 7 the next
    number is 0 again, and with nothing stored there is nothing to send, credits or not. (The next
    number was once computed a bit too wide, 8, which differs from the stored count 0: with a
    credit at hand the transmitter sent slot 0's old packet as a ninth.)"""
    cfg = ICIConfig(beat_bytes=8, latency_cycles=1, packet_beats=6, rx_packets=4, replay_packets=4)
    msgs = [[j * 10 + b for b in range(6)] for j in range(8)]
    got, st = run(cfg, msgs)
    assert got == msgs
    assert (st["tx_packets"], st["rx_packets"], st["duplicates"]) == (8, 8, 0), st
