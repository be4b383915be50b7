"""``mxu sweep``: the design space of a TOML grid of ``mxu synth`` configurations, on Ray (``sim.sweep``):
one task per point, records cached by hash, sweep.json and Pareto plots."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .errors import UsageError
from .files import check_build_dir, check_out_dir, progress_enabled, project_info, write_outputs
from .options import out_dir_arg, positive_arg

__all__ = ["add_parser", "run", "resolve_point", "OUT_FILES"]

#: what ``mxu sweep`` writes into OUT (the plots only when a point has both values)
OUT_FILES = ("sweep.json", "pareto_fmax_lut4.png", "pareto_gmacs_lut4.png")

_COLUMNS = (("block", 7), ("target", 10), ("rows", 4), ("cols", 4), ("fmt", 10), ("stages", 6), ("seed", 4))


def add_parser(sub) -> None:
    """Add the ``sweep`` subcommand to the ``mxu`` parser's subparsers ``sub``."""
    s = sub.add_parser(
        "sweep",
        help="synthesize, place and route a grid of configurations on Ray; sweep.json and Pareto plots",
        description="Read a TOML grid of mxu synth configurations (every key an mxu synth option with _: "
        "block, target, rows, cols, fmt, subnormals, stages, backpressure, queue_depth, "
        "pseudo_channels, hbm_timing, freq, seed, dsp, widelut, preset; place = false for Yosys "
        "only; gemm = 'MxKxN' for the throughput figure; a top-level list is an axis of the "
        "grid, each [[point]] table one partial configuration), check every point, and run each "
        "as one Ray task (Yosys, nextpnr, the exact cycle model of an MXU): on a local Ray "
        "instance with --jobs CPUs, or on the cluster at --address. Records are cached by the "
        "hash of the point, the hardware sources and the tool versions, so a sweep that is "
        "started again runs only what it has no record of. A point that does not fit its part "
        "or whose tool fails is recorded and the others go on. Writes OUT/sweep.json (one record "
        "per point) and the Pareto plots OUT/pareto_fmax_lut4.png (Fmax against LUT4) and "
        "OUT/pareto_gmacs_lut4.png (GEMM throughput against LUT4). Exit status 2 for a bad "
        "specification (nothing is started), 1 when a point failed.",
    )
    s.add_argument("spec", type=Path, metavar="SPEC.toml", help="the grid (see above and the manual)")
    s.add_argument(
        "--address", default=None, help="address of an existing Ray cluster (default: start a local Ray instance)"
    )
    s.add_argument(
        "--jobs", type=positive_arg, default=2, help="points run at once (and the local instance's CPUs); default 2"
    )
    s.add_argument("--json", action="store_true", help="print sweep.json's records as JSON instead of a table")
    s.add_argument(
        "-o",
        "--out",
        required=True,
        type=out_dir_arg,
        help="output folder: sweep.json and the plots (created; files there are replaced)",
    )


def resolve_point(argv: list[str], out: Path | str = "unused") -> tuple:
    """``mxu synth``'s own checks of a sweep point's arguments ``argv`` (without ``-o``): ``(args,
    factory, module name, Target, configuration, block description)``, nothing generated.

    Raises:
        ValueError: what ``mxu synth`` would refuse (its one-line message).
    """
    from .errors import Parser
    from .synth import add_parser as add_synth_parser
    from .synth import resolve

    parser = Parser(prog="mxu")
    add_synth_parser(parser.add_subparsers(dest="command", parser_class=Parser))
    try:
        args = parser.parse_args(["synth", *argv, "-o", str(out)])
        return (args, *resolve(args))
    except UsageError as e:
        raise ValueError(str(e)) from None


def _cell(v, width: int) -> str:
    return ("-" if v is None else str(v)).rjust(width)


def _value(r: dict, key: str):
    """A point's option ``key`` as written, else as resolved (an engine's array options in its MXU)."""
    if r["options"].get(key) is not None:
        return r["options"][key]
    res = r.get("resolved") or {}
    return res.get(key, res.get("engine", {}).get("mxu", {}).get(key))


def format_table(records: list[dict]) -> str:
    """One line per point: its configuration (the defaults filled in), status, LUT4 / FF / DSP / BRAM,
    achieved MHz and GMAC/s with the GEMM (M x K x N) it is for."""
    head = " ".join(k.rjust(w) for k, w in _COLUMNS) + "   status       LUT4     FF  DSP BRAM    MHz  GMAC/s  GEMM"
    lines = [head]
    for r in records:
        row = " ".join(_cell(_value(r, k), w) for k, w in _COLUMNS)
        if r["status"] == "ok":
            row += (
                f"   {'ok' + (' (cached)' if r.get('cached') else ''):<11}{r['lut4']:>6} {r['ff']:>6} {r['dsp']:>4}"
                f" {r['bram']:>4} {_cell(r['achieved_mhz'], 6)} {_cell(r['gemm_gmacs'], 7)}  {r.get('gemm') or '-'}"
            )
        else:
            row += f"   {r['status']}: {r['error']}"
        lines.append(row)
    return "\n".join(lines)


def run(args) -> int:
    """Run ``mxu sweep``; returns the exit status (UsageError for a bad specification)."""
    from sim import sweep

    check_out_dir(args.out, OUT_FILES)
    check_build_dir()
    if not args.spec.is_file():
        raise UsageError(f"{args.spec}: no such file" if not args.spec.exists() else f"{args.spec}: not a file")
    try:
        points = sweep.load_spec(args.spec, resolve_point)
    except sweep.SpecError as e:
        raise UsageError(f"{args.spec}: {e}") from None
    bar = None
    if progress_enabled():
        from tqdm import tqdm

        bar = tqdm(total=len(points), desc="mxu sweep", unit="point", file=sys.stderr, leave=False)

    def progress(done: int) -> None:
        if bar is not None:
            bar.n = done
            bar.refresh()

    try:
        records, figures = sweep.run_sweep(points, resolve_point, address=args.address, jobs=args.jobs,
                                           progress=progress)
    finally:
        if bar is not None:
            bar.close()
    doc = {"spec": str(args.spec), "points": len(records), **figures, "project": project_info(), "records": records}
    files = {"sweep.json": json.dumps(doc, indent=1)}
    tmp = args.out.parent / f".{args.out.name}.plots"
    tmp.mkdir(parents=True, exist_ok=True)
    gemms = ", ".join(dict.fromkeys(r["gemm"] for r in records if r.get("gemm_gmacs") is not None)) or "-"
    try:
        for name, y, ylabel in (
            ("pareto_fmax_lut4.png", "achieved_mhz", "Fmax (MHz)"),
            ("pareto_gmacs_lut4.png", "gemm_gmacs", f"GMAC/s of the GEMM {gemms} (cycles x Fmax)"),
        ):
            if sweep.plot_pareto(
                records,
                "lut4",
                y,
                tmp / name,
                xlabel="LUT4 (block)",
                ylabel=ylabel,
                title=f"{args.spec.name}: Pareto front",
            ):
                files[name] = tmp / name
        write_outputs(args.out, files)
        for name in OUT_FILES:  # a plot of an earlier sweep that this one has no values for
            if name not in files:
                (args.out / name).unlink(missing_ok=True)
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(records) if args.json else format_table(records))
    return 1 if any(r["status"] == "failed" for r in records) else 0
