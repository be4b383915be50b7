# amaranth: UnusedElaboratable=no
"""The pseudo-channel controller's components, each against its own contract in Amaranth's simulator.

The whole controller is tested against the device model and the JEDEC checker in
``test_hbm_controller.py``; here each part is driven alone, so a bug is found where it sits: the bank
timing's distances rule by rule, the refresh timer's cadence, the queue's age and hazard matrices
and readiness flags, the scheduler's choice and its masks for the command on the pins, the write
path's CWL and the read path's credit under random back-pressure.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from amaranth.sim import Simulator

from hw.hbm.bank_timing import BankTiming
from hw.hbm.config import DRAMSIM3_HBM2, HBMConfig
from hw.hbm.read_path import ReadResponsePath, response_fifo_depth
from hw.hbm.refresh import RefreshTimer
from hw.hbm.request_queue import RequestQueue
from hw.hbm.scheduler import CommandScheduler
from hw.hbm.write_path import WriteDataPath

T = DRAMSIM3_HBM2
CFG = HBMConfig(pseudo_channels=1, queue_depth=4, rows=64, columns=8, timing=T)
BC = T.burst_cycles
ISSUE_FIELDS = (
    "act",
    "pre",
    "prea",
    "ref",
    "rd",
    "wr",
    "act_bank",
    "act_row",
    "pre_bank",
    "col_bank",
    "col_row",
    "col_col",
    "col_tag",
    "col_grant",
    "col_slot",
    "act_banks",
    "pre_banks",
    "col_banks",
)


def _run(dut, bench, clock=True):
    sim = Simulator(dut)
    if clock:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _set_issue(ctx, port, **fields):
    """Set the issue struct; the one-hot bank fields follow the command and bank fields."""
    for cmd, bank, onehot in (("act", "act_bank", "act_banks"), ("pre", "pre_bank", "pre_banks")):
        if fields.get(cmd):
            fields.setdefault(onehot, 1 << fields.get(bank, 0))
    if fields.get("rd") or fields.get("wr"):
        fields.setdefault("col_banks", 1 << fields.get("col_bank", 0))
    for name in ISSUE_FIELDS:
        ctx.set(getattr(port, name), fields.get(name, 0))


# bank 5 = bank group 1, bank 1 (4 banks per group)
BANK, GROUP = 5, 1
BANK_RULES = [
    # command on the pins, status bit that it holds low, JEDEC distance in cycles
    (dict(act=1, act_bank=BANK), "col_ok", BANK, T.tRCD),
    (dict(act=1, act_bank=BANK), "pre_ok", BANK, T.tRAS),
    (dict(act=1, act_bank=BANK), "bg_act_ok", GROUP, T.tRRD_L),
    (dict(act=1, act_bank=BANK), "ch_act_ok", None, T.tRRD_S),
    (dict(pre=1, pre_bank=BANK), "act_ok", BANK, T.tRP),
    (dict(prea=1), "act_ok", 0, T.tRP),
    (dict(rd=1, col_bank=BANK), "pre_ok", BANK, T.tRTP),
    (dict(rd=1, col_bank=BANK), "bg_rd_ok", GROUP, T.tCCD_L),
    (dict(rd=1, col_bank=BANK), "ch_rd_ok", None, max(T.tCCD_S, BC)),
    (dict(rd=1, col_bank=BANK), "ch_wr_ok", None, T.tRTW),
    (dict(wr=1, col_bank=BANK), "pre_ok", BANK, T.CWL + BC + T.tWR),
    (dict(wr=1, col_bank=BANK), "bg_rd_ok", GROUP, T.CWL + BC + T.tWTR_L),
    (dict(wr=1, col_bank=BANK), "ch_rd_ok", None, T.CWL + BC + T.tWTR_S),
    (dict(wr=1, col_bank=BANK), "bg_wr_ok", GROUP, T.tCCD_L),
    (dict(wr=1, col_bank=BANK), "ch_wr_ok", None, max(T.tCCD_S, BC)),
    (dict(ref=1), "rfc_ok", None, T.tRFC),
]


@pytest.mark.parametrize(
    "cmd, port, index, distance", BANK_RULES, ids=[f"{next(iter(c))}-{p}" for c, p, _, _ in BANK_RULES]
)
def test_bank_timing_distance(cmd, port, index, distance):
    """A command on the pins at cycle 0 holds the status bit low until cycle distance - 1, the first
    cycle a decision may be taken for the pins at cycle distance; ``next`` is ``status`` one cycle
    early."""
    dut = BankTiming(CFG)
    seen, seen_next = [], []

    async def bench(ctx):
        _set_issue(ctx, dut.issue, **cmd)
        for _cycle in range(distance + 3):
            bit = getattr(dut.status, port)
            nbit = getattr(dut.next, port)
            seen.append(ctx.get(bit if index is None else bit[index]))
            seen_next.append(ctx.get(nbit if index is None else nbit[index]))
            await ctx.tick()
            _set_issue(ctx, dut.issue)

    _run(dut, bench)
    # cycle 0: not yet counted (the scheduler masks the command on the pins)
    assert seen == [1] + [0] * (distance - 2) + [1] * 4
    assert seen_next[:-1] == seen[1:]


@pytest.mark.parametrize("extra", [0, 6])
def test_bank_timing_trc_only_where_tras_plus_trp_does_not_imply_it(extra):
    """After an ACT, ``act_ok`` of the bank waits tRC only when tRC > tRAS + tRP: otherwise the open
    bank blocks the next ACT, PRE comes tRAS after the ACT at the earliest and holds ``act_ok`` for
    tRP, which together are tRC (every JEDEC HBM2 set)."""
    t = replace(T, tRC=T.tRAS + T.tRP + extra)
    dut = BankTiming(replace(CFG, timing=t))
    seen = []

    async def bench(ctx):
        _set_issue(ctx, dut.issue, act=1, act_bank=BANK)
        for _cycle in range(t.tRC + 3):
            seen.append(ctx.get(dut.status.act_ok[BANK]))
            await ctx.tick()
            _set_issue(ctx, dut.issue)

    _run(dut, bench)
    assert seen == ([1] + [0] * (t.tRC - 2) + [1] * 4 if extra else [1] * (t.tRC + 3))


def test_bank_timing_faw_and_open_rows():
    """Four ACTs tRRD_S apart: the fifth waits for the first + tFAW. ACT opens the row, PRE closes."""
    dut = BankTiming(CFG)
    first_ok = []

    async def bench(ctx):
        acts = [k * T.tRRD_L for k in range(4)]  # banks 0, 4, 8, 12: four bank groups
        for cycle in range(T.tFAW + 4):
            if cycle in acts:
                b = 4 * acts.index(cycle)
                _set_issue(ctx, dut.issue, act=1, act_bank=b, act_row=10 + b)
            else:
                _set_issue(ctx, dut.issue)
            if cycle > acts[-1] and ctx.get(dut.status.ch_act_ok) and not first_ok:
                first_ok.append(cycle)
            await ctx.tick()
        assert ctx.get(dut.status.bank_open) == 0x1111
        assert [ctx.get(dut.status.open_row[b]) for b in (0, 4, 8, 12)] == [10, 14, 18, 22]
        _set_issue(ctx, dut.issue, pre=1, pre_bank=4)
        await ctx.tick()
        _set_issue(ctx, dut.issue)
        assert ctx.get(dut.status.bank_open) == 0x1101

    _run(dut, bench)
    assert first_ok == [T.tFAW - 1]


def test_refresh_timer_cadence():
    """One REF due every tREFI; with requests queued the drain starts when max_refresh_postpone are
    owed, with an empty queue as soon as one is; the REF ends the drain."""
    t = replace(T, tREFI=40, tRFC=10)
    dut = RefreshTimer(replace(CFG, timing=t, max_refresh_postpone=2))
    log = []

    async def bench(ctx):
        ctx.set(dut.queue_empty, 0)
        for cycle in range(200):
            if cycle == 100:  # serve the drain: one REF
                ctx.set(dut.ref_issued, 1)
            elif cycle == 101:
                ctx.set(dut.ref_issued, 0)
                ctx.set(dut.queue_empty, 1)
            log.append((ctx.get(dut.owed), ctx.get(dut.draining)))
            await ctx.tick()

    _run(dut, bench)
    owed = [o for o, _ in log]
    assert owed.index(1) == 40 and owed.index(2) == 80
    drain = [d for _, d in log]
    assert drain.index(1) == 81  # owed reached 2 at cycle 80
    assert drain[101] == 0 and owed[101] == 1  # the REF at 100 ended the drain
    assert drain.index(1, 101) == 102  # one owed and the queue empty


def _req(ctx, port, write, addr, tag, wdata=0, wmask=0):
    ctx.set(port.valid, 1)
    p = port.payload
    ctx.set(p.write, write)
    ctx.set(p.addr, addr)
    ctx.set(p.tag, tag)
    ctx.set(p.wdata, wdata)
    ctx.set(p.wmask, wmask)


def test_request_queue_order_hazards_and_readiness():
    """Three requests to open rows: a write to X, a read to Y, a read to X. The age matrix orders
    them; the read of X waits for the write of X (hazard) until one cycle after the write left;
    the write's data comes out one cycle after its WR is on the pins."""
    dut = RequestQueue(CFG)
    x, y = CFG.encode(0, 1, 1, 7, 3), CFG.encode(0, 2, 0, 9, 1)
    out = {}

    async def bench(ctx):
        for b in range(CFG.banks):  # every bank open at row 7 (bank 5) or 9, all timing met
            for port in (dut.banks, dut.banks_next):
                ctx.set(port.open_row[b], 7 if b == 5 else 9)
        for port in (dut.banks, dut.banks_next):
            ctx.set(port.bank_open, (1 << CFG.banks) - 1)
            for name in ("act_ok", "col_ok", "pre_ok", "bg_act_ok", "bg_rd_ok", "bg_wr_ok"):
                ctx.set(getattr(port, name), (1 << len(getattr(port, name))) - 1)
            for name in ("ch_act_ok", "ch_rd_ok", "ch_wr_ok", "rfc_ok"):
                ctx.set(getattr(port, name), 1)
        for write, addr, tag in ((1, x, 1), (0, y, 2), (0, x, 3)):
            _req(ctx, dut.req, write, addr, tag, wdata=0xABCD + tag, wmask=0xF)
            await ctx.tick()
        ctx.set(dut.req.valid, 0)
        v = dut.view
        out["valid"], out["hit"] = ctx.get(v.valid), ctx.get(v.hit)
        out["older"] = [ctx.get(v.older[i]) for i in range(3)]
        out["bank"] = [ctx.get(v.bank[i]) for i in range(3)]
        out["ready0"] = ctx.get(v.col_ready)
        ctx.set(dut.retire, 0b001)  # the write of X is decided ...
        await ctx.tick()
        ctx.set(dut.retire, 0)
        _set_issue(ctx, dut.issue, wr=1, col_slot=0, col_grant=1)  # ... and on the pins
        out["ready1"] = ctx.get(v.col_ready) & ctx.get(v.valid)
        await ctx.tick()
        _set_issue(ctx, dut.issue)
        out["ready2"] = ctx.get(v.col_ready) & ctx.get(v.valid)
        out["wdata"], out["wmask"] = ctx.get(dut.wdata), ctx.get(dut.wmask)
        out["valid2"] = ctx.get(v.valid)

    _run(dut, bench)
    assert out["valid"] == 0b111 and out["hit"] == 0b111
    assert out["older"] == [0b000, 0b001, 0b011]
    assert out["bank"] == [5, 8, 5]
    assert out["ready0"] == 0b011  # the read of X waits for the write of X
    assert out["ready1"] == 0b010  # conservative for one cycle: the write is leaving
    assert out["ready2"] == 0b110  # one cycle after the write left
    assert (out["wdata"], out["wmask"]) == (0xABCD + 1, 0xF)
    assert out["valid2"] == 0b110


def _sched_inputs(ctx, dut, **kw):
    q, st = dut.queue, dut.banks
    n, nb = CFG.queue_depth, CFG.banks
    ones_n, ones_b = (1 << n) - 1, (1 << nb) - 1
    ctx.set(q.valid, kw.get("valid", 0b111))
    ctx.set(q.allow, kw.get("allow", ones_n))
    ctx.set(q.write, kw.get("write", 0))
    ctx.set(q.col_ready, kw.get("col_ready", 0))
    ctx.set(q.act_ready, kw.get("act_ready", 0))
    ctx.set(q.strict, kw.get("strict", 0))
    ctx.set(q.has_hit, kw.get("has_hit", 0))
    ctx.set(q.has_miss, kw.get("has_miss", 0))
    ctx.set(q.oldest_miss, kw.get("oldest_miss", 0))
    # slot 2 oldest, then 0, then 1
    for i, older in enumerate((0b100, 0b101, 0b000, 0b111)):
        ctx.set(q.older[i], older)
    for i, bank in enumerate(kw.get("banks", (3, 4, 5, 6))):
        ctx.set(q.bank[i], bank)
        ctx.set(q.row[i], 20 + i)
        ctx.set(q.tag[i], 8 + i)
    ctx.set(st.bank_open, kw.get("bank_open", 0))
    ctx.set(st.pre_ok, kw.get("pre_ok", ones_b))
    ctx.set(st.act_ok, ones_b)
    ctx.set(st.rfc_ok, 1)
    ctx.set(dut.draining, kw.get("draining", 0))
    ctx.set(dut.rd_credit, kw.get("rd_credit", 1))
    _set_issue(ctx, dut.pins, **kw.get("pins", {}))


@pytest.mark.parametrize(
    "case, inputs, expect",
    [
        (
            "oldest ready slot wins",
            dict(col_ready=0b101),
            dict(rd=1, col_grant=0b100, col_tag=10, col_bank=5, col_banks=1 << 5),
        ),
        ("oldest among two", dict(col_ready=0b011), dict(rd=1, col_grant=0b001, col_slot=0, col_row=20)),
        ("write", dict(col_ready=0b010, write=0b010), dict(wr=1, col_grant=0b010, col_slot=1)),
        ("no credit: reads wait", dict(col_ready=0b011, write=0b010, rd_credit=0), dict(wr=1, col_slot=1)),
        (
            "PRE on the pins masks its bank",
            dict(col_ready=0b101, pins=dict(pre=1, pre_bank=5)),
            dict(rd=1, col_grant=0b001),
        ),
        ("strict: only the allowed slot", dict(col_ready=0b011, allow=0b100, strict=1), dict(rd=0, col_grant=0)),
        ("ACT oldest", dict(act_ready=0b011), dict(act=1, act_bank=3, act_row=20, act_banks=1 << 3)),
        ("ACT on the pins: no ACT", dict(act_ready=0b011, pins=dict(act=1)), dict(act=0)),
        (
            "PRE: open bank, no hit, a miss",
            dict(bank_open=0b1010000, has_miss=0b1010000),
            dict(pre=1, pre_bank=4, pre_banks=1 << 4),
        ),
        (
            "PRE: not a bank with a hit",
            dict(bank_open=0b1010000, has_miss=0b1010000, has_hit=0b10000),
            dict(pre=1, pre_bank=6),
        ),
        (
            "PRE: not after a RD to that bank",
            dict(bank_open=0b10000, has_miss=0b10000, pins=dict(rd=1, col_bank=4)),
            dict(pre=0),
        ),
        ("ACT before PRE", dict(act_ready=0b001, bank_open=0b10000, has_miss=0b10000), dict(act=1, pre=0, pre_banks=0)),
        (
            "draining: PREA, no column, nothing retired",
            dict(draining=1, col_ready=0b111, bank_open=0b10000),
            dict(prea=1, rd=0, wr=0, col_grant=0),
        ),
        ("draining, all closed: REF", dict(draining=1), dict(ref=1, prea=0)),
        ("REF on the pins: nothing", dict(draining=1, pins=dict(ref=1)), dict(ref=0, act=0, rd=0)),
    ],
)
def test_scheduler_choice(case, inputs, expect):
    """The scheduler's combinational choice for one set of registered inputs."""
    dut = CommandScheduler(CFG)
    got = {}

    async def bench(ctx):
        _sched_inputs(ctx, dut, **inputs)
        for name in expect:
            got[name] = ctx.get(getattr(dut.issue, name))

    _run(dut, bench, clock=False)
    assert got == expect, case


def test_scheduler_no_column_command_after_one():
    """A RD chosen in one cycle is on the pins in the next: no column command is chosen then (every
    column-to-column distance is at least 2 cycles), and the one after may be."""
    dut = CommandScheduler(CFG)
    got = []

    async def bench(ctx):
        _sched_inputs(ctx, dut, col_ready=0b111)
        for _ in range(3):
            issue = {name: ctx.get(getattr(dut.issue, name)) for name in ISSUE_FIELDS}
            got.append((issue["rd"], issue["col_grant"]))
            await ctx.tick()
            _set_issue(ctx, dut.pins, **issue)

    _run(dut, bench)
    assert got == [(1, 0b100), (0, 0), (1, 0b100)]


@pytest.mark.parametrize("cwl", [T.CWL, 1], ids=["fifo", "cwl1-straight-through"])
def test_write_path_cwl_and_back_to_back(cwl):
    """Each WR's data leaves exactly CWL cycles after the WR on the pins, bursts back to back (with
    CWL = 1 the data goes straight from the queue memory to the pins)."""
    t = replace(T, CWL=cwl, tRTW=T.CL + BC - cwl + 2)
    dut = WriteDataPath(replace(CFG, timing=t))
    seen = []

    async def bench(ctx):
        wr_cycles = [0, BC, 2 * BC, 10]
        for cycle in range(30):
            ctx.set(dut.wr, cycle in wr_cycles)
            if cycle - 1 in wr_cycles:  # the queue memory's data, one cycle after the WR
                ctx.set(dut.wdata, 0x100 + cycle - 1)
                ctx.set(dut.wmask, cycle & 0xF)
            if ctx.get(dut.dram_wdata_valid):
                seen.append((cycle, ctx.get(dut.dram_wdata), ctx.get(dut.dram_wmask)))
            await ctx.tick()

    _run(dut, bench)
    assert seen == [(c + cwl, 0x100 + c, (c + 1) & 0xF) for c in (0, BC, 2 * BC, 10)]


def test_read_path_credit_under_back_pressure(seed):
    """Reads as fast as the credit allows, data CL cycles after each RD, a randomly stalled
    response stream: every tag comes out once, in RD order, with its data; the buffer never
    overflows (a dropped burst would lose a tag)."""
    print(f"seed {seed}")
    rng = random.Random(seed)
    dut = ReadResponsePath(CFG)
    depth = response_fifo_depth(CFG)
    issued, got = [], []
    max_used = []

    async def bench(ctx):
        pins_rd = False
        returning = {}
        tag = 0
        for cycle in range(600):
            ready = rng.random() < 0.4
            ctx.set(dut.rsp.ready, ready)
            # a decision now puts the RD on the pins next cycle; not right after another RD
            decide = tag < 120 and not pins_rd and ctx.get(dut.rd_credit)
            ctx.set(dut.rd, pins_rd)
            ctx.set(dut.tag, tag - 1 if pins_rd else 0)
            if pins_rd:
                issued.append(tag - 1)
                returning[cycle + T.CL] = tag - 1
            ctx.set(dut.rdata_valid, cycle in returning)
            ctx.set(dut.rdata, 0xD000 + returning.get(cycle, 0))
            if ctx.get(dut.rsp.valid) and ready:
                got.append((ctx.get(dut.rsp.payload.tag), ctx.get(dut.rsp.payload.rdata)))
            max_used.append(len(issued) - len(got))
            pins_rd = decide
            tag += decide
            await ctx.tick()

    _run(dut, bench)
    assert len(issued) == 120
    assert got == [(t % (1 << CFG.tag_bits), 0xD000 + t) for t in issued]
    assert max(max_used) <= depth


PARTS = [BankTiming, RefreshTimer, RequestQueue, CommandScheduler, WriteDataPath, ReadResponsePath]


@pytest.mark.parametrize("part", PARTS, ids=lambda c: c.__name__)
def test_part_rejects_a_config_that_is_not_an_hbm_config(part):
    with pytest.raises(TypeError, match=r"config must be an HBMConfig; got \{'queue_depth': 4\}"):
        part({"queue_depth": 4})


def test_every_synth_block_builds_its_component():
    """``mxu synth --block hbm-*`` builds the named part, with the configuration given."""
    from hw.hbm.axi import HBMController
    from hw.hbm.controller import PseudoChannelController
    from sim.blocks import HBM_BLOCKS, hbm_block

    want = {
        "hbm": HBMController,
        "hbm-channel": PseudoChannelController,
        "hbm-queue": RequestQueue,
        "hbm-bank-timing": BankTiming,
        "hbm-scheduler": CommandScheduler,
        "hbm-refresh": RefreshTimer,
        "hbm-read-path": ReadResponsePath,
        "hbm-write-path": WriteDataPath,
    }
    assert sorted(HBM_BLOCKS) == sorted(want)
    for name, cls in want.items():
        made = hbm_block(name, CFG)()
        assert type(made) is cls and made.config is CFG, name
    with pytest.raises(ValueError, match="block must be one of hbm, hbm-channel, .*; got 'hbm-bus'"):
        hbm_block("hbm-bus", CFG)
