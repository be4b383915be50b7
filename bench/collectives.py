"""Collectives on a ring of collective engines: RTL cycles against the cost model and the textbook ring.

Each point runs one collective on a ring (``verif.pod_sim.run_collective``: collective engines and
ICI channels in the Amaranth simulator, each node's memory a checked behavioural AXI4 memory),
checks every node's array bit for bit against ``verif.golden.collectives``, and records the last
node's cycles, ``verif.collective_model.collective_cycles``, ``ring_formula`` (``(N - 1) / N`` of the
array per link at ``beat_bytes`` a cycle, halved on a bidirectional ring, plus a hop latency per
step) and the link utilization: link beats of data sent over cycles times the links in use.
Writes ``bench/results/collectives.json``::

    python -m bench.collectives            # every point (about 25 minutes on one core)
    python -m bench.collectives --quick    # the two smallest, to build/bench/collectives_quick.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from bench import git_commit

OUT = Path(__file__).resolve().parent / "results" / "collectives.json"

#: (op, nodes, rows, fp32 columns, bidirectional)
POINTS = [
    ("all_gather", 4, 64, 64, False),
    ("reduce_scatter", 4, 64, 64, False),
    ("all_reduce", 4, 64, 64, False),
    ("all_reduce", 4, 64, 64, True),
    ("all_reduce", 2, 64, 64, False),
    ("all_reduce", 8, 64, 64, False),
    ("all_gather", 4, 256, 64, False),
    ("reduce_scatter", 4, 256, 64, False),
    ("all_reduce", 4, 256, 64, False),
    ("all_reduce", 4, 256, 64, True),
]


def measure(op: str, nodes: int, rows: int, cols: int, bidirectional: bool, seed: int = 1) -> dict:
    from hw.pod import CollectiveConfig
    from verif.collective_model import collective_cycles, ring_formula, ring_steps
    from verif.golden.collectives import after_collective
    from verif.pod_sim import run_collective

    cfg = CollectiveConfig()
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((rows, cols)).astype(np.float32) for _ in range(nodes)]
    t0 = time.perf_counter()
    res = run_collective(cfg, arrays, op, bidirectional=bidirectional, max_cycles=2_000_000)
    wall = time.perf_counter() - t0
    want = after_collective(op, arrays, bidirectional=bidirectional)
    exact = all(np.array_equal(g.view(np.uint32), w.view(np.uint32)) for g, w in zip(res["out"], want))
    payload = sum(
        s.beats
        for r in range(nodes)
        for ccw in (False, True)
        for s in ring_steps(cfg, op, rows, cols * 4, nodes, r, bidirectional=bidirectional, ccw=ccw)
        if s.tx
    )
    cycles = max(res["cycles"])
    links = nodes * (2 if bidirectional else 1)
    model = collective_cycles(cfg, op, rows, cols * 4, nodes, bidirectional=bidirectional)
    return {
        "op": op,
        "nodes": nodes,
        "rows": rows,
        "row_bytes": cols * 4,
        "bidirectional": bidirectional,
        "bytes_per_node": rows * cols * 4,
        "link": cfg.link.as_dict(),
        "cycles": cycles,
        "model_cycles": model,
        "model_error": round((model - cycles) / cycles, 4),
        "formula_cycles": round(ring_formula(cfg, op, rows, cols * 4, nodes, bidirectional=bidirectional), 1),
        "payload_beats": payload,
        "link_utilization": round(payload / (cycles * links), 4),
        "framing_bound": round(cfg.link.packet_beats / (cfg.link.packet_beats + 2), 4),
        "bitexact": exact,
        "wall_s": round(wall, 1),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.collectives", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="the two smallest points only, written to build/bench/collectives_quick.json unless --out",
    )
    ap.add_argument(
        "-o", "--out", type=Path, default=None, help=f"the JSON (default {OUT.relative_to(OUT.parents[2])})"
    )
    args = ap.parse_args(argv)
    points = sorted(POINTS, key=lambda p: p[1] * p[2])[:2] if args.quick else POINTS
    if args.out is not None:
        out = args.out
    elif args.quick:  # a smoke run must not replace the published table
        from sim.runner import build_root

        out = build_root() / "bench" / "collectives_quick.json"
    else:
        out = OUT
    rows = []
    for p in points:
        r = measure(*p)
        print(json.dumps(r), flush=True)
        rows.append(r)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"commit": git_commit(), "points": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0 if all(r["bitexact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
