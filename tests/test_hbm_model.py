"""Self-test of the HBM2 configuration, the JEDEC checker and the device model (pure Python, fast).

Every rule of the checker's table is fed a sequence one cycle too early (must raise
TimingViolation naming the rule) and the same sequence at exactly the minimum distance (must pass),
on every timing preset. Where a preset makes a rule unreachable because another rule is stricter
(e.g. tCCD_S = 1 < burst_cycles = 2, or tRC = tRAS + tRP), the scenario raises that rule's figure
just enough to make it the binding one (``tweak``) -- the test still runs at the rule's boundary.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from hw.hbm.config import (
    ADDRESS_FIELDS,
    COMPRESSED_REFRESH,
    DRAMSIM3_HBM2,
    RAMULATOR2_HBM2,
    TIMING_PRESETS,
    HBMConfig,
    HBMTiming,
    PagePolicy,
)
from verif.hbm_device import HBMDevice
from verif.jedec_checker import OTHER_RULES, RULES, JedecChecker, TimingViolation
from verif.jedec_selftest import B0, B1, EXTRA, G1, RULE_BY_NAME, SCENARIOS

PRESETS = list(TIMING_PRESETS)


def cfg_for(timing: HBMTiming, **kw) -> HBMConfig:
    return HBMConfig(pseudo_channels=kw.pop("pseudo_channels", 1), timing=timing, **kw)


CASES = [(name, i) for name, lst in SCENARIOS.items() for i in range(len(lst))]
EXTRA_CASES = [(name, i) for name, lst in EXTRA.items() for i in range(len(lst))]


def test_every_table_rule_has_a_scenario():
    assert set(SCENARIOS) == set(RULE_BY_NAME)


def _replay(config, setup, nxt, at):
    chk = JedecChecker(config)
    for cycle, cmd, (bg, bank), row, col in setup:
        chk.command(cycle, 0, cmd, bg, bank, row, col)
    cmd, (bg, bank), row, col = nxt
    chk.command(at, 0, cmd, bg, bank, row, col)
    return chk


def _boundary(timing, name, scenario, distance):
    config = cfg_for(timing)
    setup, ref, nxt = scenario(config.timing)
    d = distance(config.timing)
    assert ref + d - 1 >= setup[-1][0], "scenario: the early command would precede the setup"
    _replay(config, setup, nxt, ref + d)  # exactly the minimum distance: legal
    with pytest.raises(TimingViolation) as exc:
        _replay(config, setup, nxt, ref + d - 1)
    assert name in exc.value.rules, str(exc.value)
    assert f"{name} violated" in str(exc.value)
    assert f"at cycle {ref + d - 1}" in str(exc.value)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name,idx", CASES)
def test_rule_boundary(preset, name, idx):
    scenario, tweak = SCENARIOS[name][idx]
    timing = tweak(TIMING_PRESETS[preset])
    _boundary(timing, name, scenario, RULE_BY_NAME[name].distance)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name,idx", EXTRA_CASES)
def test_extra_rule_boundary(preset, name, idx):
    scenario, tweak, distance = EXTRA[name][idx]
    _boundary(tweak(TIMING_PRESETS[preset]), name, scenario, distance)


def test_violation_message_names_both_commands_and_cycles():
    chk = JedecChecker(cfg_for(DRAMSIM3_HBM2))
    chk.command(10, 0, "ACT", 1, 2, row=7)
    with pytest.raises(TimingViolation) as exc:
        chk.command(23, 0, "RD", 1, 2, row=7, column=3)
    assert str(exc.value) == (
        "tRCD_RD violated: ACT(pc0 bg1 b2 row7) at cycle 10 -> RD(pc0 bg1 b2 row7 col3) "
        "at cycle 23: distance 13 < tRCD = 14 (bank scope)"
    )
    assert exc.value.rule == "tRCD_RD"
    assert isinstance(exc.value, AssertionError)


def test_rule_table_shape():
    for r in RULES:
        assert r.scope.value in {"bank", "bank_group", "pseudo_channel"}
        for t in TIMING_PRESETS.values():
            assert r.distance(t) >= 1
    assert {"tFAW", "DATA_BUS", "REFRESH_GAP", "REFRESH_RATE"} <= set(OTHER_RULES)


# ---- other pseudo-channel / scope independence ------------------------------------------------
@pytest.mark.parametrize("preset", PRESETS)
def test_pseudo_channels_are_independent(preset):
    t = TIMING_PRESETS[preset]
    chk = JedecChecker(cfg_for(t, pseudo_channels=2))
    chk.command(0, 0, "ACT", 0, 0, 1)
    chk.command(0, 1, "ACT", 0, 0, 1)  # same cycle, other pseudo-channel: own command bus, own timers
    chk.command(t.tRCD, 0, "RD", 0, 0, 1)
    chk.command(t.tRCD, 1, "RD", 0, 0, 1)  # own data bus too
    chk.command(t.tRCD + 1, 0, "ACT", 1, 0, 2)  # a row command beside the column traffic
    with pytest.raises(TimingViolation) as exc:
        chk.command(t.tRCD + 1, 1, "RD", 0, 0, 1, 1)  # same pseudo-channel: data bus still busy
    assert "DATA_BUS" in exc.value.rules


@pytest.mark.parametrize("preset", PRESETS)
def test_bank_scope_rules_do_not_leak_to_other_banks(preset):
    t = TIMING_PRESETS[preset]
    chk = JedecChecker(cfg_for(t))
    a = t.tRAS
    chk.command(0, 0, "ACT", *B1, row=3)
    chk.command(a, 0, "ACT", *B0, row=4)
    chk.command(a, 0, "RD", *B1, row=3)  # tRCD of bank B0 does not apply to B1
    chk.command(a + t.tRTP, 0, "PRE", *B1)  # tRAS of bank B0 does not apply to B1
    chk.command(a + max(t.tRTP + 1, t.tRRD_S), 0, "ACT", *G1, row=1)
    chk.command(a + max(t.tRCD, t.tRTW), 0, "WR", *B0, row=4)  # B0's own tRCD; tRTW is pc-wide
    assert chk.open_row(0, *B1) is None and chk.open_row(0, *B0) == 4


# ---- command bus, order, range ----------------------------------------------------------------
def test_command_bus_slots():
    t = DRAMSIM3_HBM2
    chk = JedecChecker(cfg_for(t))
    chk.command(0, 0, "PRE", 0, 0)
    with pytest.raises(TimingViolation) as exc:
        chk.command(0, 0, "PRE", 0, 1)
    assert exc.value.rules == ("CMD_BUS_ROW",)
    chk.command(1, 0, "ACT", 0, 0, 3)
    chk.command(1 + t.tRCD, 0, "RD", 0, 0, 3)
    chk.command(1 + t.tRCD, 0, "ACT", 1, 0, 4)  # row + column command in one cycle: legal
    with pytest.raises(TimingViolation) as exc:
        chk.command(1 + t.tRCD, 0, "RD", 0, 0, 3, 1)
    assert "CMD_BUS_COL" in exc.value.rules


def test_cycle_order_and_address_range():
    chk = JedecChecker(cfg_for(DRAMSIM3_HBM2))
    chk.command(5, 0, "PRE")
    with pytest.raises(TimingViolation) as exc:
        chk.command(4, 0, "PRE")
    assert exc.value.rule == "CYCLE_ORDER"
    with pytest.raises(TimingViolation) as exc:
        chk.command(6, 0, "ACT", 0, 0, row=16384)
    assert str(exc.value) == (
        "ADDRESS_RANGE violated: ACT at cycle 6: row must be an integer from 0 to 16383; got 16384"
    )
    with pytest.raises(TimingViolation) as exc:
        chk.command(6, 1, "ACT")
    assert exc.value.rule == "ADDRESS_RANGE"
    with pytest.raises(ValueError):
        chk.command(6, 0, "NOP")


# ---- prerequisites ----------------------------------------------------------------------------
@pytest.mark.parametrize("preset", PRESETS)
def test_prerequisites(preset):
    t = TIMING_PRESETS[preset]
    cfg = cfg_for(t)
    chk = JedecChecker(cfg)
    with pytest.raises(TimingViolation) as exc:
        chk.command(0, 0, "RD", 0, 0, 1)
    assert exc.value.rules == ("RDWR_BANK_CLOSED",)
    with pytest.raises(TimingViolation) as exc:
        chk.command(0, 0, "WR", 0, 0, 1)
    assert exc.value.rules == ("RDWR_BANK_CLOSED",)
    chk.command(0, 0, "PRE", 2, 1)  # PRE to a closed bank: allowed no-op
    chk.command(1, 0, "PREA")  # PREA with no bank open: allowed no-op
    chk.command(2, 0, "ACT", 0, 0, 1)  # no tRP: the precharges above closed nothing
    with pytest.raises(TimingViolation) as exc:
        chk.command(2 + t.tRCD, 0, "RD", 0, 0, 2)
    assert exc.value.rules == ("RDWR_ROW_MISS",)
    with pytest.raises(TimingViolation) as exc:
        chk.command(2 + t.tRC, 0, "ACT", 0, 0, 3)
    assert exc.value.rules == ("ACT_BANK_OPEN",)
    with pytest.raises(TimingViolation) as exc:
        chk.command(2 + t.tRC, 0, "REF")
    assert exc.value.rules == ("REF_BANK_OPEN",)
    assert "bg0 b0 row1" in str(exc.value)
    chk.command(2 + t.tRAS, 0, "PRE", 0, 0)
    assert chk.open_row(0, 0, 0) is None
    chk.command(2 + t.tRAS + t.tRP, 0, "REF")
    assert chk.refresh_cycles(0) == [2 + t.tRAS + t.tRP]


# ---- refresh cadence ----------------------------------------------------------------------------
def _refresh_run(t, cycles_of_refs, end, pcs=2):
    chk = JedecChecker(cfg_for(t, pseudo_channels=pcs))
    for c in cycles_of_refs:
        for pc in range(pcs):
            chk.command(c, pc, "REF")
    return chk, chk.finish(end)


@pytest.mark.parametrize("preset", PRESETS)
def test_refresh_on_time_passes(preset):
    t = TIMING_PRESETS[preset]
    refs = [k * t.tREFI + 17 for k in range(1, 12)]  # scheduling slack after each tREFI tick
    _, summary = _refresh_run(t, refs, 12 * t.tREFI)
    assert summary["refreshes"] == [11, 11]


@pytest.mark.parametrize("preset", PRESETS)
def test_refresh_postponed_eight_then_caught_up_passes(preset):
    t = TIMING_PRESETS[preset]
    p = 8
    refs = [(p + 1) * t.tREFI + i * t.tRFC for i in range(p + 1)]  # nine REFs back to back
    _, summary = _refresh_run(t, refs, (p + 1) * t.tREFI + 9 * t.tRFC)
    assert summary["worst_gap_cycles"][0] == (p + 1) * t.tREFI


@pytest.mark.parametrize("preset", PRESETS)
def test_refresh_too_late_fails_finish(preset):
    t = TIMING_PRESETS[preset]
    step = t.tREFI * 3 // 2  # every 1.5 tREFI: each gap is legal, the average is not
    # after 18 REFs (27 tREFI) 27 - 8 = 19 are owed: fails; after 17 (25.5 tREFI) 25 - 8 = 17: passes
    with pytest.raises(TimingViolation) as exc:
        _refresh_run(t, [k * step for k in range(1, 19)], 18 * step)
    assert exc.value.rules == ("REFRESH_RATE", "REFRESH_RATE")  # both pseudo-channels
    assert "REFRESH_RATE violated on pc0: 18 REFs" in str(exc.value)
    _refresh_run(t, [k * step for k in range(1, 18)], 17 * step)


@pytest.mark.parametrize("preset", PRESETS)
def test_refresh_gap(preset):
    t = TIMING_PRESETS[preset]
    limit = 9 * t.tREFI
    chk = JedecChecker(cfg_for(t))
    chk.command(100, 0, "REF")
    chk.command(100 + limit, 0, "PRE")  # exactly at the limit: legal
    with pytest.raises(TimingViolation) as exc:
        chk.command(101 + limit, 0, "PRE")  # fires on any command, immediately
    assert exc.value.rules == ("REFRESH_GAP",)
    assert f"REF at cycle 100 -> no REF by cycle {101 + limit}" in str(exc.value)
    with pytest.raises(TimingViolation) as exc:
        chk.finish(101 + limit)
    assert "REFRESH_GAP" in exc.value.rules
    chk2 = JedecChecker(cfg_for(t))
    with pytest.raises(TimingViolation) as exc:
        chk2.finish(limit + 1)  # no REF at all since cycle 0
    assert "start at cycle 0" in str(exc.value)


# ---- device model -----------------------------------------------------------------------------
def _run(dev, schedule, end):
    """Drive ``dev`` cycle by cycle: at each cycle c, issue ``schedule[c]`` (a list of (kind, args,
    kwargs) with kind "cmd" or "wdata"), then ``tick(c)``; return {data cycle: [ReadData]}."""
    got = {}
    for c in range(end):
        for kind, args, kw in schedule.get(c, []):
            (dev.command if kind == "cmd" else dev.write_data)(c, *args, **kw)
        for r in dev.tick(c):
            got.setdefault(c, []).append(r)
    return got


def _at(schedule, cycle, *args, kind="cmd", **kw):
    schedule.setdefault(cycle, []).append((kind, args, kw))


@pytest.mark.parametrize("preset", PRESETS)
def test_device_masked_write_then_read_at_cl(preset):
    t = TIMING_PRESETS[preset]
    cfg = cfg_for(t)
    dev = HBMDevice(cfg)
    n = cfg.burst_bytes
    full = bytes(range(0x40, 0x40 + n))
    part = bytes([0xEE]) * n
    mask = 0x0000_FF0F  # bytes 0-3 and 8-15
    sch = {}
    _at(sch, 0, 0, "ACT", 1, 2, row=9)
    w1 = t.tRCD
    _at(sch, w1, 0, "WR", 1, 2, 9, 4, data=full)
    w2 = w1 + max(t.tCCD_L, t.burst_cycles)
    _at(sch, w2, 0, "WR", 1, 2, 9, 4, data=part, mask=mask)
    rd = w2 + t.CWL + t.burst_cycles + t.tWTR_L
    _at(sch, rd, 0, "RD", 1, 2, 9, 4)
    got = _run(dev, sch, rd + t.CL + 5)
    assert list(got) == [rd + t.CL], got  # exactly at CL, nowhere else
    (r,) = got[rd + t.CL]
    expect = bytes(part[i] if mask >> i & 1 else full[i] for i in range(n))
    assert r.data == expect
    assert (r.pc, r.bank_group, r.bank, r.row, r.column, r.issue_cycle) == (0, 1, 2, 9, 4, rd)
    assert dev.read_address(cfg.encode(0, 1, 2, 9, 4)) == expect
    assert dev.peek(0, 1, 2, 9, 5) == bytes(n)  # never written: fill


@pytest.mark.parametrize("preset", PRESETS)
def test_device_write_data_at_cwl_and_read_before_write(preset):
    t = TIMING_PRESETS[preset]
    cfg = cfg_for(t)
    dev = HBMDevice(cfg, fill=0xA5)
    n = cfg.burst_bytes
    sch = {}
    _at(sch, 0, 0, "ACT", 0, 0, row=1)
    rd = t.tRCD
    _at(sch, rd, 0, "RD", 0, 0, 1, 0)
    wr = rd + t.tRTW
    _at(sch, wr, 0, "WR", 0, 0, 1, 0)  # data comes on the pins at wr + CWL
    _at(sch, wr + t.CWL, 0, bytes([7]) * n, mask=1, kind="wdata")
    rd2 = wr + t.CWL + t.burst_cycles + t.tWTR_L
    _at(sch, rd2, 0, "RD", 0, 0, 1, 0)
    got = _run(dev, sch, rd2 + t.CL + 1)
    assert sorted(got) == [rd + t.CL, rd2 + t.CL]
    assert got[rd + t.CL][0].data == bytes([0xA5]) * n  # the read came before the write
    assert got[rd2 + t.CL][0].data == bytes([7]) + bytes([0xA5]) * (n - 1)
    # a WR whose data never arrives fails one cycle after WR + CWL
    wr2 = rd2 + t.tRTW
    dev.command(wr2, 0, "WR", 0, 0, 1, 1)
    dev.tick(wr2 + t.CWL)
    with pytest.raises(TimingViolation) as exc:
        dev.tick(wr2 + t.CWL + 1)
    assert exc.value.rule == "WRITE_DATA_MISSING"


def test_device_write_data_at_wrong_cycle_and_missed_read():
    t = DRAMSIM3_HBM2
    dev = HBMDevice(cfg_for(t))
    dev.command(0, 0, "ACT")
    dev.command(t.tRCD, 0, "WR")
    with pytest.raises(TimingViolation) as exc:
        dev.write_data(t.tRCD + t.CWL - 1, 0, bytes(32))
    assert exc.value.rule == "WRITE_DATA_UNEXPECTED"
    dev2 = HBMDevice(cfg_for(t))
    dev2.command(0, 0, "ACT")
    dev2.command(t.tRCD, 0, "RD")
    with pytest.raises(RuntimeError, match="never collected"):
        dev2.tick(t.tRCD + t.CL + 1)  # skipped the data cycle


def test_device_rejects_illegal_command_and_bad_data():
    dev = HBMDevice(cfg_for(RAMULATOR2_HBM2))
    with pytest.raises(TimingViolation):
        dev.command(0, 0, "RD")
    dev.command(0, 0, "ACT")
    with pytest.raises(ValueError, match="data must be 32 bytes"):
        dev.command(10, 0, "WR", data=b"\0")
    with pytest.raises(ValueError, match="mask must be an integer from 0 to 4294967295; got -1"):
        dev.command(10, 0, "WR", data=bytes(32), mask=-1)


@pytest.mark.parametrize("preset", PRESETS)
def test_device_random_legal_traffic_matches_shadow(preset):
    """A slow, obviously legal schedule (one bank at a time, every gap generous) over random
    addresses with refreshes, checked against a shadow memory."""
    t = TIMING_PRESETS[preset]
    cfg = cfg_for(t, rows=64)
    dev = HBMDevice(cfg)
    rng = random.Random(1234)
    shadow, expect, sch = {}, {}, {}
    gap = max(t.tRAS, t.tRCD + t.CWL + t.burst_cycles + t.tWR, t.tRCD + t.tRTP) + 1
    cycle, refs = 0, 0
    for _ in range(250):
        bg, bank, row, col = rng.randrange(4), rng.randrange(4), rng.randrange(64), rng.randrange(32)
        _at(sch, cycle, 0, "ACT", bg, bank, row)
        acc = cycle + t.tRCD
        key = (0, bg, bank, row, col)
        if rng.random() < 0.5:
            data, mask = rng.randbytes(32), rng.getrandbits(32)
            old = shadow.get(key, bytes(32))
            shadow[key] = bytes(data[i] if mask >> i & 1 else old[i] for i in range(32))
            _at(sch, acc, 0, "WR", bg, bank, row, col, data=data, mask=mask)
        else:
            _at(sch, acc, 0, "RD", bg, bank, row, col)
            expect[acc + t.CL] = shadow.get(key, bytes(32))
        _at(sch, cycle + gap, 0, "PRE", bg, bank)
        cycle += gap + max(t.tRP, t.tRC - gap, t.CWL + t.burst_cycles + t.tWTR_L, t.CL + t.burst_cycles)
        if cycle // t.tREFI > refs:
            _at(sch, cycle, 0, "REF")
            refs += 1
            cycle += t.tRFC
    assert refs >= 1
    got = _run(dev, sch, cycle + 1)
    assert {c: [r.data for r in rs] for c, rs in got.items()} == {c: [d] for c, d in expect.items()}
    dev.finish(cycle + 1)


# ---- configuration --------------------------------------------------------------------------------
def _t(**kw):
    return dataclasses.replace(DRAMSIM3_HBM2, **kw)


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: _t(tRCD=0), "tRCD must be an integer >= 1; got 0"),
        (lambda: _t(tCK_ns=0), "tCK_ns must be a number > 0; got 0"),
        (lambda: _t(tRC=40), "tRC must be >= tRAS + tRP = 48; got 40"),
        (lambda: _t(tREFI=260), "tREFI must be > tRFC = 260; got 260"),
        (lambda: _t(tRAS=10), "tRAS must be >= tRCD = 14; got 10"),
        (lambda: _t(tCCD_L=1, tCCD_S=2), "tCCD_L must be >= tCCD_S = 2; got 1"),
        (lambda: _t(tRRD_L=3), "tRRD_L must be >= tRRD_S = 4; got 3"),
        (lambda: _t(tWTR_L=5), "tWTR_L must be >= tWTR_S = 6; got 5"),
        (lambda: _t(tRTW=11), "tRTW must be >= CL + burst_cycles - CWL = 12; got 11"),
        (lambda: _t(burst_cycles=0), "burst_cycles must be an integer >= 1; got 0"),
        (lambda: HBMConfig(pseudo_channels=3), "pseudo_channels must be a power of two >= 1; got 3"),
        (lambda: HBMConfig(bank_groups=0), "bank_groups must be a power of two >= 1; got 0"),
        (lambda: HBMConfig(banks_per_group=6), "banks_per_group must be a power of two >= 1; got 6"),
        (lambda: HBMConfig(rows=1000), "rows must be a power of two >= 1; got 1000"),
        (lambda: HBMConfig(columns=33), "columns must be a power of two >= 1; got 33"),
        (lambda: HBMConfig(data_bits=48), "data_bits must be a power of two >= 8; got 48"),
        (lambda: HBMConfig(burst_length=8), "burst_length must be one of 2, 4; got 8"),
        (lambda: HBMConfig(burst_length=2), "timing.burst_cycles must be burst_length / 2 = 1; got 2"),
        (lambda: HBMConfig(queue_depth=0), "queue_depth must be an integer from 1 to 256; got 0"),
        (lambda: HBMConfig(max_refresh_postpone=9), "max_refresh_postpone must be an integer from 0 to 8; got 9"),
        (lambda: HBMConfig(page_policy="lazy"), "page_policy must be one of open, closed; got 'lazy'"),
        (
            lambda: HBMConfig(address_mapping=("row", "bank", "bank", "channel", "column")),
            "address_mapping must be an ordering of channel, bank_group, bank, row, column (each once, MSB first); "
            "got ('row', 'bank', 'bank', 'channel', 'column')",
        ),
    ],
)
def test_config_messages(make, message):
    with pytest.raises(ValueError) as exc:
        make()
    assert str(exc.value) == message


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: _t(CL=True), "CL must be an integer >= 1; got True"),
        (lambda: _t(tRCD=2.5), "tRCD must be an integer >= 1; got 2.5"),
        (lambda: HBMConfig(timing="dramsim3"), "timing must be an HBMTiming; got 'dramsim3'"),
        (lambda: HBMConfig(rows=1024.0), "rows must be a power of two >= 1; got 1024.0"),
        (lambda: HBMConfig(page_policy=1), "page_policy must be one of open, closed; got 1"),
    ],
)
def test_config_wrong_types(make, message):
    """A value of the wrong type is a TypeError, with the same message style."""
    with pytest.raises(TypeError) as exc:
        make()
    assert str(exc.value) == message


def test_config_derived():
    cfg = HBMConfig()
    assert (cfg.banks, cfg.burst_bytes, cfg.page_bytes) == (16, 32, 1024)
    assert cfg.capacity_bytes == 2 * 16 * 16384 * 1024
    assert cfg.field_bits == {"channel": 1, "bank_group": 2, "bank": 2, "row": 14, "column": 5}
    assert cfg.address_bits == 29 and cfg.offset_bits == 5
    assert cfg.policy is PagePolicy.OPEN
    assert HBMConfig(address_mapping=list(ADDRESS_FIELDS)).address_mapping == ADDRESS_FIELDS
    assert DRAMSIM3_HBM2.tRC == 48 and RAMULATOR2_HBM2.tRC == 24 and COMPRESSED_REFRESH.tREFI == 400
    assert (
        HBMTiming(
            tCK_ns=1,
            CL=7,
            CWL=2,
            tRCD=7,
            tRP=7,
            tRAS=17,
            tCCD_S=1,
            tCCD_L=2,
            tRRD_S=2,
            tRRD_L=3,
            tFAW=15,
            tWR=8,
            tWTR_S=3,
            tWTR_L=4,
            tRTP=3,
            tRFC=350,
            tREFI=3900,
        )
        == RAMULATOR2_HBM2
    )  # tRC and tRTW defaults
    with pytest.raises(ValueError, match="address must be a multiple of burst_bytes = 32; got 33"):
        cfg.decode(33)
    with pytest.raises(ValueError, match="address must be an integer from 0 to 536870911; got 536870912"):
        cfg.decode(cfg.capacity_bytes)
    with pytest.raises(ValueError, match="column must be an integer from 0 to 31; got 32"):
        cfg.encode(0, 0, 0, 0, 32)


MAPPINGS = [
    ("row", "bank", "bank_group", "channel", "column"),
    ("channel", "row", "bank_group", "bank", "column"),
    ("row", "column", "bank", "bank_group", "channel"),
    ("column", "row", "channel", "bank", "bank_group"),
]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("mapping", MAPPINGS)
def test_address_round_trip(preset, mapping):
    cfg = HBMConfig(pseudo_channels=2, timing=TIMING_PRESETS[preset], address_mapping=mapping)
    rng = random.Random(7)
    for _ in range(300):
        f = tuple(rng.randrange(s) for s in cfg.field_sizes.values())
        a = cfg.encode(*f)
        assert a % cfg.burst_bytes == 0 and 0 <= a < cfg.capacity_bytes
        assert cfg.decode(a) == f
        b = rng.randrange(cfg.capacity_bytes // cfg.burst_bytes) * cfg.burst_bytes
        assert cfg.encode(*cfg.decode(b)) == b
    # the least significant field sits right above the byte offset
    lsb = mapping[-1]
    one = {n: 0 for n in ADDRESS_FIELDS} | {lsb: 1}
    assert cfg.encode(*(one[n] for n in ADDRESS_FIELDS)) == cfg.burst_bytes


@pytest.mark.parametrize("mapping", MAPPINGS)
def test_address_mapping_is_a_bijection_small(mapping):
    cfg = HBMConfig(pseudo_channels=2, bank_groups=2, banks_per_group=2, rows=4, columns=4, address_mapping=mapping)
    seen = {cfg.encode(*cfg.decode(a)) for a in range(0, cfg.capacity_bytes, cfg.burst_bytes)}
    assert seen == set(range(0, cfg.capacity_bytes, cfg.burst_bytes))
    decoded = {cfg.decode(a) for a in range(0, cfg.capacity_bytes, cfg.burst_bytes)}
    assert len(decoded) == cfg.capacity_bytes // cfg.burst_bytes


@pytest.mark.parametrize("pcs", [2, 4])
@pytest.mark.parametrize("mapping", MAPPINGS)
def test_channel_xor_is_a_bijection_and_only_moves_the_channel(mapping, pcs):
    cfg = HBMConfig(
        pseudo_channels=pcs,
        bank_groups=2,
        banks_per_group=2,
        rows=4,
        columns=4,
        address_mapping=mapping,
        channel_xor=True,
    )
    plain = HBMConfig(pseudo_channels=pcs, bank_groups=2, banks_per_group=2, rows=4, columns=4, address_mapping=mapping)
    addrs = range(0, cfg.capacity_bytes, cfg.burst_bytes)
    assert {cfg.encode(*cfg.decode(a)) for a in addrs} == set(addrs)
    assert len({cfg.decode(a) for a in addrs}) == len(addrs)
    for a in addrs:
        assert cfg.decode(a)[1:] == plain.decode(a)[1:]


def test_channel_xor_spreads_power_of_two_strides():
    """With the engine's mapping (channel lowest), rows at a stride of 32 B x pseudo_channels ..
    64 KiB (one burst each) land in one pseudo-channel without the hash and in both / all four,
    evenly over every aligned group of ``pseudo_channels`` rows, with it; the exact 2-channel
    sequence is the Thue-Morse parity of the row index."""
    mapping = ("row", "bank", "bank_group", "column", "channel")
    for pcs in (2, 4):
        plain = HBMConfig(pseudo_channels=pcs, address_mapping=mapping)
        cfg = HBMConfig(pseudo_channels=pcs, address_mapping=mapping, channel_xor=True)
        for k in range(5 + pcs.bit_length() - 1, 17):
            rows = [i << k for i in range(64)]
            assert {plain.decode(a)[0] for a in rows} == {0}
            chans = [cfg.decode(a)[0] for a in rows]
            for g in range(0, 64, pcs):
                assert sorted(chans[g : g + pcs]) == list(range(pcs)), (pcs, k, chans)
            if pcs == 2:
                assert chans[:8] == [0, 1, 1, 0, 1, 0, 0, 1]
    with pytest.raises(TypeError, match=r"^channel_xor must be True or False; got 1$"):
        HBMConfig(channel_xor=1)
