"""The blocks ``mxu mutate`` can mutate, each with the regression that judges its mutants.

A block's regression is the cocotb testbench and configuration of its default pytest tests
(``tests/test_*_cocotb.py``), with a fixed seed so every mutant meets the same stimulus, split into
runs ordered cheapest first: a killed mutant stops at its first failing run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from sim.mutate import Target, TestRun

__all__ = ["BLOCKS", "target"]


def _rtlil(make: Callable[[], object], name: str) -> Callable[[], tuple[str, str]]:
    """The design as Amaranth RTLIL with source locations (each cell knows its Python line)."""

    def design() -> tuple[str, str]:
        import os

        from amaranth.back import rtlil

        os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
        return "rtlil", rtlil.convert(make(), name=name, emit_src=True)

    return design


def _mac(options: dict, seed: int) -> Target:
    """The MAC: ``tests/test_mac_cocotb.py::test_mac``'s bench (every special pairing, then 20,000
    random MACs over the distributions with random gaps and back-pressure)."""
    from hw.arith import MAC, MACConfig

    cfg = MACConfig(**{"fmt": "bf16", "subnormals": "ftz", "stages": 2, **options})
    base = {"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages, "seed": seed, "gaps": True}
    runs = (
        TestRun(
            "corner_cases",
            "verif.tb.mac_tb",
            {"MXU_TB_CONFIG": json.dumps({**base, "random_total": 0})},
            testcase="corner_cases",
        ),
        TestRun(
            "random_macs",
            "verif.tb.mac_tb",
            {"MXU_TB_CONFIG": json.dumps({**base, "random_total": 20000, "corners": False})},
        ),
    )
    return Target(
        "mac",
        "mac",
        _rtlil(lambda: MAC(cfg), "mac"),
        runs,
        config={"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages},
    )


def _pe(options: dict, seed: int) -> Target:
    """One PE (default bf16, FTZ, 2 stages): ``tests/test_pe_cocotb.py::test_pe``'s bench, every MAC
    corner vector with its weight streamed through the weight registers, then 20,000 random MACs
    under random strobes and random cycles with ``en`` low, every output checked every cycle; both
    with the strap ``lookahead`` low and high (the weight chosen in its cycle, or a cycle ahead)."""
    from hw.pe import PE, PEConfig

    cfg = PEConfig(**{"fmt": "bf16", "subnormals": "ftz", "stages": 2, **options})
    base = {"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages, "seed": seed}
    runs = tuple(
        run
        for ahead in (False, True)
        for run in (
            TestRun("corner_cases" + ("_lookahead" if ahead else ""), "verif.tb.pe_tb",
                    {"MXU_TB_CONFIG": json.dumps({**base, "random_total": 0, "lookahead": ahead})},
                    testcase="corner_cases"),
            TestRun("random_macs" + ("_lookahead" if ahead else ""), "verif.tb.pe_tb",
                    {"MXU_TB_CONFIG": json.dumps({**base, "random_total": 20000, "corners": False,
                                                  "lookahead": ahead})},
                    testcase="random_macs"),
        )
    )
    return Target("pe", "pe", _rtlil(lambda: PE(cfg), "pe"), runs,
                  config={"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages})


def _mxu(options: dict, seed: int) -> Target:
    """The MXU (default 8x8 bf16, 2 stages): ``tests/test_mxu_cocotb.py``'s bench, four tiles of random
    lengths back to back and with stalls (``test_mxu_tiles``), the 24 x 40 x 24 GEMM
    (``test_same_gemm_on_three_shapes``, on this shape), then MAC test vectors in every PE
    (``test_mxu_tiles``'s ``mac_vectors``)."""
    import numpy as np

    from hw.mxu import MXU, MXUConfig
    from verif.mxu_stim import mxu_probe

    cfg = MXUConfig(**{"rows": 8, "cols": 8, **options})
    r = np.random.default_rng(seed)
    tiles = [int(r.integers(1, 3 * cfg.rows + cfg.cols + 4)) for _ in range(4)]
    base = {**cfg.as_dict(), "seed": seed, "specials": 0.03}
    tiles_env = {"MXU_TB_CONFIG": json.dumps({**base, "tiles": tiles})}
    runs = (
        TestRun("tiles_back_to_back", "verif.tb.mxu_tb", tiles_env, testcase="tiles_back_to_back"),
        TestRun("tiles_with_stalls", "verif.tb.mxu_tb", tiles_env, testcase="tiles_with_stalls"),
        TestRun(
            "gemm_24x40x24",
            "verif.tb.mxu_tb",
            {"MXU_TB_CONFIG": json.dumps({**base, "tiles": [2], "gemm": [24, 40, 24]})},
            testcase="gemm",
        ),
        TestRun(
            "mac_vectors",
            "verif.tb.mxu_tb",
            {"MXU_TB_CONFIG": json.dumps({**base, "probe": list(mxu_probe(cfg.fmt))})},
            testcase="mac_vectors",
        ),
    )
    # The whole array in one Amaranth hierarchy (not the PE and row modules of mxu_verilog): its RTLIL
    # keeps every cell's Python line; flattened, a mutation changes one PE of the R x C.
    from hw.pe import PE

    return Target("mxu", "mxu", _rtlil(lambda: MXU(cfg), "mxu"), runs, config=cfg.as_dict(),
                  parts=((r"row_\d+\.\\pe_\d+\.", "pe", _rtlil(lambda: PE(cfg.pe), "pe")),))


def _hbm_channel(options: dict, seed: int) -> Target:
    """One HBM2 pseudo-channel controller in the stress configuration of
    ``tests/test_hbm_cocotb.py::test_stress_same_commands_as_amaranth`` (:data:`verif.hbm_sim.STRESS`:
    64 rows of 8 columns, queue 8, Ramulator2 timings with refresh every 400 cycles, 2 REFs postponed at
    most, age cap 32): every one of its traffic parts (:data:`verif.hbm_sim.STRESS_TRAFFIC`) under the fatal
    JEDEC checker, each command at the Amaranth model's cycle."""
    from hw.hbm.controller import PseudoChannelController
    from verif.hbm_sim import STRESS, STRESS_TRAFFIC, traffic_reference

    cfg = STRESS
    runs = []
    for part, (traffic, fixed_seed, gap_p, stall_p) in STRESS_TRAFFIC.items():
        s = seed if fixed_seed is None else fixed_seed
        # the Amaranth model's run of the same traffic, as the test compares it
        ref = traffic_reference(cfg, traffic, s, gap_p=gap_p, stall_p=stall_p, max_cycles=400_000)
        runs.append(TestRun(part, "verif.tb.hbm_tb", {"HBM_TB_CONFIG": json.dumps({
            "config": cfg.as_dict(), "max_cycles": 400_000, "seed": s, "traffic": traffic, "gap_p": gap_p,
            "stall_p": stall_p, "expect_cycles": ref["cycles"], "expect_trace": ref["trace_digest"]})}))
    from hw.hbm.bank_timing import BankTiming
    from hw.hbm.read_path import ReadResponsePath
    from hw.hbm.refresh import RefreshTimer
    from hw.hbm.request_queue import RequestQueue
    from hw.hbm.scheduler import CommandScheduler
    from hw.hbm.write_path import WriteDataPath

    # the controller's components, each judged alone when a survivor sits in it
    parts = tuple((rf"{name}\.", name, _rtlil(lambda c=cls: c(cfg), name)) for name, cls in (
        ("queue", RequestQueue), ("banks", BankTiming), ("refresh", RefreshTimer), ("scheduler", CommandScheduler),
        ("write_path", WriteDataPath), ("read_path", ReadResponsePath)))
    return Target("hbm-channel", "hbm_pc", _rtlil(lambda: PseudoChannelController(cfg), "hbm_pc"), tuple(runs),
                  parts=parts,
                  config={"queue_depth": 8, "rows": 64, "columns": 8, "timing": "RAMULATOR2_HBM2",
                          "tRFC": cfg.timing.tRFC, "tREFI": cfg.timing.tREFI,
                          "max_refresh_postpone": cfg.max_refresh_postpone, "age_cap_cycles": cfg.age_cap_cycles})


#: the GEMM engine's components (``hw/engine/``) as mutation blocks ``engine-<name>``: the submodule
#: name of each inside the engine
ENGINE_COMPONENTS = ("a_loader", "accumulator", "c0_loader", "csr", "descriptor", "feeder", "perf", "sequencer",
                     "weight_loader", "write_address", "write_data")

#: the engine regression's GEMMs (M, K, N, initial C, bf16 result, back-pressure) on
#: :func:`engine_stress_config`: edges of every loop (partial tiles and m-blocks, K < R, N < C, several
#: groups of n-blocks), many m-blocks (past the sequencer's 8-entry table), one row per m-block (the
#: K-chain dependency), K at the A bank's limit, K of every residue mod 4, groups of 5 and of 16
#: n-blocks, 256 and 400 n-blocks (the n-block counters' bits 7 and 8), groups cut below the
#: K-chain's n-blocks (4 rows: 4 n-blocks per group where the dependency spans 7), an initial C and a
#: bf16 result; then some of them again with random back-pressure (:class:`hw.axi_stall.AXI4Stall`
#: rates on the A, W, C ports): A, weights, C0 rows and the write-back's D writes arriving late, so
#: that waits which the memory system's own pace never makes decide do (on the feeder's campaign it
#: killed 4 more of the same 200 mutants; issuing a k-block 0 beat while the bank still loads C0 is
#: still never reached alone); last, two m-blocks of 2^b + 1 n-blocks for b = 4 .. 8 and of 512
#: n-blocks, the most ``dim_bits`` = 11 allows (a loop's cursor compares the n-blocks left with the
#: group size when it enters an m-block, and a bit b lost there leaves 1 or 0), one-row m-blocks of
#: K = 128 in groups of 16 n-blocks (the K chain's beat counts up to their width, ``GROUP_BEATS`` =
#: 512 beats), a one-row GEMM of 31 n-blocks, whose last group of 15 sets every bit of a group size
#: below 16, two m-blocks of 2^b + 1 n-blocks for b = 0 .. 3, and one row of K = 120 on 9 n-blocks
#: (fewer beats per k-block than the array's latency: the K chain waits with 256 or more beats
#: issued in the group, bit 8 of its count) and 2,047 rows (256 m-blocks: every bit of a row count).
#: :func:`engine_register_jobs` follow them.
ENGINE_SHAPES = ((33, 20, 17, True, False), (9, 8, 40, False, False), (17, 33, 9, False, True),
                 (40, 3, 9, True, False), (1, 24, 5, False, False), (70, 4, 2, False, False),
                 (3, 128, 3, True, True), (3, 18, 48, True, False), (1, 4, 1024, False, False),
                 (4, 8, 40, False, False), (1, 4, 1600, False, False),
                 (33, 20, 17, True, False, (0, 0, 192)), (17, 33, 9, False, True, (160, 0, 0)),
                 (40, 3, 9, True, False, (0, 0, 160)), (3, 128, 3, True, True, (96, 96, 96)),
                 (9, 8, 40, False, False, (0, 192, 0)), (70, 4, 2, False, False, (192, 0, 64)),
                 (3, 18, 48, True, False, (64, 0, 224)), (1, 24, 5, False, False, (0, 0, 240)),
                 *((9, 4, 4 * (2**b + 1), False, False) for b in range(4, 9)), (9, 4, 2047, False, False),
                 (2, 128, 64, False, False), (1, 4, 124, False, False),
                 *((9, 4, 4 * (2**b + 1), False, False) for b in range(4)), (1, 120, 36, False, False),
                 (2047, 4, 4, False, False))


#: fp32 bit patterns of the rounding job's initial C (:func:`engine_rounding_job`): RNE ties to an
#: even and to an odd bf16 (both signs), one ulp either side of a tie, a tie that carries into the
#: exponent, the largest floats that round to infinity and that do not, infinities, NaNs whose payload
#: is only in the bits bf16 drops (quiet and signalling), zeros, subnormals (a tie among them), the
#: smallest normal, and each of the 16 dropped bits alone
ROUNDING_C0 = (0x3F808000, 0x3F818000, 0xBF808000, 0xBF818000, 0x3F808001, 0x3F807FFF, 0xBF808001,
               0x3FFF8000, 0x3FFFFFFF, 0x7F7F8000, 0x7F7F7FFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
               0x7FC00000, 0x7F800001, 0xFF800100, 0x7FFFFFFF, 0xFFC00001, 0x00000000, 0x80000000, 0x00000001,
               0x007FFFFF, 0x807F8000, 0x00408000, 0x00800000, 0x0080FFFF,
               *(0x3F800000 | 1 << b for b in range(16)), *(0xC0000000 | 1 << b for b in range(16)))


def engine_rounding_job(fmt: str, seed: int):
    """The engine regression's rounding job (float formats): 8 x 4 x 64, A all zeros and an initial C
    of :data:`ROUNDING_C0` then random bit patterns, result rounded to bf16; each result is its C
    plus zeros, so the write-back's RNE rounding, overflow and NaN handling meet every corner the
    random GEMMs (standard normal operands) do not. Returns a :class:`sim.gemm.GemmJob`."""
    import numpy as np

    from sim.gemm import GemmJob
    from verif.golden import to_format

    rng = np.random.default_rng(seed)
    m, k, n = 8, 4, 64
    bits = np.concatenate([np.array(ROUNDING_C0, dtype=np.uint32),
                           rng.integers(0, 1 << 32, m * n - len(ROUNDING_C0), dtype=np.uint32)])
    b = to_format(rng.standard_normal((k, n)).astype(np.float32), fmt)
    a = to_format(np.zeros((m, k), dtype=np.float32), fmt)
    return GemmJob(a, b, bits.reshape(m, n).view(np.float32), "bf16")


def engine_register_jobs(cfg) -> list[tuple[str, list[list[int]], bool, int]]:
    """The engine regression's register jobs, run after :data:`ENGINE_SHAPES`: each a descriptor
    near a 3 x 16 x 16 GEMM with C0 whose strides are exactly the shortest allowed, changed in one
    place, so every check of the descriptor unit decides alone both ways (ZERO_DIM, DIM_TOO_LARGE
    at bit ``dim_bits`` and at ``max_k`` + 1, each base and stride bit below 32 misaligned, each
    stride one element short, each matrix ending on the memory's last byte and 32 bytes past it,
    the RANGE pipeline's high partial products, C's checks only with LOAD_C, bf16 results' shorter
    rows), partial AXI4-Lite write strobes (one byte, two bytes of a register) and read-backs of the
    whole register map, these with the AXI4-Lite channels paused (:func:`verif.tb.base.axil_pauses`:
    AW before W, B and R held). Returns ``(name, writes, readback, ERROR code)`` per job: ``writes`` only
    the registers that differ from the job before (the register block keeps them), ``[offset, value]``
    or ``[offset, value, bytes]``; the code is what the original design must report (checked when
    the target is made).

    ``cfg`` must be :func:`engine_stress_config`'s (its memory is stored whole by the device model,
    so a matrix at the memory's end is a legal GEMM).
    """
    from hw.engine import REG
    from verif.gemm_host import layout, register_writes

    ob, cap, top = cfg.operand_bytes, cfg.hbm.capacity_bytes, 1 << cfg.dim_bits
    m, k, n = 3, 16, 16
    lay = layout(m, k, n, ob, 4, True, start=0x1000)
    off_of = {r.offset: name for name, r in REG.items()}
    base = {off_of[o]: v for o, v in register_writes(m, k, n, lay, load_c=True, out_bf16=False)}
    rows = {"A": m, "B": k, "C": m, "D": m}
    rowb = {"A": k * ob, "B": n * ob, "C": 4 * n, "D": 4 * n}
    cases: list[tuple[str, dict, int]] = [("base", {}, 0)]
    cases += [(f"zero_{d}", {d: 0}, 1) for d in "MKN"]
    cases += [("zero_before_too_large", {"M": 0, "N": top}, 1)]
    cases += [(f"{d}_bit_{cfg.dim_bits}", {d: top, **({"A_STRIDE": 1 << 13} if d == "K" else {})}, 2) for d in "MKN"]
    cases += [("K_max", {"K": cfg.max_k, "A_STRIDE": cfg.max_k * ob}, 0),
              ("K_max_plus_1", {"K": cfg.max_k + 1, "A_STRIDE": 2 * cfg.max_k * ob}, 2),
              ("M_bit_31", {"M": 1 << 31}, 2)]
    cases += [(f"{x}_{kind}_bit_{b}", {f"{x}_{kind}": base[f"{x}_{kind}"] + (1 << b)}, 4)
              for x in "ABCD" for kind in ("BASE", "STRIDE") for b in range(5)]
    cases += [("C_misaligned_without_load_c", {"FLAGS": 0, "C_BASE": base["C_BASE"] + 8, "C_STRIDE": 8}, 0),
              ("A_short", {"K": k + 1}, 5), ("B_short", {"N": n + 1, "C_STRIDE": 128, "D_STRIDE": 128}, 5),
              ("C_short", {"C_STRIDE": 4 * n - 32}, 5), ("C_short_without_load_c", {"FLAGS": 0, "C_STRIDE": 32}, 0),
              ("D_short", {"D_STRIDE": 4 * n - 32}, 5), ("D_bf16", {"FLAGS": 3, "D_STRIDE": 2 * n}, 0)]
    for x in "ABCD":
        at_end = cap - (rows[x] - 1) * base[f"{x}_STRIDE"] - rowb[x]
        cases += [(f"{x}_at_end", {f"{x}_BASE": at_end}, 0), (f"{x}_past_end", {f"{x}_BASE": at_end + 32}, 6)]
    cases += [("A_stride_bit_17", {"A_STRIDE": 1 << 17}, 0),
              ("A_stride_past_end", {"A_STRIDE": cap // 2}, 6),
              ("C_stride_bit_31_without_load_c", {"FLAGS": 0, "C_STRIDE": 0xFFFFFFE0}, 0),
              ("C_stride_bit_31", {"C_STRIDE": 0xFFFFFFE0}, 6),
              ("D_base_bit_31", {"D_BASE": 0x80000000}, 6)]
    # partial write strobes, from the base descriptor: M = 0x0403, then its byte 1 cleared (M = 3);
    # K's byte 2 set (K = 0x10010: too large); K again 16 and N's bytes 2 and 3 written (N = 0x01000010)
    M, K, N = (REG[r].offset for r in "MKN")
    strobes = [("M_byte_1", [[M, 0x0403], [M + 1, 0, 1]], 0), ("K_byte_2", [[K + 2, 1, 1]], 2),
               ("N_bytes_2_3", [[K, k], [N + 2, 0x0100, 2]], 2)]
    jobs, state = [], {}
    for name, change, code in [*cases, ("restore", {}, None)]:
        want = {**base, **change}
        writes = [[REG[r].offset, v] for r, v in want.items() if state.get(r) != v]
        if code is None:  # the strobe jobs, the first with the writes that restore the base descriptor
            jobs += [(sname, (writes if i == 0 else []) + sw, True, scode)
                     for i, (sname, sw, scode) in enumerate(strobes)]
        else:
            jobs.append((name, writes, False, code))
        state = want
    return jobs


def engine_stress_config(**options):
    """The engine the ``engine`` mutation blocks mutate: the array of ``options`` (``rows``, ``cols``,
    ``fmt``, ``subnormals``, ``stages``; default 4x4 bf16) with the smallest buffers, so that every
    readiness rule binds: 8-row m-blocks, 16 accumulator entries, the smallest A buffer (a power of
    two, >= 256 bytes) holding the longest K of :data:`ENGINE_SHAPES`, 11-bit dimensions (``dim_bits``:
    N up to 2,047, so a test reaches every bit of an n-block count); one pseudo-channel refreshing
    every 400 cycles (tRFC 60 cycles, as the HBM stress configuration), so that the A, B and C0
    streams stall and the feeder and loaders wait on each other; 64 rows per bank (1 MiB, all of it
    stored by the device model, so :func:`engine_register_jobs` can place a matrix on its last byte).

    Raises:
        TypeError, ValueError: a bad option (:meth:`hw.engine.EngineConfig.from_options`).
    """
    from dataclasses import replace

    from hw.engine import EngineConfig

    k = max(s[1] for s in ENGINE_SHAPES)
    a_bytes = 256
    while True:
        cfg = EngineConfig.from_options(**{"rows": 4, "cols": 4, "fmt": "bf16", **options, "pseudo_channels": 1,
                                           "m_block": 8, "acc_entries": 16, "a_buffer_bytes": a_bytes,
                                           "dim_bits": 11})
        if cfg.max_k >= k:
            break
        a_bytes *= 2
    timing = replace(cfg.hbm.timing, tRFC=60, tREFI=400)
    return replace(cfg, hbm=replace(cfg.hbm, timing=timing, rows=64))


def _engine_component(name: str):
    def make(options: dict, seed: int) -> Target:
        """One component of the GEMM engine (``name``; "": the whole engine) of
        :func:`engine_stress_config`, mutated inside the GEMM simulation top (engine, HBM controller, HDL device
        models and JEDEC checkers): the transaction-level bench (``verif.tb.gemm_fast_tb``) runs
        :data:`ENGINE_SHAPES` back to back, and each result's bits, STATUS, CYCLES and performance
        counters must be the original design's, which match the golden model (checked once, when
        the target is first made)."""
        return _engine_target(name, options, seed)

    return make


def _engine_target(name: str, options: dict, seed: int) -> Target:
    import dataclasses
    import hashlib

    import numpy as np

    from sim.gemm import (
        bench_jobs,
        check_bitexact,
        default_timeout,
        random_jobs,
        run_gemms,
        sim_top_verilog,
        stored_rows_for,
    )
    from sim.runner import build_root
    from verif.gemm_host import FILL
    from verif.hdl.gemm_sim_top import GEMMSimTop
    from verif.tb.base import GemmTbConfig

    cfg = engine_stress_config(**options)
    fmt = cfg.mxu.fmt
    jobs = random_jobs(fmt, [s[:3] for s in ENGINE_SHAPES], seed)
    rng = np.random.default_rng(seed + 1)
    for j, (m, _, n, c0, bf16_out, *stall) in enumerate(ENGINE_SHAPES):
        c = (rng.integers(-1000, 1000, (m, n), dtype=np.int32) if fmt == "int8"
             else rng.standard_normal((m, n)).astype(np.float32)) if c0 else None
        jobs[j] = dataclasses.replace(jobs[j], c=c, out="bf16" if bf16_out and fmt != "int8" else "fp32",
                                      stall=stall[0] if stall else (0, 0, 0))
    if fmt != "int8":
        jobs.append(engine_rounding_job(fmt, seed + 2))
    specs, arrays = bench_jobs(jobs, fmt)
    regs = engine_register_jobs(cfg)
    raw = [{"kind": "regs", "writes": w, "readback": rb, "pause": rb} for _, w, rb, _ in regs]
    specs += raw
    stored_rows = stored_rows_for(specs, cfg)
    key = hashlib.sha256(repr((cfg, specs, FILL, "expect v2")).encode()
                         + b"".join(arrays[k].tobytes() for k in sorted(arrays)))
    home = build_root() / "mutation-engine" / key.hexdigest()[:16]  # the hardware, the operands, the fill
    home.mkdir(parents=True, exist_ok=True)
    expect = home / "expect.json"
    if not expect.is_file():  # the original design, checked against the golden model once
        results, _ = run_gemms(jobs, cfg, memory="hdl", progress=False, raw_jobs=raw)
        check_bitexact(jobs, results[:len(jobs)], cfg)
        for (what, _, _, code), r in zip(regs, results[len(jobs):], strict=True):
            if r.status >> 4 & 0xF != code:
                raise RuntimeError(f"register job {what}: STATUS {r.status:#x}, want ERROR {code}")
        # (a register job reads no D: its bits are None, as the bench's output has no d<j> for it)
        expect.write_text(json.dumps([{"status": r.status, "cycles": r.cycles, "perf": r.perf,
                                       "bits": _digest(r.bits) if r.bits.size else None, "readback": r.readback}
                                      for r in results]))
    np.savez(home / "jobs.npz", **arrays)
    conf = GemmTbConfig(engine=cfg, jobs=specs, out_npz="{scratch}/out.npz", jobs_npz=str(home / "jobs.npz"),
                        timeout_cycles=default_timeout(specs, cfg), stored_rows=stored_rows)
    env = {**conf.env(), "MXU_MUTATE_EXPECT": str(expect)}
    module = f"gemm_sim.top.engine.{name}" if name else "gemm_sim.top.engine"

    def design() -> tuple[str, str]:
        import os

        from amaranth.back import rtlil

        os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
        # built as verif.hdl.gemm_sim_top.gemm_sim_verilog builds it, so the module's ports are the same
        top = GEMMSimTop(cfg, stored_rows=stored_rows, fill=FILL, pe_blackbox=True, row_name="gemm_sim_row",
                         hbm_name="gemm_sim_hbm", checker_name="gemm_sim_chk")
        return "rtlil", rtlil.convert(top, name="gemm_sim", emit_src=True)

    def context(work: Path) -> list[Path]:  # the simulation top without the mutated module
        out = work / "context.v"
        if not out.is_file():
            out.write_text(_without_module(sim_top_verilog(cfg, stored_rows).read_text(), module))
        return [out]

    return Target(f"engine-{name.replace('_', '-')}" if name else "engine", module, design,
                  (TestRun("gemms", "verif.tb.gemm_fast_tb", env, check="sim.mutate_targets:check_gemms"),),
                  config={**cfg.as_dict(), "shapes": [list(s) for s in ENGINE_SHAPES],
                          "gemms": len(jobs), "register_jobs": [r[0] for r in regs]},
                  sim_top="gemm_sim", context=context)


def _digest(bits) -> str:
    import hashlib

    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(bits).tobytes()).hexdigest()


def _without_module(text: str, module: str) -> str:
    """Verilog ``text`` without the definition of ``module`` (Yosys writes ``module \\a.b (`` for a
    name with dots).

    Raises:
        ValueError: ``text`` does not define ``module`` exactly once.
    """
    import re

    heads = [mo.start() for mo in re.finditer(rf"^module \\?{re.escape(module)} ?\(", text, re.M)]
    if len(heads) != 1:
        raise ValueError(f"the simulation top defines module {module} {len(heads)} times, not once")
    end = text.index("endmodule", heads[0]) + len("endmodule")
    return text[:heads[0]] + text[end:]


def check_gemms(env: dict[str, str], scratch: Path) -> str | None:
    """The GEMM bench's results (``scratch/out.npz``) against the original design's
    (``env["MXU_MUTATE_EXPECT"]``): None, or the first difference (bits, STATUS, CYCLES, counters)."""
    import numpy as np

    want = json.loads(Path(env["MXU_MUTATE_EXPECT"]).read_text())
    out = np.load(scratch / "out.npz")
    for j, w in enumerate(want):
        bits = out.get(f"d{j}")
        got = {"bits": None if bits is None else _digest(bits), "status": int(out[f"status{j}"]),
               "cycles": int(out[f"cycles{j}"]), "perf": {k: int(out[f"{k}{j}"]) for k in w["perf"]},
               "readback": [int(x) for x in out[f"readback{j}"]] if f"readback{j}" in out else None}
        for key in ("bits", "status", "cycles", "perf", "readback"):
            if got[key] != w.get(key):
                return f"GEMM {j}: {key} " + ("differ" if key in ("bits", "readback") else
                                              f"{got[key]} instead of {w[key]}")
    return None


#: block name -> (what it is for --help, the option names it takes, the target factory)
BLOCKS: dict[str, tuple[str, tuple[str, ...], Callable[[dict, int], Target]]] = {
    "mac": ("one MAC (multiply, fp32 add)", ("fmt", "subnormals", "stages"), _mac),
    "pe": ("one PE (weight registers and MAC)", ("fmt", "subnormals", "stages"), _pe),
    "mxu": ("the systolic array (default 8x8)", ("rows", "cols", "fmt", "subnormals", "stages"), _mxu),
    "hbm-channel": ("one HBM2 pseudo-channel controller (small geometry, queue 8, refresh and age stress)", (),
                    _hbm_channel),
    "engine": ("the whole GEMM engine, MXU included (default 4x4 bf16; smallest buffers, one pseudo-channel)",
               ("rows", "cols", "fmt", "subnormals", "stages"), _engine_component("")),
    **{f"engine-{c.replace('_', '-')}": (f"the GEMM engine's {c.replace('_', ' ')} (default 4x4 bf16; smallest "
                                         "buffers)", ("rows", "cols", "fmt", "subnormals", "stages"),
                                         _engine_component(c))
       for c in ENGINE_COMPONENTS},
}


def target(block: str, options: dict, seed: int) -> Target:
    """The :class:`~sim.mutate.Target` of ``block`` with configuration ``options`` (the keys its
    entry in :data:`BLOCKS` names) and regression seed ``seed``.

    Raises:
        ValueError: unknown block, an option the block does not take, or a bad configuration value.
        TypeError: a configuration value of the wrong type.
    """
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(BLOCKS)}; got {block!r}")
    _, keys, make = BLOCKS[block]
    extra = sorted(set(options) - set(keys))
    if extra:
        raise ValueError(f"{', '.join(extra)} does not apply to block {block} (it takes {', '.join(keys)})")
    return make(options, seed)
