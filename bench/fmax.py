"""Benchmark: Fmax and resources of each component, out of context, over several placement seeds.

Every block of ``mxu synth --block`` that is listed in :data:`BLOCKS` is synthesized once with Yosys
and placed and routed with nextpnr for each seed (``mxu synth``'s flow, :func:`sim.synth.run_flow`,
the same out-of-context wrapper). Per record: the achieved Fmax, the critical path (from and to
cell, delay, logic levels) and the block's Yosys cells (LUT4, FF, carry, DSP, block RAM, LUT RAM).
The table in the manual quotes the median Fmax of the seeds.

Writes ``bench/results/fmax.json`` (``--merge``: keeps the records of the blocks not run). Usage::

    .venv/bin/python -m bench.fmax [--blocks hbm-channel,engine-feeder,gemm-top-4x4-bf16,...]
        [--seeds 1,2,3] [--target ecp5-85k] [--freq 100] [--jobs 2] [--merge] [--collect] [-o FILE]

``--collect`` places nothing: it takes the records of placements an earlier run finished from their
work folders (``build/bench/fmax/<block>-<target>-s<seed>/synth.json``), for a run stopped before it
wrote the JSON (each placement of a GEMM top takes 20 minutes or more).
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

_HBM = {"pseudo_channels": 1, "queue_depth": 16}
#: the engine's parts on the 8x8 int8 engine (one pseudo-channel's address width)
_ENGINE = {"rows": 8, "cols": 8, "fmt": "int8", "pseudo_channels": 2}
#: record name -> (``mxu synth`` block, options): HBMConfig options for the HBM parts (one
#: pseudo-channel of the default geometry), ``EngineConfig.from_options`` for the engine blocks,
#: MXUConfig fields for ``mxu``
BLOCKS: dict[str, tuple[str, dict]] = {
    "hbm-channel": ("hbm-channel", _HBM),
    # the controller with its AXI4 front end (one port) on the GEMM engine's two pseudo-channels
    "hbm-2pc": ("hbm", {"pseudo_channels": 2, "queue_depth": 16}),
    "hbm-queue": ("hbm-queue", _HBM),
    "hbm-scheduler": ("hbm-scheduler", _HBM),
    "hbm-bank-timing": ("hbm-bank-timing", _HBM),
    "hbm-refresh": ("hbm-refresh", _HBM),
    "hbm-read-path": ("hbm-read-path", _HBM),
    "hbm-write-path": ("hbm-write-path", _HBM),
    # the products registered in the DSP blocks (multiplier="ecp5"), and with the generic multiplier
    "mxu-8x8-int8": (
        "mxu",
        {"rows": 8, "cols": 8, "fmt": "int8", "stages": 2, "backpressure": False, "multiplier": "ecp5"},
    ),
    "mxu-8x8-int8-generic": ("mxu", {"rows": 8, "cols": 8, "fmt": "int8", "stages": 2, "backpressure": False}),
    "engine-8x8-int8": ("engine", _ENGINE),
    "gemm-top-8x8-int8": ("gemm-top", {**_ENGINE, "queue_depth": 16}),
    "gemm-top-4x4-bf16": ("gemm-top", {"rows": 4, "cols": 4, "fmt": "bf16", "pseudo_channels": 2, "queue_depth": 16}),
    # a pod node's collective engine for the 8x8 bf16 engine (fp32 adder lanes), 8-byte links, 4 slots
    "pod-collective": ("pod-collective", {"rows": 8, "cols": 8, "fmt": "bf16"}),
    # one direction of the pod's ICI link (8-byte beats, 16-packet receive buffer, latency 4)
    "ici-channel": ("ici-channel", {"beat_bytes": 8, "rx_packets": 16}),
    **{
        b: (b, _ENGINE)
        for b in (
            "engine-descriptor",
            "engine-sequencer",
            "engine-a-loader",
            "engine-weight-loader",
            "engine-c0-loader",
            "engine-accumulator",
            "engine-feeder",
            "engine-write-address",
            "engine-write-data",
            "engine-perf",
        )
    },
}


def _verilog(record: str):
    from sim.blocks import ENGINE_BLOCKS, ICI_BLOCKS, POD_BLOCKS, engine_block, hbm_block, ici_block, pod_block
    from sim.runner import generate_verilog

    block, options = BLOCKS[record]
    name = block.replace("-", "_")
    if block == "mxu":
        from hw.generate import mxu_verilog
        from hw.mxu import MXUConfig

        cfg = MXUConfig(**options)
        factory = lambda: mxu_verilog(cfg, name)  # noqa: E731
    elif block in ENGINE_BLOCKS:
        from hw.engine import EngineConfig

        cfg = EngineConfig.from_options(**options)
        factory = engine_block(block, cfg, name)
    elif block in ICI_BLOCKS:
        from hw.ici import ICIConfig

        cfg = ICIConfig(**options)
        factory = ici_block(block, cfg)
    elif block in POD_BLOCKS:
        from hw.engine import EngineConfig
        from hw.pod.config import PodConfig

        cfg = PodConfig(engine=EngineConfig.from_options(**options))
        factory = pod_block(block, cfg)
    else:
        from hw.hbm.config import HBMConfig

        cfg = HBMConfig(**options)
        factory = hbm_block(block, cfg)
    return generate_verilog(factory, name=name, key=(block, cfg)), name


def _work(block: str, seed: int, target: str) -> Path:
    return ROOT / "build" / "bench" / "fmax" / f"{block}-{target}-s{seed}"


def run_one(block: str, seed: int, target: str, freq: float) -> dict:
    """One placement of ``block`` with ``seed``: the record written to the JSON."""
    from sim import synth

    verilog, name = _verilog(block)
    t0 = time.perf_counter()
    rep = synth.run_flow(verilog, name, target, _work(block, seed, target), freq_mhz=freq, seed=seed)
    return _record(block, seed, target, freq, rep, time.perf_counter() - t0)


def collect_one(block: str, seed: int, target: str, freq: float) -> dict:
    """The record of a placement that finished in an earlier run of this benchmark (its work folder's
    ``synth.json``), for a run stopped before it wrote the JSON.

    Raises:
        FileNotFoundError: that placement has no finished report.
        ValueError: the report is for another requested clock or seed, or was placed from other Verilog
            than the tree generates now (the hardware changed since).
    """
    work = _work(block, seed, target)
    path = work / "synth.json"
    if not path.is_file():
        raise FileNotFoundError(f"no finished placement of {block} with seed {seed} ({path})")
    rep = json.loads(path.read_text())
    if (rep["requested_mhz"], rep["seed"]) != (freq, seed):
        raise ValueError(f"{path} is for {rep['requested_mhz']} MHz and seed {rep['seed']}, not {freq} and {seed}")
    verilog, name = _verilog(block)
    placed = work / f"{name}.v"
    if not placed.is_file() or placed.read_text() != verilog.read_text():
        raise ValueError(f"{placed} is not the Verilog the tree generates for {block} now: place it again")
    return _record(block, seed, target, freq, rep, rep["wall_s"]["total_s"])


def _record(block: str, seed: int, target: str, freq: float, rep: dict, wall_s: float) -> dict:
    clk = rep["fmax"][0]
    cells = rep["cells"]["block"]
    return {
        "block": block,
        "config": {"block": BLOCKS[block][0], **BLOCKS[block][1]},
        "target": target,
        "seed": seed,
        "requested_mhz": freq,
        "achieved_mhz": clk["achieved_mhz"],
        "met": clk["met"],
        "critical_path": clk.get("critical_path"),
        "mapper": rep["mapper"],
        **{k: cells[k] for k in ("lut4", "ff", "carry", "dsp", "bram", "lutram")},
        "wall_s": round(wall_s, 1),
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
    ap.add_argument("--merge", action="store_true", help="keep the records of other blocks already in the file")
    ap.add_argument(
        "--collect",
        action="store_true",
        help="place nothing: take each placement's report from its work folder under "
        "build/bench/fmax/ (a run stopped before it wrote the JSON)",
    )
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
    jobs = [(b, s) for b in blocks for s in seeds]
    if args.collect:
        try:
            records = [{**collect_one(b, s, args.target, args.freq), "git_commit": commit} for b, s in jobs]
        except (OSError, ValueError) as exc:
            print(f"bench.fmax: {exc}", file=sys.stderr)
            return 2
    else:
        for block in blocks:  # generate each block's Verilog once, before the workers share the cache
            _verilog(block)
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_one, b, s, args.target, args.freq) for b, s in jobs]
            records = []
            for f in futures:
                rec = {**f.result(), "git_commit": commit}
                print(json.dumps({k: rec[k] for k in ("block", "seed", "achieved_mhz", "lut4", "ff")}), flush=True)
                records.append(rec)
    if args.merge and args.out.exists():
        kept = [r for r in json.loads(args.out.read_text())["records"] if r["block"] not in blocks]
        records = kept + records
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
