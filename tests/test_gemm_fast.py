"""The GEMM engine on the HDL memory system (device model and JEDEC checker in the netlist) against the
reference: the Python device model and checker called every clock cycle.

Same engine, same controller: the results must be bit-identical, and every GEMM of a run must take
the same CYCLES with the same performance counters and simulated cycles from START to ``irq`` (both
benches wait for the memory to drain by one rule, ``verif.gemm_host.drain_cycles``, so a later GEMM
meets the refresh timer at the same phase).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from hw.engine import EngineConfig
from sim.gemm import GemmJob, run_gemms
from verif import checked
from verif.golden import matmul, to_format


def jobs(rng, shapes, *, c=False):
    out = []
    for m, k, n in shapes:
        a = to_format(rng.standard_normal((m, k)).astype(np.float32), "bf16")
        b = to_format(rng.standard_normal((k, n)).astype(np.float32), "bf16")
        c0 = rng.standard_normal((m, n)).astype(np.float32) if c else None
        out.append(GemmJob(a, b, c0, "fp32"))
    return out


@pytest.mark.cocotb
def test_hdl_memory_matches_the_python_model(seed):
    """8x8 engine, Verilator: 33x65x17 with an initial C, then five more shapes in the same run."""
    rng = np.random.default_rng(seed)
    shapes = [(64, 64, 64), (1, 256, 256), (9, 8, 40), (100, 16, 8), (17, 33, 65)]
    js = jobs(rng, [(33, 65, 17)], c=True) + jobs(rng, shapes)
    fast, info = run_gemms(js, memory="hdl", progress=False)
    ref, _ = run_gemms(js, memory="python", progress=False)
    for j, (f, r) in enumerate(zip(fast, ref)):
        gold = matmul(js[j].a, js[j].b, js[j].c, fmt="bf16", subnormals="ftz").view(np.uint32)
        checked.count(2 * gold.size)
        assert np.array_equal(f.bits, gold) and np.array_equal(r.bits, gold), f"job {j}: not bit-exact"
        assert f.status == r.status == 2 and f.clobbered_bytes == r.clobbered_bytes == 0
    assert [(f.cycles, f.perf, f.sim_cycles) for f in fast] == [(r.cycles, r.perf, r.sim_cycles) for r in ref]
    print(f"HDL memory: {info['sim_cycles']} cycles at {info['cycles_per_s']:,.0f} cycles/s")


@pytest.mark.cocotb
def test_backdoor_round_trip_first_and_last_bursts(seed):
    """Random bursts at the first and last stored burst of each pseudo-channel read back unchanged,
    without a clock cycle (the GEMM tests above load and read every matrix the same way)."""
    _, info = run_gemms(
        [],
        memory="hdl",
        sim="icarus",
        progress=False,
        raw_jobs=[{"kind": "backdoor", "seed": seed}],
        timeout_cycles=10_000,
    )
    assert info["backdoor"] == 0
    with pytest.raises(ValueError, match="device_hbm needs memory='hdl'"):
        run_gemms([], memory="python", device_hbm=EngineConfig().hbm)
    with pytest.raises(ValueError, match="a backdoor job needs memory='hdl'"):
        run_gemms([], memory="python", raw_jobs=[{"kind": "backdoor", "seed": seed}])


@pytest.mark.cocotb
def test_checker_in_the_netlist_fails_a_controller_with_a_short_rule():
    """The devices check tRCD three cycles longer than the controller obeys: the run fails at the
    first RD with the checker's message (rule, both commands, address, cycle), in Icarus."""
    cfg = EngineConfig.from_options(rows=4, cols=4)
    t = cfg.hbm.timing
    strict = dataclasses.replace(cfg.hbm, timing=dataclasses.replace(t, tRCD=t.tRCD + 3))
    rng = np.random.default_rng(1)
    with pytest.raises(RuntimeError) as exc:
        run_gemms(jobs(rng, [(4, 8, 4)]), cfg, memory="hdl", sim="icarus", progress=False, device_hbm=strict)
    msg = str(exc.value)
    assert "JEDEC violation: tRCD_RD violated: ACT at cycle" in msg, msg[-2000:]
    assert f"< tRCD = {t.tRCD + 3}" in msg and f"distance {t.tRCD}" in msg


def test_chained_job_is_checked_before_any_build():
    """``GemmJob.a_from``: an earlier job's fp32 result; anything else is refused at once."""
    rng = np.random.default_rng(0)
    (j0,) = jobs(rng, [(4, 8, 4)])
    b = j0.b[:4]
    cases = [
        ([GemmJob(None, b, a_from=0)], "a_from must be the index of an earlier job (none before job 0); got 0"),
        ([j0, GemmJob(j0.a, b, a_from=0)], "give a or a_from, not both"),
        ([j0, GemmJob(None, b, a_from=1)], "a_from must be the index of an earlier job (0..0); got 1"),
        ([dataclasses.replace(j0, out="bf16"), GemmJob(None, b, a_from=0)], "needs a float format and the earlier"),
        ([j0, GemmJob(None, j0.b, a_from=0)], "A is 4x4 but B is 8x4"),
    ]
    for js, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            run_gemms(js, progress=False)


@pytest.mark.cocotb
def test_end_of_run_refresh_rate_check_fires():
    """Regression: the end-of-run strobe was set and cleared in one time step, so no clock edge saw
    it and the checkers' REFRESH_RATE rule never ran in the HDL bench. Devices that expect a REF
    every 500 cycles, against the controller's 3,900, fail a run of about 7,500 cycles at its end (the
    controller gives 1 REF; 1 + 8 postponed < 15 tREFI periods), with the rule's name. (The gap
    limit, 9 x 500 cycles, stays above the controller's 3,900, so only the end-of-run check fires.)
    A 4x4 int8 engine on Icarus: the simulator is beside the point, and it needs no build of minutes."""
    cfg = EngineConfig.from_options(rows=4, cols=4, fmt="int8")
    t = cfg.hbm.timing
    dev = dataclasses.replace(cfg.hbm, timing=dataclasses.replace(t, tREFI=500))
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-128, 128, (48, 48)).astype(np.int8) for _ in range(2))
    with pytest.raises(RuntimeError) as exc:
        run_gemms([GemmJob(a, b, None, "fp32")], cfg, sim="icarus", memory="hdl", progress=False, device_hbm=dev)
    msg = str(exc.value)
    want = "end of run: JEDEC violation: " + "; ".join(f"REFRESH_RATE violated: pc{k} at cycle 7494" for k in (0, 1))
    assert want in msg, msg[-2000:]


@pytest.mark.cocotb
@pytest.mark.parametrize("memory", ["hdl", "python"])
def test_writes_queued_behind_a_refresh_reach_the_device_before_d_is_read(memory):
    """Regression (found by ``mxu report``): on the 4x4 int8 engine with L = 2, a 64x64x64 GEMM after a
    4x64x64 one read the last group's 108 results (rows 37-63, columns 60-63) as the fill pattern.
    Both pseudo-channels began a REF while their queues were empty; the last result writes were
    posted (B, then DONE) into the queues behind it, and the benches' drain rule counted the quiet
    spell from the last column command, which lay before DONE, so D was read while the writes
    waited out tRFC. A request waiting in a queue now restarts the count (``queue_empty<k>``): the
    results are bit-exact. The engine's CYCLES were those of the run that failed (2,647 and 16,574)
    until the HBM controller's request register added a cycle per memory round trip, and changed again
    with the register slices between engine and controller (2,650 and 16,558); with each, the case
    was re-run without the queue_empty rule and both memories still read the fill pattern (108
    results; the HDL bench's rule is ``since_col`` in ``verif.hdl.gemm_sim_top``)."""
    from sim.gemm import random_jobs

    cfg = EngineConfig.from_options(rows=4, cols=4, fmt="int8", stages=2)
    jobs = random_jobs("int8", [(4, 64, 64), (64, 64, 64)], seed=1)
    results, _ = run_gemms(jobs, cfg, sim="verilator", memory=memory, progress=False)
    for job, res in zip(jobs, results):
        want = matmul(job.a, job.b, None, fmt="int8", subnormals="ftz").view(np.uint32)
        checked.count(want.size)
        assert res.status == 0b10 and np.array_equal(res.bits, want), int((res.bits != want).sum())
    assert [r.cycles for r in results] == [2650, 16558]
    assert results[1].perf["perf_wait_w"] == 39  # the late weights that set up the refresh phase


def test_check_bitexact_names_the_gemm_and_counts_the_differences():
    """The check behind the report's and the sweep's engine figures: one flipped bit in the second
    GEMM's results fails with its shape and the count; the golden results themselves pass."""
    from sim.gemm import GemmResult, check_bitexact, random_jobs
    from verif.golden import expected_bits

    cfg = EngineConfig.from_options(rows=2, cols=2, fmt="bf16", stages=1)
    jobs = random_jobs("bf16", [(2, 3, 4), (5, 6, 7)], seed=3)
    gold = [expected_bits(j.a, j.b, fmt="bf16", subnormals="ftz") for j in jobs]
    results = [GemmResult(g.view(np.float32), g, 0, 0b10, 0) for g in gold]
    check_bitexact(jobs, results, cfg)
    bad = gold[1].copy()
    bad[4, 6] ^= 1
    results[1] = GemmResult(bad.view(np.float32), bad, 0, 0b10, 0)
    with pytest.raises(RuntimeError, match=r"the engine's 5x6x7 GEMM is not bit-exact .* \(1 of 35 elements differ\)"):
        check_bitexact(jobs, results, cfg)


@pytest.mark.cocotb
def test_random_back_pressure_on_each_port_changes_cycles_not_results():
    """Random back-pressure in the HDL memory system (``hw.axi_stall.AXI4Stall`` between each engine
    port and the controller) on the A, W and C ports one at a time, then on all three: every result is
    bit-exact with its initial C, nothing outside D is written, and the engine's waits follow the
    stalled port (A: waiting on A; W: waiting on weights; C: the C0 rows and the result writes, so
    the drain). The stall pattern is a function of the cycle count from reset, so the cycles are
    exact. 4x4 int8 with L = 2 (the build of the refresh regression above)."""
    from sim.gemm import random_jobs

    cfg = EngineConfig.from_options(rows=4, cols=4, fmt="int8", stages=2)
    stalls = [(0, 0, 0), (192, 0, 0), (0, 192, 0), (0, 0, 192), (128, 128, 128)]
    rng = np.random.default_rng(2)
    jobs = [
        dataclasses.replace(j, c=rng.integers(-1000, 1000, (33, 17), dtype=np.int32), stall=s)
        for j, s in zip(random_jobs("int8", [(33, 40, 17)] * len(stalls), seed=2), stalls)
    ]
    results, _ = run_gemms(jobs, cfg, sim="verilator", memory="hdl", progress=False)
    for job, res in zip(jobs, results):
        want = matmul(job.a, job.b, job.c, fmt="int8", subnormals="ftz").view(np.uint32)
        checked.count(want.size)
        assert res.status == 0b10 and res.clobbered_bytes == 0, job.stall
        assert np.array_equal(res.bits, want), (job.stall, int((res.bits != want).sum()))
    waits = [
        (r.cycles, r.perf["perf_wait_a"], r.perf["perf_wait_w"], r.perf["perf_wait_acc"], r.perf["perf_drain"])
        for r in results
    ]
    # (CYCLES, waiting on A, on weights, on the accumulator, draining); every run feeds 1,650 beats
    assert waits == [
        (1867, 117, 0, 53, 25),
        (1870, 148, 0, 25, 25),
        (2017, 107, 173, 40, 25),
        (2206, 97, 0, 314, 123),
        (1912, 118, 0, 68, 54),
    ]
    assert all(r.perf["perf_feed"] == 1650 for r in results)
    with pytest.raises(ValueError, match="a job with stall needs memory='hdl'"):
        run_gemms(jobs[1:2], cfg, memory="python")
    with pytest.raises(ValueError, match=r"job 0: stall must be three rates 0..255"):
        run_gemms([dataclasses.replace(jobs[0], stall=(0, 256, 0))], cfg)
