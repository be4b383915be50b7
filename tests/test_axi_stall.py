# amaranth: UnusedElaboratable=no
"""Random back-pressure on an AXI4 port (:class:`hw.axi_stall.AXI4Stall`), in Amaranth's simulator."""

from __future__ import annotations

import numpy as np
import pytest

from hw.axi_slice import CHANNELS, _payloads
from hw.axi_stall import AXI4Stall, lfsr_next, lfsr_start
from verif.amaranth_tb import run_testbench

SEED = 3  # the AXI4Stall seed of every test below (the LFSR model starts from the same states)


def _traffic(rate: int, cycles: int, in_p: float, out_p: float, seed: int):
    """Sources on all five channels that keep the AXI4 rules (VALID held with its payload until the
    handshake) and random READY (``in_p``, ``out_p``: their probabilities per cycle); checks each
    cycle that a handshake on one side is one on the other and that the destination's VALID is
    never withdrawn before its handshake. Returns, per channel,
    the payloads sent, the payloads received and the cycles a transfer was held back (source
    offering, destination ready, no transfer) and, per channel and cycle, whether it was open."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    dut = AXI4Stall(20, 32, 2, seed=SEED)
    fields = _payloads(20, 32, 2)
    sides = {ch: (dut.s, dut.m) if ch in ("aw", "w", "ar") else (dut.m, dut.s) for ch in CHANNELS}
    sent = {ch: [] for ch in CHANNELS}
    got = {ch: [] for ch in CHANNELS}
    held = dict.fromkeys(CHANNELS, 0)
    opened = {ch: [] for ch in CHANNELS}

    def value(ch):
        return {f: int(rng.integers(0, 1 << w)) for f, w in fields[ch].items()}

    async def bench(ctx):
        ctx.set(dut.rate, rate)
        pending = {ch: None for ch in CHANNELS}
        shown = dict.fromkeys(CHANNELS, False)  # the destination saw VALID last cycle, no handshake
        for _ in range(cycles):
            for ch in CHANNELS:
                src, dst = sides[ch]
                if pending[ch] is None and rng.random() < in_p:
                    pending[ch] = value(ch)
                    for f in fields[ch]:
                        ctx.set(getattr(src, ch + f), pending[ch][f])
                ctx.set(getattr(src, ch + "valid"), pending[ch] is not None)
                ctx.set(getattr(dst, ch + "ready"), rng.random() < out_p)
            for ch in CHANNELS:
                src, dst = sides[ch]
                d_valid, d_ready = ctx.get(getattr(dst, ch + "valid")), ctx.get(getattr(dst, ch + "ready"))
                s_ready = ctx.get(getattr(src, ch + "ready"))
                opened[ch].append(bool(d_valid or s_ready))
                assert d_valid or not shown[ch], f"{ch}: VALID withdrawn before its handshake"
                assert (d_valid and d_ready) == (pending[ch] is not None and s_ready), f"{ch}: one handshake"
                if d_valid and d_ready:
                    got[ch].append({f: ctx.get(getattr(dst, ch + f)) for f in fields[ch]})
                    sent[ch].append(pending[ch])
                    pending[ch] = None
                elif pending[ch] is not None and d_ready:
                    held[ch] += 1
                shown[ch] = bool(d_valid and not d_ready)
            await ctx.tick()

    run_testbench(dut, bench)
    return sent, got, held, opened


def _model_open(seed: int, channel: int, rate: int, cycles: int) -> list[bool]:
    """Whether a channel is open in each cycle from reset with both sides always willing, by the
    LFSR model: its low byte at or above ``rate``."""
    state, out = lfsr_start(seed, channel), []
    for _ in range(cycles):
        out.append((state & 0xFF) >= rate)
        state = lfsr_next(state)
    return out


@pytest.mark.parametrize("rate", [0, 1, 128, 255])
def test_always_willing_sides_pass_exactly_the_open_cycles(rate):
    """Source always offering, destination always ready: every channel is open in exactly the
    cycles the LFSR model says (its low byte at or above ``rate``), and passes one transfer in each."""
    sent, got, held, opened = _traffic(rate, 600, 1.0, 1.0, seed=1)
    for c, ch in enumerate(CHANNELS):
        assert opened[ch] == _model_open(SEED, c, rate, 600), ch
        assert got[ch] == sent[ch] and len(got[ch]) == sum(opened[ch]) == 600 - held[ch], ch


@pytest.mark.parametrize("rate", [0, 1, 128, 255])
def test_lfsr_period_closes_a_channel_in_rate_256ths_of_the_cycles(rate):
    """The model's LFSR is maximal (period 65,535: every non-zero 16-bit state once), so over a
    period a channel is closed in exactly 256 * rate - 1 cycles (the states with a low byte below
    ``rate``, without the all-zero state): the stated probability rate / 256."""
    state = first = lfsr_start(0, 0)
    closed = period = 0
    while period < 70_000:
        closed += (state & 0xFF) < rate
        state = lfsr_next(state)
        period += 1
        if state == first:
            break
    assert period == 65_535
    assert closed == max(0, 256 * rate - 1)


@pytest.mark.parametrize("rate,seed", [(0, 1), (96, 2), (200, 3)])
def test_random_traffic_keeps_order_and_the_handshake_rules(rate, seed):
    """Random VALID and READY on every channel: each payload arrives unchanged, in order, none lost
    or duplicated; VALID is never withdrawn before its handshake; rate 0 holds nothing back."""
    sent, got, held, _ = _traffic(rate, 1500, 0.7, 0.6, seed)
    for ch in CHANNELS:
        assert got[ch] == sent[ch], ch
        assert len(got[ch]) > 50, ch
        assert (held[ch] == 0) == (rate == 0), (ch, held[ch])


def test_bad_arguments():
    with pytest.raises(ValueError, match="seed"):
        AXI4Stall(20, 32, 2, seed=4096)
    with pytest.raises(TypeError, match="seed"):
        AXI4Stall(20, 32, 2, seed="1")
    with pytest.raises(ValueError, match="data_bits"):
        AXI4Stall(20, 4, 2)


def test_start_states_are_distinct_and_non_zero():
    """Every seed 0..4095 gives its five channels start states no other channel of any seed has, and
    none is 0 (the LFSR's lock-up state)."""
    starts = [lfsr_start(s, c) for s in range(4096) for c in range(len(CHANNELS))]
    assert len(set(starts)) == len(starts) == 20_480 and 0 not in starts
