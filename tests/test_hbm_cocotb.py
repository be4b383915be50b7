"""cocotb regression of the generated pseudo-channel controller on Verilator and Icarus, against the
HBM2 device model with the fatal JEDEC checker and a shadow memory (:mod:`verif.tb.hbm_tb`), and
cycle-for-cycle agreement with the Amaranth simulation of the same traffic."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hw.hbm.config import COMPRESSED_REFRESH, RAMULATOR2_HBM2, HBMConfig
from hw.hbm.controller import PseudoChannelController
from sim.runner import generate_verilog, run_cocotb
from verif.hbm_harness import PCHarness, build_traffic
from verif.hbm_sim import STRESS, STRESS_TRAFFIC, run_pc_amaranth, traffic_reference

# Small geometry (many row conflicts), Ramulator2 timings; and the DRAMsim3 timings with refresh
# compressed to tREFI = 400 at the full HBM2 pseudo-channel geometry (16 banks, 16,384 rows).
SMALL = HBMConfig(pseudo_channels=1, queue_depth=8, rows=64, columns=8, timing=RAMULATOR2_HBM2)
FULL_COMPRESSED = HBMConfig(pseudo_channels=1, queue_depth=16, timing=COMPRESSED_REFRESH, max_refresh_postpone=4)


def run_hbm(
    cfg: HBMConfig, simulator: str, seed: int, traffic: list[dict], report, gap_p=0.0, stall_p=0.0, max_cycles=200_000
) -> dict:
    verilog = generate_verilog(lambda: PseudoChannelController(cfg), name="hbm_pc", key=cfg)
    conf = {
        "config": cfg.as_dict(),
        "seed": seed,
        "traffic": traffic,
        "gap_p": gap_p,
        "stall_p": stall_p,
        "max_cycles": max_cycles,
    }
    env = {"HBM_TB_CONFIG": json.dumps(conf), "HBM_TB_REPORT": str(report)}
    result = run_cocotb([verilog], "hbm_pc", "verif.tb.hbm_tb", simulator=simulator, env=env)
    print(f"{simulator}: build {result.build_s:.1f} s, test {result.test_s:.1f} s, seed {seed}")
    assert result.failed == 0 and result.passed == 1, result.log_tail()
    return json.loads(report.read_text())


@pytest.mark.cocotb
def test_hazards_and_back_pressure(simulator, seed, tmp_path):
    """Random reads and partial writes on 12 addresses plus the whole small channel, pauses on req,
    back-pressure on rsp: nothing lost, nothing corrupted, every JEDEC rule held, and every command at
    the cycle the Amaranth model issues it."""
    traffic = [
        {"kind": "random", "count": 300, "span_bursts": 12, "write_p": 0.5, "partial_p": 0.5},
        {"kind": "random", "count": 200, "write_p": 0.3, "bursts": 2},
    ]
    stats = run_hbm(SMALL, simulator, seed, traffic, tmp_path / "r.json", gap_p=0.25, stall_p=0.25)
    assert stats["requests"] == 700
    # and the same DRAM commands at the same cycles as the Amaranth model: a scheduling or timing-counter
    # bug that stays legal and loses nothing is still a different controller
    ref = traffic_reference(SMALL, traffic, seed, gap_p=0.25, stall_p=0.25)
    assert (stats["cycles"], stats["trace_digest"]) == (ref["cycles"], ref["trace_digest"])


@pytest.mark.cocotb
def test_dense_random_same_commands_as_amaranth(simulator, tmp_path):
    """1,200 random reads and partial writes over the whole small channel, offered back to back
    with 10 % back-pressure: every command at the Amaranth model's cycle. This traffic holds banks at
    their minimum distances often enough to catch timing-counter bugs the hazards traffic never
    meets (mutants that issued a PRE inside tWR on one bank passed every other test)."""
    traffic = [{"kind": "random", "count": 1200, "write_p": 0.5, "partial_p": 0.3}]
    stats = run_hbm(SMALL, simulator, 3, traffic, tmp_path / "r.json", stall_p=0.1, max_cycles=400_000)
    ref = traffic_reference(SMALL, traffic, 3, stall_p=0.1, max_cycles=400_000)
    assert (stats["cycles"], stats["trace_digest"]) == (ref["cycles"], ref["trace_digest"])


@pytest.mark.cocotb
def test_compressed_refresh_long_run(simulator, seed, tmp_path, soak):
    """Sequential writes then reads back and random traffic at the full geometry with tREFI = 400:
    dozens of REFs, postponed while the queue is busy, never more than 4 owed."""
    n = 12000 if soak else 1500
    traffic = [
        {"kind": "sequential", "count": n, "write": True},
        {"kind": "sequential", "count": n, "write": False},
        {"kind": "random", "count": n // 2, "write_p": 0.5},
    ]
    stats = run_hbm(FULL_COMPRESSED, simulator, seed, traffic, tmp_path / "r.json")
    assert stats["refreshes"] >= stats["cycles"] // 400 - 4 >= 20
    assert 1 <= stats["max_refresh_owed"] <= 4


@pytest.mark.cocotb
def test_same_cycles_as_amaranth(simulator, tmp_path):
    """The generated Verilog and the Amaranth model of the controller issue the same commands: the
    same traffic gives the same cycle count, the same DRAM commands at the same cycles and the same
    latency of every request (a scheduling mutant that keeps the total would pass a count alone)."""
    traffic = [{"kind": "random", "count": 150, "write_p": 0.4, "span_bursts": 20}]
    stats = run_hbm(SMALL, simulator, 11, traffic, tmp_path / "r.json", gap_p=0.2, stall_p=0.2)
    rng = np.random.default_rng(11)
    h = PCHarness(SMALL, build_traffic(SMALL, traffic, rng), rng=rng, gap_p=0.2, stall_p=0.2)
    ref = run_pc_amaranth(h, 200_000)  # the harness itself: its per-request latencies are compared too
    assert stats["cycles"] == ref["cycles"]
    # every DRAM command at the same cycle and every request's latency, not only the total
    assert stats["trace_digest"] == ref["trace_digest"]
    assert [tuple(x) for x in stats["latencies_raw"]] == h.latencies


@pytest.mark.cocotb
@pytest.mark.parametrize("part", list(STRESS_TRAFFIC))
@pytest.mark.parametrize("simulator", ["verilator", pytest.param("icarus", marks=pytest.mark.soak)], indirect=True)
def test_stress_same_commands_as_amaranth(part, simulator, seed, tmp_path):
    """The small channel with refresh every 400 cycles, 2 REFs postponed at most and an age cap of
    32 cycles (:data:`verif.hbm_sim.STRESS`): every command at the Amaranth model's cycle, every
    JEDEC rule held, nothing lost. Under real timings the postponement limit and the age cap take
    tens of thousands of busy cycles; mutants of the refresh counter, the forced drain and the age
    bookkeeping passed every other test."""
    traffic, fixed_seed, gap_p, stall_p = STRESS_TRAFFIC[part]
    s = seed if fixed_seed is None else fixed_seed
    stats = run_hbm(
        STRESS, simulator, s, traffic, tmp_path / "r.json", gap_p=gap_p, stall_p=stall_p, max_cycles=400_000
    )
    ref = traffic_reference(STRESS, traffic, s, gap_p=gap_p, stall_p=stall_p, max_cycles=400_000)
    assert (stats["cycles"], stats["trace_digest"]) == (ref["cycles"], ref["trace_digest"])
    if part == "dense":  # the limits this configuration exists for were reached
        assert stats["max_refresh_owed"] == STRESS.max_refresh_postpone
        assert stats["refreshes"] >= stats["cycles"] // STRESS.timing.tREFI - STRESS.max_refresh_postpone
