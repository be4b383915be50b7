"""The forward register slice (:class:`hw.stream_register.StreamRegister`) in Amaranth's simulator."""

from __future__ import annotations

import pytest

from hw.stream_register import StreamRegister
from verif.amaranth_tb import run_testbench, stream_traffic


def _run(in_p: float, out_p: float, seed: int, count: int = 200):
    """Random producer and consumer around a StreamRegister (``verif.amaranth_tb.stream_traffic``)."""
    return stream_traffic(StreamRegister(16), in_p, out_p, seed, count)


def test_full_rate_and_one_cycle_latency():
    """Producer and consumer always willing: one transfer per cycle, each out exactly one cycle
    after it went in."""
    sent, got, t_in, t_out = _run(1.0, 1.0, seed=1)
    assert got == sent
    assert t_in == list(range(200))
    assert t_out == [t + 1 for t in t_in]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_backpressure_keeps_order_and_every_value(seed):
    """Random offers and random back-pressure: nothing lost, duplicated or reordered, and a value
    never leaves in the cycle it entered."""
    sent, got, t_in, t_out = _run(0.7, 0.5, seed)
    assert got == sent
    assert all(o > i for i, o in zip(t_in, t_out))


def test_payload_holds_while_stalled():
    """The stream rule: while valid is high and ready low, the payload does not change."""
    dut = StreamRegister(8)

    async def bench(ctx):
        ctx.set(dut.o.ready, 0)
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.i.payload, 0xA5)
        await ctx.tick()
        assert ctx.get(dut.o.valid) == 1 and ctx.get(dut.o.payload) == 0xA5
        assert ctx.get(dut.i.ready) == 0
        ctx.set(dut.i.payload, 0x3C)
        for _ in range(3):
            await ctx.tick()
            assert ctx.get(dut.o.payload) == 0xA5
        ctx.set(dut.o.ready, 1)
        assert ctx.get(dut.i.ready) == 1
        await ctx.tick()
        assert ctx.get(dut.o.payload) == 0x3C

    run_testbench(dut, bench)


def test_bad_shape():
    with pytest.raises(TypeError, match="shape"):
        StreamRegister("wide")


def test_hbm_queue_empty_covers_the_request_register():
    """Regression guard for the HBM controller's request register: a posted write waits a cycle in
    the register before the queue holds it, and ``queue_empty0`` must be low then too (the GEMM
    benches' drain rule reads it to know every accepted write is on its way to the pins). One
    one-beat write burst to address 0 on one pseudo-channel: from the cycle after its W beat is
    taken until its ACT's tRCD has passed, ``queue_empty0`` is 0 in every cycle."""
    from hw.hbm.axi import AXI_INCR, HBMController
    from hw.hbm.config import HBMConfig

    cfg = HBMConfig(pseudo_channels=1)
    dut = HBMController(cfg, axi_ports=1, id_bits=1, rob_depth=16)
    axi = dut.axi0
    seen = []

    async def bench(ctx):
        for sig, v in (
            (axi.awvalid, 1),
            (axi.awaddr, 0),
            (axi.awlen, 0),
            (axi.awsize, cfg.offset_bits),
            (axi.awburst, AXI_INCR),
            (axi.wvalid, 1),
            (axi.wlast, 1),
            (axi.wdata, 0x1234),
            (axi.wstrb, (1 << cfg.burst_bytes) - 1),
            (axi.bready, 1),
        ):
            ctx.set(sig, v)
        taken = None
        for cycle in range(40):
            aw_now = ctx.get(axi.awvalid) and ctx.get(axi.awready)
            if taken is None and ctx.get(axi.wvalid) and ctx.get(axi.wready):
                taken = cycle
            await ctx.tick()
            if aw_now:
                ctx.set(axi.awvalid, 0)
            if taken is not None:
                ctx.set(axi.wvalid, 0)
                seen.append(ctx.get(dut.queue_empty0))
        assert taken is not None, "the W beat was never taken"

    run_testbench(dut, bench)
    assert len(seen) > cfg.timing.tRCD and seen[: cfg.timing.tRCD] == [0] * cfg.timing.tRCD, seen
