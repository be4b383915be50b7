"""Benchmark: MXU cycles from the cycle model (verified equal to the RTL by the tests) against
SCALE-Sim v2's weight-stationary count and the ideal ``M*K*N/(R*C)``. Writes
``bench/results/mxu_cycles.json``.

The GEMM is streamed as ``ceil(K/R) * ceil(N/C)`` tiles of M beats with every stream always ready
(array only: no memory system; the GEMM engine issue adds that). Usage:
``.venv/bin/python bench/mxu_cycles.py``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from verif.cycles import gemm_cycles, ideal_cycles, scalesim_ws_cycles

ROOT = Path(__file__).resolve().parents[1]

SHAPES = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (1, 256, 256), (256, 256, 8), (8, 8, 8), (16, 16, 16)]
ARRAYS = [(8, 8, 2), (16, 16, 2), (8, 8, 1)]


def main() -> int:
    rows = []
    for r, c, stages in ARRAYS:
        for m, k, n in SHAPES:
            cyc = gemm_cycles(m, k, n, r, c, stages)
            ss = scalesim_ws_cycles(m, k, n, r, c)
            ideal = ideal_cycles(m, k, n, r, c)
            rows.append(
                {
                    "array": f"{r}x{c}",
                    "stages": stages,
                    "m": m,
                    "k": k,
                    "n": n,
                    "cycles": cyc,
                    "scalesim_ws": ss,
                    "ideal": ideal,
                    "utilization": round(ideal / cyc, 4),
                    "vs_scalesim": round(cyc / ss, 4),
                }
            )
            print(
                f"{r}x{c} L={stages} {m}x{k}x{n}: {cyc} cycles, SCALE-Sim {ss}, ideal {ideal:.0f}, "
                f"util {ideal / cyc:.1%}"
            )
    out = ROOT / "bench" / "results" / "mxu_cycles.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": "verif.cycles.gemm_cycles", "records": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
