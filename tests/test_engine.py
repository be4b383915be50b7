"""GEMM engine in the Amaranth simulator with a checking AXI4 memory (fast tier).

Every result is compared bit for bit with ``verif.golden.matmul`` (and ``fp32_to_bf16_bits`` for bf16
output); every byte the engine writes must be a result byte; every memory burst is checked against
the AXI4 rules (``verif.engine_sim.AxiMemory``); memory answers with random stalls (seeded).
"""

from __future__ import annotations

import numpy as np
import pytest

from hw.engine import REG, EngineConfig
from hw.hbm.config import HBMConfig
from hw.mxu import MXUConfig
from verif import checked
from verif.engine_sim import run_engine_amaranth
from verif.golden import expected_bits as golden_bits
from verif.golden import to_format
from verif.mxu_stim import _random_acc, _random_ops, as_format

HBM1 = HBMConfig(pseudo_channels=1)


def random_job(rng, fmt, m, k, n, *, load_c=False, out_bf16=False, specials=0.05):
    a = as_format(_random_ops(fmt, (m, k), rng, specials), fmt)
    b = as_format(_random_ops(fmt, (k, n), rng, specials), fmt)
    c = _random_acc(fmt, (m, n), rng, specials).view(np.int32 if fmt == "int8" else np.float32) if load_c else None
    return {"a": a, "b": b, "c": c, "out_bf16": out_bf16}


def expected_bits(job, fmt, subnormals):
    return golden_bits(
        job["a"], job["b"], job.get("c"), fmt=fmt, subnormals=subnormals, out="bf16" if job.get("out_bf16") else "fp32"
    )


def check(cfg, jobs, results):
    for j, (job, r) in enumerate(zip(jobs, results)):
        assert r["status"] == 0b10, f"job {j}: STATUS 0x{r['status']:x}"
        want = expected_bits(job, cfg.mxu.fmt, cfg.mxu.subnormals)
        got = r["d"]
        bad = np.argwhere(got != want)
        checked.count(want.size)
        first = tuple(bad[0]) if bad.size else None
        assert bad.size == 0, (
            f"job {j} {job['a'].shape}x{job['b'].shape}: {len(bad)} mismatches, first at "
            f"{first}: got 0x{int(got[first]):x} want 0x{int(want[first]):x}"
        )
        assert r["stray_writes"] == 0, f"job {j}: {r['stray_writes']} bytes written outside the result"
        assert r["bytes_written"] == want.size * want.itemsize, f"job {j}: result bytes not all written"
        check_perf(cfg, job, r, j)


def check_perf(cfg, job, r, j=0):
    """The performance counters account for the run: one FEED per activation beat (M rows for
    every weight tile), the waits and the drain inside CYCLES, the rest set-up."""
    (m, k), n = job["a"].shape, job["b"].shape[1]
    p = r["perf"]
    R, C = cfg.mxu.rows, cfg.mxu.cols
    assert p["PERF_FEED"] == m * (-(-k // R)) * (-(-n // C)), f"job {j}: {p}"
    setup = r["cycles"] - sum(p.values())
    assert 8 <= setup <= 64, f"job {j}: set-up {setup} cycles of {r['cycles']} ({p})"
    assert p["PERF_DRAIN"] >= cfg.mxu.latency_cycles, f"job {j}: the array latency is in the drain ({p})"


# (fmt, subnormals, rows, cols, m_block, acc_entries): each hits a different buffer geometry
CONFIGS = [
    ("bf16", "ftz", 2, 2, 8, 16),  # chunks of 4 B (8 per beat), entries 8 B (4 per beat)
    ("bf16", "ieee", 4, 8, 16, 32),  # fp32 entry = one beat, bf16 entry = half a beat
    ("fp8_e4m3fn", "ftz", 4, 4, 4, 8),  # tiny m-blocks: the K-chain dependency stalls the feeder
    ("fp8_e5m2", "ieee", 2, 4, 8, 16),
    ("int8", "ftz", 4, 2, 8, 16),
    ("bf16", "ftz", 1, 16, 8, 16),  # fp32 entry = two beats, weight row = one beat
    ("bf16", "ftz", 16, 1, 8, 16),  # A chunk = one beat
]


@pytest.mark.parametrize(
    "fmt,subnormals,rows,cols,m_block,acc", CONFIGS, ids=[f"{c[0]}-{c[1]}-{c[2]}x{c[3]}-mb{c[4]}" for c in CONFIGS]
)
def test_engine_random(fmt, subnormals, rows, cols, m_block, acc, seed):
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    cfg = EngineConfig(
        mxu=MXUConfig(rows=rows, cols=cols, fmt=fmt, subnormals=subnormals),
        hbm=HBM1,
        m_block=m_block,
        acc_entries=acc,
        a_buffer_bytes=256,
    )
    shapes = [(1, 1, 1), (m_block + 3, 2 * rows + 1, 2 * cols + 1), (3, 5 * rows, cols), (1, 3, 3 * cols + 2)]
    jobs = []
    for i, (m, k, n) in enumerate(shapes):
        jobs.append(random_job(rng, fmt, m, k, n, load_c=i % 2 == 1, out_bf16=(fmt != "int8" and i % 3 == 2)))
    results = run_engine_amaranth(cfg, jobs, seed=seed, stall_p=0.3)
    check(cfg, jobs, results)


@pytest.mark.parametrize("n,ramp", [(1, True), (2, False)], ids=["n1-ramp", "n2-no-ramp"])
def test_first_block_passes_and_ramp(n, ramp, seed):
    """8 x 1 bf16 array, K = 40 (A rows of 3 beats): every m-block is read in passes of 2 beats
    then 1 beat of every row and computing starts after the first pass; with N = 1 (an A beat feeds 2
    tile beats) the m-blocks ramp 18, 18, 27, 21, 16; with N = 2 they do not (18, 32, 32, 18). The
    RTL's A reads are compared beat by beat with the rule (and so with verif.cycles.engine_blocking),
    results bit-exact under random stalls."""
    from verif.cycles import engine_blocking

    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    cfg = EngineConfig(mxu=MXUConfig(rows=8, cols=1), hbm=HBM1, m_block=32, acc_entries=32, a_buffer_bytes=4096)
    m, k = 100, 40
    blocks = engine_blocking(m, k, n, cfg)["m_blocks"]
    assert cfg.first_block_rows == 18  # D + 2 = 16 + 2 > 2R + C - 1 = 16
    assert blocks == ([18, 18, 27, 21, 16] if ramp else [18, 32, 32, 18])
    jobs = [random_job(rng, "bf16", m, k, n, load_c=True)]
    res = run_engine_amaranth(cfg, jobs, seed=seed, stall_p=0.2)
    check(cfg, jobs, res)
    check_a_reads(res[0], blocks, rb=3, q=2)


def check_a_reads(res, blocks, rb, q):
    """The RTL's A reads (beat addresses in order) are the blocks' passes: for each m-block, passes
    of ``q`` beats of every row (``rb`` beats per row)."""
    from verif.cycles import a_read_order

    lay = res["layout"]
    want = a_read_order(blocks, rb, q, lay.a_base, lay.a_stride)
    got = res["a_beats"]
    first = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
    assert got == want, f"A reads differ from beat {first} on ({len(got)} read, {len(want)} expected)"


def test_blocking_looks_ahead_when_a_bank_rows_are_few(seed):
    """When the A bank holds fewer rows than 2 x (2R + C - 1) (16x16 bf16 at K = 256: 64 rows,
    MINM = 47), a full block can leave a rest too long for one block and too short for two of MINM
    rows; the block before it then takes rem - 2 MINM rows. 4x4 bf16, 16-row A bank (K = 64),
    M = 62: blocks 13, 16, 11, 11, 11 (without the look-ahead 13, 16, 16, 9, 8: tiles shorter than
    MINM = 11 rows cannot run back to back); the RTL's A reads follow them beat by beat, results
    bit-exact under random stalls. The 16x16 rule: 256^3 in blocks 49, 64, 49, 47, 47 and the
    engine blocking costs nothing over the array model (65,600 cycles; 68,891 before)."""
    from verif.cycles import engine_array_cycles, engine_blocking

    print(f"seed {seed}")
    cfg16 = EngineConfig.from_options(rows=16, cols=16)
    assert engine_blocking(256, 256, 256, cfg16)["m_blocks"] == [49, 64, 49, 47, 47]
    assert engine_array_cycles(256, 256, 256, cfg16) == 65_600
    rng = np.random.default_rng(seed)
    cfg = EngineConfig(mxu=MXUConfig(rows=4, cols=4), hbm=HBM1, m_block=32, acc_entries=32, a_buffer_bytes=2048)
    blocks = engine_blocking(62, 64, 8, cfg)["m_blocks"]
    assert blocks == [13, 16, 11, 11, 11]
    jobs = [random_job(rng, "bf16", 62, 64, 8, load_c=True)]
    res = run_engine_amaranth(cfg, jobs, seed=seed, stall_p=0.2)
    check(cfg, jobs, res)
    check_a_reads(res[0], blocks, rb=4, q=2)


def test_many_m_blocks_pass_through_the_sequencer_table(seed):
    """The block rule runs once per GEMM in the engine's m-block sequencer, into a table of 8 blocks
    the loops index. 2x2 bf16, 8-row m-blocks: 200x3x5 without an initial C is 26 blocks (the
    block indices wrap; the C0 consumer never moves without LOAD_C and must not hold the
    sequencer back: counted, the run hangs after 8 blocks), 165x5x7 with C0 and bf16 output 21
    blocks; bit-exact under random stalls, and the A reads follow ``engine_blocking`` beat by beat."""
    from verif.cycles import engine_blocking

    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    cfg = EngineConfig(mxu=MXUConfig(rows=2, cols=2), hbm=HBM1, m_block=8, acc_entries=16, a_buffer_bytes=256)
    blocks = engine_blocking(200, 3, 5, cfg)["m_blocks"]
    assert blocks == [7] + [8] * 22 + [7, 5, 5]
    assert len(engine_blocking(165, 5, 7, cfg)["m_blocks"]) == 21
    jobs = [random_job(rng, "bf16", 200, 3, 5), random_job(rng, "bf16", 165, 5, 7, load_c=True, out_bf16=True)]
    res = run_engine_amaranth(cfg, jobs, seed=seed, stall_p=0.3)
    check(cfg, jobs, res)
    check_a_reads(res[0], blocks, rb=1, q=1)


def test_engine_k_larger_than_one_bank_row_limit():
    """K at MAX_K (one A row fills a bank): m-blocks of one row."""
    cfg = EngineConfig(mxu=MXUConfig(rows=2, cols=2), hbm=HBM1, m_block=4, acc_entries=8, a_buffer_bytes=64)
    assert cfg.max_k == 32
    rng = np.random.default_rng(7)
    jobs = [random_job(rng, "bf16", 3, 32, 3)]
    check(cfg, jobs, run_engine_amaranth(cfg, jobs))


def test_padding_keeps_negative_zero():
    """-0 results survive K padding: (-0) * (+0) padding products add -0, never +0."""
    cfg = EngineConfig(mxu=MXUConfig(rows=4, cols=4), hbm=HBM1, m_block=8, acc_entries=16)
    a = to_format(np.array([[-0.0, 1.0, 0.0]], dtype=np.float32), "bf16")
    b = to_format(np.array([[1.0], [-0.0], [5.0]], dtype=np.float32), "bf16")  # -0 + -0 + 0*5=+0 -> +0
    c0 = np.array([[-0.0]], dtype=np.float32)
    jobs = [{"a": a[:, :2], "b": b[:2], "c": c0}, {"a": a[:, :1], "b": b[:1], "c": c0}]
    res = run_engine_amaranth(cfg, jobs)
    check(cfg, jobs, res)
    assert int(res[0]["d"][0, 0]) == 0x80000000 and int(res[1]["d"][0, 0]) == 0x80000000


ERR_CASES = {
    "zero_m": ({"M": 0}, 1),
    "zero_k": ({"K": 0}, 1),
    "zero_n": ({"N": 0}, 1),
    "m_too_large": ({"M": 1 << 20}, 2),
    "k_above_max_k": ({"K": 513}, 2),
    "bf16_out_int8": (None, 3),
    "a_base_misaligned": ({"A_BASE": 0x1010}, 4),
    "d_stride_misaligned": ({"D_STRIDE": 48}, 4),
    "a_stride_short": ({"A_STRIDE": 0}, 5),
    "d_stride_short": ({"N": 9}, 5),
    "b_past_end": ({"B_BASE": (1 << 28) - 32}, 6),
    "d_past_end": ({"M": 1 << 19, "D_STRIDE": 1 << 12}, 6),
}


def test_bad_descriptors_set_error_and_return_to_idle():
    """Every bad descriptor: DONE with the ERROR code, irq, idle again, and a good GEMM afterwards."""
    cfg = EngineConfig(mxu=MXUConfig(rows=2, cols=2), hbm=HBM1, m_block=4, acc_entries=8, a_buffer_bytes=1024)
    base = {
        "M": 2,
        "K": 3,
        "N": 8,
        "FLAGS": 0,
        "A_BASE": 0x1000,
        "A_STRIDE": 32,
        "B_BASE": 0x2000,
        "B_STRIDE": 32,
        "C_BASE": 0x3000,
        "C_STRIDE": 32,
        "D_BASE": 0x4000,
        "D_STRIDE": 32,
    }
    jobs, want = [], []
    for name, (change, code) in ERR_CASES.items():
        regs = dict(base, **(change or {}))
        if change is None:
            continue
        jobs.append({"writes": [(REG[r].offset, v) for r, v in regs.items()]})
        want.append((name, code))
    rng = np.random.default_rng(3)
    good = random_job(rng, "bf16", 5, 3, 4)
    jobs.append(good)
    res = run_engine_amaranth(cfg, jobs)
    for (name, code), r in zip(want, res):
        assert r["status"] == (code << 4) | 0b10, f"{name}: STATUS 0x{r['status']:x}, want error {code}"
        assert r["cycles"] <= 10, f"{name}: {r['cycles']} cycles to report a descriptor error"
    check(cfg, [good], res[-1:])
    # int8 with bf16 output
    cfg8 = EngineConfig(
        mxu=MXUConfig(rows=2, cols=2, fmt="int8"), hbm=HBM1, m_block=4, acc_entries=8, a_buffer_bytes=1024
    )
    regs = dict(base, FLAGS=2)
    r = run_engine_amaranth(cfg8, [{"writes": [(REG[k].offset, v) for k, v in regs.items()]}])[0]
    assert r["status"] == (3 << 4) | 0b10


def test_host_checks_follow_dim_bits():
    """The host refuses what the engine's DIM_TOO_LARGE would: 4,096 on a 12-bit engine."""
    from verif.cycles import check_engine_dims

    cfg = EngineConfig(a_buffer_bytes=8192, dim_bits=12)
    check_engine_dims(4095, 4095, 4095, cfg)
    with pytest.raises(ValueError, match=r"^N = 4096 is larger than the engine's largest dimension 2\^12 - 1 = 4095 "):
        check_engine_dims(1, 1, 4096, cfg)


def test_engine_config_errors():
    with pytest.raises(ValueError, match=r"^dim_bits must be an integer from 8 to 20; got 21$"):
        EngineConfig(dim_bits=21)
    with pytest.raises(TypeError, match=r"^dim_bits must be an integer from 8 to 20; got 12.0$"):
        EngineConfig(dim_bits=12.0)
    with pytest.raises(ValueError, match=r"^rows must be a power of two from 1 to 256; got 3$"):
        EngineConfig(mxu=MXUConfig(rows=3, cols=4))
    with pytest.raises(ValueError, match=r"^acc_entries must be >= m_block = 128; got 64$"):
        EngineConfig(acc_entries=64)
    with pytest.raises(ValueError, match=r"^a_buffer_bytes must be a power of two from 32 to 67108864; got 1000$"):
        EngineConfig(a_buffer_bytes=1000)
    with pytest.raises(ValueError, match=r"^m_block must be an integer from 1 to 65536; got 0$"):
        EngineConfig(m_block=0)


def test_manual_register_map_is_generated():
    """The manual's register map is generated from hw.engine.csr.REGISTERS (tests/test_docs.py checks
    the built page), never typed: the page holds the directive and no register row of its own."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "engine.md").read_text()
    assert "```{mxu-reference} registers" in page
    assert "| 0x00 | ID |" not in page


def test_cycle_model_blocking_matches_the_rtl_rule():
    """verif.cycles.engine_blocking: every block <= Mbmax, the blocks cover M, none shorter than
    2R + C - 1 when M allows, and the group covers the K-chain distance."""
    from verif.cycles import engine_blocking

    cfg = EngineConfig(mxu=MXUConfig(rows=8, cols=8))
    minm = 23
    for m in (1, 22, 23, 46, 47, 64, 100, 128, 129, 150, 151, 250, 1000):
        b = engine_blocking(m, 64, 64, cfg)
        assert sum(b["m_blocks"]) == m and max(b["m_blocks"]) <= b["mb_max"]
        if m >= 2 * minm:
            assert min(b["m_blocks"]) >= minm, (m, b["m_blocks"])
        assert b["g"] * b["mb_max"] >= min(cfg.mxu.latency_cycles + 16, 8 * b["mb_max"])
    assert engine_blocking(64, 64, 64, cfg)["m_blocks"] == [25, 39]  # first: D + 2 = 25 rows
    # groups: 2 n-blocks for the 25-row block (25 < D + 16 = 39 beats), 1 for the 39-row one
    assert engine_blocking(64, 64, 64, cfg)["block_g"] == [2, 1]
    assert engine_blocking(1, 256, 256, cfg)["g"] == 32


def test_group_starts_while_its_initial_c_loads():
    """A group with FLAGS.LOAD_C starts k-block 0 as soon as the C0 rows it feeds are stored, not
    after the whole C0 load (the C0 beats wait while the collector writes the same bank). 4x4 engine,
    96x16x8 with C0, a memory withholding each beat with probability 0.5 (seed 5): bit-exact, and
    the cycles exactly as this engine gives them. When the rule was introduced, this run took 944
    cycles with the whole-load rule and 919 with it (cycles without a free accumulator: 59 -> 41).
    The stalls are drawn per cycle, so any change of the engine's timing redraws the run and these
    figures with it: this engine gives 906 cycles (44 without a free accumulator) at seed 5."""
    rng = np.random.default_rng(3)
    cfg = EngineConfig(mxu=MXUConfig(rows=4, cols=4), hbm=HBM1, m_block=32, acc_entries=32)
    a = as_format(rng.standard_normal((96, 16)).astype(np.float32), "bf16")
    b = as_format(rng.standard_normal((16, 8)).astype(np.float32), "bf16")
    c = rng.standard_normal((96, 8)).astype(np.float32)
    jobs = [{"a": a, "b": b, "c": c}]
    res = run_engine_amaranth(cfg, jobs, seed=5, stall_p=0.5)
    check(cfg, jobs, res)
    assert (res[0]["cycles"], res[0]["perf"]["PERF_WAIT_ACC"]) == (906, 44), res[0]["perf"]


def test_a_group_waits_for_its_own_start_not_the_banks_old_ready():
    """A bank stays READY for its old group until the collector writes that group's last output
    beat, the array's latency after the feeder's last beat of it. 4x4 bf16, 8-row m-blocks, 16
    accumulator entries, 16x3x9 with C0 (no memory stalls): the groups alternate between two n-blocks
    (bank 0) and one (bank 1); the feeder finished the one-n-block group, 8 beats, inside the array's
    latency and fed the next group's first rows in bank 0 from the old group's entries, before
    that group's C0 was loaded: its C0 beats later overwrote the results (rows 8 and 9 of the
    first n-block read back C0 alone). The feeder now waits until the C0 loader has started the
    group; the wait counts as PERF_WAIT_ACC."""
    cfg = EngineConfig(mxu=MXUConfig(rows=4, cols=4), hbm=HBM1, m_block=8, acc_entries=16, a_buffer_bytes=256)
    rng = np.random.default_rng(1)
    jobs = [random_job(rng, "bf16", 16, 3, 9, load_c=True), random_job(rng, "bf16", 40, 3, 4, load_c=True)]
    res = run_engine_amaranth(cfg, jobs, seed=1, stall_p=0.0)
    check(cfg, jobs, res)
    assert [(r["cycles"], r["perf"]["PERF_WAIT_ACC"]) for r in res] == [(133, 27), (103, 14)], [r["perf"] for r in res]


def test_k_chain_wait_ends_in_the_cycle_the_output_is_written():
    """A beat of k-block >= 1 continues an output the collector must have written: with 4-row
    m-blocks and one n-block (4x4 bf16, 8x40x4, no memory stalls) every k-block waits for the
    array's latency, and the feeder issues the beat in the first cycle the write-back count allows.
    The count's compare is made a cycle ahead from the count after the edge (it was in front of the
    issue decision, the engine's critical path); a compare that saw the count a cycle late would add
    a cycle to every wait (292 -> 310 cycles here, 18 waits). Exact cycles of this engine, before and after
    that change."""
    rng = np.random.default_rng(2)
    cfg = EngineConfig(mxu=MXUConfig(rows=4, cols=4), hbm=HBM1, m_block=4, acc_entries=8)
    jobs = [random_job(rng, "bf16", 8, 40, 4, specials=0.0)]
    res = run_engine_amaranth(cfg, jobs, seed=1, stall_p=0.0)
    check(cfg, jobs, res)
    assert (res[0]["cycles"], res[0]["perf"]["PERF_WAIT_DEP"]) == (292, 162), res[0]["perf"]


def test_write_back_waits_for_fifo_room_exactly_under_w_back_pressure():
    """The write-back reads a piece only while its 16-beat W FIFO has room for it and the two pieces
    behind it (level <= 12); that check is a register loaded a cycle ahead from the level after the
    edge (the level's adder was in front of the cursor's step, the board top's critical path). With
    W (and every other channel) withheld 80 % of the cycles the FIFO runs full: exact cycles of
    this engine before and after that change (a check that missed this cycle's W beat gives 1,494)."""
    rng = np.random.default_rng(3)
    cfg = EngineConfig(mxu=MXUConfig(rows=4, cols=4), hbm=HBM1, m_block=8, acc_entries=16, a_buffer_bytes=512)
    jobs = [random_job(rng, "bf16", 40, 3, 40, out_bf16=True)]
    res = run_engine_amaranth(cfg, jobs, seed=3, stall_p=0.8)
    check(cfg, jobs, res)
    assert res[0]["cycles"] == 1531
