"""Benchmark: Fmax and resources of each component, out of context, over several placement seeds.

Every block of ``mxu synth --block`` that is listed in :data:`BLOCKS` is synthesized once with Yosys
and placed and routed with nextpnr for each seed (``mxu synth``'s flow, :func:`sim.synth.run_flow`,
the same out-of-context wrapper). Per record: the achieved Fmax, the critical path (from and to
cell, delay, logic levels) and the block's Yosys cells (LUT4, FF, carry, DSP, block RAM, LUT RAM).
The table in the manual quotes the median Fmax of the seeds.

Writes ``bench/results/fmax.json``. Usage::

    .venv/bin/python -m bench.fmax [--blocks hbm-channel,hbm-queue,...] [--seeds 1,2,3]
        [--target ecp5-85k] [--freq 100] [--jobs 2] [-o FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench import git_commit

ROOT = Path(__file__).resolve().parents[1]

#: block -> HBMConfig options (the HBM parts serve one pseudo-channel of the default geometry)
BLOCKS: dict[str, dict] = {
    "hbm-channel": {"pseudo_channels": 1, "queue_depth": 16},
    "hbm-queue": {"pseudo_channels": 1, "queue_depth": 16},
    "hbm-scheduler": {"pseudo_channels": 1, "queue_depth": 16},
    "hbm-bank-timing": {"pseudo_channels": 1, "queue_depth": 16},
    "hbm-refresh": {"pseudo_channels": 1, "queue_depth": 16},
    "hbm-read-path": {"pseudo_channels": 1, "queue_depth": 16},
    "hbm-write-path": {"pseudo_channels": 1, "queue_depth": 16},
}


def _verilog(block: str):
    from hw.hbm.config import HBMConfig
    from sim.blocks import hbm_block
    from sim.runner import generate_verilog

    cfg = HBMConfig(**BLOCKS[block])
    name = block.replace("-", "_")
    return generate_verilog(hbm_block(block, cfg), name=name, key=(block, cfg)), name


def run_one(block: str, seed: int, target: str, freq: float) -> dict:
    """One placement of ``block`` with ``seed``: the record written to the JSON."""
    from sim import synth

    verilog, name = _verilog(block)
    work = ROOT / "build" / "bench" / "fmax" / f"{block}-{target}-s{seed}"
    t0 = time.perf_counter()
    rep = synth.run_flow(verilog, name, target, work, freq_mhz=freq, seed=seed)
    clk = rep["fmax"][0]
    cells = rep["cells"]["block"]
    return {
        "block": block,
        "config": BLOCKS[block],
        "target": target,
        "seed": seed,
        "requested_mhz": freq,
        "achieved_mhz": clk["achieved_mhz"],
        "met": clk["met"],
        "critical_path": clk.get("critical_path"),
        "mapper": rep["mapper"],
        **{k: cells[k] for k in ("lut4", "ff", "carry", "dsp", "bram", "lutram")},
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def summarize(records: list[dict]) -> list[dict]:
    """Per block: the median Fmax of its seeds (and the range), cells, the median seed's critical path."""
    out = []
    for block in dict.fromkeys(r["block"] for r in records):
        rs = sorted((r for r in records if r["block"] == block), key=lambda r: r["achieved_mhz"])
        med = rs[(len(rs) - 1) // 2]
        out.append(
            {
                "block": block,
                "seeds": [r["seed"] for r in rs],
                "median_mhz": statistics.median(r["achieved_mhz"] for r in rs),
                "min_mhz": rs[0]["achieved_mhz"],
                "max_mhz": rs[-1]["achieved_mhz"],
                **{k: med[k] for k in ("lut4", "ff", "carry", "dsp", "bram", "lutram")},
                "critical_path": med["critical_path"],
            }
        )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", default=",".join(BLOCKS), help="comma list of blocks (default: all)")
    ap.add_argument("--seeds", default="1,2,3", help="nextpnr placement seeds (default 1,2,3)")
    ap.add_argument("--target", default="ecp5-85k", help="mxu synth target (default ecp5-85k)")
    ap.add_argument("--freq", type=float, default=100.0, help="requested clock, MHz (default 100)")
    ap.add_argument("--jobs", type=int, default=2, help="placements in parallel (default 2)")
    ap.add_argument("-o", "--out", type=Path, default=ROOT / "bench" / "results" / "fmax.json")
    args = ap.parse_args(argv)
    blocks = args.blocks.split(",")
    unknown = [b for b in blocks if b not in BLOCKS]
    if unknown:
        print(f"bench.fmax: unknown blocks {', '.join(unknown)}; choose from {', '.join(BLOCKS)}", file=sys.stderr)
        return 2
    seeds = [int(s) for s in args.seeds.split(",")]
    commit = git_commit()
    t0 = time.perf_counter()
    for block in blocks:  # generate each block's Verilog once, before the workers share the cache
        _verilog(block)
    jobs = [(b, s) for b in blocks for s in seeds]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, b, s, args.target, args.freq) for b, s in jobs]
        records = []
        for f in futures:
            rec = f.result()
            print(json.dumps({k: rec[k] for k in ("block", "seed", "achieved_mhz", "lut4", "ff")}), flush=True)
            records.append(rec)
    result = {
        "benchmark": "fmax",
        "git_commit": commit,
        "target": args.target,
        "requested_mhz": args.freq,
        "wall_s": round(time.perf_counter() - t0, 1),
        "records": records,
        "summary": summarize(records),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
