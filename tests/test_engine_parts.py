# amaranth: UnusedElaboratable=no
"""The GEMM engine's components, each against its own contract in Amaranth's simulator.

The whole engine is tested against a Python AXI4 memory in ``test_engine.py`` and on the HBM
controller in ``test_gemm_top.py``; here the parts are driven with the descriptor unit and the
m-block sequencer in front of them (the registers a host writes), so a bug is found where it sits:
the sequencer's blocks and groups against :func:`verif.cycles.engine_blocking`, the A loader's bursts
and the words it stores, the weight loader's rows in tile order with their +0 padding, the C0
loader's groups, entries and bank hand-shake, the feeder's
activation beats (behind a real A loader) and its wait for the write-back, the accumulator's entries
and bank states, the write-back's bursts, byte enables and bf16 rounding, each under random
back-pressure on its streams; the performance counters' one counter per cycle.
"""

from __future__ import annotations

import random

import ml_dtypes
import numpy as np
import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hw.engine import EngineConfig
from hw.engine.a_loader import ALoader
from hw.engine.accumulator import Accumulator
from hw.engine.c0_loader import C0Loader
from hw.engine.csr import PERF_COUNTERS
from hw.engine.cursor import BlockCursor
from hw.engine.descriptor import DescriptorUnit
from hw.engine.feeder import Feeder, a_bank_connections
from hw.engine.interface import AccState, Why
from hw.engine.perf import PerfCounters
from hw.engine.sequencer import BlockSequencer
from hw.engine.weight_loader import WeightLoader
from hw.engine.write_address import WriteAddress
from hw.engine.write_data import WriteData
from hw.hbm.config import HBMConfig
from hw.mxu import MXUConfig
from verif.cycles import a_read_order, engine_blocking

HBM1 = HBMConfig(pseudo_channels=1)


class _Front(Elaboratable):
    """The descriptor unit and the sequencer in front of ``parts`` (engine components), their
    sequencer ports in ``seq_ports`` (a list of the parts' ``seq*`` members)."""

    def __init__(self, cfg, parts, seq_ports):
        self.du = DescriptorUnit(cfg)
        self.seq = BlockSequencer(cfg, len(seq_ports))
        self.parts, self.seq_ports = parts, seq_ports

    def elaborate(self, platform):
        m = Module()
        m.submodules.du, m.submodules.seq = du, seq = self.du, self.seq
        m.d.comb += [seq.desc.eq(du.desc), seq.prep.eq(du.prep), seq.g_final.eq(du.g_final)]
        for j, p in enumerate(self.parts):
            m.submodules[f"part{j}"] = p
            m.d.comb += [p.prep.eq(du.prep), p.go.eq(du.go)]
            if hasattr(p, "desc"):
                m.d.comb += p.desc.eq(du.desc)
            if hasattr(p, "run"):
                m.d.comb += p.run.eq(du.run)
            if isinstance(p, BlockCursor):
                m.d.comb += [p.nb.eq(du.desc.nb), p.counted.eq(1)]
        for j, port in enumerate(self.seq_ports):
            wiring.connect(m, port, getattr(seq, f"port{j}"))
        return m


def _stride(x: int) -> int:
    return -(-x // 32) * 32


def _descriptor(cfg, m, k, n, *, out_bf16=False):
    """Register values of a GEMM laid out from address 0x1000: A, B, D one after another."""
    ob = cfg.operand_bytes
    sa, sb, sd = _stride(k * ob), _stride(n * ob), _stride(n * (2 if out_bf16 else 4))
    a = 0x1000
    b = a + m * sa
    d = _stride(b + k * sb)
    return {
        "M": m,
        "K": k,
        "N": n,
        "FLAGS": 2 * out_bf16,
        "A_BASE": a,
        "A_STRIDE": sa,
        "B_BASE": b,
        "B_STRIDE": sb,
        "C_BASE": 0,
        "C_STRIDE": 0,
        "D_BASE": d,
        "D_STRIDE": sd,
    }


async def _start(ctx, du, regs):
    for name, v in regs.items():
        ctx.set(getattr(du, f"reg_{name}"), v)
    ctx.set(du.start, 1)
    await ctx.tick()
    ctx.set(du.start, 0)


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _memory_cycle(ctx, loader, rng, mem, pending):
    """One cycle of a random-speed AXI4 memory on a loader's AR/R channels (before the clock edge):
    AR ready 70 % of the cycles, the next pending beat of ``mem`` on R 60 % of them. Returns whether a
    beat is taken on R (valid and ready; the caller pops ``pending[0]`` after the edge) and the
    accepted AR burst's beat addresses (empty without one)."""
    ctx.set(loader.ar.ready, rng.random() < 0.7)
    r_ok = bool(pending) and rng.random() < 0.6
    ctx.set(loader.r.valid, r_ok)
    if r_ok:
        ctx.set(loader.r.payload.data, _element(mem, pending[0], 32))
    burst = []
    if ctx.get(loader.ar.valid) and ctx.get(loader.ar.ready):
        a, ln = ctx.get(loader.ar.payload.addr), ctx.get(loader.ar.payload.len)
        burst = [a + 32 * i for i in range(ln + 1)]
        pending.extend(burst)
    return r_ok and bool(ctx.get(loader.r.ready)), burst


def _element(mem, at, nbytes):
    """The little-endian value of ``nbytes`` bytes of ``mem`` (a uint8 array) at byte ``at``."""
    return int.from_bytes(mem[at : at + nbytes].tobytes(), "little")


def _small_engine(rows, cols, fmt):
    """An engine configuration with small buffers (16-row m-blocks, 64 accumulator entries, 512-byte A
    banks), so that a GEMM of a few dozen rows has several m-blocks, groups and passes."""
    return EngineConfig(
        mxu=MXUConfig(rows=rows, cols=cols, fmt=fmt), hbm=HBM1, m_block=16, acc_entries=64, a_buffer_bytes=512
    )


def _groups(cfg, m, k, n):
    """The engine's groups in order, as (first row, rows, first n-block, n-blocks), from the blocking of
    :func:`verif.cycles.engine_blocking`: each m-block's n-blocks in groups of its ``block_g``."""
    blocking, nbs = engine_blocking(m, k, n, cfg), -(-n // cfg.mxu.cols)
    groups, m0 = [], 0
    for mb, gb in zip(blocking["m_blocks"], blocking["block_g"], strict=True):
        groups += [(m0, mb, nb0, min(gb, nbs - nb0)) for nb0 in range(0, nbs, gb)]
        m0 += mb
    return groups


# (rows, cols, fmt, m_block, a_buffer_bytes, acc_entries, M, K, N): long and short blocks, ramps,
# the look-ahead, more blocks than the sequencer's table holds, groups smaller than the n-blocks
BLOCKINGS = [
    (4, 4, "bf16", 16, 512, 64, 62, 64, 4),
    (4, 4, "bf16", 16, 512, 64, 150, 8, 40),
    (8, 1, "bf16", 32, 4096, 32, 100, 40, 1),
    (2, 2, "int8", 8, 256, 16, 77, 5, 9),
    (16, 16, "bf16", 128, 32768, 512, 256, 256, 256),
]


@pytest.mark.parametrize("case", BLOCKINGS, ids=[f"{c[0]}x{c[1]}-{c[2]}-{c[6]}x{c[7]}x{c[8]}" for c in BLOCKINGS])
def test_sequencer_blocks_and_groups_follow_the_blocking_rule(case, seed):
    """A cursor stepping its groups at random moments (the table fills only as far as it is allowed
    to) sees exactly the m-blocks and group sizes of ``verif.cycles.engine_blocking``; the descriptor
    unit's ``mbmax`` and ``g`` are the model's ``mb_max`` and ``g``."""
    print(f"seed {seed}")
    rows, cols, fmt, mblock, abuf, acc, m, k, n = case
    cfg = EngineConfig(
        mxu=MXUConfig(rows=rows, cols=cols, fmt=fmt), hbm=HBM1, m_block=mblock, a_buffer_bytes=abuf, acc_entries=acc
    )
    model = engine_blocking(m, k, n, cfg)
    nb = -(-n // cols)
    want = []
    for mb, gb in zip(model["m_blocks"], model["block_g"]):
        want += [(mb, nb0, min(gb, nb - nb0)) for nb0 in range(0, nb, gb)]
    cur = BlockCursor(cfg)
    dut = _Front(cfg, [cur], [cur.seq])
    rng = random.Random(seed)
    got = []

    async def bench(ctx):
        await _start(ctx, dut.du, _descriptor(cfg, m, k, n))
        while not ctx.get(dut.du.run):
            await ctx.tick()
        assert (ctx.get(dut.du.desc.mbmax), ctx.get(dut.du.desc.g)) == (model["mb_max"], model["g"])
        for _ in range(20 * len(want) + 100):
            step = ctx.get(cur.ok) and not ctx.get(cur.fin) and rng.random() < 0.5
            if step:
                got.append((ctx.get(cur.mb), ctx.get(cur.nb0), ctx.get(cur.gc)))
            ctx.set(cur.next_group, step)
            await ctx.tick()
            if ctx.get(cur.fin):
                break
        assert ctx.get(cur.fin)

    _run(dut, bench)
    assert got == want


# (rows, fmt, M, K, beats per A row, beats per row per pass = 2 chunks of max(1, R * ob / 32) beats)
@pytest.mark.parametrize(
    "rows,fmt,m,k,rb,q", [(8, "bf16", 100, 40, 3, 2), (16, "bf16", 20, 100, 7, 2), (4, "int8", 30, 70, 3, 2)]
)
def test_a_loader_bursts_and_stored_words(rows, fmt, m, k, rb, q, seed):
    """Every AR burst of the A loader is one row's part of a pass (random AR ready, random gaps on R);
    when a bank is ``full``, each word the feeder's read port returns is the row's bytes of A, and the
    bank is only reused after the feeder releases it."""
    print(f"seed {seed}")
    cfg = EngineConfig(
        mxu=MXUConfig(rows=rows, cols=1, fmt=fmt), hbm=HBM1, m_block=32, acc_entries=32, a_buffer_bytes=4096
    )
    regs = _descriptor(cfg, m, k, 1)
    blocks = engine_blocking(m, k, 1, cfg)["m_blocks"]
    al = ALoader(cfg)
    dut = _Front(cfg, [al], [al.seq_read, al.seq_store])
    rng = random.Random(seed)
    mem = np.random.default_rng(seed).integers(0, 256, 1 << 16, dtype=np.uint8)
    nsub = max(1, rows * cfg.operand_bytes // 32)
    kb, cpw = -(-k // rows), max(1, 32 // (rows * cfg.operand_bytes))
    wpr = -(-kb // cpw)  # A words per row
    depth = 4096 // (32 * nsub)  # words per bank
    beats, pending = [], []

    async def bench(ctx):
        await _start(ctx, dut.du, regs)
        m0, bank = 0, 0
        for mb in blocks:
            for _ in range(20000):
                if ctx.get(al.full) >> bank & 1:
                    break
                r_ok, burst = _memory_cycle(ctx, al, rng, mem, pending)
                if burst:
                    assert burst[0] // 4096 == (burst[-1] + 31) // 4096, "burst crosses 4 KiB"
                    beats.extend(burst)
                await ctx.tick()
                if r_ok:
                    pending.pop(0)
            ctx.set(al.r.valid, 0)
            ctx.set(al.ar.ready, 0)
            for i in range(mb):
                for wi in range(-(-rb // nsub)):
                    ctx.set(al.rd_addr, bank * depth + i * wpr + wi)
                    ctx.set(al.rd_en, 1)
                    await ctx.tick()
                    ctx.set(al.rd_en, 0)
                    word = ctx.get(al.rd_data).to_bytes(32 * nsub, "little")
                    row = regs["A_BASE"] + (m0 + i) * regs["A_STRIDE"]
                    n_bytes = 32 * min(nsub, rb - wi * nsub)
                    lo = row + wi * nsub * 32
                    assert word[:n_bytes] == mem[lo : lo + n_bytes].tobytes(), f"block row {m0 + i} word {wi}"
            ctx.set(al.free, 1)
            ctx.set(al.free_bank, bank)
            await ctx.tick()
            ctx.set(al.free, 0)
            assert not ctx.get(al.full) >> bank & 1
            m0, bank = m0 + mb, bank ^ 1

    _run(dut, bench)
    assert beats == a_read_order(blocks, rb, q, regs["A_BASE"], regs["A_STRIDE"])


def _bf16_rne(x: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 bits, RNE, NaN as the canonical quiet NaN 0x7FC0."""
    with np.errstate(invalid="ignore"):  # the NaN is replaced
        return np.where(np.isnan(x), np.uint16(0x7FC0), x.astype(ml_dtypes.bfloat16).view(np.uint16))


@pytest.mark.parametrize(
    "cols,out_bf16,n,m_block,acc,a_bytes,m",
    [
        (2, False, 7, 8, 32, 256, 21),
        (4, True, 13, 8, 32, 256, 21),
        (16, True, 49, 8, 32, 256, 21),
        (16, False, 49, 8, 32, 256, 21),
        (32, True, 97, 8, 32, 256, 21),
        (4, False, 4, 8, 32, 256, 21),
        (2, False, 7, 32, 64, 1024, 45),
    ],
    ids=[
        "2cols-fp32",
        "4cols-bf16",
        "16cols-bf16",
        "16cols-fp32",
        "32cols-bf16",
        "4cols-fp32-1nb",
        "2cols-fp32-groups-of-1",
    ],
)
def test_write_back_bursts_strobes_and_rounding(cols, out_bf16, n, m_block, acc, a_bytes, m, seed):
    """The write-back (address and data sides) writes every finished accumulator entry to its place
    in D, converted once to bf16 (RNE) when asked, with WSTRB covering exactly the columns < N: the
    bytes written are exactly D's, under random AW/W ready and B delays. Each bank's output beats
    arrive at random (READY with rising complete rows, DONE after the last beat) and an entry reads as
    garbage until its last k-block's beat is in, so a row read before it is complete is caught
    (with groups of one n-block a row's first entry is its last: the fifth case). Every third group
    is complete at once, so only the window after a group change holds its first read back; the
    last case's m-blocks take 2, 1 and 2 n-blocks per group, so the row segment changes length
    between groups: a last-piece flag computed with the previous group's row end, or a cursor step
    a cycle later, fails it (one read per piece is counted)."""
    print(f"seed {seed}")
    cfg = EngineConfig(
        mxu=MXUConfig(rows=2, cols=cols), hbm=HBM1, m_block=m_block, acc_entries=acc, a_buffer_bytes=a_bytes
    )
    k = 3
    regs = _descriptor(cfg, m, k, n, out_bf16=out_bf16)
    model = engine_blocking(m, k, n, cfg)
    if m_block == 32:  # the case's point: the group size changes between m-blocks
        assert model["block_g"] == [2, 1, 2], model
    wa, wd = WriteAddress(cfg), WriteData(cfg)
    dut = _Front(cfg, [wa, wd], [wa.seq, wd.seq])

    class Top(Elaboratable):
        def elaborate(self, platform):
            mod = Module()
            mod.submodules.front = dut
            wiring.connect(mod, wa.wlen, wd.wlen)
            return mod

    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    result = (nrng.standard_normal((m, n)) * 1e3).astype(np.float32)
    # RNE corners: ties to even (down and up), just below and above a tie, the largest finite
    # (rounds to inf), a subnormal tie, inf, NaN (canonical 0x7FC0 in bf16)
    corners = [
        0x3F808000,
        0x3F818000,
        0x3F807FFF,
        0x3F808001,
        0xBF818000,
        0x7F7FFFFF,
        0x00008000,
        0x7F800000,
        0x7F800001,
    ]
    result.view(np.uint32).reshape(-1)[: len(corners)] = corners
    # the groups in write-back order, bank 0, 1, 0, ...: (m0, mb, nb0, gc)
    groups, m0 = [], 0
    nb = -(-n // cols)
    for mb, gb in zip(model["m_blocks"], model["block_g"]):
        groups += [(m0, mb, nb0, min(gb, nb - nb0)) for nb0 in range(0, nb, gb)]
        m0 += mb
    padded = np.zeros((m, nb * cols), np.float32)
    padded[:, :n] = result

    def bank_image(q):
        m0, mb, nb0, gc = groups[q]
        img = {}
        for g in range(gc):
            for i in range(mb):
                lanes = padded[m0 + i, (nb0 + g) * cols : (nb0 + g + 1) * cols]
                img[g * mb + i] = int.from_bytes(lanes.tobytes(), "little")
        return img

    written: dict[int, int] = {}
    # accumulator reads: one per piece (at most PB bytes from the row segment's start), so a piece
    # taken with the previous group's geometry shows as one read too many even where its bytes are right
    eb = 2 if out_bf16 else 4
    pb = min(cols * eb, 32)
    want_reads = sum(mb * -(-(min((nb0 + gc) * cols, n) - nb0 * cols) * eb // pb) for _, mb, nb0, gc in groups)
    reads = []

    async def bench(ctx):
        await _start(ctx, dut.du, regs)
        banks = [bank_image(0), bank_image(1) if len(groups) > 1 else {}]
        loaded = [0, 1]
        kbs = -(-k // cfg.mxu.rows)
        wc = [0, 0]  # output beats written into each bank's group, in the order (k-block, g, i)

        def beats(q):
            return kbs * groups[q][1] * groups[q][3] if q < len(groups) else 0

        def final(b, e, count):  # entry e = g * mb + i holds its result after its last k-block's beat
            return count > (kbs - 1) * groups[loaded[b]][1] * groups[loaded[b]][3] + e

        def rows_done(b):  # rows whose last beat (last k-block, last n-block of the group) is written
            if loaded[b] >= len(groups):
                return 0
            _, mb, _, gc = groups[loaded[b]]
            return min(mb, max(0, wc[b] - (kbs * gc - 1) * mb))

        aws, b_due = [], []
        for cycle in range(50000):
            seen = list(wc)  # the beats written before this cycle's edge
            for b in range(2):
                # a beat written at this edge (half of the groups' beats every cycle, so the
                # write-back often finds the next bank DONE and reads it as soon as its window after
                # the group change allows); the write-back sees each bank's state and complete rows
                # after the edge
                if wc[b] < beats(loaded[b]) and rng.random() < (1.0 if loaded[b] % 4 < 2 else 0.3):
                    wc[b] += 1
                busy = wc[b] < beats(loaded[b])
                ctx.set(wd.rows_done_next[b], rows_done(b))
                ctx.set(
                    wd.acc_state_next[b],
                    AccState.READY if busy else AccState.DONE if loaded[b] < len(groups) else AccState.FREE,
                )
            ctx.set(wa.aw.ready, rng.random() < 0.6)
            ctx.set(wd.w.ready, bool(aws) and rng.random() < 0.6)
            ctx.set(wa.b, bool(b_due) and b_due[0] <= cycle)
            rd = ctx.get(wd.rd_en), ctx.get(wd.rd_addr)
            reads.append(rd[0])
            rel = ctx.get(wd.free), ctx.get(wd.free_bank)
            if ctx.get(wa.b):
                b_due.pop(0)
            if ctx.get(wa.aw.valid) and ctx.get(wa.aw.ready):
                aws.append([ctx.get(wa.aw.payload.addr), ctx.get(wa.aw.payload.len) + 1])
            if ctx.get(wd.w.valid) and ctx.get(wd.w.ready):
                addr, left = aws[0]
                data = ctx.get(wd.w.payload.data).to_bytes(32, "little")
                strb = ctx.get(wd.w.payload.strb)
                assert ctx.get(wd.w.payload.last) == (left == 1)
                for i in range(32):
                    if strb >> i & 1:
                        assert addr + i not in written, f"byte 0x{addr + i:x} written twice"
                        written[addr + i] = data[i]
                aws[0] = [addr + 32, left - 1]
                if left == 1:
                    aws.pop(0)
                    b_due.append(cycle + rng.randrange(1, 6))
            if ctx.get(wa.idle) and ctx.get(wd.idle):
                break
            await ctx.tick()
            for b in range(2):
                if rd[0]:
                    done = loaded[b] < len(groups) and final(b, rd[1], seen[b])
                    ctx.set(wd.rd_data[b], banks[b].get(rd[1], 0) if done else rng.getrandbits(32 * cols))
            if rel[0]:
                b = rel[1]
                assert wc[b] == beats(loaded[b]), f"bank {b} freed before its group's last beat"
                loaded[b] += 2
                banks[b] = bank_image(loaded[b]) if loaded[b] < len(groups) else {}
                # every third group is complete at once (its bank DONE when the write-back gets to
                # it, so only the window after the group change holds the first read back)
                wc[b] = beats(loaded[b]) if loaded[b] % 3 == 2 else 0
        assert ctx.get(wa.idle) and ctx.get(wd.idle), "write-back did not finish"

    _run(Top(), bench)
    assert sum(reads) == want_reads, f"{sum(reads)} accumulator reads for {want_reads} pieces"
    out = _bf16_rne(result) if out_bf16 else result.view(np.uint32)
    raw = out.view(np.uint8).reshape(m, -1)
    want = {regs["D_BASE"] + i * regs["D_STRIDE"] + j: int(raw[i, j]) for i in range(m) for j in range(raw.shape[1])}
    assert sorted(written) == sorted(want), "bytes written are not exactly D's"
    assert written == want


def _bursts(addr, beats, bb):
    """The AXI4 INCR bursts (address, beats) of a transfer: at most 256 beats, none across 4 KiB."""
    out = []
    while beats:
        n = min(beats, (4096 - addr % 4096) // bb, 256)
        out.append((addr, n))
        addr, beats = addr + n * bb, beats - n
    return out


@pytest.mark.parametrize("bb", [32, 4])
def test_burst_splitter_bursts_latency_and_rate(bb, seed):
    """Random transfers (1 to 700 beats, some across 4 KiB boundaries) under random gaps on ``cmd`` and
    random ``ax`` back-pressure give exactly the legal bursts in order; with both sides always ready,
    single-burst transfers leave one burst per cycle, the first in the cycle of its ``cmd``; ``cmd.ready``
    is a register (it does not follow ``ax.ready`` within a cycle)."""
    from hw.engine.dma import BurstSplitter

    rnd = random.Random(seed)
    sp = BurstSplitter(34, bb)
    xfers = [(rnd.randrange(0, 1 << 20) * bb, rnd.choice([1, 2, rnd.randrange(1, 701)])) for _ in range(60)]
    xfers += [(4096 - bb, 2), ((1 << 34) - 512 * bb, 512)]
    singles = [(j * 4096, 1 + j % 200) for j in range(12)]  # one burst each
    want = [b for a, n in xfers for b in _bursts(a, n, bb)]
    got, timing = [], {}

    async def bench(ctx):
        for phase, items, busy_bus in (("random", xfers, True), ("rate", singles, False)):
            i, seen, cyc, start = 0, 0, 0, None
            n_out = len(want) if phase == "random" else len(singles)
            while seen < n_out:
                offer = i < len(items) and (not busy_bus or rnd.random() < 0.7)
                ctx.set(sp.cmd.valid, offer)
                if offer:
                    ctx.set(sp.cmd.payload.addr, items[i][0])
                    ctx.set(sp.cmd.payload.beats, items[i][1])
                ready = not busy_bus or rnd.random() < 0.6
                held = []
                for r in (not ready, ready):
                    ctx.set(sp.ax.ready, r)
                    held.append(ctx.get(sp.cmd.ready))
                assert held[0] == held[1], "cmd.ready follows ax.ready"
                if offer and ctx.get(sp.cmd.ready):
                    start = cyc if start is None else start
                    i += 1
                if ready and ctx.get(sp.ax.valid):
                    burst = (ctx.get(sp.ax.payload.addr), ctx.get(sp.ax.payload.len) + 1)
                    if phase == "random":
                        got.append(burst)
                    else:
                        timing.setdefault("first", cyc - start)
                        timing["last"] = cyc - start
                    seen += 1
                await ctx.tick()
                cyc += 1
            ctx.set(sp.cmd.valid, 0)
            for _ in range(3):
                await ctx.tick()
            assert not ctx.get(sp.busy) and not ctx.get(sp.ax.valid)

    _run(sp, bench)
    assert got == want
    assert timing == {"first": 0, "last": len(singles) - 1}


def _range_verdict(cfg, regs):
    """Run the descriptor unit alone on ``regs`` until it reports DONE or strobes ``go``; returns
    (error code, CYCLES at that point; None for a descriptor that passed to ``go``)."""
    du = DescriptorUnit(cfg)
    out = {}

    async def bench(ctx):
        await _start(ctx, du, regs)
        for _ in range(200):
            if ctx.get(du.go):
                out["verdict"] = (0, None)
                return
            status = ctx.get(du.status)
            if status & 0b10:
                out["verdict"] = (status >> 4 & 0xF, ctx.get(du.cycles))
                return
            await ctx.tick()

    _run(du, bench)
    return out["verdict"]


def _range_regs(cfg, matrix, rows, stride, past):
    """Registers of a 2x2 int8 GEMM whose matrix ``matrix`` has ``rows`` rows of ``stride`` bytes and
    ends exactly at the memory's last byte (``past`` = 0) or ``past`` bytes beyond it."""
    cap = cfg.hbm.capacity_bytes
    regs = {"M": 4, "K": 32, "N": 32, "FLAGS": 0, "C_BASE": 0, "C_STRIDE": 128}
    regs.update({f"{x}_BASE": 0x1000 * (j + 1) for j, x in enumerate("ABD")})
    regs.update({"A_STRIDE": 32, "B_STRIDE": 32, "D_STRIDE": 128})
    if matrix == "C":
        regs["FLAGS"] = 1
    regs["M" if matrix != "B" else "K"] = rows
    regs["A_STRIDE"] = regs["K"]
    rowb = {"A": regs["K"], "B": regs["N"], "C": regs["N"] * 4, "D": regs["N"] * 4}[matrix]
    regs[f"{matrix}_STRIDE"] = stride
    regs[f"{matrix}_BASE"] = cap - (rows - 1) * stride - rowb + past
    return regs


# (matrix, rows, stride): rows - 1 and stride chosen so each of the four 17-bit partial products of
# the RANGE pipeline carries a part of the product
RANGE_CASES = [
    ("A", (1 << 17) + 5, 0x7E0),  # rows - 1 above 17 bits: the high row bits times the low stride bits
    ("B", 512, 0x5E0),
    ("C", 5, 0x2A00060),  # stride above 17 bits: the low row bits times the high stride bits
    ("D", 3, 0x3FE0020),
]


@pytest.mark.parametrize("matrix,rows,stride", RANGE_CASES, ids=[c[0] for c in RANGE_CASES])
def test_range_check_is_exact_at_the_end_of_memory(matrix, rows, stride):
    """A matrix that ends on the memory's last byte passes; 32 bytes further fails with ERROR 6,
    reported at a fixed cycle: START, CHK1, CHK2, then matrix j (A, B, C, D = 0..3) is judged in
    RANGE's cycle j + 3 (a four-stage pipeline), so CYCLES reads 7 + j."""
    cfg = EngineConfig(
        mxu=MXUConfig(rows=2, cols=2, fmt="int8"), hbm=HBM1, m_block=4, acc_entries=8, a_buffer_bytes=1024
    )
    assert _range_verdict(cfg, _range_regs(cfg, matrix, rows, stride, 0)) == (0, None)
    assert _range_verdict(cfg, _range_regs(cfg, matrix, rows, stride, 32)) == (6, 7 + "ABCD".index(matrix))


def test_range_check_sees_the_product_above_34_bits_and_ignores_c_without_load_c():
    """(rows - 1) * stride = 2**17 * 2**17 = 2**34: only the high-by-high partial product is non-zero,
    and the sum is above the 34-bit address space, so A does not fit however small its base. C far
    beyond the memory does not matter when FLAGS.LOAD_C is clear."""
    cfg = EngineConfig(
        mxu=MXUConfig(rows=2, cols=2, fmt="int8"), hbm=HBM1, m_block=4, acc_entries=8, a_buffer_bytes=1024
    )
    regs = _range_regs(cfg, "A", 1, 32, 0)
    assert _range_verdict(cfg, dict(regs, M=(1 << 17) + 1, A_BASE=0, A_STRIDE=1 << 17)) == (6, 7)
    assert _range_verdict(cfg, dict(regs, C_BASE=0xFFFFFFE0, C_STRIDE=0xFFFFFFE0)) == (0, None)


@pytest.mark.parametrize(
    "dim,value,want",
    [("M", 4095, 0), ("M", 4096, 2), ("N", 4095, 0), ("N", 4096, 2), ("K", 4095, 0), ("K", 4096, 2), ("N", 1 << 20, 2)],
)
def test_dim_bits_sets_the_largest_dimension(dim, value, want):
    """With ``dim_bits`` = 12, 4,095 is the largest M, K or N (it passes every check to ``go``);
    4,096 sets bit 12 and is DIM_TOO_LARGE (ERROR 2) at CHK1, CYCLES = 2, like any bit above the
    width of the 32-bit register."""
    cfg = EngineConfig(
        mxu=MXUConfig(rows=2, cols=2, fmt="int8"), m_block=4, acc_entries=8, a_buffer_bytes=4096, dim_bits=12
    )
    assert (cfg.max_dim, cfg.max_k) == (4095, 4095)
    regs = {
        "M": 4,
        "K": 32,
        "N": 32,
        "FLAGS": 0,
        "A_BASE": 0,
        "A_STRIDE": 4096,
        "B_BASE": 1 << 24,
        "B_STRIDE": 4096,
        "C_BASE": 0,
        "C_STRIDE": 0,
        "D_BASE": 1 << 25,
        "D_STRIDE": 16384,
        dim: value,
    }
    assert _range_verdict(cfg, regs) == (want, None if want == 0 else 2)


@pytest.mark.parametrize(
    "part",
    [
        DescriptorUnit,
        ALoader,
        WeightLoader,
        C0Loader,
        Accumulator,
        Feeder,
        WriteAddress,
        WriteData,
        BlockCursor,
        lambda c: BlockSequencer(c, 1),
    ],
)
def test_part_rejects_a_config_that_is_not_an_engine_config(part):
    with pytest.raises(TypeError, match="config must be an EngineConfig; got MXUConfig"):
        part(MXUConfig())


def test_sequencer_ports_must_be_positive():
    with pytest.raises(ValueError, match="ports must be an integer >= 1; got 0"):
        BlockSequencer(EngineConfig(), 0)


def test_every_part_has_plain_verilog_port_names():
    """A port named like a (System)Verilog keyword (``begin``, ``release``) comes out as an escaped
    identifier, which ``mxu synth``'s wrapper could not parse and readers trip over: every engine
    part's module header has plain identifiers only."""
    from amaranth.back import verilog

    from sim.blocks import ENGINE_BLOCKS, engine_block

    cfg = EngineConfig.from_options(rows=2, cols=2, fmt="int8")
    for name in ENGINE_BLOCKS:
        if not name.startswith("engine-"):
            continue
        module = name.replace("-", "_")
        text = verilog.convert(engine_block(name, cfg)(), name=module)
        header = text[text.index(f"module {module}(") :].split(";")[0]
        assert "\\" not in header, f"{name}: escaped port names in {header}"


class _FeederFront(_Front):
    """The A loader and the feeder wired as in the engine, with the descriptor unit and the sequencer
    in front of them."""

    def __init__(self, cfg):
        self.al, self.fd = ALoader(cfg), Feeder(cfg)
        super().__init__(cfg, [self.al, self.fd], [self.al.seq_read, self.al.seq_store, self.fd.seq])

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += a_bank_connections(self.al, self.fd)
        return m


def _feeder_beats(cfg, groups, a, k):
    """The feeder's beats, in order, for each group, k-block, n-block of the group and row (``a``: M x K
    operand bit patterns): (a chunk; bank and entry of the partial sums it continues, or None for +0
    in k-block 0; swap; group index; its index among the group's k-block >= 1 beats, or None; whether
    it is the group's last beat)."""
    R, w = cfg.mxu.rows, 8 * cfg.operand_bytes
    pad = 0 if cfg.mxu.fmt == "int8" else 1 << (w - 1)  # -0
    beats = []
    for j, (m0, mb, _, gc) in enumerate(groups):
        order = [(kb, g, i) for kb in range(-(-k // R)) for g in range(gc) for i in range(mb)]
        for q, (kb, g, i) in enumerate(order):
            ks = range(kb * R, kb * R + R)
            chunk = sum((int(a[m0 + i, kk]) if kk < k else pad) << (r * w) for r, kk in enumerate(ks))
            cont = None if kb == 0 else (j % 2, g * mb + i)
            beats.append((chunk, cont, i == 0, j, None if kb == 0 else q - gc * mb, q == len(order) - 1))
    return beats


def _acc_word(cfg, bank, entry):
    """The accumulator entry the bench returns for (bank, entry): lane c holds a value naming all three."""
    return sum(((bank << 24) | (entry << 8) | c) << (32 * c) for c in range(cfg.mxu.cols))


# (rows, cols, fmt, M, K, N): a chunk per word (bf16 4 rows), four chunks per word (int8 8 rows),
# K padded in the last k-block, short m-blocks whose K chain makes the feeder wait for the write-back,
# groups of one n-block, an m-block of one row and a single k-block
FEEDER_CASES = [
    (4, 4, "bf16", 37, 22, 9),
    (8, 8, "int8", 20, 70, 17),
    (2, 2, "bf16", 5, 7, 13),
    (4, 4, "int8", 17, 9, 3),
    (2, 2, "int8", 1, 2, 3),
]


@pytest.mark.parametrize(
    "rows,cols,fmt,m,k,n", FEEDER_CASES, ids=[f"{c[0]}x{c[1]}-{c[2]}-{c[3]}x{c[4]}x{c[5]}" for c in FEEDER_CASES]
)
def test_feeder_beats_under_back_pressure(rows, cols, fmt, m, k, n, seed):
    """The feeder offers every activation beat in the engine's order with the right chunk of A (-0 or 0
    past K), the partial sums it continues (+0 in k-block 0 without C0, else the entry it read from its
    bank) and swap on a tile's first row, with the A loader's banks filled at random speed, random
    gaps in its MXU ready, groups started late, half of them loading their C0 rows at random speed,
    and a write-back count that lags the beats by 12 cycles: a beat in k-block >= 1 is never offered
    before the output it continues is written, and the accumulator check is exact in both directions
    (a beat is issued only in a cycle its bank is READY, or LOADING with its C0 row stored in k-block
    0, and the feeder reports waiting on the accumulator (``why``) only in a cycle it is not)."""
    print(f"seed {seed}")
    cfg = _small_engine(rows, cols, fmt)
    regs = _descriptor(cfg, m, k, n)
    groups = _groups(cfg, m, k, n)
    dut = _FeederFront(cfg)
    al, fd = dut.al, dut.fd
    rng = random.Random(seed)
    ob = cfg.operand_bytes
    mem = np.random.default_rng(seed).integers(0, 256, 1 << 16, dtype=np.uint8)
    a = np.array(
        [[_element(mem, regs["A_BASE"] + i * regs["A_STRIDE"] + kk * ob, ob) for kk in range(k)] for i in range(m)]
    )
    want = _feeder_beats(cfg, groups, a, k)
    first_beat = {}  # group -> index of its first beat
    for x, beat in enumerate(want):
        first_beat.setdefault(beat[3], x)
    w = rows * 8 * ob
    lag = 12

    async def bench(ctx):
        await _start(ctx, dut.du, regs)
        pending, got = [], []
        started, done = 0, 0  # groups the C0 side started, groups fed
        # write-back count per bank (of the group the bank holds), (cycle, group) of the writes to come
        wcount, w_group, writes = [0, 0], [None, None], []
        acc_next = None
        w_seen, offered = [], False  # the write-back counts the feeder saw each cycle; a beat is on offer
        # the accumulator banks and the groups loading C0 (the store side stores the first one's rows
        # in order; a later one's bank is LOADING meanwhile)
        state, c0_bank, c0_row, loading, c0_rate = [AccState.READY, AccState.READY], 0, 0, [], {}
        acc_seen = []  # (bank states, C0 bank, C0 row, groups started before the cycle) per cycle
        seen = {"issued while loading": 0, "waits on a loading bank": 0}
        waited = set()  # groups the feeder waited for on their C0 rows
        for cycle in range(200000):
            if len(got) == len(want):
                break
            while writes and writes[0][0] <= cycle:
                wg = writes.pop(0)[1]
                if w_group[wg % 2] == wg:
                    wcount[wg % 2] += 1
            # every third group starts only once the feeder waits for it (so it meets a loading bank)
            start = (
                ctx.get(dut.du.run)
                and started < len(groups)
                and started < done + (1 if started % 3 == 0 else 2)
                and rng.random() < 0.3
            )
            acc_seen.append((list(state), c0_bank, c0_row, started))
            ctx.set(fd.acc_state, state)
            ctx.set(fd.c0_bank, c0_bank)
            c0_next = c0_row
            if start:
                wcount[started % 2], w_group[started % 2] = 0, started
            # held until the feeder waits for it: every third group's C0 rows, and the next one's after
            # its first row (the feeder moves into a group loading with rows stored but not its own)
            h = loading[0] if loading else None
            held = h not in waited and (h % 3 == 0 or (h % 3 == 1 and c0_row >= 1)) if loading else True
            if not held and rng.random() < c0_rate[h]:
                c0_next = c0_row + 1  # a C0 row stored at this edge
                if c0_next == groups[h][1]:  # the group's last: READY, the store side moves on
                    state[c0_bank], c0_next = AccState.READY, 0
                    loading.pop(0)
                    c0_bank = loading[0] % 2 if loading else 1 - c0_bank
            ctx.set(fd.c0_start, start)
            ctx.set(fd.c0_row_next, c0_next)
            ctx.set(fd.wcount, wcount)
            # the writes that raise a bank's count at the next edge
            ctx.set(fd.acc_wr, sum(1 << (wg % 2) for t, wg in writes if t == cycle + 1 and w_group[wg % 2] == wg))
            w_seen.append(list(wcount))
            if acc_next is not None:
                ctx.set(fd.acc_rd_data, acc_next)
            ctx.set(fd.act.ready, rng.random() < 0.7)
            r_ok, _ = _memory_cycle(ctx, al, rng, mem, pending)
            acc_next = None
            if ctx.get(fd.acc_rd_en):
                addr = ctx.get(fd.acc_rd_addr)
                acc_next = [_acc_word(cfg, 0, addr), _acc_word(cfg, 1, addr)]
            valid = ctx.get(fd.act.valid)
            idx = len(got)
            chunk, cont, swap, j, q, last = want[idx]
            if cycle >= 1 and ctx.get(dut.du.run) and (not valid or not offered):
                # the decision of the last cycle (a beat issued, or `why` registered with the empty
                # stage) against the model's accumulator check of that cycle for the beat it was at
                st, cb, cr, n_started = acc_seen[-2]
                i = (idx - first_beat[j]) % groups[j][1]
                c0_stored = q is None and st[j % 2] == AccState.LOADING and cb == j % 2 and cr > i
                acc_ok = n_started > j and (st[j % 2] == AccState.READY or c0_stored)
                if valid:
                    assert acc_ok, f"beat {idx} issued without its accumulator bank"
                    seen["issued while loading"] += st[j % 2] == AccState.LOADING
                elif ctx.get(fd.why) == Why.ACC:
                    assert not acc_ok, f"cycle {cycle}: waited on the accumulator for beat {idx}"
                    seen["waits on a loading bank"] += st[j % 2] == AccState.LOADING
                    waited.add(j)
            if valid and not offered and q is not None:
                # a beat first offered now was issued in the previous cycle: the output it continues
                # (one write per beat of the group, in order) was written by then
                assert w_seen[-2][cont[0]] > q, f"beat {idx} issued ahead of the write-back"
            offered = valid and not ctx.get(fd.act.ready)
            if valid and ctx.get(fd.act.ready):
                beat = ctx.get(fd.act.payload)
                c_want = 0 if cont is None else _acc_word(cfg, *cont)
                fields = (beat & ((1 << w) - 1), beat >> w & ((1 << 32 * cols) - 1), beat >> (w + 32 * cols))
                assert fields == (chunk, c_want, swap), f"beat {idx} (group {j})"
                got.append(beat)
                writes.append((cycle + lag, j))
                done += last
            if start and (started % 3 == 0 or rng.random() < 0.5):  # the group loads its C0 rows
                state[started % 2] = AccState.LOADING
                if not loading:
                    c0_bank, c0_next = started % 2, 0
                loading.append(started)
                c0_rate[started] = 0.03 if started % 3 == 0 else rng.choice([0.1, 0.5])
            elif start:
                state[started % 2] = AccState.READY
            started += start
            c0_row = c0_next
            await ctx.tick()
            if r_ok:
                pending.pop(0)
        assert len(got) == len(want), f"{len(got)} of {len(want)} beats in 200,000 cycles"
        print(seen)
        # (a one-row group's bank is READY at the edge its C0 row is stored: never issued while loading)
        assert seen["waits on a loading bank"] and (seen["issued while loading"] or max(gr[1] for gr in groups) == 1), (
            f"the C0 path was not exercised: {seen}"
        )
        ctx.set(fd.act.ready, 1)
        ctx.set(fd.wcount, [len(want), len(want)])  # every output written: nothing holds a beat back
        for _ in range(100):  # and not one beat more
            await ctx.tick()
            assert not ctx.get(fd.act.valid), f"a beat after the last of {len(want)}"

    _run(dut, bench)


# (rows, cols, fmt, M, K, N): a row segment of two beats (32 bf16 columns), rows sharing a beat
# (4 int8 columns, 8 rows per beat), padding rows (K not a multiple of R) and columns (N not of C),
# several m-blocks and groups
WEIGHT_CASES = [(4, 32, "bf16", 40, 10, 75), (8, 4, "int8", 20, 19, 13), (2, 2, "bf16", 9, 3, 9)]


@pytest.mark.parametrize(
    "rows,cols,fmt,m,k,n", WEIGHT_CASES, ids=[f"{c[0]}x{c[1]}-{c[2]}-{c[3]}x{c[4]}x{c[5]}" for c in WEIGHT_CASES]
)
def test_weight_loader_rows_in_tile_order(rows, cols, fmt, m, k, n, seed):
    """The weight loader offers each tile's rows, row R-1 first, in the engine's tile order (m-block,
    group, k-block, n-block of the group), with rows k >= K and columns >= N as +0, under random AR
    ready, random gaps on R and random ready on its weight stream; no burst crosses 4 KiB, the
    padding rows are not read, and no row follows the last."""
    print(f"seed {seed}")
    cfg = _small_engine(rows, cols, fmt)
    regs = _descriptor(cfg, m, k, n)
    wl = WeightLoader(cfg)
    dut = _Front(cfg, [wl], [wl.seq_read, wl.seq_rows])
    rng = random.Random(seed)
    ob, w = cfg.operand_bytes, 8 * cfg.operand_bytes
    mem = np.random.default_rng(seed).integers(0, 256, 1 << 16, dtype=np.uint8)

    def b(kk, nn):
        return _element(mem, regs["B_BASE"] + kk * regs["B_STRIDE"] + nn * ob, ob) if kk < k and nn < n else 0

    want, real_rows = [], 0
    for _, _, nb0, gc in _groups(cfg, m, k, n):
        for kb in range(-(-k // rows)):
            for nb in range(nb0, nb0 + gc):
                for r in reversed(range(rows)):
                    want.append(sum(b(kb * rows + r, nb * cols + c) << (c * w) for c in range(cols)))
                    real_rows += kb * rows + r < k

    async def bench(ctx):
        await _start(ctx, dut.du, regs)
        pending, got, read_rows = [], [], 0
        for _ in range(200000):
            if len(got) == len(want):
                break
            r_ok, burst = _memory_cycle(ctx, wl, rng, mem, pending)
            if burst:
                assert burst[0] // 4096 == (burst[-1] + 31) // 4096, "burst crosses 4 KiB"
                read_rows += 1
                assert regs["B_BASE"] <= burst[0] < regs["B_BASE"] + k * regs["B_STRIDE"], "read outside B"
            ctx.set(wl.wgt.ready, rng.random() < 0.6)
            if ctx.get(wl.wgt.valid) and ctx.get(wl.wgt.ready):
                got.append(ctx.get(wl.wgt.payload))
                i = len(got) - 1
                assert got[-1] == want[i], f"row {i}: got {got[-1]:#x} want {want[i]:#x}"
            await ctx.tick()
            if r_ok:
                pending.pop(0)
        assert len(got) == len(want), f"{len(got)} of {len(want)} rows in 200,000 cycles"
        ctx.set(wl.wgt.ready, 1)
        for _ in range(100):  # and not one row more
            await ctx.tick()
            assert not ctx.get(wl.wgt.valid), f"a row after the last of {len(want)}"
        assert read_rows == real_rows, f"{read_rows} row reads for {real_rows} rows of B"

    _run(dut, bench)


# (rows, cols, fmt, M, K, N, load_c): an entry segment of two beats (16 columns of fp32), four
# entries per beat (2 columns), C0 columns past N, several m-blocks and groups; and without C0
C0_CASES = [(4, 16, "bf16", 20, 8, 45, True), (2, 2, "int8", 23, 4, 9, True), (4, 4, "bf16", 20, 8, 13, False)]


@pytest.mark.parametrize(
    "rows,cols,fmt,m,k,n,load_c",
    C0_CASES,
    ids=[f"{c[0]}x{c[1]}-{c[3]}x{c[4]}x{c[5]}-{'c0' if c[6] else 'no-c0'}" for c in C0_CASES],
)
def test_c0_loader_groups_entries_and_banks(rows, cols, fmt, m, k, n, load_c, seed):
    """The C0 loader starts each group in the next bank only when that bank is FREE, stores the
    group's C0 rows into entries g * mb + i of it (every column < N, lanes as the beats carry them)
    and reports the group done once its last entry is stored; without LOAD_C it claims each bank
    and reads nothing. Random AR/R speed, the collector's random use of a bank's write port
    (``bank_busy``) and banks freed after random delays."""
    print(f"seed {seed}")
    cfg = _small_engine(rows, cols, fmt)
    regs = _descriptor(cfg, m, k, n)
    regs.update(FLAGS=int(load_c), C_BASE=regs["D_BASE"], C_STRIDE=_stride(4 * n))
    cl = C0Loader(cfg)
    dut = _Front(cfg, [cl], [cl.seq_read, cl.seq_store])
    rng = random.Random(seed)
    mem = np.random.default_rng(seed).integers(0, 256, 1 << 16, dtype=np.uint8)

    def c0(row, col):
        return _element(mem, regs["C_BASE"] + row * regs["C_STRIDE"] + 4 * col, 4)

    groups = _groups(cfg, m, k, n)

    async def bench(ctx):
        await _start(ctx, dut.du, regs)
        state = [AccState.FREE, AccState.FREE]
        free_at = [None, None]  # cycle a READY bank is freed (the group fed and written back)
        pending, started, done, entries = [], [], 0, [{}, {}]
        for cycle in range(200000):
            if done == len(groups) and all(s_ == AccState.FREE for s_ in state):
                break
            for b_ in range(2):
                if state[b_] == AccState.READY and free_at[b_] is not None and cycle >= free_at[b_]:
                    state[b_], free_at[b_] = AccState.FREE, None
            ctx.set(cl.acc_state, state)
            ctx.set(cl.bank_busy, rng.getrandbits(2) if rng.random() < 0.3 else 0)
            r_ok, burst = _memory_cycle(ctx, cl, rng, mem, pending)
            assert not burst or load_c, "C0 read without LOAD_C"
            if ctx.get(cl.start):
                j, b_ = len(started), ctx.get(cl.start_bank)
                assert j < len(groups) and b_ == j % 2 and state[b_] == AccState.FREE, f"group {j} in bank {b_}"
                started.append(b_)
                entries[b_] = {}
                state[b_] = AccState.LOADING if load_c else AccState.READY
                if not load_c:
                    done += 1
                    free_at[b_] = cycle + rng.randrange(1, 30)
            if ctx.get(cl.wr_valid):
                b_, addr, data, lanes = (
                    ctx.get(cl.wr_bank),
                    ctx.get(cl.wr_addr),
                    ctx.get(cl.wr_data),
                    ctx.get(cl.wr_lanes),
                )
                assert state[b_] == AccState.LOADING and not ctx.get(cl.bank_busy) >> b_ & 1, "write to a busy bank"
                for c in range(cols):
                    if lanes >> c & 1:
                        entries[b_][(addr, c)] = data >> (32 * c) & 0xFFFFFFFF
            if ctx.get(cl.group_done):
                b_, j = ctx.get(cl.done_bank), done
                r0, mb, nb0, gc = groups[j]
                for i in range(mb):
                    for g in range(gc):
                        for c in range(cols):
                            col = (nb0 + g) * cols + c
                            if col < n:
                                assert entries[b_].get((g * mb + i, c)) == c0(r0 + i, col), (
                                    f"group {j} row {r0 + i} column {col}"
                                )
                state[b_] = AccState.READY
                free_at[b_] = cycle + 1 + rng.randrange(1, 30)
                done += 1
            await ctx.tick()
            if r_ok:
                pending.pop(0)
        assert done == len(groups) and len(started) == len(groups), f"{done} of {len(groups)} groups"

    _run(dut, bench)


# (rows, cols, fmt, M, K, N, LOAD_C): several m-blocks and groups of several n-blocks and k-blocks,
# groups of one n-block, an m-block of one row and a single k-block (each loop end at its first count)
ACC_CASES = [
    (4, 4, "bf16", 37, 22, 9, True),
    (8, 8, "int8", 20, 70, 17, False),
    (2, 2, "bf16", 5, 7, 13, True),
    (2, 2, "int8", 1, 2, 3, True),
    (4, 4, "int8", 17, 9, 3, False),
]


@pytest.mark.parametrize(
    "rows,cols,fmt,m,k,n,load_c",
    ACC_CASES,
    ids=[f"{c[0]}x{c[1]}-{c[2]}-{c[3]}x{c[4]}x{c[5]}-{'c0' if c[6] else 'no-c0'}" for c in ACC_CASES],
)
def test_accumulator_collects_groups_into_ping_pong_banks(rows, cols, fmt, m, k, n, load_c, seed):
    """The collector writes each output beat (k-block, n-block g of the group, row i) into entry
    g * mb + i of the group's bank, the group's last beat makes the bank DONE, and the banks follow
    FREE -> (LOADING ->) READY -> DONE -> FREE with the C0 loader's and the write-back's strobes;
    ``wcount`` counts the beats since the bank was freed and ``rows_done`` the rows whose last beat is
    in (``state_next`` / ``rows_done_next``: both after the edge, as if the bank were not freed),
    ``bank_busy`` names the bank written, and a C0 beat writes only its lanes. Beats at random
    moments, C0 entries in random order with random lanes, banks read back (feeder port after C0,
    write-back port after DONE) and freed at random."""
    print(f"seed {seed}")
    cfg = _small_engine(rows, cols, fmt)
    regs = _descriptor(cfg, m, k, n)
    regs.update(FLAGS=int(load_c), C_BASE=regs["D_BASE"], C_STRIDE=_stride(4 * n))
    acc = Accumulator(cfg)
    dut = _Front(cfg, [acc], [acc.seq])
    rng = random.Random(seed)
    groups = _groups(cfg, m, k, n)
    kbs = -(-k // rows)
    mask = (1 << 32 * cols) - 1
    S = AccState

    async def bench(ctx):
        await _start(ctx, dut.du, regs)
        for _ in range(200):
            if ctx.get(dut.du.run):
                break
            await ctx.tick()
        assert ctx.get(dut.du.run), f"descriptor rejected: STATUS {ctx.get(dut.du.status):#x}"
        mem = [[0] * cfg.acc_entries, [0] * cfg.acc_entries]  # the model of both banks
        state, wcount, rows = [S.FREE, S.FREE], [0, 0], [0, 0]
        beats = {}  # group -> its remaining (entry, last) beats in the collector's order
        c0_left = {}  # group -> its remaining (entry, lanes) C0 writes
        cj, oj, wj = 0, 0, 0  # next group to start, to collect, to write back
        fd_read = wb_read = None  # (bank, entry) read at the last edge
        wb_left = None  # the entries of group wj still to read back
        for cycle in range(100000):
            if wj == len(groups):
                break
            for b in range(2):
                got = ctx.get(acc.state[b]), ctx.get(acc.wcount[b]), ctx.get(acc.rows_done[b])
                assert got == (state[b], wcount[b], rows[b]), f"bank {b}, cycle {cycle}"
            # a read returns the entry as it was before the edge that read it (the write of that edge
            # is not forwarded)
            if fd_read is not None:
                assert ctx.get(acc.fd_data[fd_read[0]]) == fd_read[2], f"feeder port, bank and entry {fd_read[:2]}"
            if wb_read is not None:
                assert ctx.get(acc.wb_data[wb_read[0]]) == wb_read[2], f"write-back port, bank and entry {wb_read[:2]}"
            fd_read = wb_read = None
            # the collector: the next beat of group oj once its bank is READY
            beat = None
            if oj < cj and state[oj % 2] == S.READY and rng.random() < 0.6:
                entry, row_end, last = beats[oj].pop(0)
                beat = (oj % 2, entry, rng.getrandbits(32 * cols), row_end, last)
            ctx.set(acc.out.valid, beat is not None)
            ctx.set(acc.out.payload, 0 if beat is None else beat[2])
            assert ctx.get(acc.bank_busy) == (0 if beat is None else 1 << beat[0])
            # the C0 loader: start the next group in a FREE bank, or store one C0 entry, or finish
            start = done = c0 = None
            loading = [j for j in c0_left if state[j % 2] == S.LOADING]
            if loading and not c0_left[loading[0]]:
                done = loading[0] % 2
                del c0_left[loading[0]]
            elif loading and (beat is None or beat[0] != loading[0] % 2) and rng.random() < 0.6:
                entry, lanes = c0_left[loading[0]].pop(0)
                c0 = (loading[0] % 2, entry, rng.getrandbits(32 * cols), lanes)
            elif cj < len(groups) and not loading and state[cj % 2] == S.FREE and rng.random() < 0.3:
                start, (_, mb, _, gc) = cj % 2, groups[cj]
                order = [
                    (g * mb + i, kb == kbs - 1 and g == gc - 1)
                    for kb in range(kbs)
                    for g in range(gc)
                    for i in range(mb)
                ]
                beats[cj] = [(e, row_end, q == len(order) - 1) for q, (e, row_end) in enumerate(order)]
                entries = list(range(gc * mb))
                rng.shuffle(entries)
                c0_left[cj] = [(e, rng.getrandbits(cols)) for e in entries] if load_c else []
                if not load_c:
                    del c0_left[cj]
                cj += 1
            ctx.set(acc.c0_start, start is not None)
            ctx.set(acc.c0_start_bank, start or 0)
            ctx.set(acc.c0_done, done is not None)
            ctx.set(acc.c0_done_bank, done or 0)
            ctx.set(acc.c0_valid, c0 is not None)
            if c0 is not None:
                ctx.set(acc.c0_bank, c0[0])
                ctx.set(acc.c0_addr, c0[1])
                ctx.set(acc.c0_data, c0[2])
                ctx.set(acc.c0_lanes, c0[3])
            # read a READY bank's entry through the feeder's port, a DONE bank's through the write-back's
            ready = [b for b in range(2) if state[b] == S.READY]
            ctx.set(acc.fd_en, bool(ready))
            if ready:
                b = ready[0]
                e = rng.randrange(cfg.acc_entries)
                fd_read = (b, e, mem[b][e])
                ctx.set(acc.fd_addr, e)
            free = None
            if wj < oj and state[wj % 2] == S.DONE:
                if wb_left is None:
                    _, mb, _, gc = groups[wj]
                    wb_left = list(range(gc * mb))
                if not wb_left and rng.random() < 0.5:
                    free, wb_left = wj % 2, None
                    wj += 1
                elif wb_left and rng.random() < 0.7:
                    e = wb_left.pop(0)
                    wb_read = (wj % 2, e, mem[wj % 2][e])
            ctx.set(acc.wb_en, wb_read is not None)
            if wb_read is not None:
                ctx.set(acc.wb_addr, wb_read[1])
            ctx.set(acc.wb_free, free is not None)
            ctx.set(acc.wb_free_bank, free or 0)
            # each bank's state and complete rows after the edge, unless the write-back frees it
            nxt = [(ctx.get(acc.state_next[b]), ctx.get(acc.rows_done_next[b])) for b in range(2)]
            await ctx.tick()
            # the model after the edge
            if start is not None:
                state[start] = S.LOADING if load_c else S.READY
            if done is not None:
                state[done] = S.READY
            if c0 is not None:
                b, e, data, lanes = c0
                lane = sum(0xFFFFFFFF << (32 * c) for c in range(cols) if lanes >> c & 1)
                mem[b][e] = (mem[b][e] & ~lane | data & lane) & mask
            if beat is not None:
                b, e, data, row_end, last = beat
                mem[b][e] = data
                wcount[b] += 1
                rows[b] += row_end
                if last:
                    state[b] = S.DONE
                    oj += 1
            assert nxt == [(state[b], rows[b]) for b in range(2)], f"state_next / rows_done_next, cycle {cycle}"
            if free is not None:
                state[free], wcount[free], rows[free] = S.FREE, 0, 0
        assert wj == len(groups), f"{wj} of {len(groups)} groups written back"

    _run(dut, bench)


def test_perf_counters_count_each_cycle_once(seed):
    """Each counting cycle adds one to exactly one counter: FEED (valid and ready), WAIT_W (valid, not
    ready) or, with no beat offered, the counter of the feeder's reason (none for SETUP); nothing
    counts outside ``counting``, and ``started`` clears them all."""
    print(f"seed {seed}")
    dut = PerfCounters()
    rng = random.Random(seed)
    why_name = {Why.A: "PERF_WAIT_A", Why.ACC: "PERF_WAIT_ACC", Why.DEP: "PERF_WAIT_DEP", Why.DRAIN: "PERF_DRAIN"}

    async def bench(ctx):
        want = dict.fromkeys(PERF_COUNTERS, 0)
        for cycle in range(3000):
            assert {x: ctx.get(getattr(dut, x.lower())) for x in PERF_COUNTERS} == want, f"cycle {cycle}"
            started, counting = rng.random() < 0.01, rng.random() < 0.8
            valid, ready, why = rng.random() < 0.5, rng.random() < 0.5, rng.choice(list(Why))
            for port, v in (("started", started), ("counting", counting), ("act_valid", valid), ("act_ready", ready)):
                ctx.set(getattr(dut, port), v)
            ctx.set(dut.why, why)
            await ctx.tick()
            if started:
                want = dict.fromkeys(PERF_COUNTERS, 0)
            elif counting:
                name = "PERF_FEED" if valid and ready else "PERF_WAIT_W" if valid else why_name.get(why)
                if name is not None:
                    want[name] += 1

    _run(dut, bench)
