"""Where the GEMM engine's cycles above the array model go (8x8 bf16 engine, default parameters).

* ``steady``: the engine + HBM top in Verilator on M x K x N and the same GEMM with more rows; the
  marginal utilization (extra ideal cycles / extra cycles) is the steady state without the start and
  end of a GEMM.
* ``ideal``: the engine alone in the Amaranth simulator against a zero-latency AXI memory
  (``verif.engine_sim``): what the engine's own start and end cost without the HBM (slow: ~4 min).
* ``ideal_skinny``: the same for 256x256x8 (the shape slower than SCALE-Sim with the HBM; ~10 min).

Writes ``bench/results/gemm_overheads.json`` (merged per mode) and prints the numbers.
Usage: ``python -m bench.gemm_overheads [steady] [ideal] [ideal_skinny]`` (default: the
first two).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bench import git_commit
from verif.golden import matmul, to_format

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "bench" / "results" / "gemm_overheads.json"
STEADY = [(64, 64, 64), (128, 64, 64), (256, 64, 64), (128, 128, 128), (256, 128, 128)]


def _data(rng, m, k, n):
    return (
        to_format(rng.standard_normal((m, k)).astype(np.float32), "bf16"),
        to_format(rng.standard_normal((k, n)).astype(np.float32), "bf16"),
    )


def steady() -> dict:
    from hw.engine import EngineConfig
    from sim.gemm import GemmJob, run_gemms

    rng = np.random.default_rng(5)
    jobs = [GemmJob(*_data(rng, *s)) for s in STEADY]
    results, _ = run_gemms(jobs, EngineConfig(), progress=False)
    rows = []
    for s, j, r in zip(STEADY, jobs, results):
        exact = bool(np.array_equal(matmul(j.a, j.b).view(np.uint32), r.bits))
        rows.append({"m": s[0], "k": s[1], "n": s[2], "cycles": r.cycles, "bitexact": exact})
    marginal = []
    for a, b in ((0, 1), (1, 2), (3, 4)):
        x, y = rows[a], rows[b]
        extra_ideal = (y["m"] - x["m"]) * x["k"] * x["n"] / 64
        marginal.append(
            {
                "from": [x["m"], x["k"], x["n"]],
                "to": [y["m"], y["k"], y["n"]],
                "extra_cycles": y["cycles"] - x["cycles"],
                "utilization": extra_ideal / (y["cycles"] - x["cycles"]),
            }
        )
    return {"runs": rows, "marginal": marginal}


def _ideal(m, k, n) -> dict:
    from hw.engine import EngineConfig
    from verif.engine_sim import run_engine_amaranth

    rng = np.random.default_rng(1)
    a, b = _data(rng, m, k, n)
    r = run_engine_amaranth(EngineConfig(), [{"a": a, "b": b}])[0]
    return {
        "m": m,
        "k": k,
        "n": n,
        "cycles": r["cycles"],
        "bitexact": bool(np.array_equal(matmul(a, b).view(np.uint32), r["d"])),
    }


def ideal() -> dict:
    return _ideal(64, 64, 64)


def ideal_skinny() -> dict:
    return _ideal(256, 256, 8)


def main(argv: list[str]) -> int:
    runs = {"steady": steady, "ideal": ideal, "ideal_skinny": ideal_skinny}
    ap = argparse.ArgumentParser(prog="python -m bench.gemm_overheads", description=__doc__.split("\n\n")[0])
    ap.add_argument("modes", nargs="*", metavar="MODE", help=f"one of {', '.join(runs)} (default: steady ideal)")
    modes = ap.parse_args(argv).modes or ["steady", "ideal"]
    for mode in modes:
        if mode not in runs:
            ap.error(f"MODE must be one of {', '.join(runs)}; got {mode!r}")
    commit = git_commit()
    results = {mode: {"commit": commit, **runs[mode]()} for mode in modes}
    data = json.loads(OUT.read_text()) if OUT.is_file() else {}  # read late: another mode may have run
    data.update(results)
    for mode, value in results.items():
        print(mode, json.dumps(value, indent=1))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
