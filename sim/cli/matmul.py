"""``mxu matmul``: one GEMM through the GEMM engine RTL in a simulator, checked bit for bit."""

from __future__ import annotations

import argparse
import json
import sys
import time

from .errors import UsageError
from .files import check_build_dir, check_out_file, gemm_shape, initial_c, load_npy, operand, progress_enabled
from .options import (
    FMTS,
    PSEUDO_CHANNELS,
    SIMULATORS,
    SUBNORMALS,
    add_size_limit_option,
    check_size,
    engine_params,
    engine_size_arg,
    npy_path_arg,
    preset_names,
    stages_arg,
    waves_path_arg,
)
from .report import finish_gemm, round_or_none

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``matmul`` subcommand to the ``mxu`` parser's subparsers ``sub``."""
    m = sub.add_parser(
        "matmul", help="run one GEMM C = A @ B (+ C0) through the GEMM engine RTL and check it bit for bit",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Run C = C0 + A @ B through the generated GEMM engine (MXU + HBM controller + device model) in a
simulator, compare every result bit for bit with the golden model (one sequential fp32 chain over
k per element, verif.golden.matmul), write C and print one JSON object on stdout.

Inputs are 2-D .npy files (numpy.save): A is M x K, B is K x N.
  bf16 / fp8: float16 and float32 values are rounded to nearest even into the format (float16
              widens to float32 exactly first), float64 values are rounded once; with --bits, A and B
              hold raw bit patterns instead (uint16 for bf16,
              uint8 for fp8). uint16/uint8 arrays without --bits are refused.
  int8:       int8 arrays (any integer array with values in -128..127); with --bits, uint8
              two's-complement bytes.
  --c C0:     M x N initial accumulator, float32 (float64/float16 are rounded RNE to float32);
              for int8 any integer array with values in the int32 range.

Output C.npy: float32 for --out-fmt fp32 (NaN is the canonical 0x7FC00000), int32 for int8, and
for --out-fmt bf16 the bf16 results widened exactly to float32 (C.view(np.uint32) >> 16 gives the
bf16 bit patterns). The file is written atomically (all or nothing).

JSON fields: m, k, n, rows, cols, stages, fmt, subnormals, out_fmt (int32 for int8), sim, memory,
pseudo_channels, cycles (engine cycles, start to done), predicted_cycles (the array alone with
always-ready streams, verif.cycles.gemm_cycles), engine_model_cycles (the array alone on the
engine's own blocking of M into m-blocks, verif.cycles.engine_array_cycles), ideal_cycles
(M*K*N/(R*C)), scalesim_cycles (SCALE-Sim v2 weight-stationary), utilization (ideal/cycles), perf
(the engine's performance counters PERF_FEED .. PERF_DRAIN), status (the engine's STATUS register:
2 = DONE with no error),
engine_error (null, or the error it reports), bitexact, mismatches, build_s, sim_cycles_per_s,
wall_s, output.

Exit status: 0 when every result is bit-exact; 1 when any result differs from the golden model
(C.npy is still written, holding the RTL's results, and the first mismatches with both bit
patterns go to stderr), when the engine reports an error status (nothing written) or when the
simulator fails; 2 for bad input (one line on stderr, nothing written).""")
    m.add_argument("a", type=npy_path_arg, metavar="A.npy", help="left operand, M x K")
    m.add_argument("b", type=npy_path_arg, metavar="B.npy", help="right operand, K x N")
    m.add_argument("-o", "--out", required=True, type=npy_path_arg, metavar="C.npy",
                   help="where to write the M x N result (.npy; written atomically, missing parent folders created)")
    m.add_argument("--c", type=npy_path_arg, default=None, metavar="C0.npy",
                   help="initial accumulator, M x N (float32; integers for int8); default +0")
    m.add_argument("--rows", type=engine_size_arg, default=None,
                   help="MXU PE rows R, a power of two (default 8)")
    m.add_argument("--cols", type=engine_size_arg, default=None,
                   help="MXU PE columns C, a power of two (default 8)")
    m.add_argument("--preset", default=None, metavar="NAME",
                   help="named MXU configuration (rows, cols, fmt, subnormals, stages; options given "
                        "explicitly win): " + ", ".join(preset_names()))
    m.add_argument("--fmt", choices=FMTS, default=None, help="input format (default: bf16)")
    m.add_argument("--subnormals", choices=SUBNORMALS, default=None,
                   help="ftz: flush subnormals to zero (default); ieee: gradual underflow")
    m.add_argument("--stages", type=stages_arg, default=None,
                   help="pipeline stages of each PE's MAC, 1..9 cycles (default 2)")
    m.add_argument("--out-fmt", choices=("fp32", "bf16"), default="fp32",
                   help="result format: fp32 (default; int32 for int8) or bf16 (fp32 rounded once, RNE)")
    m.add_argument("--bits", action="store_true",
                   help="A and B hold raw bit patterns (uint16 for bf16, uint8 for fp8 and int8)")
    m.add_argument("--sim", choices=SIMULATORS, default="verilator", help="simulator (default: verilator)")
    m.add_argument("--waves", type=waves_path_arg, default=None, metavar="OUT.fst",
                   help="record a waveform there (.fst or .vcd)")
    m.add_argument("--memory", choices=("hdl", "python"), default="hdl",
                   help="HBM device model and JEDEC checker: hdl (default), in the netlist, Python only at "
                        "the transaction level; python, the reference model called every clock cycle "
                        "(same bits and cycles, several times slower)")
    m.add_argument("--pseudo-channels", type=int, choices=PSEUDO_CHANNELS, default=None, metavar="P",
                   help="HBM pseudo-channels of the engine's memory system: 1, 2 or 4 (default 2)")
    add_size_limit_option(m, "build and simulate an engine larger than 16x16")


def run(args) -> int:
    """Run ``mxu matmul``; returns the exit status (0 bit-exact, 1 mismatch or engine error)."""

    from sim import toolchain

    t0 = time.perf_counter()
    params = engine_params(args)
    fmt, subnormals = params["fmt"], params["subnormals"]
    if args.out_fmt == "bf16" and fmt == "int8":
        raise UsageError("--out-fmt bf16 does not apply to --fmt int8 (results are int32)")
    if args.waves is not None:
        check_out_file(args.waves, "--waves")
    check_out_file(args.out, suffix=".npy")
    m, k, n = gemm_shape(args.a, args.b, args.c)   # from the headers: nothing big is read yet

    from hw.engine import EngineConfig
    from sim.gemm import GemmJob, run_gemms
    from verif.cycles import engine_array_cycles, gemm_cycles, ideal_cycles, scalesim_ws_cycles
    from verif.gemm_host import check_gemm, engine_error
    from verif.golden import compare_bits, expected_bits, result_bits

    try:
        engine = EngineConfig.from_options(**params)
        # the engine's own descriptor checks (MAX_K, 2**20 dimensions, memory size) before any build
        check_gemm(m, k, n, engine, load_c=args.c is not None, out_bf16=args.out_fmt == "bf16")
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    check_size(engine.mxu.rows, engine.mxu.cols, args, simulated=True)
    if args.size_limit:
        from sim.size import check_simulated_cycles
        try:
            check_simulated_cycles(m, k, n, engine.mxu.rows, engine.mxu.cols, engine.mxu.stages)
        except ValueError as e:
            raise UsageError(str(e)) from None
    check_build_dir()
    try:
        toolchain.check_simulator(args.sim)
    except toolchain.SimulatorUnavailable as e:
        raise UsageError(str(e)) from None
    a = operand(load_npy(args.a, "A"), "A", args.a, fmt, args.bits)
    b = operand(load_npy(args.b, "B"), "B", args.b, fmt, args.bits)
    c = initial_c(load_npy(args.c, "--c"), args.c, fmt, m, n) if args.c is not None else None
    job = GemmJob(a, b, c, args.out_fmt)
    try:
        results, info = run_gemms([job], engine, sim=args.sim, waves=str(args.waves) if args.waves else None,
                                  progress=progress_enabled(), memory=args.memory)
    except ValueError as e:
        raise UsageError(str(e).splitlines()[0] if str(e) else "rejected by the GEMM engine") from None
    result = results[0]
    rows, cols, stages = engine.mxu.rows, engine.mxu.cols, engine.mxu.stages
    ideal = ideal_cycles(m, k, n, rows, cols)
    report = {
        "m": m, "k": k, "n": n, "rows": rows, "cols": cols, "stages": stages, "fmt": fmt,
        "subnormals": subnormals, "out_fmt": args.out_fmt, "sim": args.sim, "memory": args.memory,
        "pseudo_channels": engine.hbm.pseudo_channels,
        "cycles": int(result.cycles), "predicted_cycles": gemm_cycles(m, k, n, rows, cols, stages),
        "engine_model_cycles": engine_array_cycles(m, k, n, engine),
        "ideal_cycles": ideal, "scalesim_cycles": scalesim_ws_cycles(m, k, n, rows, cols),
        "utilization": round(ideal / result.cycles, 4) if result.cycles and not engine_error(result.status) else None,
        "perf": dict(result.perf),
        "status": int(result.status), "engine_error": engine_error(result.status),
        "bitexact": None, "mismatches": None,
        "build_s": round_or_none(info.get("build_s")), "sim_cycles_per_s": round_or_none(info.get("cycles_per_s"), 0),
        "wall_s": None, "output": None,
    }
    if report["engine_error"]:
        report["wall_s"] = round(time.perf_counter() - t0, 2)
        print(json.dumps(report))
        print(f"mxu: failed: the engine reported {report['engine_error']}; nothing written", file=sys.stderr)
        return 1
    rtl = result_bits(result.bits, args.out_fmt)
    golden = expected_bits(a, b, c, fmt=fmt, subnormals=subnormals, out=args.out_fmt)
    bad = compare_bits(rtl, golden)
    if rtl.shape != golden.shape:
        report.update(bitexact=False, mismatches=len(bad), wall_s=round(time.perf_counter() - t0, 2))
        print(json.dumps(report))
        print(f"mxu: failed: the engine returned a {rtl.shape} result for a {golden.shape} GEMM; nothing written",
              file=sys.stderr)
        return 1
    return finish_gemm(args.out, args.out_fmt, fmt, report, rtl, golden, bad, t0, source="rtl")
