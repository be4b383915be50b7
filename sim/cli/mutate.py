"""``mxu mutate``: mutation testing of a block (``sim.mutate``): how many one-point bugs its regression
catches, with each survivor checked for equivalence by a bounded formal check."""

from __future__ import annotations

import argparse
import json
import sys

from .errors import UsageError
from .files import check_build_dir, check_out_dir, progress_enabled
from .options import FMTS, SUBNORMALS, out_dir_arg, positive_arg, seed_arg, stages_arg

__all__ = ["add_parser", "run"]

#: the configuration options and the key each sets
_CONFIG = ("fmt", "subnormals", "stages", "rows", "cols")


def _seconds_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text!r}")
    return value


def add_parser(sub) -> None:
    """Add the ``mutate`` subcommand to the ``mxu`` parser's subparsers ``sub``."""
    from sim.mutate_targets import BLOCKS

    g = sub.add_parser(
        "mutate", help="mutation testing: how many one-point bugs in a block its regression catches",
        description="Ask Yosys for N mutations of the block's generated design (mutate -list, every mode), build "
                    "them into one simulator model behind a selector, run the block's regression against each "
                    "(a fixed seed, stop at the first failing test, a time limit per mutant) and check every "
                    "survivor for equivalence with the original (bounded model check, SymbiYosys + Yices). "
                    "Writes OUT/mutate.json (every mutant: the mutation, its Amaranth source line, the verdict, "
                    "the test that killed it) and prints a table; started again with the same options it "
                    "resumes (finished mutants are not re-run). Blocks: "
                    + "; ".join(f"{k}: {v[0]}" for k, v in BLOCKS.items()) + ".")
    g.add_argument("--block", required=True, choices=list(BLOCKS), help="block to mutate")
    g.add_argument("--fmt", choices=FMTS, default=None, help="input format (default: bf16)")
    g.add_argument("--subnormals", choices=SUBNORMALS, default=None, help="ftz (default) or ieee")
    g.add_argument("--stages", type=stages_arg, default=None, help="pipeline stages of each MAC (default 2)")
    g.add_argument("--rows", type=positive_arg, default=None, help="MXU PE rows (blocks with an array)")
    g.add_argument("--cols", type=positive_arg, default=None, help="MXU PE columns (blocks with an array)")
    g.add_argument("--count", type=positive_arg, default=200, help="mutations asked of Yosys (default 200)")
    g.add_argument("--seed", type=seed_arg, default=1, help="Yosys's sampling seed (default 1)")
    g.add_argument("--test-seed", type=seed_arg, default=1,
                   help="the regression's random seed, the same for every mutant (default 1)")
    g.add_argument("--sim", choices=["verilator", "icarus"], default="verilator",
                   help="simulator (default verilator)")
    g.add_argument("--jobs", type=positive_arg, default=2, help="mutants judged in parallel (default 2)")
    g.add_argument("--timeout", type=_seconds_arg, default=None,
                   help="seconds per mutant before it counts as killed by timeout (default: 5 x the original "
                        "design's regression time + 30 s)")
    g.add_argument("--depth", type=seed_arg, default=20,
                   help="cycles of the bounded equivalence check of each survivor (default 20; 0: no check)")
    g.add_argument("-o", "--out", required=True, type=out_dir_arg,
                   help="output folder: mutate.json and the work files (created; an existing one resumes)")
    g.add_argument("--json", action="store_true", help="print the whole record as JSON instead of a table")


def run(args) -> int:
    """Run ``mxu mutate``; returns the exit status (UsageError for bad input)."""
    from sim import mutate, toolchain
    from sim.mutate_targets import target

    options = {k: getattr(args, k) for k in _CONFIG if getattr(args, k) is not None}
    check_out_dir(args.out, ["mutate.json"])
    check_build_dir()
    try:
        toolchain.check_simulator(args.sim)
    except toolchain.SimulatorUnavailable as e:
        raise UsageError(f"--sim {args.sim}: {e}") from None
    try:
        tgt = target(args.block, options, args.test_seed)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None

    bar = None
    if progress_enabled():
        from tqdm import tqdm

        bar = tqdm(total=args.count, desc=f"mxu mutate {args.block}", unit="mutant", file=sys.stderr, leave=False)

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.refresh()

    try:
        record = mutate.run_campaign(tgt, args.out, count=args.count, seed=args.seed, simulator=args.sim,
                                     jobs=args.jobs, timeout_s=args.timeout, depth=args.depth,
                                     test_seed=args.test_seed, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(json.dumps(record))
    else:
        print(f"{args.block} {json.dumps(record['config'])}: {record['summary']['mutants']} mutants "
              f"(seed {args.seed}), {args.sim}, {record['wall_s']} s")
        print(mutate.format_table(record))
        for m in record["mutants"]:
            if m.get("status") == "survived":
                print(f"survived: #{m['index']} {m['mode']} {m['cell']} {m['port']}[{m['portbit']}] "
                      f"at {m['source'] or '?'}")
    return 0
