"""Benchmark: the mutation score of each block's default regression (``mxu mutate``'s campaigns).

Per campaign: N mutations of the block from Yosys (``mutate -list N -seed S``), the block's
regression against each (Verilator, regression seed 1), every survivor checked for equivalence.
Each campaign works in ``build/mutation/<name>/`` (resumable: an interrupted run goes on where it
stopped) and its record goes into ``bench/results/mutation.json`` (``--merge`` keeps the other
campaigns' records); the manual's table is generated from that file. Usage::

    .venv/bin/python -m bench.mutation [--campaigns mac-bf16,mac-int8,...] [--count 200] [--seed 1]
        [--jobs 2] [--merge] [-o FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench import git_commit
from sim.mutate_targets import ENGINE_COMPONENTS

ROOT = Path(__file__).resolve().parents[1]

#: campaign name -> (block, configuration options)
CAMPAIGNS: dict[str, tuple[str, dict]] = {
    "mac-bf16": ("mac", {"fmt": "bf16", "subnormals": "ftz", "stages": 2}),
    "mac-bf16-ieee": ("mac", {"fmt": "bf16", "subnormals": "ieee", "stages": 2}),
    "mac-int8": ("mac", {"fmt": "int8", "stages": 2}),
    "pe-bf16": ("pe", {"fmt": "bf16", "subnormals": "ftz", "stages": 2}),
    "mxu-8x8-bf16": ("mxu", {"rows": 8, "cols": 8, "fmt": "bf16", "stages": 2}),
    "hbm-channel": ("hbm-channel", {}),
    # each GEMM engine component inside the engine (4x4 bf16, two pseudo-channels)
    **{f"engine-{c.replace('_', '-')}": (f"engine-{c.replace('_', '-')}", {}) for c in ENGINE_COMPONENTS},
}


def main(argv=None) -> int:
    from sim import mutate
    from sim.mutate_targets import target

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaigns", default=",".join(CAMPAIGNS), help="comma list (default: all)")
    ap.add_argument("--count", type=int, default=200, help="mutations per campaign (default 200)")
    ap.add_argument("--seed", type=int, default=1, help="Yosys's sampling seed (default 1)")
    ap.add_argument("--jobs", type=int, default=2, help="mutants in parallel (default 2)")
    ap.add_argument("--depth", type=int, default=20, help="equivalence check depth, cycles (default 20)")
    ap.add_argument("--rejudge", default="", help="comma list of statuses to judge again (e.g. survived)")
    ap.add_argument("--merge", action="store_true", help="keep the other campaigns' records in the file")
    ap.add_argument("-o", "--out", type=Path, default=ROOT / "bench" / "results" / "mutation.json")
    args = ap.parse_args(argv)
    names = [n for n in args.campaigns.split(",") if n]
    unknown = [n for n in names if n not in CAMPAIGNS]
    if unknown:
        ap.error(f"unknown campaigns {unknown}; choose from {', '.join(CAMPAIGNS)}")
    records = {}
    if args.merge and args.out.is_file():
        records = {r["campaign"]: r for r in json.loads(args.out.read_text())["campaigns"]}
    for name in names:
        block, options = CAMPAIGNS[name]
        t0 = time.perf_counter()
        record = mutate.run_campaign(
            target(block, options, 1),
            ROOT / "build" / "mutation" / name,
            count=args.count,
            seed=args.seed,
            simulator="verilator",
            jobs=args.jobs,
            timeout_s=None,
            depth=args.depth,
            test_seed=1,
            rejudge=tuple(x for x in args.rejudge.split(",") if x),
        )
        summary = record["summary"]
        print(f"{name}: {summary} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        records[name] = {
            "campaign": name,
            "block": block,
            "config": record["config"],
            "count": args.count,
            "seed": args.seed,
            "simulator": "verilator",
            "test_seed": 1,
            "equivalence_depth": args.depth,
            "summary": summary,
            "wall_s": record["wall_s"],
            "mutant_s": record["mutant_s"],
            "timeout_s": record["timeout_s"],
            "baseline_s": record["baseline_s"],
            "regression": [r["name"] for r in record["regression"]],
            "survivors": [
                {k: m[k] for k in ("index", "mode", "cell", "port", "portbit", "source", "detail")}
                for m in record["mutants"]
                if m.get("status") == "survived"
            ],
            "equivalent": [
                {k: m[k] for k in ("index", "mode", "cell", "port", "portbit", "source", "detail")}
                for m in record["mutants"]
                if m.get("status") == "equivalent"
            ],
            "commit": git_commit(),
            "date": time.strftime("%Y-%m-%d"),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        order = [n for n in CAMPAIGNS if n in records]
        args.out.write_text(json.dumps({"campaigns": [records[n] for n in order]}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
