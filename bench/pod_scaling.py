"""Scaling of a data-parallel GEMM over the pod: one 512 x 256 x 256 bf16 GEMM on N = 1, 2, 4, 8 nodes.

Each point runs the GEMM sharded ``dp`` (A by rows, B on every node) on a pod of default engines
(8 x 8 bf16, two HBM pseudo-channels each, every controller with its HDL device model and JEDEC
checker) in Verilator (``sim.pod.run_pod``), checks C bit for bit against the single-engine golden
``matmul`` and records the pod's cycles (start of the first node to done of the last), each node's
GEMM cycles and the scaling efficiency ``cycles(N = 1) / (N * cycles(N))``. Writes
``bench/results/pod_scaling.json``::

    python -m bench.pod_scaling             # N = 1, 2, 4, 8 (builds four simulators: about 20 minutes)
    python -m bench.pod_scaling --nodes 1 2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bench import git_commit

OUT = Path(__file__).resolve().parent / "results" / "pod_scaling.json"
SHAPE = (512, 256, 256)


def measure(nodes: int, seed: int = 1) -> dict:
    import ml_dtypes

    from hw.engine import EngineConfig
    from hw.pod.config import PodConfig
    from sim.pod import run_pod
    from verif.golden import matmul
    from verif.pod_host import assemble, plan_matmul

    m, k, n = SHAPE
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    cfg = PodConfig(engine=EngineConfig(), nodes=nodes)
    plan = plan_matmul(cfg, a, b, None, "dp")
    res = run_pod(cfg, plan)
    got = assemble(plan, res["results"]).view(np.uint32)
    exact = bool(np.array_equal(got, matmul(a, b).view(np.uint32)))
    return {
        "nodes": nodes,
        "m": m,
        "k": k,
        "n": n,
        "rows": 8,
        "cols": 8,
        "fmt": "bf16",
        "pseudo_channels": cfg.engine.hbm.pseudo_channels,
        "pod_cycles": res["phase_cycles"][0],
        "gemm_cycles": res["gemm_cycles"],
        "bitexact": exact,
        "build_s": round(res["build_s"], 1),
        "wall_s": round(res["wall_s"], 1),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.pod_scaling", description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8], help="pod sizes (default 1 2 4 8)")
    args = ap.parse_args(argv)
    rows = []
    for nodes in args.nodes:
        r = measure(nodes)
        print(json.dumps(r), flush=True)
        rows.append(r)
    base = next((r["pod_cycles"] for r in rows if r["nodes"] == 1), None)
    for r in rows:
        r["scaling_efficiency"] = None if base is None else round(base / (r["nodes"] * r["pod_cycles"]), 4)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"commit": git_commit(), "points": rows}, indent=1) + "\n")
    return 0 if all(r["bitexact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
