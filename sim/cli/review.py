"""``mxu report``: the design-review page of one MXU configuration (``sim.design_report``,
``sim.report_html``): OUT/index.html and OUT/report.json, the trace and the diagrams beside them."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile

from .errors import UsageError
from .files import check_build_dir, check_out_dir, progress_enabled, write_outputs
from .options import (
    FMTS,
    SUBNORMALS,
    add_config_options,
    float_range_arg,
    generate_params,
    out_dir_arg,
    positive_arg,
    stages_arg,
)

__all__ = ["add_parser", "run", "OUT_FILES"]

#: what ``mxu report`` writes into OUT, all together or none (lut4_per_pe.svg when the sweep cache has
#: arrays of this format on the target)
OUT_FILES = ("index.html", "report.json", "block.svg", "tile.svg", "tile.vcd", "tile.wavedrom.json", "utilization.svg",
             "lut4_per_pe.svg", "engine_start.svg", "engine.vcd", "engine_start.wavedrom.json", "roofline.svg")

#: arrays above this many PEs are refused: the page simulates the array in Icarus (about 2,000 PE
#: cycles per second for bf16)
MAX_PES = 64


def add_parser(sub) -> None:
    """Add the ``report`` subcommand to the ``mxu`` parser's subparsers ``sub``."""
    from sim.synth import TARGETS

    r = sub.add_parser(
        "report", help="a design-review page of one MXU configuration: index.html and report.json",
        description="Write OUT/index.html, a self-contained page for a design review of one MXU configuration, "
                    "and OUT/report.json with every number on it: every parameter with meaning and unit, the "
                    "numerics contract and the port table; a block diagram generated from the design's "
                    "hierarchy; a timing diagram of two weight tiles drawn (WaveDrom) from a simulation of "
                    "the generated Verilog in Icarus, its VCD beside the page, and the beat cycles read from "
                    "that trace against the cycle model; the cycle model against "
                    "SCALE-Sim v2's weight-stationary count and the utilization against M; the array inside the "
                    "GEMM engine with the HDL memory system: a GEMM's start traced (Icarus) and drawn, a few "
                    "GEMMs' cycles and performance counters against the engine's cycle model, bit-exact, and "
                    "the roofline; one HBM controller's efficiency per traffic pattern against its bound and its "
                    "read latency percentiles against the DRAM's floor (--sim, --hbm-scale); the array's "
                    "resources and Fmax on --target (mxu synth's flow, unless --no-synth) and the mxu sweep "
                    "records of this configuration; the mutation score of each block. Parameters come from "
                    "--preset or --config, then from the options given, which win. Arrays of at most "
                    f"{MAX_PES} PEs (the trace is simulated in Icarus).")
    r.add_argument("--rows", type=positive_arg, default=None, help="MXU PE rows R (default 8)")
    r.add_argument("--cols", type=positive_arg, default=None, help="MXU PE columns C (default 8)")
    r.add_argument("--fmt", choices=FMTS, default=None, help="input format (default: bf16)")
    r.add_argument("--subnormals", choices=SUBNORMALS, default=None, help="ftz (default) or ieee")
    r.add_argument("--stages", type=stages_arg, default=None, help="pipeline stages of each MAC, 1..9 (default 2)")
    add_config_options(r)
    r.set_defaults(block=None)  # generate_params reads it; a report is always of an MXU
    r.add_argument("--no-backpressure", dest="backpressure", action="store_const", const=False, default=None,
                   help="MXU without out__ready")
    r.add_argument("--target", choices=list(TARGETS), default="ecp5-85k",
                   help="FPGA target of the synthesis section (default ecp5-85k)")
    r.add_argument("--no-synth", action="store_true", help="leave out synthesis and place and route (minutes)")
    r.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                   help="simulator of the engine's GEMMs and the HBM controller's traffic (default verilator; "
                        "the traces are Icarus's)")
    r.add_argument("--hbm-scale", type=float_range_arg(0, 1, "a fraction of the full traffic"), default=0.2,
                   help="length of the HBM controller's traffic patterns, 0 < F <= 1 (default 0.2: 16,000 "
                        "sequential requests, about 8 tREFI; cached)")
    r.add_argument("--json", action="store_true", help="print report.json instead of the summary line")
    r.add_argument("-o", "--out", required=True, type=out_dir_arg,
                   help="output folder (created; its files appear together or not at all)")


def run(args) -> int:
    """Run ``mxu report``; returns the exit status (UsageError for bad input)."""
    from hw.mxu import MXUConfig
    from sim import design_report, report_html

    params = generate_params(args, blocks=("mxu",))
    params.pop("block")
    try:
        cfg = MXUConfig(**params)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    if cfg.rows * cfg.cols > MAX_PES:
        raise UsageError(f"a {cfg.rows}x{cfg.cols} array has {cfg.rows * cfg.cols} PEs; mxu report simulates the "
                         f"array in Icarus and takes at most {MAX_PES}")
    check_out_dir(args.out, OUT_FILES)
    check_build_dir()
    bar = None
    if progress_enabled():
        from tqdm import tqdm

        bar = tqdm(total=7, desc="mxu report", unit="step", file=sys.stderr,
                   leave=False)

    def progress(text: str) -> None:
        if bar is not None:
            bar.set_postfix_str(text)
            bar.update()

    work = tempfile.mkdtemp(prefix=".mxu-report-")
    try:
        from pathlib import Path

        w = Path(work)
        from .sweep import resolve_point

        doc = design_report.collect(cfg, w, target=args.target, resolve=None if args.no_synth else resolve_point,
                                    progress=progress, sim=args.sim, hbm_scale=args.hbm_scale)
        if doc["engine"]["available"]:
            report_html.roofline_plot(doc["engine"], w / "roofline.svg")
        report_html.utilization_plot(doc["cycles"], w / "utilization.svg")
        if report_html.per_pe_plot(doc["fpga"], w / "lut4_per_pe.svg"):
            doc["fpga"]["per_pe_svg"] = "lut4_per_pe.svg"
        mode = "" if cfg.fmt == "int8" else f" ({cfg.subnormals})"  # subnormals do not apply to int8
        title = (f"open-mxu design review: {cfg.rows}x{cfg.cols} {cfg.fmt}{mode}, "
                 f"{cfg.stages} pipeline stage{'s' if cfg.stages > 1 else ''}")
        (w / "index.html").write_text(report_html.render(doc, title))
        (w / "report.json").write_text(json.dumps(doc, indent=1))
        written = [name for name in OUT_FILES if (w / name).exists()]
        write_outputs(args.out, {name: w / name for name in written})
        for name in set(OUT_FILES) - set(written):  # a plot of an earlier report this one has no values for
            (args.out / name).unlink(missing_ok=True)
    finally:
        if bar is not None:
            bar.close()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(doc))
    else:
        print(json.dumps({"page": str(args.out / "index.html"), "report": str(args.out / "report.json"),
                          "timing_matches_model": doc["timing"]["matches"], "wall_s": doc["wall_s"]}))
    return 0
