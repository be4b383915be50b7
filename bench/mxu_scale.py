"""Benchmark: MXU generation and simulation at scale. Writes ``bench/results/mxu_scale.json``.

* Verilog generation (``hw.generate.mxu_verilog``) of square bf16 arrays 8, 16, 32, 64, 128: wall
  time, peak memory of the generating process (a fresh subprocess per size, ``ru_maxrss``), Verilog
  size in bytes.
* Verilator build time (``--hierarchical``, cold, in a scratch build folder) for 8x8 and 16x16.
* Simulated cycles per second of a 16x16 array in Verilator and Icarus (cocotb testbench
  ``verif.tb.mxu_tb``, back-to-back tiles; cycles from the cycle model; time = the cocotb test
  run including simulator start-up, so it is the rate a cocotb user sees, not the raw simulator's).
* Per-module ``verilator --lint-only`` time and result (``sim.lint``) for 16x16 and 128x128.

Usage: ``.venv/bin/python bench/mxu_scale.py [--sizes 8,16,32,64,128] [--skip-sim]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_GEN = r"""
import json, os, resource, sys, time
os.environ["AMARANTH_USE_YOSYS"] = "builtin"
from hw.generate import mxu_verilog
from hw.mxu import MXUConfig
n = int(sys.argv[1])
t = time.perf_counter()
text = mxu_verilog(MXUConfig(n, n, "bf16", "ftz", 2), "mxu")
wall = time.perf_counter() - t
print(json.dumps({"size": n, "generate_s": round(wall, 2), "verilog_bytes": len(text.encode()),
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "modules": text.count("\nmodule ") + text.startswith("module ")}))
"""


def bench_generation(sizes):
    rows = []
    for n in sizes:
        out = subprocess.run([sys.executable, "-c", _GEN, str(n)], check=True, capture_output=True, text=True)
        rec = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps(rec), flush=True)
        rows.append(rec)
    return rows


def bench_sim(n: int, simulator: str, tiles: list[int]):
    from hw.generate import mxu_verilog
    from hw.mxu import MXUConfig
    from sim.runner import build_root, generate_verilog, run_cocotb
    from verif.cycles import mxu_schedule

    cfg = MXUConfig(n, n, "bf16", "ftz", 2)
    verilog = generate_verilog(lambda: mxu_verilog(cfg, "mxu"), name="mxu", key=cfg)
    build_dir = build_root() / "bench" / f"mxu-{simulator}-{n}"
    shutil.rmtree(build_dir, ignore_errors=True)  # a cold build
    env = {"MXU_TB_CONFIG": json.dumps({**cfg.as_dict(), "seed": 1, "tiles": tiles, "specials": 0.0})}
    args = ["--hierarchical"] if simulator == "verilator" else []
    res = run_cocotb(
        [verilog],
        "mxu",
        "verif.tb.mxu_tb",
        simulator=simulator,
        env=env,
        build_dir=build_dir,
        build_args=args,
        testcase="tiles_back_to_back",
    )
    cycles = mxu_schedule(n, n, 2, tiles).total_cycles
    rec = {
        "size": n,
        "simulator": simulator,
        "build_s": round(res.build_s, 1),
        "cycles": cycles,
        "test_s": round(res.test_s, 2),
        "cycles_per_s": round(cycles / res.test_s),
        "passed": res.passed,
        "failed": res.failed,
    }
    print(json.dumps(rec), flush=True)
    return rec


def bench_lint(n: int):
    """Per-module ``verilator --lint-only`` of the generated n x n bf16 MXU (sim.lint)."""
    from hw.generate import mxu_verilog
    from hw.mxu import MXUConfig
    from sim.lint import lint_mxu
    from sim.runner import build_root, generate_verilog

    cfg = MXUConfig(n, n, "bf16", "ftz", 2)
    verilog = generate_verilog(lambda: mxu_verilog(cfg, "mxu"), name="mxu", key=cfg)
    work = build_root() / "bench" / f"lint-{n}"
    work.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(verilog, work / "mxu.v")
    res = lint_mxu(work / "mxu.v")
    rec = {"size": n, "clean": all(r.ok for r in res), "seconds": {r.top: round(r.seconds, 1) for r in res}}
    print(json.dumps(rec), flush=True)
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,16,32,64,128")
    ap.add_argument("--skip-sim", action="store_true")
    ap.add_argument("--lint-sizes", default="16,128")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "mxu_scale.json")
    args = ap.parse_args(argv)
    from sim import toolchain

    result = {
        "versions": toolchain.tool_versions(),
        "generation": bench_generation([int(s) for s in args.sizes.split(",")]),
    }
    result["lint"] = [bench_lint(int(n)) for n in args.lint_sizes.split(",") if n]
    if not args.skip_sim:
        result["verilator_build"] = [bench_sim(n, "verilator", [4]) for n in (8, 16)]
        tiles = [200, 200, 200, 200]
        result["simulation"] = [bench_sim(16, s, tiles) for s in ("verilator", "icarus")]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
