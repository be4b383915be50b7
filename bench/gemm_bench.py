"""Benchmark: GEMM engine cycles measured in the RTL (memory system included) against the array-only
cycle model, the ideal ``M*K*N/(R*C)`` and SCALE-Sim v2's weight-stationary count.

For each array size, every GEMM shape runs in one :func:`sim.gemm.run_gemms` call (one simulator
process) on random bf16 data (fixed seed), and each result is checked bit for bit against the golden
model. ``cycles`` is the engine's CYCLES register (start strobe to done: HBM reads of A and B,
weight loads, the array, write-back of C); ``predicted`` is :func:`verif.cycles.gemm_cycles`, the
array alone with every stream always ready and one tile per (k-block, n-block) of all M rows;
``engine_model_cycles`` is the array alone on the engine's own blocking (M cut into m-blocks,
:func:`verif.cycles.engine_array_cycles`), so ``cycles - engine_model_cycles`` is what the memory
system and the engine's control cost. Utilization is ``ideal / cycles``.

Writes ``bench/results/gemm_bench.json`` (``--quick``: ``gemm_bench_quick.json``) and prints a
markdown table. Usage::

    .venv/bin/python -m bench.gemm_bench [--quick] [--arrays 8x8,16x16] [--sim verilator|icarus]
        [--pseudo-channels 1|2|4] [--shapes MxKxN,...] [--a-buffer-kib KIB] [-o FILE]

A Verilator build of the 16x16 engine takes well over 15 minutes of C++ on a busy 2-core machine;
the 8x8 run simulates about 340,000 cycles in 2 to 3 minutes (cocotb and the Python HBM device model
set the pace, about 2,400 cycles/s).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from bench import git_commit
from hw.engine import EngineConfig
from sim.gemm import GemmJob, run_gemms
from verif.cycles import engine_array_cycles, gemm_cycles, ideal_cycles, scalesim_ws_cycles
from verif.gemm_host import engine_error
from verif.golden import compare_bits, expected_bits, result_bits, to_format

ROOT = Path(__file__).resolve().parents[1]

SHAPES = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (1, 256, 256), (256, 256, 8)]
ARRAYS = [(8, 8), (16, 16)]
QUICK_SHAPES = [(64, 64, 64), (1, 256, 256), (256, 256, 8)]
QUICK_ARRAYS = [(8, 8)]
SEED = 2024


def _jobs(shapes, rng) -> list[GemmJob]:
    jobs = []
    for m, k, n in shapes:
        a = to_format(rng.standard_normal((m, k)).astype(np.float32), "bf16")
        b = to_format(rng.standard_normal((k, n)).astype(np.float32), "bf16")
        jobs.append(GemmJob(a, b))
    return jobs


def run(
    arrays, shapes, sim: str, stages: int = 2, pseudo_channels: int = 2, a_buffer_bytes: int | None = None
) -> list[dict]:
    records = []
    for rows, cols in arrays:
        params = EngineConfig.from_options(
            rows=rows,
            cols=cols,
            fmt="bf16",
            subnormals="ftz",
            stages=stages,
            pseudo_channels=pseudo_channels,
            a_buffer_bytes=a_buffer_bytes,
        )
        jobs = _jobs(shapes, np.random.default_rng(SEED))
        t0 = time.perf_counter()
        results, info = run_gemms(jobs, params, sim=sim, progress=sys.stderr.isatty())
        wall = time.perf_counter() - t0
        print(
            f"{rows}x{cols}: {len(jobs)} GEMMs, {info.get('sim_cycles')} cycles simulated in "
            f"{wall:.1f} s (build {info.get('build_s') or 0:.1f} s, {info.get('cycles_per_s') or 0:,.0f} cycles/s)",
            file=sys.stderr,
        )
        for (m, k, n), job, res in zip(shapes, jobs, results):
            error = engine_error(res.status)
            golden = expected_bits(job.a, job.b, job.c, fmt="bf16", subnormals="ftz")
            bad = compare_bits(result_bits(res.bits, "fp32"), golden) if error is None else None
            ideal = ideal_cycles(m, k, n, rows, cols)
            ss = scalesim_ws_cycles(m, k, n, rows, cols)
            pred = gemm_cycles(m, k, n, rows, cols, stages)
            records.append(
                {
                    "array": f"{rows}x{cols}",
                    "rows": rows,
                    "cols": cols,
                    "stages": stages,
                    "pseudo_channels": params.hbm.pseudo_channels,
                    "a_buffer_bytes": params.a_buffer_bytes,
                    "m": m,
                    "k": k,
                    "n": n,
                    "cycles": int(res.cycles),
                    "predicted_cycles": pred,
                    "overhead_cycles": int(res.cycles) - pred,
                    "engine_model_cycles": engine_array_cycles(m, k, n, params),
                    "ideal_cycles": ideal,
                    "scalesim_cycles": ss,
                    "utilization": round(ideal / res.cycles, 4) if res.cycles else None,
                    "predicted_utilization": round(ideal / pred, 4),
                    "faster_than_scalesim": bool(res.cycles < ss),
                    "vs_scalesim": round(res.cycles / ss, 4),
                    "perf": res.perf,
                    "status": int(res.status),
                    "engine_error": error,
                    "bitexact": bad is not None and not bad,
                    "run_sim_cycles": info.get("sim_cycles"),
                    "run_wall_s": round(wall, 2),
                    "run_build_s": info.get("build_s"),
                    "run_cycles_per_s": info.get("cycles_per_s"),
                }
            )
    return records


def table(records) -> str:
    lines = [
        "| array | PCs | M x K x N | RTL cycles | array model | engine blocking model | ideal | SCALE-Sim WS | "
        "utilization | < SCALE-Sim | bit-exact |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|:---:|:---:|",
    ]
    for r in records:
        util = f"{r['utilization']:.1%}" if r["utilization"] is not None else "-"
        em = f"{r['engine_model_cycles']:,}" if r.get("engine_model_cycles") is not None else "-"
        lines.append(
            f"| {r['array']} | {r['pseudo_channels']} | {r['m']}x{r['k']}x{r['n']} | {r['cycles']:,} | "
            f"{r['predicted_cycles']:,} | {em} | "
            f"{r['ideal_cycles']:,.0f} | {r['scalesim_cycles']:,} | {util} | "
            f"{'yes' if r['faster_than_scalesim'] else 'no'} | {'yes' if r['bitexact'] else 'NO'} |"
        )
    return "\n".join(lines)


def perf_table(records) -> str:
    """Where each GEMM's cycles go, from the engine's performance counters (``hw.engine.csr``)."""
    lines = [
        "| array | PCs | M x K x N | RTL cycles | beats (FEED) | set-up | wait A | wait weights | "
        "wait acc. bank | wait K-chain | drain |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in records:
        p = r.get("perf") or {}
        if not p:
            continue
        setup = r["cycles"] - sum(p.values())
        lines.append(
            f"| {r['array']} | {r['pseudo_channels']} | {r['m']}x{r['k']}x{r['n']} | {r['cycles']:,} | "
            f"{p['perf_feed']:,} | {setup:,} | {p['perf_wait_a']:,} | {p['perf_wait_w']:,} | "
            f"{p['perf_wait_acc']:,} | {p['perf_wait_dep']:,} | {p['perf_drain']:,} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"subset: {', '.join('x'.join(map(str, s)) for s in QUICK_SHAPES)} on 8x8 only",
    )
    p.add_argument(
        "--arrays",
        default=None,
        metavar="RxC,...",
        help="array sizes to run (default: " + ",".join(f"{r}x{c}" for r, c in ARRAYS) + ")",
    )
    p.add_argument(
        "--shapes", default=None, metavar="MxKxN,...", help="GEMM shapes to run instead of the standard list"
    )
    p.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    p.add_argument(
        "--pseudo-channels",
        type=int,
        choices=(1, 2, 4),
        default=2,
        help="HBM pseudo-channels of the engine's memory (default 2; peak 16 B/cycle each)",
    )
    p.add_argument(
        "--a-buffer-kib",
        type=int,
        default=None,
        metavar="KIB",
        help="bytes per A bank in KiB (default: the engine's, 32 KiB)",
    )
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        default=None,
        help="JSON file (default bench/results/gemm_bench.json, or gemm_bench_quick.json)",
    )
    args = p.parse_args(argv)
    arrays, shapes = (QUICK_ARRAYS, QUICK_SHAPES) if args.quick else (ARRAYS, SHAPES)
    if args.arrays:
        try:
            arrays = [tuple(int(v) for v in a.lower().split("x")) for a in args.arrays.split(",")]
        except ValueError:
            p.error(f"--arrays: give sizes like 8x8,16x16, not {args.arrays!r}")
    if args.shapes:
        try:
            shapes = [tuple(int(v) for v in s_.lower().split("x")) for s_ in args.shapes.split(",")]
            assert all(len(s_) == 3 and min(s_) >= 1 for s_ in shapes)
        except (ValueError, AssertionError):
            p.error(f"--shapes: give shapes like 64x64x64,256x256x8, not {args.shapes!r}")
    out = args.out or ROOT / "bench" / "results" / ("gemm_bench_quick.json" if args.quick else "gemm_bench.json")
    t0 = time.perf_counter()
    commit = git_commit()  # before the run: the RTL is generated from the tree as it is now
    records = run(
        arrays,
        shapes,
        args.sim,
        pseudo_channels=args.pseudo_channels,
        a_buffer_bytes=args.a_buffer_kib * 1024 if args.a_buffer_kib else None,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "bench/gemm_bench.py",
                "git_commit": commit,
                "sim": args.sim,
                "fmt": "bf16",
                "subnormals": "ftz",
                "seed": SEED,
                "quick": args.quick,
                "wall_s": round(time.perf_counter() - t0, 1),
                "records": records,
            },
            indent=2,
        )
        + "\n"
    )
    print(table(records))
    print()
    print(perf_table(records))
    print(f"\nwritten: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0 if all(r["bitexact"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
