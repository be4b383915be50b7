"""Benchmark: data-bus efficiency, latency and refresh of one HBM2 pseudo-channel controller.

Runs the generated Verilog in Verilator under cocotb (:mod:`verif.tb.hbm_tb`) against the device
model and the fatal JEDEC checker, for each timing set and traffic pattern, and compares each
efficiency with its analytical bound. Writes ``bench/results/hbm_bench.json``. Usage::

    .venv/bin/python bench/hbm_bench.py [--timings dramsim3_hbm2,ramulator2_hbm2] [--scale 1.0]
        [--scenarios sequential_read,...] [--seed 1] [--out FILE]

A full run takes about 5 minutes on 2 cores (one Verilator build per timing set, then 7 scenarios
of 80k-160k cycles each). ``--scale`` below about 0.2 makes runs shorter than a few tREFI, where
refresh has not yet cost its steady-state share and efficiencies can exceed the bounds.

The scenarios, the efficiency bounds and the refresh-debt charge are
:mod:`verif.hbm_figures`'s (``mxu report`` measures the same). Latency here is request accepted ->
read response taken (reads) or WR on the pins (writes), by the bank state the request found on
arrival (row hit, closed bank, row conflict), or ``refresh_blocked`` when a PREA/REF was issued while
it waited. The saturated scenarios measure mostly queueing (16 requests ahead); ``unloaded_mix``
offers one request at a time, so its latencies are the controller's own.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hw.hbm.config import TIMING_PRESETS, HBMConfig
from hw.hbm.controller import PseudoChannelController
from sim.runner import generate_verilog, run_cocotb
from verif.hbm_figures import UNLOADED, scenarios, summarize

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--timings", default="dramsim3_hbm2,ramulator2_hbm2", help="comma list of hw.hbm.config.TIMING_PRESETS keys"
    )
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every request count")
    ap.add_argument("--seed", type=int, default=1, help="traffic generator seed")
    ap.add_argument("--scenarios", default=None, help="comma list (default: all)")
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "bench" / "results" / "hbm_bench.json",
        help="JSON output (default bench/results/hbm_bench.json)",
    )
    args = ap.parse_args(argv)
    records = []
    work = ROOT / "build" / "bench" / "hbm"
    work.mkdir(parents=True, exist_ok=True)
    for tname in args.timings.split(","):
        cfg = HBMConfig(pseudo_channels=1, queue_depth=16, timing=TIMING_PRESETS[tname])
        verilog = generate_verilog(lambda cfg=cfg: PseudoChannelController(cfg), name="hbm_pc", key=cfg)
        for name, traffic in scenarios(args.scale).items():
            if args.scenarios and name not in args.scenarios.split(","):
                continue
            report = work / f"{tname}-{name}.json"
            conf = {
                "config": cfg.as_dict(),
                "seed": args.seed,
                "traffic": traffic,
                "max_cycles": 2_000_000,
                "max_outstanding": 1 if name in UNLOADED else None,
            }
            t0 = time.perf_counter()
            result = run_cocotb(
                [verilog],
                "hbm_pc",
                "verif.tb.hbm_tb",
                simulator="verilator",
                env={"HBM_TB_CONFIG": json.dumps(conf), "HBM_TB_REPORT": str(report)},
            )
            if result.failed or not result.passed:
                print(result.log_tail(), file=sys.stderr)
                return 1
            s = json.loads(report.read_text())
            fig = summarize(name, s, cfg)
            rec = {
                "timing": tname,
                **{
                    k: fig[k]
                    for k in (
                        "scenario",
                        "requests",
                        "cycles",
                        "efficiency",
                        "refresh_debt_at_end",
                        "efficiency_debt_charged",
                        "bound",
                        "of_bound",
                        "row_hit_rate",
                    )
                },
                "latency_cycles": s["latency_cycles"],
                "refreshes": s["refreshes"],
                "max_refresh_owed": s["max_refresh_owed"],
                "worst_refresh_gap_cycles": s["worst_refresh_gap_cycles"],
                "sim_cycles_per_s": round(s["cycles_per_s"]),
                "wall_s": round(time.perf_counter() - t0, 1),
                "config": {
                    "queue_depth": cfg.queue_depth,
                    "banks": cfg.banks,
                    "rows": cfg.rows,
                    "columns": cfg.columns,
                    "page_policy": cfg.page_policy,
                    "max_refresh_postpone": cfg.max_refresh_postpone,
                    "age_cap_cycles": cfg.age_cap_cycles,
                },
            }
            print(json.dumps({k: v for k, v in rec.items() if k not in ("latency_cycles", "config")}), flush=True)
            records.append(rec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"records": records, "seed": args.seed, "scale": args.scale}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
