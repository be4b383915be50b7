"""Simulation speed of the GEMM engine: the HDL memory system against the per-cycle Python model,
side by side in one run on one machine.

For each simulator and memory model, one simulator process runs the GEMMs of ``--shapes`` on the
bf16 engine (``--array``, default 8x8; two pseudo-channels) with the JEDEC checker on, and records
the simulated cycles, the wall time of the simulation (build excluded), cycles per second and
whether every result was bit-exact. The build time of each model is recorded too (``--cold``
removes the cached build first, so it is a cold build).

    python -m bench.sim_speed --sims verilator --cold   # both memory models on a 256^3 GEMM
    python -m bench.sim_speed --sims icarus --shapes 16x32x16 --append
    python -m bench.sim_speed --sims verilator --memories hdl --array 16x16 --shapes 64x64x64 --cold --append
    python -m bench.sim_speed --sims verilator --demo -o bench/results/sim_speed_demo.json

``--demo`` times ``mxu demo --memory M`` warm instead (its second run; the first fills the caches).

Writes ``bench/results/sim_speed.json`` (``-o`` elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from unittest.mock import patch

import numpy as np

from bench import git_commit
from hw.engine import EngineConfig
from sim.gemm import GemmJob, run_gemms
from sim.runner import build_root
from verif.golden import matmul, to_format

ROOT = Path(__file__).resolve().parent.parent


def _jobs(shapes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for m, k, n in shapes:
        a = to_format(rng.standard_normal((m, k)).astype(np.float32), "bf16")
        b = to_format(rng.standard_normal((k, n)).astype(np.float32), "bf16")
        out.append(GemmJob(a, b, None, "fp32"))
    return out


def _cold(sim: str, memory: str) -> None:
    """Remove the cached simulator build of this model (so the next run measures a cold build)."""
    top = "gemm" if memory == "python" else "gemm_sim"
    for d in (build_root() / "cache" / "sim").glob(f"{sim}-{top}-*"):
        shutil.rmtree(d)


def measure(sim: str, memory: str, shapes, seed: int, cold: bool, array: tuple[int, int] = (8, 8)) -> dict:
    cfg = EngineConfig.from_options(rows=array[0], cols=array[1])
    jobs = _jobs(shapes, seed)
    if cold:
        _cold(sim, memory)
    # A cold build compiles everything: the compiler cache (sim.toolchain.ccache_executable) would
    # serve Verilator's run-time library from an earlier build of any configuration.
    with patch.dict(os.environ, {"MXU_CCACHE": "0"} if cold else {}):
        t0 = time.perf_counter()
        results, info = run_gemms(jobs, cfg, sim=sim, memory=memory, progress=False)
        wall = time.perf_counter() - t0
    exact = all(
        np.array_equal(r.bits, matmul(j.a, j.b, None, fmt="bf16", subnormals="ftz").view(np.uint32))
        for j, r in zip(jobs, results)
    )
    return {
        "kind": "gemm",
        "array": f"{array[0]}x{array[1]}",
        "sim": sim,
        "memory": memory,
        "shapes": ["x".join(map(str, s)) for s in shapes],
        "engine_cycles": [r.cycles for r in results],
        "sim_cycles": info["sim_cycles"],
        "sim_wall_s": round(info["sim_wall_s"], 2),
        "cycles_per_s": round(info["cycles_per_s"]),
        "build_s": round(info["build_s"], 1),
        "cached_build": info["cached_build"],
        "wall_s": round(wall, 1),
        "bitexact": exact,
    }


def measure_demo(sim: str, memory: str) -> dict:
    """Wall time of ``mxu demo --memory memory`` warm: the second of two runs (the data split and the
    trained model from the cache, both layers in one simulator run, the golden model and the report)."""
    import tempfile

    walls = []
    for _ in range(2):
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, "-m", "sim.cli", "demo", "--sim", sim, "--memory", memory, "-o", out, "--json"]
            t0 = time.perf_counter()
            res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            walls.append(time.perf_counter() - t0)
            if res.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed:\n{res.stderr[-2000:]}")
            summary = json.loads(res.stdout)
    return {
        "kind": "demo",
        "sim": sim,
        "memory": memory,
        "wall_s": round(walls[1], 1),
        "first_wall_s": round(walls[0], 1),
        "train_s": summary["model"]["train_s"],
        "sim_cycles": summary["sim_cycles"],
        "bitexact": summary["bitexact"],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_speed", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", default="verilator,icarus", help="comma list (default: verilator,icarus)")
    ap.add_argument("--memories", default="hdl,python", help="comma list of hdl, python (default: both)")
    ap.add_argument("--shapes", default="256x256x256", help="comma list of MxKxN (default: 256x256x256)")
    ap.add_argument("--python-shapes", default=None, help="shapes for the per-cycle Python model (default: --shapes)")
    ap.add_argument("--array", default="8x8", help="MXU rows x columns of the engine (default 8x8)")
    ap.add_argument("--cold", action="store_true", help="remove each model's cached build first")
    ap.add_argument("--demo", action="store_true", help="time `mxu demo` warm with each memory model instead")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("-o", "--out", type=Path, default=ROOT / "bench" / "results" / "sim_speed.json")
    ap.add_argument("--append", action="store_true", help="add the records to the file instead of replacing it")
    args = ap.parse_args(argv)

    def shapes(text):
        return [tuple(int(x) for x in s.split("x")) for s in text.split(",")]

    records = []
    for sim in args.sims.split(","):
        for memory in args.memories.split(","):
            sh = shapes(args.python_shapes if memory == "python" and args.python_shapes else args.shapes)
            array = tuple(int(x) for x in args.array.split("x"))
            rec = measure_demo(sim, memory) if args.demo else measure(sim, memory, sh, args.seed, args.cold, array)
            print(json.dumps(rec), flush=True)
            records.append(rec)
    commit = git_commit()
    if args.append and args.out.is_file():
        records = json.loads(args.out.read_text())["records"] + records
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "bench/sim_speed.py",
                "git_commit": commit,
                "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
                "records": records,
            },
            indent=1,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
