"""Run GEMMs through the generated GEMM engine + HBM controller RTL in a simulator.

This is the library behind ``mxu matmul`` and ``mxu demo``: it generates (or reuses from the build
cache) the Verilog of :class:`hw.top.GEMMTop`, builds it for Verilator or Icarus, loads A, B and an
optional initial C into the HBM device model (backdoor), programs the engine through its AXI4-Lite
registers, runs until ``done``, reads the result back from the device model and returns it with the
cycle counts. It does **not** compare with the golden model; callers do (``verif.golden.matmul``).
"""

from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["GemmJob", "GemmResult", "run_gemms", "engine_verilog", "sim_top_verilog", "stored_rows_for",
           "random_jobs", "check_bitexact", "engine_gemm_cycles", "bench_jobs", "default_timeout"]


@dataclass
class GemmJob:
    """One GEMM: ``a`` (M, K) and ``b`` (K, N) arrays in the format's dtype (ml_dtypes bfloat16 /
    float8 or numpy int8; convert host data with ``verif.golden.to_format``), optional ``c`` (M, N)
    float32 (int32 for int8) initial accumulator, ``out`` "fp32" (int32 for int8) or "bf16".

    ``a_from``: instead of ``a`` (None), A is the fp32 result of the earlier job ``a_from`` of the same
    run after ReLU (:func:`verif.golden.relu`), rounded RNE into the format (float formats only): a
    layer that consumes the one before it without leaving the simulator (``mxu demo``'s MLP).

    ``stall``: (A, W, C) rates 0..255 of random back-pressure on the engine's three memory ports
    during this job (:class:`hw.axi_stall.AXI4Stall`, HDL memory only): the same result, more
    cycles."""
    a: np.ndarray | None
    b: np.ndarray
    c: np.ndarray | None = None
    out: str = "fp32"
    a_from: int | None = None
    stall: tuple[int, int, int] = (0, 0, 0)


@dataclass
class GemmResult:
    """Result of one job.

    result: (M, N) float32 (int32 for int8; ml_dtypes bfloat16 when ``out == "bf16"``).
    bits: the raw result bit patterns (uint32, or uint16 for bf16 output).
    cycles: engine cycles from the start strobe to done (its CYCLES register).
    perf: the engine's performance counters after the run, lower-case register names
        (``hw.engine.PERF_COUNTERS``: perf_feed, perf_wait_a, perf_wait_w, perf_wait_acc,
        perf_wait_dep, perf_drain; cycles minus their sum is the set-up).
    status: the raw STATUS register after the run: 0b10 (DONE) on success; bits [7:4] hold the
        ERROR code (``hw.engine.ERRORS``) and bit 8 BUS_ERROR.
    readback: for a register job with ``"readback"``, every register's word after the run
        (``verif.tb.base.READBACK_OFFSETS``), else None.
    """
    result: np.ndarray
    bits: np.ndarray
    cycles: int
    status: int
    sim_cycles: int = 0
    clobbered_bytes: int = 0
    perf: dict = field(default_factory=dict)
    readback: tuple | None = None


def random_jobs(fmt: str, shapes, seed: int) -> list[GemmJob]:
    """One GEMM per (M, K, N) of ``shapes``, fp32 out, no C0, operands from
    ``numpy.random.default_rng(seed)`` in order (A then B of each): uniform int8, or standard normal
    values rounded to the format (:func:`verif.golden.to_format`)."""
    from verif.golden import to_format

    rng = np.random.default_rng(seed)

    def operand(shape):
        if fmt == "int8":
            return rng.integers(-128, 128, shape, dtype=np.int8)
        return to_format(rng.standard_normal(shape).astype(np.float32), fmt)

    return [GemmJob(operand((m, k)), operand((k, n)), None, "fp32") for m, k, n in shapes]


def check_bitexact(jobs: list[GemmJob], results: list[GemmResult], config) -> None:
    """Every result bit for bit against :func:`verif.golden.expected_bits` (NaN canonical), counted
    with :func:`verif.checked.count`.

    Raises:
        RuntimeError: naming the first GEMM that is not bit-exact and how many of its elements differ.
    """
    from verif import checked
    from verif.golden import compare_bits, expected_bits, result_bits

    for job, res in zip(jobs, results, strict=True):
        want = expected_bits(job.a, job.b, job.c, fmt=config.mxu.fmt, subnormals=config.mxu.subnormals,
                             out=job.out)
        bad = compare_bits(result_bits(res.bits, job.out), want)
        checked.count(want.size)
        if bad:
            m, k = job.a.shape
            raise RuntimeError(f"the engine's {m}x{k}x{job.b.shape[1]} GEMM is not bit-exact against the golden "
                               f"model ({len(bad)} of {want.size} elements differ)")


def engine_gemm_cycles(config, m: int, k: int, n: int, *, sim: str = "verilator", seed: int = 1) -> int:
    """The engine's CYCLES for one M x K x N GEMM of random operands (:func:`random_jobs`, ``seed``) on
    the RTL with the HDL memory system in ``sim``, checked by :func:`check_bitexact`.

    Raises:
        RuntimeError: the testbench failed, or the result is not bit-exact.
    """
    jobs = random_jobs(config.mxu.fmt, [(m, k, n)], seed)
    results, _ = run_gemms(jobs, config, sim=sim, memory="hdl", progress=False)
    check_bitexact(jobs, results, config)
    return results[0].cycles


def _check_job(j: int, job: GemmJob, fmt: str, specs: list[dict]) -> tuple[int, int]:
    """Check job ``j`` against the format and the jobs before it; returns A's shape (M, K)."""
    from verif.golden import dtype_of
    dt = np.dtype(dtype_of(fmt))
    names = ("a", "b")
    if job.a_from is not None:
        if job.a is not None:
            raise ValueError(f"job {j}: give a or a_from, not both")
        if not isinstance(job.a_from, int) or not 0 <= job.a_from < j:
            allowed = f"0..{j - 1}" if j else "none before job 0"
            raise ValueError(f"job {j}: a_from must be the index of an earlier job ({allowed}); got {job.a_from!r}")
        src = specs[job.a_from]
        if fmt == "int8" or src["out_bf16"]:
            raise ValueError(f"job {j}: a_from needs a float format and the earlier job's fp32 output")
        names = ("b",)
        shape_a = (src["m"], src["n"])
    for name in names:
        x = getattr(job, name)
        if not isinstance(x, np.ndarray) or x.ndim != 2 or 0 in x.shape:
            raise ValueError(f"job {j}: {name} must be a non-empty 2-D array")
        if x.dtype != dt:
            raise ValueError(f"job {j}: {name} must have dtype {dt.name} for fmt={fmt}; got {x.dtype}")
    if job.a_from is None:
        shape_a = job.a.shape
    (m, k), (k2, n) = shape_a, job.b.shape
    if k != k2:
        raise ValueError(f"job {j}: A is {m}x{k} but B is {k2}x{n}: inner dimensions (K) differ")
    if job.c is not None:
        want = np.int32 if fmt == "int8" else np.float32
        if job.c.shape != (m, n) or job.c.dtype != want:
            raise ValueError(f"job {j}: C0 must be a ({m}, {n}) {np.dtype(want).name} array; "
                             f"got {job.c.shape} {job.c.dtype}")
    if job.out not in ("fp32", "bf16"):
        raise ValueError(f"job {j}: out must be fp32 or bf16; got {job.out!r}")
    if job.out == "bf16" and fmt == "int8":
        raise ValueError(f"job {j}: bf16 output is not available for int8 (results are int32)")
    st = job.stall
    if not (isinstance(st, (tuple, list)) and len(st) == 3
            and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 255 for x in st)):
        raise ValueError(f"job {j}: stall must be three rates 0..255 (A, W, C ports); got {st!r}")
    return m, k


def engine_verilog(cfg) -> Path:
    """Generate (or reuse) the Verilog of the engine + HBM top (:class:`hw.top.GEMMTop`) for the
    :class:`hw.engine.EngineConfig` ``cfg``; returns its path."""
    from hw.generate import gemm_top_verilog
    from sim.runner import generate_verilog
    return generate_verilog(lambda: gemm_top_verilog(cfg, "gemm"), name="gemm", key=("gemm_top", cfg))


def sim_top_verilog(cfg, stored_rows: int, device_hbm=None) -> Path:
    """Generate (or reuse) the Verilog of the engine with the HDL memory system
    (:class:`verif.hdl.gemm_sim_top.GEMMSimTop`, module ``gemm_sim``); returns its path."""
    from sim.runner import generate_verilog
    from verif.gemm_host import FILL
    from verif.hdl.gemm_sim_top import gemm_sim_verilog

    return generate_verilog(lambda: gemm_sim_verilog(cfg, stored_rows=stored_rows, fill=FILL, device_hbm=device_hbm),
                            name="gemm_sim", key=("gemm_sim", cfg, stored_rows, FILL, device_hbm))


def stored_rows_for(specs: list[dict], cfg) -> int:
    """Rows per bank the HDL device model must store for ``specs`` laid out one after another from
    0x1000 (as the testbenches do): a power of two, at least 256 (so most runs share one build) or
    every row of a smaller memory."""
    from verif.gemm_host import layout

    end = 0x1000
    for s in specs:
        if s["kind"] == "gemm":
            end = layout(s["m"], s["k"], s["n"], cfg.mxu.operand_bits // 8, 2 if s["out_bf16"] else 4, s["load_c"],
                         pad_bytes=s["pad_bytes"], start=end).end
    per_row = cfg.hbm.capacity_bytes // cfg.hbm.rows  # bytes of all banks and channels at one row index
    rows = min(256, cfg.hbm.rows)
    while rows * per_row < end and rows < cfg.hbm.rows:
        rows *= 2
    return rows


def bench_jobs(jobs: list[GemmJob], fmt: str, pad_bytes: int = 0) -> tuple[list[dict], dict[str, np.ndarray]]:
    """The GEMM benches' job descriptions (``GemmTbConfig.jobs``) and operand arrays (the jobs npz:
    ``a<j>``, ``b<j>``, ``c<j>`` as raw bits) of ``jobs`` on an array of format ``fmt``.

    Raises:
        ValueError: a job's shapes or dtypes do not fit (message names the input).
    """
    specs, arrays = [], {}
    for j, job in enumerate(jobs):
        m, k = _check_job(j, job, fmt, specs)
        n = job.b.shape[1]
        specs.append({"kind": "gemm", "m": m, "k": k, "n": n, "load_c": job.c is not None,
                      "out_bf16": job.out == "bf16", "pad_bytes": pad_bytes, "a_from": job.a_from,
                      "stall": list(job.stall)})
        if job.a_from is None:
            arrays[f"a{j}"] = np.ascontiguousarray(job.a).view(np.uint16 if fmt == "bf16" else np.uint8)
        arrays[f"b{j}"] = np.ascontiguousarray(job.b).view(np.uint16 if fmt == "bf16" else np.uint8)
        if job.c is not None:
            arrays[f"c{j}"] = np.ascontiguousarray(job.c).view(np.uint32)
    return specs, arrays


def default_timeout(specs: list[dict], cfg) -> int:
    """Cycles without ``irq`` after which a bench fails a run: 20 x the array-only cycle model of its
    GEMMs + 20,000."""
    from verif.cycles import gemm_cycles

    est = sum(gemm_cycles(s["m"], s["k"], s["n"], cfg.mxu.rows, cfg.mxu.cols, cfg.mxu.stages)
              for s in specs if s["kind"] == "gemm")
    return 20 * est + 20_000


def run_gemms(jobs: list[GemmJob], config=None, *, sim: str = "verilator",
              waves: str | None = None, progress: bool | None = None, raw_jobs: list[dict] | None = None,
              pad_bytes: int = 0, timeout_cycles: int | None = None,
              trace: str | None = None, memory: str | None = None, device_hbm=None) -> tuple[list[GemmResult], dict]:
    """Run ``jobs`` one after another in one simulator process.

    Args:
        jobs: the GEMMs (see :class:`GemmJob`).
        config: the hardware, a :class:`hw.engine.EngineConfig` (default: ``EngineConfig()``, an
            8 x 8 bf16 array on two HBM2 pseudo-channels; ``EngineConfig.from_options(rows=..)``
            for others).
        sim: "verilator" or "icarus".
        waves: write an FST/VCD waveform there.
        progress: show a progress bar (tqdm) on stderr; None (default): when stderr is a terminal.
        raw_jobs: hand-made register writes ``[{"writes": [(offset, value), ...]}]`` (tests of the
            descriptor checks), run after ``jobs`` in the same simulation; their results have empty
            arrays, the STATUS, CYCLES and counters. With
            ``memory="hdl"`` also ``{"kind": "backdoor", "seed": s}``: a backdoor round trip (its
            count of bursts that did not read back is in ``run_info["backdoor"]``).
        pad_bytes: extra bytes (multiple of 32) at the end of every matrix row in memory.
        timeout_cycles: a run without ``irq`` for this many cycles fails (default: 20 x the
            array-only cycle model + 20,000).
        trace: write a per-cycle trace there (npz: ``cmds`` (cycle, pseudo-channel, row command,
            column command: ``hw.hbm.controller.RowCmd`` / ``ColCmd`` values, 0 = none) of every DRAM
            command, ``addrs`` (row bg, bank, row; column bg, bank, row, column) of each,
            ``samples`` (cycle, act valid, act ready, feeder wait reason, B arvalid, B arready,
            B rvalid, A arvalid,
            A rvalid, accumulator bank 0 and 1 states, C0 rvalid, result W beat) for every cycle;
            Verilator only: it reads engine internals; with ``memory="python"`` only: with
            ``memory="hdl"`` a trace has the commands and ``samples`` is empty). Python samples the
            pins every cycle while a trace is recorded.
        memory: "hdl" (default; "python" when ``trace`` is given): the HBM device model and JEDEC
            checker in the netlist (:mod:`verif.hdl`, bench :mod:`verif.tb.gemm_fast_tb`), Python only
            at the transaction level;
            "python": the reference, the Python device model and checker called every clock cycle
            (:mod:`verif.tb.gemm_tb`). Both give the same bits, CYCLES and performance counters for
            every job of a run (``tests/test_gemm_fast.py``); the HDL one is several times faster to
            build and to run.
        device_hbm: with ``memory="hdl"``, the device models' HBMConfig when it differs from the
            controller's (other timing rules: a test that the JEDEC checker fails the run).

    Returns:
        (results, run_info): run_info has ``sim_cycles``, ``wall_s``, ``build_s``, ``test_s``,
        ``cycles_per_s``, ``cached_build``.

    Raises:
        ValueError: a job's shapes or dtypes do not fit the parameters (message names the input).
        sim.runner.BuildError / SimulationError: the simulator failed; RuntimeError: the testbench
        failed (an engine hang, an X on a DRAM pin, a JEDEC timing violation): the message holds the
        end of the log.
    """
    from hw.engine import PERF_COUNTERS, EngineConfig
    from sim.runner import build_root, run_cocotb
    from verif.tb.base import GemmTbConfig

    cfg = EngineConfig() if config is None else config
    if not isinstance(cfg, EngineConfig):
        raise TypeError(f"config must be an EngineConfig; got {type(cfg).__name__}")
    if memory is None:
        memory = "python" if trace else "hdl"
    if memory not in ("hdl", "python"):
        raise ValueError(f"memory must be one of hdl, python; got {memory!r}")
    if device_hbm is not None and memory != "hdl":
        raise ValueError("device_hbm needs memory='hdl' (the Python device model checks the controller's own rules)")
    fmt = cfg.mxu.fmt
    specs, arrays = bench_jobs(jobs, fmt, pad_bytes)
    if raw_jobs is not None:
        specs += [dict(rj) if "kind" in rj else {"kind": "regs", **rj, "writes": [list(w) for w in rj["writes"]]}
                  for rj in raw_jobs]
        if memory != "hdl" and any(sp["kind"] == "backdoor" for sp in specs):
            raise ValueError("a backdoor job needs memory='hdl' (it round-trips the HDL device model's storage)")
    if memory != "hdl" and any(any(sp.get("stall", ())) for sp in specs):
        raise ValueError("a job with stall needs memory='hdl' (the back-pressure is in the HDL memory system)")
    if timeout_cycles is None:
        timeout_cycles = default_timeout(specs, cfg)
    bar = None
    import sys
    if progress is None:
        progress = sys.stderr.isatty()
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=3, desc="gemm", unit="step", file=sys.stderr, leave=False,
                   bar_format="{desc}: {n_fmt}/{total_fmt} [{elapsed}] {postfix}")
        bar.set_postfix_str("generating Verilog")
    t0 = time.perf_counter()
    stored_rows = stored_rows_for(specs, cfg)
    verilog = engine_verilog(cfg) if memory == "python" else sim_top_verilog(cfg, stored_rows, device_hbm)
    if bar:
        bar.update(1)
        bar.set_postfix_str(f"{sim}: build (cached if built before) and simulate {len(specs)} GEMM(s)")
    work = build_root() / "runs"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        tmp = Path(tmp)
        np.savez(tmp / "jobs.npz", **arrays) if arrays else None
        conf = GemmTbConfig(engine=cfg, jobs=specs, out_npz=str(tmp / "out.npz"),
                            jobs_npz=str(tmp / "jobs.npz") if arrays else None, timeout_cycles=timeout_cycles,
                            trace=str(Path(trace).resolve()) if trace else None, stored_rows=stored_rows,
                            device_hbm=device_hbm)
        stop = threading.Event()

        def tick():  # elapsed time on the bar while the simulator runs
            while not stop.wait(1.0):
                if bar:
                    bar.refresh()
        th = threading.Thread(target=tick, daemon=True)
        th.start()
        try:
            top, tb = ("gemm", "verif.tb.gemm_tb") if memory == "python" else ("gemm_sim", "verif.tb.gemm_fast_tb")
            # the benches reach the top ports, the HDL device models' stores (marked public in their
            # Verilog) and, for a trace, the few engine signals the per-cycle bench samples or the
            # DRAM command pins the HDL one does. Each keeps its probes in every build (read only:
            # no speed lost), so one build serves runs with and without a trace.
            if memory == "python":
                from verif.tb.gemm_tb import TRACE_SIGNALS as probes
            else:
                from verif.tb.base import command_pins
                probes = command_pins(cfg.hbm.pseudo_channels)
            res = run_cocotb([verilog], top, tb, simulator=sim, public_signals=probes,
                             waves_path=Path(waves).resolve() if waves else None,
                             env=conf.env())
        finally:
            stop.set()
            th.join()
            if bar:
                bar.update(2)
                bar.close()
        if res.failed or not (tmp / "out.npz").is_file():
            raise RuntimeError(f"GEMM testbench failed on {sim}:\n{res.log_tail()}")
        out = dict(np.load(tmp / "out.npz"))
    results = []
    backdoor = [int(out[f"backdoor{j}"]) for j, s in enumerate(specs) if s["kind"] == "backdoor"]
    for j, s in enumerate(specs):
        if s["kind"] == "backdoor":
            continue
        status = int(out[f"status{j}"])
        bits = out.get(f"d{j}")
        if bits is None:
            bits = np.zeros((0, 0), dtype=np.uint32)
            value = bits.view(np.float32)
        elif s.get("out_bf16"):
            import ml_dtypes
            value = bits.view(ml_dtypes.bfloat16)
        else:
            value = bits.view(np.int32 if fmt == "int8" else np.float32)
        perf = {name.lower(): int(out[f"{name.lower()}{j}"]) for name in PERF_COUNTERS}
        rb = out.get(f"readback{j}")
        results.append(GemmResult(value, bits, int(out[f"cycles{j}"]), status, int(out[f"sim_cycles{j}"]),
                                  int(out.get(f"clobbered{j}", 0)), perf,
                                  None if rb is None else tuple(int(x) for x in rb)))
    info = {"sim_cycles": int(out["total_cycles"]), "wall_s": time.perf_counter() - t0, "build_s": res.build_s,
            "test_s": res.test_s, "sim_wall_s": float(out["wall_s"]), "cached_build": res.cached_build}
    info["cycles_per_s"] = info["sim_cycles"] / max(1e-9, info["sim_wall_s"])
    for key in ("backdoor_s", "engine_s", "registers_s"):  # the HDL bench says where its time went
        if key in out:
            info[key] = float(out[key])
    if backdoor:
        info["backdoor"] = sum(backdoor)
    return results, info
