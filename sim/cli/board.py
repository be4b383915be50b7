"""``mxu board``: the ECP5 board top on a real board (``matmul --port``) and its bitstream (``build``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .errors import UsageError
from .files import (
    check_build_dir,
    check_out_dir,
    check_out_file,
    gemm_shape,
    initial_c,
    load_npy,
    operand,
    progress_enabled,
)
from .options import FMTS, SUBNORMALS, float_range_arg, npy_path_arg, out_dir_arg, seed_arg, stages_arg
from .report import finish_gemm

__all__ = ["add_parser", "run"]


def _baud(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of bit/s, not {text!r}") from None
    if not 300 <= value <= 12_000_000:
        raise argparse.ArgumentTypeError(f"must be 300..12000000 bit/s; got {value}")
    return value


_timeout = float_range_arg(0, 86400, "a number of seconds")


def add_parser(sub) -> None:
    """Add the ``board`` subcommand (``board matmul``, ``board build``) to the ``mxu`` parser."""
    from sim.board import BOARD_TARGETS

    b = sub.add_parser("board", help="the ECP5 board top: run a GEMM on a board over its UART, or build the "
                                     "bitstream",
                       description="The board top (hw.board.BoardTop): the GEMM engine, the HBM-style controller "
                                   "with block RAM behind every pseudo-channel, and a UART bridge (protocol in "
                                   "hw/board/bridge.py).")
    bsub = b.add_subparsers(dest="board_command", metavar="SUBCOMMAND", parser_class=type(b))
    bsub.required = True
    m = bsub.add_parser(
        "matmul", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="run C = C0 + A @ B on a board over its serial port and check it bit for bit",
        description="""\
Load A, B (and C0) into the board's memory over the serial port, program the engine's registers,
start it, poll STATUS until DONE, read D back, compare every result bit for bit with the golden
model (verif.golden.matmul) for the format the bitstream was built with (read from the engine's
CONFIG register), write C and print one JSON object on stdout.

Inputs follow `mxu matmul` (float16/float32 rounded RNE into the board's format, float64 once, --bits for
raw patterns, int8 arrays for int8; --c float32 / int32). Output C.npy as `mxu matmul` writes it.

JSON fields: m, k, n, rows, cols, stages, fmt, subnormals, out_fmt (int32 for int8), port, baud, memory_bytes,
memory_bytes_used, cycles (the engine's CYCLES register), predicted_cycles, ideal_cycles,
scalesim_cycles, utilization, status, engine_error, bitexact, mismatches, clobbered_bytes
(bytes of D's rows past column N the engine changed: 0), bytes_sent, bytes_received, link_s (wall
time of the serial traffic), wall_s, output.

Exit status: 0 bit-exact; 1 a mismatch (C.npy holds the board's results), an engine error, a byte
written outside the result, or a board that does not answer as the protocol says; 2 bad input (one
line on stderr, nothing written):
a missing file, a wrong dtype, K that differs, a port that cannot be opened, a GEMM whose matrices
do not fit the board's memory or whose K exceeds its MAX_K.""")
    m.add_argument("a", type=npy_path_arg, metavar="A.npy", help="left operand, M x K")
    m.add_argument("b", type=npy_path_arg, metavar="B.npy", help="right operand, K x N")
    m.add_argument("-o", "--out", required=True, type=npy_path_arg, metavar="C.npy", help="where to write the result")
    m.add_argument("--port", required=True,
                   help="serial port of the board (e.g. /dev/ttyUSB0; any pyserial URL such as socket://host:port)")
    m.add_argument("--baud", type=_baud, default=115_200, help="bit/s; must match the bitstream (default 115200)")
    m.add_argument("--c", type=npy_path_arg, default=None, metavar="C0.npy", help="initial accumulator, M x N")
    m.add_argument("--out-fmt", choices=("fp32", "bf16"), default="fp32",
                   help="result format: fp32 (default; int32 for int8) or bf16 (fp32 rounded once, RNE)")
    m.add_argument("--bits", action="store_true", help="A and B hold raw bit patterns")
    m.add_argument("--timeout", type=_timeout, default=10.0, metavar="S",
                   help="seconds to wait for any answer of the board, and for DONE after START (default 10)")

    bl = bsub.add_parser("build", help="build the board top's bitstream for a ULX3S (Yosys, nextpnr-ecp5, ecppack)",
                         description="Generate the board top, synthesize it with Yosys, place and route it with "
                                     "nextpnr-ecp5 on the ULX3S pins (constraints/ulx3s_board.lpf), the design clock "
                                     "made from the 25 MHz oscillator by the ECP5 PLL (--clk-mhz), and pack board.bit "
                                     "with yowasp-ecppack. Prints the utilization and the achieved Fmax against the "
                                     "design clock, and writes board.json. Exit status 2 for bad "
                                     "input or a design that does not fit, 1 when a tool fails.")
    bl.add_argument("--board", choices=list(BOARD_TARGETS), default="ulx3s-85f", help="board (default ulx3s-85f)")
    bl.add_argument("--rows", type=int, choices=(1, 2, 4, 8), default=None, help="MXU rows (default 2)")
    bl.add_argument("--cols", type=int, choices=(1, 2, 4, 8), default=None, help="MXU columns (default 2)")
    bl.add_argument("--fmt", choices=FMTS, default=None, help="input format (default bf16)")
    bl.add_argument("--subnormals", choices=SUBNORMALS, default=None, help="ftz (default) or ieee")
    bl.add_argument("--stages", type=stages_arg, default=None,
                    help="PE stages 1..9 (default 9: the PE is then not the board's critical path)")
    bl.add_argument("--memory-kib", type=int, default=64, choices=(32, 64, 128, 256),
                    help="emulated memory in KiB, all in block RAM (default 64)")
    bl.add_argument("--pseudo-channels", type=int, choices=(1, 2), default=2,
                    help="HBM pseudo-channels (controllers + block-RAM memories) of the board top (default 2)")
    bl.add_argument("--baud", type=_baud, default=115_200, help="UART bit/s (default 115200)")
    bl.add_argument("--clk-mhz", type=float, default=50.0, metavar="MHZ",
                    help="design clock made by the ECP5 PLL from the 25 MHz oscillator (default 50: the "
                         "default build places above it, with margin, on the 85F; 25 uses the pin directly)")
    bl.add_argument("--seed", type=seed_arg, default=1, help="nextpnr placement seed (default 1)")
    bl.add_argument("--json", action="store_true", help="print the report as JSON")
    bl.add_argument("-o", "--out", required=True, type=out_dir_arg, help="output folder (board.bit, board.json, logs)")


def run(args) -> int:
    """Run ``mxu board matmul`` or ``mxu board build``; returns the exit status."""
    return {"matmul": _cmd_matmul, "build": _cmd_build}[args.board_command](args)


def _cmd_matmul(args) -> int:
    import serial

    from verif.board_host import BoardError, BoardLink, check_engine, run_gemm
    from verif.cycles import gemm_cycles, ideal_cycles, scalesim_ws_cycles
    from verif.gemm_host import engine_error
    from verif.golden import compare_bits, expected_bits

    t0 = time.perf_counter()
    check_out_file(args.out, suffix=".npy")
    gemm_shape(args.a, args.b, args.c)   # shapes from the headers, before the board is asked anything
    raw_a, raw_b = load_npy(args.a, "A"), load_npy(args.b, "B")
    raw_c = load_npy(args.c, "--c") if args.c is not None else None
    try:
        port = serial.serial_for_url(args.port, baudrate=args.baud, timeout=args.timeout)
    except (serial.SerialException, ValueError) as e:
        raise UsageError(f"--port {args.port}: cannot open: {str(e).splitlines()[0] if str(e) else e}") from None
    with port:
        link = BoardLink(port)
        try:
            info = link.info()
            eng = check_engine(link)
        except BoardError as e:
            raise RuntimeError(str(e)) from None
        fmt, subnormals = eng["fmt"], eng["subnormals"]
        if args.out_fmt == "bf16" and fmt == "int8":
            raise UsageError("--out-fmt bf16 does not apply to the board's int8 format (results are int32)")
        a = operand(raw_a, "A", args.a, fmt, args.bits)
        b = operand(raw_b, "B", args.b, fmt, args.bits)
        if a.shape[1] != b.shape[0]:
            raise UsageError(f"A is {a.shape[0]}x{a.shape[1]} but B is {b.shape[0]}x{b.shape[1]}: "
                             "inner dimensions (K) differ")
        m, k = a.shape
        n = b.shape[1]
        if k > eng["max_k"]:
            raise UsageError(f"K = {k} is larger than the board engine's MAX_K = {eng['max_k']}")
        c = initial_c(raw_c, args.c, fmt, m, n) if raw_c is not None else None
        t_link = time.perf_counter()
        try:
            res = run_gemm(link, a, b, c, args.out_fmt, timeout_s=args.timeout, info=info)
        except ValueError as e:
            raise UsageError(str(e)) from None
        except BoardError as e:
            raise RuntimeError(str(e)) from None
        link_s = time.perf_counter() - t_link
    rows, cols, stages = eng["rows"], eng["cols"], eng["stages"]
    ideal = ideal_cycles(m, k, n, rows, cols)
    report = {
        "m": m, "k": k, "n": n, "rows": rows, "cols": cols, "stages": stages, "fmt": fmt, "subnormals": subnormals,
        "out_fmt": args.out_fmt, "port": args.port, "baud": args.baud, "memory_bytes": info.memory_bytes,
        "memory_bytes_used": res["memory_bytes_used"], "cycles": res["cycles"],
        "predicted_cycles": gemm_cycles(m, k, n, rows, cols, stages), "ideal_cycles": ideal,
        "scalesim_cycles": scalesim_ws_cycles(m, k, n, rows, cols),
        "utilization": round(ideal / res["cycles"], 4) if res["cycles"] else None,
        "status": res["status"], "engine_error": engine_error(res["status"]), "bitexact": None, "mismatches": None,
        "bytes_sent": res["bytes_sent"], "bytes_received": res["bytes_received"], "link_s": round(link_s, 2),
        "wall_s": None, "output": None,
    }
    report["clobbered_bytes"] = res["clobbered_bytes"]
    if res["clobbered_bytes"]:
        report["wall_s"] = round(time.perf_counter() - t0, 2)
        print(json.dumps(report))
        print(f"mxu: failed: the engine wrote {res['clobbered_bytes']} bytes of D's rows outside the "
              f"result (past column N); nothing written", file=sys.stderr)
        return 1
    if report["engine_error"]:
        report["wall_s"] = round(time.perf_counter() - t0, 2)
        print(json.dumps(report))
        print(f"mxu: failed: the engine reported {report['engine_error']}; nothing written", file=sys.stderr)
        return 1
    rtl = res["bits"]
    golden = expected_bits(a, b, c, fmt=fmt, subnormals=subnormals, out=args.out_fmt)
    bad = compare_bits(rtl, golden)
    return finish_gemm(args.out, args.out_fmt, fmt, report, rtl, golden, bad, t0, source="board")


def _cmd_build(args) -> int:
    from hw.board import BoardConfig, board_engine_config
    from hw.mxu import MXUConfig
    from sim import synth
    from sim.board import build_bitstream

    try:
        # None = not given (a given 0 must reach MXUConfig's check, not turn into the default)
        mxu = MXUConfig(rows=args.rows or 2, cols=args.cols or 2, fmt=args.fmt or "bf16",
                        subnormals=args.subnormals or "ftz", stages=9 if args.stages is None else args.stages)
        if not 1 <= args.clk_mhz <= 200:
            raise ValueError(f"--clk-mhz must be 1..200 MHz; got {args.clk_mhz:g}")
        config = BoardConfig(engine=board_engine_config(mxu, memory_kib=args.memory_kib,
                                                        pseudo_channels=args.pseudo_channels), baud=args.baud,
                             clk_hz=round(args.clk_mhz * 1e6))
    except ValueError as e:
        raise UsageError(str(e)) from None
    check_out_dir(Path(args.out), ["board.bit", "board.json"])  # before minutes of synthesis
    check_build_dir()
    say = (lambda s: print(f"mxu board build: {s}", file=sys.stderr)) if progress_enabled() else None
    try:
        report = build_bitstream(config, args.board, args.out, seed=args.seed, progress=say)
    except (synth.DoesNotFit, ValueError) as e:
        raise UsageError(str(e)) from None
    except synth.SynthError as e:
        raise RuntimeError(str(e)) from None
    if args.json:
        print(json.dumps(report))
        return 0
    u = report["utilization"]
    lines = [f"mxu board build: {report['board']} ({report['part']}), engine {mxu.rows}x{mxu.cols} {mxu.fmt} "
             f"{mxu.subnormals} stages={mxu.stages}, {report['memory_bytes'] // 1024} KiB block-RAM memory, "
             f"UART {report['baud']} baud, design clock {report['clk_mhz']:g} MHz"
             + (" (PLL from 25 MHz)" if report["pll"] else ""),
             f"  {'resource':<24} {'used':>8} {'available':>10} {'%':>7}"]
    for key, row in u.items():
        lines.append(f"  {row.get('label', key):<24} {row['used']:>8} {row['available'] or '':>10} "
                     f"{row['percent'] if row.get('percent') is not None else '':>7}")
    for f in report["fmax"]:
        lines.append(f"  Fmax {f.get('clock', 'clk')}: {f.get('achieved_mhz')} MHz achieved, "
                     f"{f.get('requested_mhz')} MHz requested ({'met' if f.get('met') else 'MISSED'})")
    lines.append(f"  bitstream {Path(args.out) / 'board.bit'} ({report['bitstream_bytes']:,} bytes); "
                 f"wall {report['wall_s']['total_s']} s")
    print("\n".join(lines))
    return 0
