"""Where the memory system's time goes in one GEMM: a per-cycle trace of the engine + HBM top.

Runs one bf16 GEMM (the benchmark's random data: ``gemm_bench._jobs``, seed 2024) through
``sim.gemm.run_gemms(..., trace=...)`` in Verilator, checks it bit for bit, and reduces the trace to:

* per pseudo-channel: ACT, PRE, REF, RD and WR commands (``hw.hbm.controller.RowCmd`` / ``ColCmd``);
* the read span: first RD command to the last A read beat (cycles), RD bursts per cycle over that span
  (all pseudo-channels together; each pseudo-channel's peak is one burst per ``burst_cycles`` = 2),
  A read beats per cycle over it, and the cycles in it with the A port's ARVALID high.

Writes ``bench/results/gemm_trace_<R>x<C>_<P>pc_<M>x<K>x<N>.json`` and prints it.
Usage: ``.venv/bin/python -m bench.gemm_trace [--array 16x16] [--shape 256x256x8] [--pseudo-channels 4]``
(the 16x16 Verilator build takes 16-25 min the first time; cached afterwards).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench import git_commit
from bench.gemm_bench import SEED, _jobs
from hw.engine import EngineConfig
from hw.hbm.controller import ColCmd, RowCmd
from sim.gemm import run_gemms
from sim.runner import build_root
from verif.gemm_host import engine_error
from verif.golden import compare_bits, expected_bits, result_bits

ROOT = Path(__file__).resolve().parents[1]

# columns of the trace's ``samples`` (sim.gemm.run_gemms docstring)
S_CYCLE, S_A_ARVALID, S_A_RVALID = 0, 7, 8


def _dims(text: str, n: int, what: str) -> tuple[int, ...]:
    try:
        v = tuple(int(x) for x in text.lower().split("x"))
        assert len(v) == n and min(v) >= 1
        return v
    except (ValueError, AssertionError):
        raise SystemExit(f"gemm_trace: {what} must look like {'x'.join(['16'] * n)}, not {text!r}") from None


def reduce_trace(cmds: np.ndarray, samples: np.ndarray, pseudo_channels: int) -> dict:
    """Counts of a ``run_gemms`` trace (``cmds``: cycle, pseudo-channel, row command, column command;
    ``samples``: one row per cycle). Raises ValueError when the trace has no RD or no A beat."""
    per_pc = []
    for pc in range(pseudo_channels):
        x = cmds[cmds[:, 1] == pc]
        per_pc.append(
            {
                "act": int((x[:, 2] == RowCmd.ACT.value).sum()),
                "pre": int(((x[:, 2] == RowCmd.PRE.value) | (x[:, 2] == RowCmd.PREA.value)).sum()),
                "ref": int((x[:, 2] == RowCmd.REF.value).sum()),
                "rd": int((x[:, 3] == ColCmd.RD.value).sum()),
                "wr": int((x[:, 3] == ColCmd.WR.value).sum()),
            }
        )
    rd_cycles = cmds[cmds[:, 3] == ColCmd.RD.value, 0]
    a_beats = samples[samples[:, S_A_RVALID] != 0, S_CYCLE]
    if not len(rd_cycles) or not len(a_beats):
        raise ValueError("the trace holds no RD command or no A read beat")
    first, last = int(rd_cycles.min()), int(a_beats.max())
    span = max(1, last - first)
    in_span = (samples[:, S_CYCLE] >= first) & (samples[:, S_CYCLE] <= last)
    return {
        "per_pseudo_channel": per_pc,
        "first_rd_cycle": first,
        "last_a_beat_cycle": last,
        "rd_bursts_in_span": int(((rd_cycles >= first) & (rd_cycles <= last)).sum()),
        "rd_bursts_per_cycle": round(float(((rd_cycles >= first) & (rd_cycles <= last)).sum()) / span, 4),
        "a_beats_per_cycle": round(len(a_beats) / span, 4),
        "a_arvalid_cycles_in_span": int(samples[in_span, S_A_ARVALID].sum()),
        "span_cycles": span,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--array", default="16x16", help="R x C (default 16x16)")
    p.add_argument("--shape", default="256x256x8", help="M x K x N (default 256x256x8)")
    p.add_argument("--pseudo-channels", type=int, choices=(1, 2, 4), default=4)
    p.add_argument("-o", "--out", type=Path, default=None, help="JSON file (default bench/results/gemm_trace_...)")
    args = p.parse_args(argv)
    rows, cols = _dims(args.array, 2, "--array")
    shape = _dims(args.shape, 3, "--shape")
    params = EngineConfig.from_options(rows=rows, cols=cols, pseudo_channels=args.pseudo_channels)
    job = _jobs([shape], np.random.default_rng(SEED))[0]
    commit = git_commit()
    work = build_root() / "runs"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        trace = Path(tmp) / "trace.npz"
        results, _info = run_gemms([job], params, progress=sys.stderr.isatty(), trace=str(trace))
        t = np.load(trace)
        counts = reduce_trace(t["cmds"], t["samples"], args.pseudo_channels)
    res = results[0]
    error = engine_error(res.status)
    bad = (
        compare_bits(result_bits(res.bits, "fp32"), expected_bits(job.a, job.b, job.c, fmt="bf16", subnormals="ftz"))
        if error is None
        else None
    )
    m, k, n = shape
    report = {
        "benchmark": "bench/gemm_trace.py",
        "git_commit": commit,
        "seed": SEED,
        "array": f"{rows}x{cols}",
        "pseudo_channels": args.pseudo_channels,
        "m": m,
        "k": k,
        "n": n,
        "cycles": int(res.cycles),
        "perf": res.perf,
        "engine_error": error,
        "bitexact": bad is not None and not bad,
        **counts,
    }
    out = args.out or ROOT / "bench" / "results" / f"gemm_trace_{rows}x{cols}_{args.pseudo_channels}pc_{m}x{k}x{n}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0 if report["bitexact"] else 1


if __name__ == "__main__":
    sys.exit(main())
