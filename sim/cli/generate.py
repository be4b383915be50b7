"""``mxu generate``: the Verilog of an MXU (or a single MAC), its JSON manifest and, with
``--fusesoc``, a FuseSoC core file for it (``sim.fusesoc``)."""

from __future__ import annotations

import json
import time

from .errors import UsageError
from .files import check_build_dir, check_out_dir, project_info, write_outputs
from .options import (
    FMTS,
    SUBNORMALS,
    add_config_options,
    add_size_limit_option,
    check_module_name,
    check_size,
    generate_params,
    out_dir_arg,
    positive_arg,
    stages_arg,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``generate`` subcommand to the ``mxu`` parser's subparsers ``sub``."""
    g = sub.add_parser("generate", help="write Verilog plus a JSON manifest for an MXU (or a single MAC)",
                       description="Write <out>/<name>.v and <out>/<name>.json: every parameter, every port "
                                   "(direction, width in bits, meaning), the latency of each path in cycles "
                                   "and the tool versions; with --fusesoc also <out>/<name>.core, a FuseSoC "
                                   "CAPI2 core of the Verilog, and <out>/<name>_lint_waivers.vlt for its lint "
                                   "target. Parameters come from --preset or --config, then from the options "
                                   "given, which win.")
    g.add_argument("--block", choices=["mxu", "mac"], default=None, help="block to generate (default: mxu)")
    g.add_argument("--rows", type=positive_arg, default=None,
                   help="MXU PE rows R (K extent of a weight tile; default 8)")
    g.add_argument("--cols", type=positive_arg, default=None, help="MXU PE columns C (N extent of a tile; default 8)")
    g.add_argument("--fmt", choices=FMTS, default=None, help="input format (default: bf16)")
    g.add_argument("--subnormals", choices=SUBNORMALS, default=None,
                   help="ftz: flush subnormals to zero (default); ieee: gradual underflow")
    g.add_argument("--stages", type=stages_arg, default=None,
                   help="pipeline stages of each MAC in cycles: 1..9 for the MXU, 0..9 for a MAC (default 2)")
    add_config_options(g)
    g.add_argument("--no-backpressure", dest="backpressure", action="store_const", const=False, default=None,
                   help="MXU without out__ready: the consumer takes every beat, the array never stalls and "
                        "has no clock enable (faster on FPGAs)")
    g.add_argument("--name", default=None, help="Verilog top module name (default: mxu or mac)")
    g.add_argument("--fusesoc", action="store_true",
                   help="also write <name>.core: a FuseSoC core (open-mxu:mxu:<name>) with targets default, lint "
                        "(Verilator) and sim (Icarus)")
    add_size_limit_option(g, "generate")
    g.add_argument("-o", "--out", required=True, type=out_dir_arg,
                   help="output folder (created; its files appear together or not at all)")


def run(args) -> int:
    """Run ``mxu generate``; returns the exit status (UsageError for bad input)."""
    from hw.arith import MAC, MACConfig
    from hw.generate import manifest, mxu_verilog
    from hw.mxu import MXU, MXUConfig
    from sim import fusesoc, runner, toolchain
    from sim.lint import WAIVER_FILE

    params = generate_params(args)
    block = params.pop("block")
    name = args.name or block
    check_module_name(name)
    model = fusesoc.PRIMITIVE_MODELS.get(params.get("multiplier", "generic")) if block == "mxu" else None
    core_files = [f"{name}.core", fusesoc.waiver_name(name), *([model] if model else [])] if args.fusesoc else []
    check_out_dir(args.out, [f"{name}.v", f"{name}.json", *core_files])  # before minutes of generation
    check_build_dir()
    t0 = time.perf_counter()
    try:
        if block == "mac":
            for key in ("rows", "cols", "backpressure", "multiplier"):
                if key in params:
                    raise UsageError(f"{key} does not apply to block mac (from "
                                     f"--{'no-' if key == 'backpressure' else ''}{key}, --preset or --config)")
            cfg = MACConfig(**{"stages": 2, **params})
        else:
            cfg = MXUConfig(**params)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    if block == "mxu":
        check_size(cfg.rows, cfg.cols, args, simulated=False)
    project = project_info()
    if args.fusesoc:
        try:
            fusesoc.vlnv(name, project["version"])
        except ValueError as e:
            raise UsageError(f"--fusesoc: {e}") from None
    if block == "mac":
        verilog = runner.generate_verilog(lambda: MAC(cfg), name=name, key=cfg)
        comp = MAC(cfg)
        latencies = {"input_to_output_cycles": cfg.latency_cycles}
        modules = [name]
    else:
        verilog = runner.generate_verilog(lambda: mxu_verilog(cfg, name), name=name, key=cfg)
        comp = MXU(cfg)
        latencies = {
            "act_to_out_cycles": cfg.latency_cycles,
            "pe_partial_sum_cycles": cfg.stages,
            "pe_activation_hop_cycles": 1,
            "weight_beats_per_tile": cfg.weight_beats,
            "commit_after_swap_min_cycles": cfg.commit_gap_cycles,
            "weight_load_hold_after_commit_cycles": cfg.load_hold_cycles,
            "formula": "out beat = act beat + R*stages + C - 1 cycles (see verif/cycles.py for tile timing)",
        }
        modules = [f"{name}_pe", f"{name}_row", name]
    comp._MustUse__silence = True
    info = manifest(comp, cfg, name=name, latency_cycles=cfg.latency_cycles, meanings=comp.port_meanings(),
                    extra={"block": block, "latencies": latencies, "modules": modules,
                           "verilog": f"{name}.v", "verilog_bytes": verilog.stat().st_size,
                           "project": project, "tools": toolchain.tool_versions()})
    files = {f"{name}.v": verilog, f"{name}.json": json.dumps(info, indent=2) + "\n"}
    if args.fusesoc:   # the same all-or-nothing group as the Verilog and the manifest
        files[f"{name}.core"] = fusesoc.core_text(name=name, version=project["version"], block=block,
                                                  parameters=info["parameters"])
        files[fusesoc.waiver_name(name)] = WAIVER_FILE
        if model:   # the primitive's simulation model, for the core's lint and sim targets
            from verif import models

            files[model] = models.MULT18X18D.with_name(model).read_text()
    write_outputs(args.out, files)
    summary = {"verilog": str(args.out / f"{name}.v"), "manifest": str(args.out / f"{name}.json")}
    if args.fusesoc:
        summary["core"] = str(args.out / f"{name}.core")
    print(json.dumps({**summary, "block": block, "parameters": info["parameters"],
                      "latency_cycles": cfg.latency_cycles, "wall_s": round(time.perf_counter() - t0, 2)}))
    return 0
