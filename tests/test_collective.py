"""The pod's collective engine (``hw.pod``) on rings of 1-5 nodes in the Amaranth simulator, bit for
bit against ``verif.golden.collectives``: every op, both ring modes, fp32 (FTZ and IEEE, with
specials) and int32, odd shapes and empty shards, tiny link buffers with AXI stalls and bit flips."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from hw.ici.config import ICIConfig
from hw.pod import ERRORS, CollectiveConfig, CollectiveEngine, CollectiveOp
from hw.pod.config import pod_link
from verif.golden.collectives import after_collective
from verif.pod_sim import run_collective

SPECIALS = np.array(
    [
        0x7FC00000,
        0xFFC00001,
        0x7F800000,
        0xFF800000,
        0x00000001,
        0x80400000,
        0x007FFFFF,
        0x00000000,
        0x80000000,
        0x7F7FFFFF,
        0xFF7FFFFF,
    ],
    dtype=np.uint32,
)


def node_arrays(rng, n, rows, cols, fmt, specials=0.1):
    """One array per node: int32 near the wrap-around points for int8; else fp32 of mixed
    magnitudes (so additions round and cancel) with ``specials`` of the entries special values."""
    out = []
    for _ in range(n):
        if fmt == "int8":
            x = rng.integers(-(2**31), 2**31, size=(rows, cols), dtype=np.int64).astype(np.int32)
        else:
            x = (rng.standard_normal((rows, cols)) * 2.0 ** rng.integers(-30, 30, (rows, cols))).astype(np.float32)
            hit = rng.random((rows, cols)) < specials
            x.view(np.uint32)[hit] = rng.choice(SPECIALS, size=int(hit.sum()))
        out.append(x)
    return out


def expected(op, arrays, subnormals, bidirectional):
    return after_collective(op, arrays, subnormals=subnormals, bidirectional=bidirectional)


def check_cycles(res, cfg, op, arrays, bidirectional):
    """The last node's cycles are within 5 % of ``verif.collective_model.collective_cycles``."""
    from verif.collective_model import collective_cycles

    rows, cols = arrays[0].shape
    model = collective_cycles(cfg, op, rows, cols * 4, len(arrays), bidirectional=bidirectional)
    assert abs(max(res["cycles"]) - model) <= 0.05 * model, (res["cycles"], model)


def check(res, exp, seed):
    assert res["error"] == [0] * len(exp) and not res["framing_error"] and not res["write_error"], res
    for k, (got, want) in enumerate(zip(res["out"], exp)):
        bad = np.argwhere(got.view(np.uint32) != want.view(np.uint32))
        assert bad.size == 0, (
            f"seed {seed}: node {k}: {len(bad)} elements differ, first at {tuple(bad[0])}: "
            f"got {got.view(np.uint32)[tuple(bad[0])]:#010x} "
            f"expected {want.view(np.uint32)[tuple(bad[0])]:#010x}"
        )


@pytest.mark.parametrize(
    "op,n,rows,cols,bidirectional,fmt,subnormals",
    [
        ("all_reduce", 4, 9, 7, True, "bf16", "ftz"),
        ("all_reduce", 3, 7, 5, False, "int8", "ftz"),
        ("reduce_scatter", 3, 8, 9, False, "bf16", "ieee"),
        ("reduce_scatter", 4, 6, 3, True, "bf16", "ieee"),
        ("all_gather", 5, 7, 11, True, "bf16", "ftz"),
        ("all_gather", 2, 3, 2, False, "int8", "ftz"),
    ],
)
def test_collective_is_bit_exact(op, n, rows, cols, bidirectional, fmt, subnormals, seed):
    """Each op on odd shapes (rows not divisible by N, rows not whole beats), with 10 % specials (NaN
    with payloads, infinities, subnormals, signed zeros): every node's memory equals the golden
    model's, bit for bit; an all-gather copies NaN payloads and subnormals unchanged; the cycles are
    within 5 % of the cost model."""
    rng = np.random.default_rng(seed)
    arrays = node_arrays(rng, n, rows, cols, fmt)
    cfg = CollectiveConfig(fmt=fmt, subnormals=subnormals)
    res = run_collective(cfg, arrays, op, bidirectional=bidirectional, pad_bytes=32 * (n % 2))
    check(res, expected(op, arrays, subnormals, bidirectional), seed)
    check_cycles(res, cfg, op, arrays, bidirectional)


@pytest.mark.parametrize(
    "n,rows,cols,op",
    [(3, 1, 1, "all_reduce"), (4, 2, 3, "reduce_scatter"), (1, 5, 3, "all_reduce"), (2, 0, 4, "all_gather")],
)
def test_collective_small_and_empty_shards(n, rows, cols, op, seed):
    """One element on three nodes (two empty chunks), fewer rows than nodes, a ring of one (the
    arrays stay as they are), no rows at all: bit-exact, and every node finishes."""
    rng = np.random.default_rng(seed)
    arrays = node_arrays(rng, n, rows, cols, "bf16")
    res = run_collective(CollectiveConfig(), arrays, op, bidirectional=True)
    check(res, expected(op, arrays, "ftz", True), seed)
    check_cycles(res, CollectiveConfig(), op, arrays, True)


@pytest.mark.parametrize("beat_bytes,op", [(4, "all_reduce"), (16, "all_reduce"), (8, "reduce_scatter")])
def test_collective_tiny_buffers_stalls_and_bit_flips(beat_bytes, op, seed):
    """Receive buffers of 3 packets of one HBM beat (so slices of one HBM beat, so a row of 84 B is cut
    into three slices), every AXI ready and read beat withheld 30 % of cycles, 2 % of the wire's
    beats corrupted: the all-reduce, and the reduce-scatter whose drains read through their own
    port, are still bit-exact (no deadlock, nothing lost or doubled) and the links report the CRC
    errors and replays."""
    rng = np.random.default_rng(seed)
    arrays = node_arrays(rng, 3, 5, 21, "bf16")
    link = ICIConfig(beat_bytes=beat_bytes, packet_beats=32 // beat_bytes, rx_packets=3)
    cfg = CollectiveConfig(link=link)
    assert cfg.slice_hbm_beats == 1
    res = run_collective(cfg, arrays, op, bidirectional=True, seed=seed, stall_p=0.3, flip_p=0.02)
    check(res, expected(op, arrays, "ftz", True), seed)
    assert res["links"]["crc_errors"] > 0 and res["links"]["replays"] > 0, res["links"]


def test_collective_refuses_bad_descriptors():
    """Each refused descriptor sets its ERRORS code with ``done`` at once, and nothing starts."""
    eng = CollectiveEngine(CollectiveConfig())
    cases = [
        (dict(base=0x1010), 1),
        (dict(stride=0x28), 1),
        (dict(row_bytes=6), 2),
        (dict(row_bytes=0), 2),
        (dict(stride=32, row_bytes=36), 3),
        (dict(nodes=0), 4),
        (dict(nodes=9), 4),
        (dict(rank=4), 4),
    ]
    got = []

    async def tb(ctx):
        for change, _ in cases:
            desc = dict(op=CollectiveOp.ALL_REDUCE, nodes=4, rank=1, base=0x1000, stride=64, rows=8, row_bytes=40)
            desc.update(change)
            for k, v in desc.items():
                ctx.set(getattr(eng.desc, k), v)
            ctx.set(eng.start, 1)
            await ctx.tick()
            ctx.set(eng.start, 0)
            await ctx.tick()
            got.append((ctx.get(eng.error), ctx.get(eng.done), ctx.get(eng.busy)))

    sim = Simulator(eng)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert got == [(code, 1, 0) for _, code in cases]
    assert set(ERRORS) == {code for _, code in cases}


def test_collective_config_errors():
    with pytest.raises(ValueError, match="link.beat_bytes must be at most the HBM beat, 32; got 64"):
        CollectiveConfig(link=ICIConfig(beat_bytes=64))
    with pytest.raises(ValueError, match="link.rx_packets must be an integer from 3 to 64; got 2"):
        CollectiveConfig(link=ICIConfig(rx_packets=2))
    with pytest.raises(ValueError, match=r"must hold an HBM beat \(8 link beats\); got 4"):
        CollectiveConfig(link=ICIConfig(beat_bytes=4, packet_beats=4, rx_packets=3))
    with pytest.raises(TypeError, match="link must be an ICIConfig"):
        CollectiveConfig(link=8)
    with pytest.raises(ValueError, match="fmt must be one of"):
        CollectiveConfig(fmt="fp16")
    with pytest.raises(ValueError, match="max_nodes must be a power of two from 2 to 16; got 6"):
        CollectiveConfig(max_nodes=6)
    with pytest.raises(TypeError, match="config must be a CollectiveConfig"):
        CollectiveEngine("bf16")


@pytest.mark.parametrize("ccw", [False, True])
def test_schedule_matches_the_reference(ccw, seed):
    """RingSchedule's commands (all three outputs, under random back-pressure) equal
    ``verif.collective_model.ring_steps`` for 12 random descriptors: every op, rings of 2-8, rows
    0-40 (fewer than the nodes too), rows of 4 B to 1.3 KB (wider than a slice: column slices)."""
    from hw.pod.schedule import RingSchedule
    from verif.collective_model import OPS, ring_steps

    rng = np.random.default_rng(seed)
    cfg = CollectiveConfig(link=ICIConfig(beat_bytes=8, packet_beats=16, rx_packets=5))
    dut = RingSchedule(cfg, ccw=ccw)
    cases = [
        (
            OPS[int(rng.integers(3))],
            int(rng.integers(2, 9)),
            int(rng.integers(0, 41)),
            4 * int(rng.integers(1, 330)),
            ccw or bool(rng.integers(2)),  # the counter-clockwise direction works on bidirectional rings only
        )
        for _ in range(12)
    ]
    got = []

    async def tb(ctx):
        for op, n, rows, row_bytes, bidi in cases:
            stride = -(-row_bytes // 32) * 32 + 64
            for k, v in dict(
                op=CollectiveOp[op.upper()],
                nodes=n,
                rank=int(rng.integers(n)),
                base=0x4000,
                stride=stride,
                rows=rows,
                row_bytes=row_bytes,
                bidirectional=int(bidi),
            ).items():
                ctx.set(getattr(dut.desc, k), v)
            rank = ctx.get(dut.desc.rank)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            outs = {"comb": [], "read": [], "write": []}
            for _ in range(20_000):
                for name in outs:
                    ctx.set(getattr(dut, name).ready, int(rng.random() < 0.6))
                await ctx.delay(1e-9)
                for name in outs:
                    o = getattr(dut, name)
                    if ctx.get(o.valid) and ctx.get(o.ready):
                        c = ctx.get(o.payload)
                        off = c.addr - 0x4000
                        outs[name].append(
                            (
                                off // stride,
                                c.rows,
                                off % stride // 32,
                                c.hbm_beats,
                                c.row_end,
                                c.beats,
                                c.local,
                                c.remote,
                                c.tx,
                                c.hbm,
                            )
                        )
                await ctx.tick()
                if ctx.get(dut.done):
                    break
            ref = [
                tuple(int(v) for v in s.__dict__.values())
                for s in ring_steps(cfg, op, rows, row_bytes, n, rank, bidirectional=bidi, ccw=ccw)
            ]
            got.append((op, n, rows, row_bytes, bidi, rank, outs, ref))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    for op, n, rows, row_bytes, bidi, rank, outs, ref in got:
        where = f"seed {seed}: {op} N={n} rank {rank} rows {rows} row_bytes {row_bytes} bidirectional {bidi}"
        assert [tuple(int(v) for v in c) for c in outs["comb"]] == ref, where
        assert [tuple(int(v) for v in c) for c in outs["read"]] == [s for s in ref if s[6]], where
        assert [tuple(int(v) for v in c) for c in outs["write"]] == [s for s in ref if s[9]], where
    assert sum(len(r[7]) for r in got) > 50


def test_reduce_scatter_drains_beside_the_next_slice():
    """A reduce-scatter's last phase (the neighbour's partial sum plus the local slice, written) runs
    beside the next slice's first phase, its local slice read through the drain's own port, as an
    all-gather's last phase does. 4 nodes, one-row slices (receive buffers of 3 packets), two slices
    per chunk: pinned at 574 cycles (with the last phase run alone: 641, the links idle in it)."""
    cfg = CollectiveConfig(link=pod_link(rx_packets=3))
    assert cfg.slice_hbm_beats == 8
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((8, 64)).astype(np.float32) for _ in range(4)]
    res = run_collective(cfg, arrays, "reduce_scatter")
    check(res, expected("reduce_scatter", arrays, "ftz", False), 1)
    check_cycles(res, cfg, "reduce_scatter", arrays, False)
    assert res["cycles"] == [574] * 4
