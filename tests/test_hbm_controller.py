# amaranth: UnusedElaboratable=no
"""Pseudo-channel controller in Amaranth's simulator against the HBM2 device model and JEDEC checker.

Every run goes through :class:`verif.hbm_harness.PCHarness`: each command is checked by the fatal
JEDEC checker, every read is compared with a shadow memory, the memory contents are compared at the
end, and the refresh cadence is checked. Small geometries (64 rows, 8 columns) keep row conflicts
frequent; the timing sets are the real ones.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hw.hbm.config import COMPRESSED_REFRESH, DRAMSIM3_HBM2, RAMULATOR2_HBM2, HBMConfig
from hw.hbm.controller import PseudoChannelController, response_fifo_depth
from hw.hbm.interface import RowCmd
from verif.hbm_harness import PCHarness, Pins, Request, random_traffic, row_conflicts, sequential
from verif.hbm_sim import run_pc_amaranth
from verif.jedec_checker import TimingViolation

TIMINGS = {"dramsim3": DRAMSIM3_HBM2, "ramulator2": RAMULATOR2_HBM2}
FULL = (1 << 32) - 1


def _cfg(timing=RAMULATOR2_HBM2, **kw) -> HBMConfig:
    base = dict(pseudo_channels=1, queue_depth=8, rows=64, columns=8, timing=timing)
    base.update(kw)
    return HBMConfig(**base)


@pytest.mark.parametrize("tname", TIMINGS)
def test_first_read_after_reset_exact_latency(tname):
    """Closed bank after reset: ACT one cycle after the request enters, RD tRCD later, data CL
    later, two cycles through the response buffer: tRCD + CL + 4 cycles from accept to response."""
    t = TIMINGS[tname]
    cfg = _cfg(t)
    a = cfg.encode(0, 1, 2, 3, 4)
    h = PCHarness(cfg, [Request(False, a)])
    run_pc_amaranth(h, 500)
    assert h.latencies == [("closed", False, False, t.tRCD + t.CL + 4, a)]
    assert h.device.reads == 1 and h.device.writes == 0


@pytest.mark.parametrize("tname", TIMINGS)
def test_first_write_after_reset_exact_latency(tname):
    """A posted write: accepted, ACT on the pins 2 cycles later, WR tRCD after the ACT."""
    t = TIMINGS[tname]
    cfg = _cfg(t)
    a = cfg.encode(0, 3, 0, 63, 7)
    data = bytes(range(100, 132))
    h = PCHarness(cfg, [Request(True, a, data, FULL)])
    run_pc_amaranth(h, 500)
    assert h.latencies == [("closed", False, True, t.tRCD + 2, a)]
    assert h.device.read_address(a) == data


@pytest.mark.parametrize("tname", TIMINGS)
def test_same_address_hazards(tname, seed):
    """Read-after-write, write-after-read, write-after-write on 6 addresses with partial byte masks:
    every read returns exactly the bytes of the writes accepted before it."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    cfg = _cfg(TIMINGS[tname])
    reqs = random_traffic(cfg, 160, rng, write_p=0.5, span_bursts=6, partial_p=0.5)
    h = PCHarness(cfg, reqs, rng=rng)
    stats = run_pc_amaranth(h, 20000)
    assert stats["requests"] == 160 and h.responses == sum(not r.write for r in reqs)


def test_read_write_same_address_sequence_exact_bytes():
    """Fixed sequence: W(all) R W(mask 0x0000FFFF) R W(mask 0xFF000000) R on one address."""
    cfg = _cfg()
    a = cfg.encode(0, 2, 1, 9, 3)
    d1, d2, d3 = bytes([0x11] * 32), bytes([0x22] * 32), bytes([0x33] * 32)
    reqs = [
        Request(True, a, d1, FULL),
        Request(False, a),
        Request(True, a, d2, 0x0000FFFF),
        Request(False, a),
        Request(True, a, d3, 0xFF000000),
        Request(False, a),
    ]
    h = PCHarness(cfg, reqs)
    run_pc_amaranth(h, 1000)
    assert h.device.read_address(a) == bytes([0x22] * 16 + [0x11] * 8 + [0x33] * 8)


@pytest.mark.parametrize(("tRCD", "tRAS"), [(1, 1), (1, 2), (2, 2), (2, 3), (3, 3)])
def test_short_row_timings_hazards_and_back_pressure(tRCD, tRAS, seed):
    """The queue's row-hit and readiness shortcuts depend on tRCD and tRAS (an ACT's hits a cycle
    late only for tRCD >= 3, the per-bank hit summary for tRAS >= 3): every branch on hazard traffic
    with pauses and back-pressure. Regression: with the late hits taken at tRCD = 2 the summary
    lacked the new hit in the cycle after the ACT, PRE (tRAS = 2) closed the row just opened, and
    the channel livelocked (127 requests never offered at seed 1)."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    cfg = _cfg(replace(RAMULATOR2_HBM2, tRCD=tRCD, tRAS=tRAS, tRC=None))
    reqs = random_traffic(cfg, 160, rng, write_p=0.5, span_bursts=6, partial_p=0.5)
    h = PCHarness(cfg, reqs, rng=rng, gap_p=0.2, stall_p=0.2)
    stats = run_pc_amaranth(h, 20000)
    assert stats["requests"] == 160 and h.responses == sum(not r.write for r in reqs)


@pytest.mark.parametrize("policy", ["open", "closed"])
@pytest.mark.parametrize("tname", TIMINGS)
def test_random_traffic_back_pressure(tname, policy, seed):
    """Random reads/writes over the whole (small) channel with pauses on req and back-pressure on
    rsp, both page policies."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    cfg = _cfg(TIMINGS[tname], page_policy=policy)
    reqs = random_traffic(cfg, 200, rng, write_p=0.4)
    h = PCHarness(cfg, reqs, rng=rng, gap_p=0.3, stall_p=0.3)
    run_pc_amaranth(h, 20000)


def test_row_conflicts_one_bank(seed):
    """Every request to bank 0 with a new row: each needs PRE + ACT (tRAS, tRP, tRC, tRTP bind)."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    cfg = _cfg(DRAMSIM3_HBM2)
    reqs = row_conflicts(cfg, 24, rng, write_p=0.5)
    h = PCHarness(cfg, reqs)
    stats = run_pc_amaranth(h, 20000)
    assert stats["row_hit_rate"] == 0.0
    # each access needs its own ACT; tRC = 48 cycles between ACTs to the one bank bounds the rate
    assert stats["cycles"] >= 23 * DRAMSIM3_HBM2.tRC


def test_refresh_while_saturated():
    """Compressed refresh (tREFI 400) under back-to-back sequential reads for ~7,000 cycles: REFs are
    forced while the queue is full; the checker's REFRESH_GAP / REFRESH_RATE rules hold and no more
    than max_refresh_postpone REFs are ever owed."""
    cfg = _cfg(COMPRESSED_REFRESH, max_refresh_postpone=2)
    rng = np.random.default_rng(7)
    reqs = sequential(cfg, 2600, False, rng)
    h = PCHarness(cfg, reqs)
    stats = run_pc_amaranth(h, 40000)
    assert stats["refreshes"] >= stats["cycles"] // 400 - 2 >= 12
    assert 1 <= stats["max_refresh_owed"] <= 2
    assert stats["worst_refresh_gap_cycles"] <= 3 * 400


def test_refresh_when_idle_is_not_postponed():
    """With an empty queue a due REF is issued at once: REFs follow every tREFI."""
    cfg = _cfg(COMPRESSED_REFRESH)
    a = cfg.encode(0, 0, 0, 0, 0)
    h = PCHarness(cfg, [Request(False, a)])
    run_pc_amaranth(h, 3000, drain_cycles=2000)
    refs = h.device.checker.refresh_cycles(0)
    # A REF falls due at the end of cycle 399 + k*400 (owed = 1 from cycle 400 + k*400), the drain
    # starts one cycle later and commands reach the pins one cycle after the decision. The first
    # time the read's row is still open (open-page policy): PREA decided at 401 (pins 402), REF
    # tRP = 14 later (pins 416); afterwards every bank is closed: REF on the pins at 802, 1202, ...
    assert refs[:4] == [402 + COMPRESSED_REFRESH.tRP, 802, 1202, 1602]


def test_age_cap_bounds_starvation():
    """One request to another row of bank 0 behind a stream of row hits to bank 0: FR-FCFS alone
    would serve every hit first; the age cap (64 cycles) forces it out."""
    cfg = _cfg(RAMULATOR2_HBM2, age_cap_cycles=64, queue_depth=8)
    hits = [Request(False, cfg.encode(0, 0, 0, 1, k % 8)) for k in range(300)]
    victim = cfg.encode(0, 0, 0, 2, 0)
    reqs = hits[:4] + [Request(False, victim)] + hits[4:]
    h = PCHarness(cfg, reqs)
    run_pc_amaranth(h, 10000)
    lat = [lat for _, _, _, lat, addr in h.latencies if addr == victim]
    t = cfg.timing
    # 64 cycles of age, then drain the hit in flight (tRTP), PRE, tRP, ACT, tRCD, RD, CL, buffer
    assert len(lat) == 1 and lat[0] <= 64 + t.tRAS + t.tRP + t.tRCD + t.CL + 8
    without = _cfg(RAMULATOR2_HBM2, age_cap_cycles=65535, queue_depth=8)
    h2 = PCHarness(without, reqs)
    run_pc_amaranth(h2, 10000)
    lat2 = [lat for _, _, _, lat, addr in h2.latencies if addr == victim]
    assert lat2[0] > 300  # the victim waits for the whole hit stream without the cap


@pytest.mark.parametrize(
    "field, delta, rules",
    [
        ("tRCD", -1, {"tRCD_RD", "tRCD_WR"}),
        ("tFAW", -8, {"tFAW"}),
        ("tRP", -2, {"tRP"}),
        ("tRFC", -20, {"tRFC"}),
        ("tRTW", -2, {"tRTW"}),
        ("tWTR_S", -2, {"tWTR_S"}),
        ("tRAS", -3, {"tRAS"}),
    ],
)
def test_controller_with_wrong_timing_fails(field, delta, rules, seed):
    """The checks can fail: a controller built with one timing too short trips exactly that rule of
    the device's checker (traffic chosen so the rule binds)."""
    print(f"seed {seed}")
    t = COMPRESSED_REFRESH
    wrong = replace(t, **{field: getattr(t, field) + delta})
    cfg = _cfg(t, max_refresh_postpone=1)
    rng = np.random.default_rng(seed)
    reqs = random_traffic(cfg, 400, rng, write_p=0.5)
    h = PCHarness(cfg, reqs)
    with pytest.raises(TimingViolation) as e:
        run_pc_amaranth(h, 20000, dut_config=replace(cfg, timing=wrong))
    assert e.value.rule in rules, str(e.value)


@pytest.mark.parametrize("tname", TIMINGS)
def test_unloaded_hit_and_conflict_exact_latency(tname):
    """One request at a time to one bank: closed (tRCD + CL + 4), row hit (CL + 4), row conflict
    once tRAS and tRTP are long met (tRP + tRCD + CL + 4)."""
    t = TIMINGS[tname]
    cfg = _cfg(t)
    a, a2, b = cfg.encode(0, 1, 2, 3, 4), cfg.encode(0, 1, 2, 3, 5), cfg.encode(0, 1, 2, 9, 0)
    h = PCHarness(cfg, [Request(False, a), Request(False, a2), Request(False, b)], max_outstanding=1)
    run_pc_amaranth(h, 2000)
    assert [(k, lat) for k, _, _, lat, _ in h.latencies] == [
        ("closed", t.tRCD + t.CL + 4),
        ("hit", t.CL + 4),
        ("conflict", t.tRP + t.tRCD + t.CL + 4),
    ]


@pytest.mark.parametrize("write", [False, True], ids=["reads", "writes"])
@pytest.mark.parametrize("tname", TIMINGS)
def test_sequential_bursts_back_to_back(tname, write):
    """800 sequential bursts at the HBM2 geometry (16 banks, 32 columns per row): every column
    command exactly burst_cycles after the previous one, across row and bank switches and the wrap
    back to bank 0 (after 512 bursts). The response buffer (response_fifo_depth: 11 / 7 entries)
    covers the read round trip. Regression: write slots used to stay busy for CWL cycles after the
    WR, and from the wrap on every row cost 2 extra cycles (DRAMsim3 timings)."""
    t = TIMINGS[tname]
    cfg = HBMConfig(pseudo_channels=1, queue_depth=16, timing=t)
    assert response_fifo_depth(cfg) == {"dramsim3": 11, "ramulator2": 7}[tname]
    h = PCHarness(cfg, sequential(cfg, 800, write, np.random.default_rng(1)))
    run_pc_amaranth(h, 5000)
    cycles = [c for c, _ in h.column_commands]
    assert len(cycles) == 800
    gaps = {b - a for a, b in zip(cycles, cycles[1:])}
    assert gaps == {t.burst_cycles}, sorted(gaps)


def test_config_errors():
    with pytest.raises(ValueError, match=r"^tag_bits must be an integer from 1 to 16; got 0$"):
        HBMConfig(tag_bits=0)
    with pytest.raises(ValueError, match=r"^age_cap_cycles must be an integer from 1 to 65535; got 0$"):
        HBMConfig(age_cap_cycles=0)
    with pytest.raises(TypeError, match=r"^config must be an HBMConfig"):
        PseudoChannelController({"queue_depth": 4})


def test_degenerate_geometry_one_bank_one_slot():
    """1 bank group x 1 bank, 2 columns, queue depth 1: zero-width fields elaborate and run."""
    cfg = HBMConfig(
        bank_groups=1, banks_per_group=1, rows=4, columns=2, queue_depth=1, pseudo_channels=1, timing=RAMULATOR2_HBM2
    )
    rng = np.random.default_rng(3)
    reqs = random_traffic(cfg, 40, rng, write_p=0.5)
    run_pc_amaranth(PCHarness(cfg, reqs), 5000)


@pytest.mark.parametrize("tname", TIMINGS)
def test_bram_emulator_behind_controller(tname, seed):
    """The FPGA configuration: controller + BRAM emulator. The emulator supplies the read data; the
    device model still checks every command and the shadow memory checks every response."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    cfg = _cfg(TIMINGS[tname])
    reqs = random_traffic(cfg, 250, rng, write_p=0.5, span_bursts=40, partial_p=0.5)
    h = PCHarness(cfg, reqs, rng=rng)
    run_pc_amaranth(h, 20000, emulated_rows=cfg.rows)
    assert h.responses == sum(not r.write for r in reqs)


def test_bram_emulator_aliases_rows_and_checks_config():
    """Rows alias modulo emulated_rows: a write to row 1 is read back from row 5 (4 emulated rows)."""
    from hw.hbm.emulator import BRAMEmulator

    cfg = _cfg()
    assert BRAMEmulator(cfg, 4).capacity_bytes == 16 * 4 * 8 * 32
    with pytest.raises(ValueError, match=r"^emulated_rows must be a power of two from 1 to 64; got 3$"):
        BRAMEmulator(cfg, 3)
    with pytest.raises(ValueError, match=r"^emulated_rows must be an integer from 1 to 64; got 65$"):
        BRAMEmulator(cfg, 65)
    a, b = cfg.encode(0, 1, 1, 1, 2), cfg.encode(0, 1, 1, 5, 2)
    data = bytes(range(32))
    h = PCHarness(cfg, [Request(True, a, data, FULL), Request(False, b)])
    # the shadow expects row 5 unwritten (zeros); the emulator returns row 1's bytes: the harness
    # must report exactly that mismatch
    with pytest.raises(AssertionError, match="returned 000102"):
        run_pc_amaranth(h, 2000, emulated_rows=4)


def test_harness_fails_a_queue_empty_that_misses_a_waiting_request():
    """``queue_empty`` is checked in every cycle (the GEMM benches' drain rule relies on it): high
    while an accepted read waits for its RD is an error naming the cycle and the count."""
    cfg = _cfg(TIMINGS[next(iter(TIMINGS))])
    idle = dict.fromkeys(Pins.__dataclass_fields__, 0)

    def pins(**kw):
        return Pins(**{**idle, "req_ready": 1, **kw})

    h = PCHarness(cfg, [Request(False, cfg.encode(0, 1, 2, 3, 4))])
    assert h.step(pins(queue_empty=1)).req_valid == 1  # accepted in cycle 0, in the queue from cycle 1
    h.step(pins(queue_empty=0))  # right: the read waits
    with pytest.raises(AssertionError, match="cycle 2: queue_empty is 1 with 1 accepted requests waiting"):
        h.step(pins(queue_empty=1))


def test_bank_sweep_puts_every_bank_through_its_situations():
    """One round: a request to each of the 16 banks, then per bank a closed-bank read, ``fill`` hits
    to another bank, a miss and a hit on a second row, read / write / read of one address, and a
    conflict back on the first row."""
    from verif.hbm_harness import bank_sweep
    from verif.hbm_sim import STRESS as cfg

    reqs = bank_sweep(cfg, np.random.default_rng(1), fill=5)
    assert len(reqs) == 16 + 16 * (1 + 5 + 5)
    decode = [cfg.decode(r.addr) for r in reqs]
    assert sorted((bg, b) for _, bg, b, _, _ in decode[:16]) == [(g, k) for g in range(4) for k in range(4)]
    for k in range(16):
        seq = reqs[16 + 11 * k : 16 + 11 * (k + 1)]
        (_, bg, b, r0, c0), fill, tail = cfg.decode(seq[0].addr), seq[1:6], seq[6:]
        assert c0 == 0 and all(cfg.decode(f.addr)[1:3] != (bg, b) for f in fill)
        t = [cfg.decode(r.addr) for r in tail]
        assert [x[1:3] for x in t] == [(bg, b)] * 5 and t[0][3] != r0 and t[4][3:] == (r0, 3)
        assert [r.write for r in tail] == [False, False, True, False, False]
        assert tail[1].addr == tail[2].addr == tail[3].addr


def test_act_windows_make_every_tfaw_slot_decide_an_act():
    """24 rounds (seed 1) in the controller: 142 ACTs (6 per round, less the banks a round found on
    the row it wanted), and for each of the four tFAW window slots some ACT that waited exactly tFAW
    behind the ACT four before it while more than tRRD_L behind the one before it: the slot's own
    wait decided it, which a continuous ACT burst never shows."""
    from verif.hbm_harness import act_windows
    from verif.hbm_sim import STRESS as cfg

    h = PCHarness(cfg, act_windows(cfg, np.random.default_rng(1), 24))
    run_pc_amaranth(h, 20000)
    acts = [c for c, row_cmd, *_ in h.commands if row_cmd == RowCmd.ACT.value]
    t = cfg.timing
    held = [j for j in range(4, len(acts)) if acts[j] - acts[j - 4] == t.tFAW and acts[j] - acts[j - 1] > t.tRRD_L]
    assert len(acts) == 142 and len(held) == 25
    assert {(j - 4) % 4 for j in held} == {0, 1, 2, 3}


@pytest.mark.parametrize("trc", [None, 30])
def test_trc_waits_only_where_it_exceeds_tras_plus_trp(trc):
    """Row conflicts in one bank: ACT to ACT is tRAS + tRP = 24 cycles when tRC is their sum (the
    bank's counter then counts tRP only), and exactly tRC when a timing set asks for more."""
    cfg = _cfg(replace(RAMULATOR2_HBM2, tRC=trc))
    h = PCHarness(cfg, row_conflicts(cfg, 12, np.random.default_rng(3)))
    run_pc_amaranth(h, 5000)
    acts = [c for c, row_cmd, *_ in h.commands if row_cmd == RowCmd.ACT.value]
    t = RAMULATOR2_HBM2
    assert len(acts) == 12 and min(np.diff(acts)) == (trc or t.tRAS + t.tRP) and t.tRAS + t.tRP == 24
