# amaranth: UnusedElaboratable=no
"""The full register slice (:class:`hw.skid_buffer.SkidBuffer`) and the AXI4 register slice built on
it (:class:`hw.axi_slice.AXI4RegisterSlice`), in Amaranth's simulator."""

from __future__ import annotations

import numpy as np
import pytest

from hw.axi_slice import CHANNELS, AXI4RegisterSlice, _payloads
from hw.skid_buffer import SkidBuffer
from verif.amaranth_tb import run_testbench, stream_traffic


def _run(in_p: float, out_p: float, seed: int, count: int = 300):
    """Random producer and consumer around a SkidBuffer (``verif.amaranth_tb.stream_traffic``)."""
    return stream_traffic(SkidBuffer(16), in_p, out_p, seed, count, registered_ready=True)


def test_full_rate_and_one_cycle_latency():
    """Producer and consumer always willing: one transfer per cycle, each out exactly one cycle
    after it went in."""
    sent, got, t_in, t_out = _run(1.0, 1.0, seed=1)
    assert got == sent
    assert t_in == list(range(300))
    assert t_out == [t + 1 for t in t_in]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_backpressure_keeps_order_and_every_value(seed):
    """Random offers and random back-pressure: nothing lost, duplicated or reordered, and a value
    never leaves in the cycle it entered."""
    sent, got, t_in, t_out = _run(0.8, 0.5, seed)
    assert got == sent
    assert all(o > i for i, o in zip(t_in, t_out))


def test_stall_fills_both_registers_then_drains_in_order():
    """The exact skid sequence: the consumer stalls while the producer offers 1, 2, 3 in a row.
    1 sits in the main register, 2 (taken in the cycle the stall began, ready still high) in the
    skid register, 3 waits with ready low; when the consumer is ready again, 1, 2, 3 leave on three
    consecutive cycles and ready rises the cycle after the skid register empties. The payload does
    not change while valid is high and ready low."""
    dut = SkidBuffer(8)
    trace = []

    async def bench(ctx):
        values = [1, 2, 3]
        ctx.set(dut.o.ready, 0)
        for cycle in range(9):
            ctx.set(dut.o.ready, cycle >= 4)
            ctx.set(dut.i.valid, bool(values))
            ctx.set(dut.i.payload, values[0] if values else 0)
            took = bool(values) and ctx.get(dut.i.ready)
            out = ctx.get(dut.o.payload) if ctx.get(dut.o.valid) and ctx.get(dut.o.ready) else None
            trace.append((ctx.get(dut.i.ready), ctx.get(dut.o.valid), ctx.get(dut.o.payload), out))
            if took:
                values.pop(0)
            await ctx.tick()

    run_testbench(dut, bench)
    # (i.ready, o.valid, o.payload, value out) per cycle
    assert trace == [
        (1, 0, 0, None),
        (1, 1, 1, None),
        (0, 1, 1, None),
        (0, 1, 1, None),
        (0, 1, 1, 1),
        (1, 1, 2, 2),
        (1, 1, 3, 3),
        (1, 0, 0, None),
        (1, 0, 0, None),
    ]


def test_bad_shape():
    with pytest.raises(TypeError, match="shape"):
        SkidBuffer("wide")


# ---------------------------------------------------------------- AXI4 register slice


def _slice_traffic(channels, forward, seed: int, beats: int = 120):
    """Random traffic on all five channels of a slice registering ``channels`` fully and ``forward``
    forward only; returns per channel the payloads in and the payloads out."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    dut = AXI4RegisterSlice(20, 32, 2, channels=channels, forward=forward)
    fields = _payloads(20, 32, 2)
    sides = {ch: (dut.s, dut.m) if ch in ("aw", "w", "ar") else (dut.m, dut.s) for ch in CHANNELS}
    sent = {ch: [] for ch in CHANNELS}
    got = {ch: [] for ch in CHANNELS}

    def value(ch, n):
        return {f: int(rng.integers(0, 1 << w)) for f, w in fields[ch].items()} | {"n": n}

    async def bench(ctx):
        pending = {ch: value(ch, 0) for ch in CHANNELS}
        for _cycle in range(40 * beats):
            if all(len(got[ch]) == beats for ch in CHANNELS):
                return
            offers = {}
            for ch in CHANNELS:
                src, dst = sides[ch]
                offers[ch] = len(sent[ch]) < beats and rng.random() < 0.7
                ctx.set(getattr(src, ch + "valid"), offers[ch])
                for f in fields[ch]:
                    ctx.set(getattr(src, ch + f), pending[ch][f])
                ctx.set(getattr(dst, ch + "ready"), rng.random() < 0.6)
            for ch in CHANNELS:
                src, dst = sides[ch]
                if ctx.get(getattr(dst, ch + "valid")) and ctx.get(getattr(dst, ch + "ready")):
                    got[ch].append({f: ctx.get(getattr(dst, ch + f)) for f in fields[ch]})
                if offers[ch] and ctx.get(getattr(src, ch + "ready")):
                    sent[ch].append({f: pending[ch][f] for f in fields[ch]})
                    pending[ch] = value(ch, len(sent[ch]))
            await ctx.tick()
        raise AssertionError("hang: " + ", ".join(f"{ch} {len(got[ch])}/{beats}" for ch in CHANNELS))

    run_testbench(dut, bench)
    return sent, got


@pytest.mark.parametrize(
    "channels,forward,seed", [(("aw", "ar"), ("w",), 1), (CHANNELS, (), 2), (("b",), ("r", "aw"), 3)]
)
def test_axi_slice_passes_every_channel_in_order(channels, forward, seed):
    """Every channel, registered (fully or forward) or passed through, delivers each payload field
    unchanged, in order, none lost or duplicated, under random VALID and READY."""
    sent, got = _slice_traffic(channels, forward, seed)
    for ch in CHANNELS:
        assert got[ch] == sent[ch], ch


def test_axi_slice_registers_exactly_the_chosen_channels():
    """A fully registered channel's READY (toward its source) does not follow its destination's
    READY in the same cycle and its VALID arrives a cycle later; a forward-registered channel's VALID
    arrives a cycle later and, holding a transfer, its READY follows the destination's; a
    passed-through channel follows at once."""
    dut = AXI4RegisterSlice(20, 32, 1, channels=("w", "r"), forward=("ar",))
    seen = {}

    async def bench(ctx):
        for ch in CHANNELS:
            src, dst = (dut.s, dut.m) if ch in ("aw", "w", "ar") else (dut.m, dut.s)
            ctx.set(getattr(src, ch + "valid"), 1)
            ctx.set(getattr(dst, ch + "ready"), 0)
        # after a tick the registered channels hold a transfer in the main register
        await ctx.tick()
        for ch in CHANNELS:
            src, dst = (dut.s, dut.m) if ch in ("aw", "w", "ar") else (dut.m, dut.s)
            v0 = ctx.get(getattr(dst, ch + "valid"))
            r0 = ctx.get(getattr(src, ch + "ready"))
            ctx.set(getattr(dst, ch + "ready"), 1)
            seen[ch] = (v0, r0, ctx.get(getattr(src, ch + "ready")))

    run_testbench(dut, bench)
    # registered: valid out, ready still high from the empty skid register and unmoved by dst ready
    assert seen["w"] == (1, 1, 1) and seen["r"] == (1, 1, 1)
    # forward: valid out a cycle later, ready low while holding it and the destination stalls,
    # high in the same cycle as the destination's ready
    assert seen["ar"] == (1, 0, 1)
    # passed through: valid at once, ready follows the destination's ready combinationally
    for ch in ("aw", "b"):
        assert seen[ch] == (1, 0, 1), ch


def test_axi_slice_bad_arguments():
    with pytest.raises(ValueError, match="channels: unknown channel 'x'; allowed: aw, w, b, ar, r"):
        AXI4RegisterSlice(20, 32, 1, channels=("aw", "x"))
    with pytest.raises(TypeError, match="channels must be a tuple"):
        AXI4RegisterSlice(20, 32, 1, channels="aw")
    with pytest.raises(ValueError, match="data_bits must be a multiple of 8"):
        AXI4RegisterSlice(20, 30, 1)
    with pytest.raises(ValueError, match="id_bits"):
        AXI4RegisterSlice(20, 32, 0)
    with pytest.raises(ValueError, match="channels and forward both name w; a channel takes one kind of slice"):
        AXI4RegisterSlice(20, 32, 1, channels=("w",), forward=("w",))
    with pytest.raises(ValueError, match="forward: unknown channel 'q'"):
        AXI4RegisterSlice(20, 32, 1, forward=("q",))
