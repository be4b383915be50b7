"""``mxu demo``: the main job (a digits MLP whose every GEMM runs on the engine RTL) and, with
``--mac``, random MACs through one generated MAC."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .errors import UsageError
from .files import check_build_dir, check_out_dir, progress_enabled, write_outputs
from .options import (
    FMTS,
    SIMULATORS,
    SUBNORMALS,
    add_size_limit_option,
    check_engine_stages,
    check_size,
    engine_size_arg,
    mac_config,
    out_dir_arg,
    seed_arg,
    stages_arg,
    vectors_arg,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``demo`` subcommand to the ``mxu`` parser's subparsers ``sub``."""
    d = sub.add_parser(
        "demo", help="the main job: a handwritten-digit MLP whose every GEMM runs on the GEMM engine RTL",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Train a small MLP (64 -> 32 ReLU -> 10, float32, scikit-learn) on the 8x8 handwritten digits
bundled with scikit-learn (1,797 images; 80/20 split, seed --seed), then classify the 360 held-out
images with every matrix product computed by the GEMM engine RTL in a simulator (bf16 inputs, fp32
accumulation, the bias as the initial accumulator, ReLU on the host), the same with the bit-exact
golden model (must agree bit for bit) and with float32 numpy (reference accuracy). Prints a
summary and writes <out>/summary.json and <out>/digits.png (16 held-out digits with the RTL's
predictions). Exit status 1 when the RTL is not bit-exact with the golden model.

mxu demo --mac runs the earlier demo instead: random MACs from five distributions through one
generated MAC against the golden model (options --fmt incl. int8, --subnormals, --stages 0..9,
--vectors, --sim, --seed, --json).""")
    d.add_argument("--mac", action="store_true",
                   help="run the MAC demo (random MACs through one generated MAC) instead of the MLP")
    d.add_argument("--fmt", choices=FMTS, default=None,
                   help="input format (default: bf16; int8 with --mac only)")
    d.add_argument("--subnormals", choices=SUBNORMALS, default=None,
                   help="ftz: flush subnormals to zero (default); ieee: gradual underflow")
    d.add_argument("--stages", type=stages_arg, default=None,
                   help="pipeline stages of the MAC in cycles: 1..9 for the MLP's MXU, 0..9 with --mac "
                        "(default 2)")
    d.add_argument("--rows", type=engine_size_arg, default=None, help="MXU PE rows R, a power of two (default 8)")
    d.add_argument("--cols", type=engine_size_arg, default=None, help="MXU PE columns C, a power of two (default 8)")
    d.add_argument("--vectors", type=vectors_arg, default=None,
                   help="--mac only: random MACs to run (default: 5000, split over the distributions)")
    d.add_argument("--sim", choices=SIMULATORS, default="verilator", help="simulator (default: verilator)")
    d.add_argument("--memory", choices=("hdl", "python"), default="hdl",
                   help="the MLP's HBM device model and JEDEC checker: hdl (default), in the netlist; python, "
                        "the reference model called every clock cycle (same bits and cycles, slower)")
    d.add_argument("--seed", type=seed_arg, default=None,
                   help="random seed, 0..2**31-1: the MLP's split and training (default 0, the published "
                        "numbers) or, with --mac, the vectors (default: random, printed)")
    d.add_argument("-o", "--out", type=out_dir_arg, default=None,
                   help="report folder for summary.json and digits.png (default: build/demo in the "
                        "repository, or $MXU_BUILD_DIR/demo)")
    d.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    add_size_limit_option(d, "build and simulate an engine larger than 16x16")


def run(args) -> int:
    """Run ``mxu demo`` (or ``mxu demo --mac``); returns the exit status."""
    if args.mac:
        for option, value in (("--rows", args.rows), ("--cols", args.cols), ("--out", args.out)):
            if value is not None:
                raise UsageError(f"{option} does not apply to the MAC demo (--mac)")
        args.fmt = args.fmt or "bf16"
        args.subnormals = args.subnormals or "ftz"
        args.stages = 2 if args.stages is None else args.stages
        args.vectors = args.vectors or 5000
        return _run_mac(args)
    if args.vectors is not None:
        raise UsageError("--vectors applies to the MAC demo only (mxu demo --mac --vectors N)")
    if args.fmt == "int8":
        raise UsageError("the MLP demo runs float formats (bf16, fp8_e4m3fn, fp8_e5m2); int8 needs --mac")
    return _run_mlp(args)


def _run_mlp(args) -> int:
    from sim import demo_mlp, runner, toolchain

    stages = 2 if args.stages is None else args.stages
    check_engine_stages(stages)
    try:
        toolchain.check_simulator(args.sim)
    except toolchain.SimulatorUnavailable as e:
        raise UsageError(str(e)) from None
    out = args.out if args.out is not None else runner.build_root() / "demo"
    check_out_dir(out, demo_mlp.REPORT_FILES)  # before training, the build and the simulation
    check_build_dir()
    check_size(args.rows or 8, args.cols or 8, args, simulated=True)
    cfg = demo_mlp.DemoConfig(rows=args.rows or 8, cols=args.cols or 8, fmt=args.fmt or "bf16",
                              subnormals=args.subnormals or "ftz", stages=stages, sim=args.sim,
                              memory=args.memory, seed=0 if args.seed is None else args.seed)
    work = Path(tempfile.mkdtemp(prefix="mxu-demo-"))
    try:
        try:
            summary = demo_mlp.run(cfg, progress=progress_enabled(), plot=work / "digits.png")
        except ValueError as e:  # the engine refused a parameter
            raise UsageError(str(e).splitlines()[0]) from None
        summary["report"] = {name: str(out / name) for name in demo_mlp.REPORT_FILES}
        write_outputs(out, {"summary.json": json.dumps(summary, indent=2) + "\n", "digits.png": work / "digits.png"})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(summary))
    else:
        print(demo_mlp.format_summary(summary))
    return 0 if summary["bitexact"] else 1


def _run_mac(args) -> int:
    import random

    from tqdm import tqdm

    from hw.arith import MAC
    from sim import runner, toolchain

    cfg = mac_config(args)
    try:
        toolchain.check_simulator(args.sim)
    except toolchain.SimulatorUnavailable as e:
        raise UsageError(str(e)) from None
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    t0 = time.perf_counter()
    steps = tqdm(total=3, desc="mxu demo", unit="step", file=sys.stderr, leave=False,
                 disable=not progress_enabled())
    steps.set_postfix_str("generating Verilog")
    verilog = runner.generate_verilog(lambda: MAC(cfg), name="mac", key=cfg)
    steps.update()
    steps.set_postfix_str(f"building and running in {args.sim}")
    report = Path(tempfile.mkstemp(prefix="mxu-demo-", suffix=".jsonl")[1])
    try:
        env = {"MXU_TB_CONFIG": json.dumps({"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages,
                                            "seed": seed, "random_total": args.vectors, "gaps": True,
                                            "corners": False}),
               "MXU_TB_REPORT": str(report)}
        result = runner.run_cocotb([verilog], "mac", "verif.tb.mac_tb", simulator=args.sim, env=env)
        steps.update(2)
        records = [json.loads(line) for line in report.read_text().splitlines() if line.strip()]
    finally:
        report.unlink(missing_ok=True)
        steps.close()
    vectors = sum(r["vectors"] for r in records)
    mismatches = sum(r["mismatches"] for r in records)
    sim_s = sum(r["seconds"] for r in records)
    summary = {
        "config": {"fmt": cfg.fmt, "subnormals": cfg.subnormals, "stages": cfg.stages,
                   "latency_cycles": cfg.latency_cycles},
        "simulator": args.sim,
        "simulator_version": toolchain.tool_versions().get("iverilog" if args.sim == "icarus" else args.sim,
                                                           "").split(";")[0],
        "seed": seed, "vectors": vectors, "mismatches": mismatches,
        "distributions": {r["test"]: r["vectors"] for r in records},
        "tests_run": len(records), "tests_failed": result.failed,
        "replay": _replay_command(args, seed),
        "build_s": round(result.build_s, 2), "cached_build": result.cached_build,
        "macs_per_s": round(vectors / sim_s) if sim_s else None,
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    ok = result.failed == 0 and mismatches == 0 and vectors > 0
    if args.json:
        print(json.dumps(summary))
    else:
        _print_summary(summary, ok, result)
    return 0 if ok else 1


def _replay_command(args, seed: int) -> str:
    return (f"mxu demo --mac --fmt {args.fmt} --subnormals {args.subnormals} --stages {args.stages} "
            f"--vectors {args.vectors} --sim {args.sim} --seed {seed}")


def _print_summary(s, ok, result) -> None:
    c = s["config"]
    if c["fmt"] == "int8":
        numerics = "fmt=int8  acc=int32 two's-complement wrap"
    else:
        numerics = f"fmt={c['fmt']}  subnormals={c['subnormals']}  acc=fp32, RNE, one rounding per MAC"
    stress = "random input gaps and back-pressure" if c["stages"] else "combinational: no pipeline to stall"
    lines = [
        "mxu demo --mac: bit-exact check of the generated MAC against the golden model",
        f"  configuration   {numerics}",
        f"                  stages={c['stages']} (latency {c['latency_cycles']} cycles)",
        f"  simulator       {s['simulator']} {s['simulator_version']}  "
        f"(build {s['build_s']} s{', cached' if s['cached_build'] else ''})",
        f"  seed            {s['seed']}  (replay: {s['replay']})",
        f"  vectors run     {s['vectors']} over {len(s['distributions'])} "
        f"distribution{'s' if len(s['distributions']) != 1 else ''}, {stress}",
    ]
    for name, n in s["distributions"].items():
        lines.append(f"                    {name:<24} {n}")
    lines += [
        f"  mismatches      {s['mismatches']}",
        f"  throughput      {s['macs_per_s']} MACs/s simulated (cocotb + {s['simulator']})",
        f"  wall time       {s['wall_s']} s",
        f"  result          {'PASS: bit-exact' if ok else 'FAIL'}",
    ]
    if not ok and result.log:
        lines.append(f"  log             {result.log}")
    print("\n".join(lines))
